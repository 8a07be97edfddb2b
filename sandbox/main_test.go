//go:build linux

package sandbox_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/sandbox"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	sandbox.Main()
	goleak.VerifyTestMain(m)
}

// requireSandbox skips without Landlock, or fails when REQUIRE_LANDLOCK=1.
func requireSandbox(tb testing.TB) sandbox.Capabilities {
	tb.Helper()
	c := sandbox.Probe()
	if !c.Available() {
		if os.Getenv("REQUIRE_LANDLOCK") == "1" {
			tb.Fatalf("REQUIRE_LANDLOCK=1 but restricted mode is unavailable: %s", c)
		}
		tb.Skipf("restricted mode unavailable: %s", c)
	}
	return c
}

func bashPath(tb testing.TB) string {
	p, err := exec.LookPath("bash")
	if err != nil {
		tb.Skip("no bash")
	}
	return p
}

type result struct {
	out    string
	code   int
	signal syscall.Signal
	cmd    *sandbox.Command
}

// runIn runs command restricted in workdir the way the engine does: own
// session, stdin /dev/null, stdout+stderr one pipe, env + Command.Env.
func runIn(t *testing.T, lim sandbox.Limits, workdir, command string, env ...string) result {
	t.Helper()
	sc, err := sandbox.Prepare(lim, bashPath(t), command, workdir)
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	t.Cleanup(func() { _ = sc.Cleanup() }) // idempotent; also on t.Fatal
	cmd := exec.Command(sc.Path, sc.Args[1:]...)
	cmd.Args[0] = sc.Args[0]
	cmd.Dir = workdir
	cmd.Env = append(append(os.Environ(), env...), sc.Env...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.WaitDelay = time.Second
	if err := start(sc, cmd); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	timer := time.AfterFunc(60*time.Second, func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	err = cmd.Wait()
	timer.Stop()
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	r := result{out: buf.String(), cmd: sc}
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
	if err := sc.Cleanup(); err != nil {
		t.Errorf("Cleanup: %v", err)
	}
	return r
}

var zeroLimits = sandbox.Limits{}

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
	return runIn(t, sandbox.Limits{}, t.TempDir(), command)
}
