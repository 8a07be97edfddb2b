//go:build linux

package sandbox_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// testCgroups gives every command a cgroup of its own, as the engine does
// (nil where the host has no cgroup v2 for the test process).
var testCgroups *proc.Cgroups

func TestMain(m *testing.M) {
	sandbox.Main()
	var err error
	if testCgroups, err = proc.ProbeCgroups(testenv.CgroupParent()); err != nil {
		if testenv.Required(testenv.Cgroups) {
			fmt.Fprintln(os.Stderr, "REQUIRE_CGROUPS=1:", err)
			os.Exit(1)
		}
		testCgroups = nil
	}
	code := m.Run()
	for _, f := range cleanups {
		f()
	}
	if testCgroups != nil {
		if err := testCgroups.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "cgroups:", err)
			code = 1
		}
	}
	if err := goleak.Find(); err != nil {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		code = 1
	}
	os.Exit(code)
}

// requireCgroups fails the test when REQUIRE_CGROUPS=1 (CI): a skip there
// would hide a broken cgroup probe.
func requireCgroups(t testing.TB) {
	t.Helper()
	if testenv.Required(testenv.Cgroups) {
		t.Fatal("REQUIRE_CGROUPS=1 but the test process has no usable cgroups (or pids limit)")
	}
}

// cleanups run when the test process ends.
var cleanups []func()

var cgroupSeq atomic.Int64

// prepare prepares command the way the engine does: in a cgroup of its own
// (when the host has them), which the test ends and removes at cleanup.
func prepare(t testing.TB, lim config.SandboxLimits, command string) (*sandbox.Command, *proc.Cgroup) {
	t.Helper()
	return prepareOpts(t, sandbox.Options{Limits: lim}, command)
}

// prepareOpts is prepare with more options (Roots, CacheDir, Network).
func prepareOpts(t testing.TB, opts sandbox.Options, command string) (*sandbox.Command, *proc.Cgroup) {
	t.Helper()
	var cg *proc.Cgroup
	if testCgroups != nil {
		var err error
		if cg, err = testCgroups.New(fmt.Sprintf("t%d", cgroupSeq.Add(1))); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { endCgroup(cg) })
	}
	opts.Bash, opts.Command, opts.Cgroup = bashPath(t), command, cg
	sc, err := sandbox.Prepare(opts)
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	t.Cleanup(func() { _ = sc.Cleanup(false) }) // idempotent; also on t.Fatal
	return sc, cg
}

// sysProcAttr starts a command in a new session inside cg (if any).
func sysProcAttr(cg *proc.Cgroup) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setsid: true}
	if cg != nil {
		a.UseCgroupFD, a.CgroupFD = true, cg.FD()
	}
	return a
}

// endCgroup kills what is left in cg and removes it; it reports whether the
// cgroup was empty, so that the command's namespaces may be reused.
func endCgroup(cg *proc.Cgroup) bool {
	if cg == nil {
		return false
	}
	empty := !cg.Populated()
	_ = cg.Kill()
	cg.Remove()
	return empty
}

// requireSandbox skips without Landlock, or fails when REQUIRE_LANDLOCK=1.
func requireSandbox(tb testing.TB) sandbox.Capabilities {
	tb.Helper()
	c := sandbox.Probe()
	testenv.Needf(tb, testenv.Landlock, c.Available(), "restricted mode unavailable: %s", c)
	return c
}

// requireNamespaces is requireSandbox for tests that need private
// namespaces too (a root engine); REQUIRE_NAMESPACES=1 (CI, which runs as
// root) makes their absence a failure.
func requireNamespaces(tb testing.TB) sandbox.Capabilities {
	tb.Helper()
	c := requireSandbox(tb)
	testenv.Needf(tb, testenv.Namespaces, c.Namespaces, "no private namespaces: %s", c)
	return c
}

func bashPath(tb testing.TB) string {
	p := testenv.NeedsTool(tb, "bash")[0]
	return p
}

type result struct {
	out    string
	code   int
	signal syscall.Signal
	cmd    *sandbox.Command
	cg     *proc.Cgroup
}

// runIn runs command restricted in workdir the way the engine does: own
// session, stdin /dev/null, stdout+stderr one pipe, env + Command.Env.
func runIn(t *testing.T, lim config.SandboxLimits, workdir, command string, env ...string) result {
	t.Helper()
	return runOpts(t, sandbox.Options{Limits: lim}, nil, workdir, command, env...)
}

// runOpts is runIn with more options; prepared, when set, is called with
// the prepared command before it starts (to serve its proxy).
func runOpts(t *testing.T, opts sandbox.Options, prepared func(*sandbox.Command), workdir, command string, env ...string) result {
	t.Helper()
	sc, cg := prepareOpts(t, opts, command)
	if prepared != nil {
		prepared(sc)
	}
	cmd := exec.Command(sc.Path, sc.Args[1:]...)
	cmd.Args[0] = sc.Args[0]
	cmd.Dir = workdir
	cmd.Env = withEnv(os.Environ(), append(env, sc.Env...))
	// The output goes through a pipe of the test's own, as the engine's
	// does (a command in a rootless world needs *os.File stdio).
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devNull(t), pw, pw
	cmd.SysProcAttr = sysProcAttr(cg)
	if err := start(sc, cmd); err != nil {
		pr.Close()
		pw.Close()
		t.Fatal(err)
	}
	pw.Close()
	var buf bytes.Buffer
	copied := make(chan struct{})
	go func() {
		_, _ = buf.ReadFrom(pr)
		close(copied)
	}()
	g := testenv.KillGroupAtCleanup(t, cmd.Process.Pid) // its survivors, never a group that got the number since
	timer := time.AfterFunc(60*time.Second, g.Kill)
	err = cmd.Wait()
	timer.Stop()
	if !keepGroup {
		g.Kill()
	}
	// A process that left the group (a background server in a world)
	// may hold the pipe: read what came until a moment after the shell
	// ended.
	select {
	case <-copied:
	case <-time.After(time.Second):
		pr.Close()
		<-copied
	}
	pr.Close()
	r := result{out: buf.String(), cmd: sc, cg: cg}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		ws := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			r.signal = ws.Signal()
			r.code = 128 + int(ws.Signal())
		} else {
			r.code = ws.ExitStatus()
		}
	} else if err != nil {
		t.Fatalf("wait: %v", err)
	}
	// The engine ends what is left in the command's cgroup (escapees that
	// left the process group) before it cleans up.
	if err := sc.Cleanup(endCgroup(cg)); err != nil {
		t.Errorf("Cleanup: %v", err)
	}
	return r
}

var zeroLimits = config.SandboxLimits{}

// keepGroup leaves what a command started in its process group running
// after the command's shell exited (tests of background servers, which end
// them themselves).
var keepGroup bool

// withEnv returns env with add's NAME=value entries replacing the names'
// earlier values, as the engine's environment policy does.
func withEnv(env, add []string) []string {
	names := map[string]bool{}
	for _, kv := range add {
		name, _, _ := strings.Cut(kv, "=")
		names[name] = true
	}
	var out []string
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); !names[name] {
			out = append(out, kv)
		}
	}
	return append(out, add...)
}

// devNull is /dev/null opened for reading, closed at the end of the test.
func devNull(t *testing.T) *os.File {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// direct makes the tests start commands with Command.StartDirect instead of
// the helper re-exec (see TestDirect).
var direct bool

func start(sc *sandbox.Command, cmd *exec.Cmd) error {
	if direct {
		return sc.StartDirect(cmd)
	}
	return sc.StartHelper(cmd)
}

func run(t *testing.T, command string) result {
	t.Helper()
	return runIn(t, config.SandboxLimits{}, t.TempDir(), command)
}
