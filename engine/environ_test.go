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

// childEnviron runs as an unprivileged user or as root: it starts an
// engine and asks a command to read the engine's environment through
// /proc/$PPID/environ, its memory through /proc/$PPID/mem, and to attach
// to it with strace.
func childEnviron() {
	e, err := engine.New(testConfig())
	if err != nil {
		fmt.Println("engine:", err)
		os.Exit(1)
	}
	r := e.Run(context.Background(), engine.ToolContext{WorkingDir: "/"}, engine.Input{
		Command: `cat /proc/$PPID/environ | tr '\0' '\n' | grep -c MARKER_VALUE_42 || true
head -c1 /proc/$PPID/mem >/dev/null
if command -v strace >/dev/null; then timeout 5 strace -p $PPID -e trace=none 2>&1 | head -1; fi`,
	})
	e.Shutdown(context.Background())
	fmt.Print(r.Output)
}

// testBinaryForOthers copies the test binary into a new directory under
// os.TempDir() that other users may enter (removed at cleanup), for a
// child run as another user; it returns the directory and the copy.
func testBinaryForOthers(t *testing.T, prefix string) (dir, bin string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if dir, err = os.MkdirTemp("", prefix); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(dir, "engine.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, bin
}

// TestEngineNotReadable: a command cannot read the environment or memory
// of its engine, whether the engine runs unprivileged or as root.
func TestEngineNotReadable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to an unprivileged user")
	}
	_, bin := testBinaryForOthers(t, "bashvisor-environ-")
	for _, user := range []string{"nobody", "root"} {
		cmd := exec.Command(bin)
		cmd.Dir = "/"
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "BASHVISOR_TEST_CHILD=environ", "SOME_VAR=MARKER_VALUE_42"}
		if user == "nobody" {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", user, err, out)
		}
		s := string(out)
		if !strings.Contains(s, "environ: Permission denied") || strings.Contains(s, "\n1\n") {
			t.Errorf("%s: the command could read the engine's environment:\n%s", user, s)
		}
		if !strings.Contains(s, "/mem' for reading: Permission denied") {
			t.Errorf("%s: the command could open the engine's memory:\n%s", user, s)
		}
		if strings.Contains(s, "Process ") && strings.Contains(s, "attached") {
			t.Errorf("%s: the command attached to the engine with strace:\n%s", user, s)
		}
	}
}
