package engine_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestOnlyStandardDescriptors: in every mode a command starts with exactly
// 0, 1 and 2, even when the engine's process holds a descriptor without
// close-on-exec.
func TestOnlyStandardDescriptors(t *testing.T) {
	sentinel := filepath.Join(t.TempDir(), "sentinel")
	fd, err := syscall.Open(sentinel, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_APPEND, 0o600) // no O_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	// ls lists its parent shell's descriptors.
	command := fmt.Sprintf(`echo fds:; ls /proc/$$/fd; echo leaked >&%d`, fd)
	check := func(t *testing.T, r engine.Result) {
		t.Helper()
		if !regexp.MustCompile(`fds:\n0\n1\n2\n\D`).MatchString(r.Output) {
			t.Errorf("the command has more than 0, 1, 2:\n%s", r.Output)
		}
		if b, _ := os.ReadFile(sentinel); len(b) > 0 {
			t.Errorf("the command wrote through inherited fd %d: %q", fd, b)
		}
	}
	t.Run("unrestricted", func(t *testing.T) {
		e := newEngine(t)
		check(t, e.Run(context.Background(), engine.ToolContext{WorkingDir: t.TempDir()}, engine.Input{Command: command}))
	})
	bothLaunchers(t, func(t *testing.T, mod func(*engine.Config)) {
		e := newEngine(t, mod)
		check(t, e.Run(context.Background(), restricted(t.TempDir()), engine.Input{Command: command}))
	})
}

// childOutOfFDs runs in a re-executed test binary: an engine whose process
// has no descriptor left starts a restricted command.
func childOutOfFDs() {
	e, err := engine.New(testConfig())
	if err != nil {
		fmt.Println("engine:", err)
		os.Exit(1)
	}
	defer e.Shutdown(context.Background())
	ws, err := os.MkdirTemp("", "out-of-fds-")
	if err != nil {
		fmt.Println("workspace:", err)
		os.Exit(1)
	}
	defer os.RemoveAll(ws)
	write := engine.ToolContext{WorkingDir: ws, Sandbox: engine.Sandbox{Profile: engine.WorkspaceWrite}}
	release := testenv.ExhaustDescriptors()
	r := e.Run(context.Background(), engine.ToolContext{WorkingDir: "/", Sandbox: engine.Sandbox{Profile: engine.ReadOnly}}, engine.Input{Command: "true"})
	_, _ = e.Held(context.Background(), write) // the layers looked for while out of descriptors
	release()
	fmt.Printf("status=%s\n%s\n", r.Status, r.Output)
	// Descriptors back: layers are found after all.
	r = e.Run(context.Background(), write, engine.Input{Command: "echo x > f"})
	b, _ := os.ReadFile(filepath.Join(ws, "f"))
	fmt.Printf("then=%s applied=%q\n%s\n", r.Status, b, r.Output)
	// The sandbox's mode was not decided while out of descriptors: root's
	// commands run in the initial user namespace, not in a rootless world
	// (where the child has CAP_SYS_ADMIN: see hasSysAdmin).
	r = e.Run(context.Background(), engine.ToolContext{WorkingDir: "/", Sandbox: engine.Sandbox{Profile: engine.ReadOnly}}, engine.Input{Command: "cat /proc/self/uid_map"})
	c := sandbox.Probe()
	fmt.Printf("uidmap=%q\nprobe: rootless=%v %s\nsysadmin=%v\n", strings.Join(strings.Fields(r.Output), " "), c.Rootless, c.Reason, hasSysAdmin())
}

// hasSysAdmin reports whether this process has CAP_SYS_ADMIN in effect
// (root, unless an engine earlier in the same test process dropped it from
// the bounding set of every program the process starts: a root without it
// makes its namespaces rootless, see sandbox.Capabilities.Rootless).
func hasSysAdmin() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<unix.CAP_SYS_ADMIN) != 0
		}
	}
	return false
}

// TestOutOfDescriptorsSaysSo: an engine out of descriptors reports that,
// not "restricted mode unavailable".
func TestOutOfDescriptorsSaysSo(t *testing.T) {
	needLandlock(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A low descriptor limit makes running out quick (Go raises the soft
	// limit only up to the hard one).
	cmd := exec.Command("prlimit", "--nofile=256:256", "--", exe)
	cmd.Env = append(os.Environ(), "BASHVISOR_TEST_CHILD=out-of-fds")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s := string(out)
	if !strings.Contains(s, "status=error") || !strings.Contains(s, "too many open files") {
		t.Errorf("want an error naming the cause:\n%s", s)
	}
	if strings.Contains(s, "restricted mode unavailable") {
		t.Errorf("an engine out of descriptors blamed restricted mode:\n%s", s)
	}
	if !strings.Contains(s, "then=ok applied=\"x\\n\"") {
		t.Errorf("once descriptors were back, a workspace-write command did not run and apply (layers given up for good):\n%s", s)
	}
	if strings.Contains(s, "sysadmin=true") && !strings.Contains(s, `uidmap="0 0 4294967295"`) {
		t.Errorf("with CAP_SYS_ADMIN, the sandbox's mode was decided while out of descriptors (a rootless world):\n%s", s)
	}
}
