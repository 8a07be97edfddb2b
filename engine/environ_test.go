package engine_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/bashvisor/bashvisor/engine"
)

// childEnviron runs as an unprivileged user: it starts an engine and asks
// a command to read the engine's environment through /proc/$PPID/environ.
func childEnviron() {
	e, err := engine.New(engine.DefaultConfig())
	if err != nil {
		fmt.Println("engine:", err)
		os.Exit(1)
	}
	r := e.Run(context.Background(), engine.ToolContext{WorkingDir: "/"}, engine.Input{
		Command: `cat /proc/$PPID/environ | tr '\0' '\n' | grep -c MARKER_VALUE_42 || true`,
	})
	e.Shutdown(context.Background())
	fmt.Print(r.Output)
}

func TestEnvironNotReadableUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to an unprivileged user")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "bashvisor-environ-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "engine.test")
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "BASHVISOR_TEST_CHILD=environ", "SOME_VAR=MARKER_VALUE_42"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s := string(out)
	if !strings.Contains(s, "Permission denied") || strings.Contains(s, "\n1\n") {
		t.Fatalf("the command could read the engine's environment:\n%s", s)
	}
}
