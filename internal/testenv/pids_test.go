package testenv

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startGroup starts args as the leader of a session and group of its own;
// at pid n when n > 0 (in InPidNamespace's namespace), retrying when a
// thread the Go runtime started meanwhile took the number.
func startGroup(t *testing.T, n int, args ...string) *exec.Cmd {
	t.Helper()
	for range 20 {
		if n > 0 {
			NextPid(t, n)
		}
		cmd := exec.Command(args[0], args[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if n <= 0 || cmd.Process.Pid == n {
			return cmd
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	t.Fatalf("no process got pid %d in 20 tries", n)
	return nil
}

// reusedVictim runs the hazard: a group whose leader a test reaped, whose
// number a victim of the test's own (a session and group of its own)
// then gets. It returns the group, as GroupOf took it while the leader
// ran, and the victim.
func reusedVictim(t *testing.T) (*Group, *exec.Cmd) {
	leader := startGroup(t, 0, "sleep", "1000")
	g := GroupOf(t, leader.Process.Pid)
	_ = leader.Process.Kill()
	_ = leader.Wait()
	victim := startGroup(t, g.Pgid, "sleep", "1000")
	t.Cleanup(func() { _ = victim.Process.Kill(); _ = victim.Wait() })
	return g, victim
}

// victimSignal ends the victim with SIGKILL to -pgid, the unsafe way
// tests used to end a group at cleanup, and returns the signal that
// ended it: SIGKILL when nothing reached it before, the earlier
// signal's when one did (a fatal signal decides the exit status when it
// is sent).
func victimSignal(t *testing.T, victim *exec.Cmd) syscall.Signal {
	t.Helper()
	if err := syscall.Kill(-victim.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("the old group's number does not name the victim's group: %v", err)
	}
	err := victim.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !exit.Sys().(syscall.WaitStatus).Signaled() {
		t.Fatalf("victim: %v", err)
	}
	return exit.Sys().(syscall.WaitStatus).Signal()
}

// TestGroupSparesReusedNumber: a group whose leader was reaped and whose
// number now names a victim's group is not signalled through a Group
// (through the pidfd, and by the rule for kernels without group pidfd
// signals); -pgid, the hazard, reaches the victim.
func TestGroupSparesReusedNumber(t *testing.T) {
	if !InPidNamespace(t) {
		return
	}
	for _, tc := range []struct {
		name   string
		signal func(g *Group) error
	}{
		{"pidfd", func(g *Group) error { return g.Signal(syscall.SIGUSR1) }},
		{"by number", func(g *Group) error { return g.byNumber(syscall.SIGUSR1, false) }},
	} {
		g, victim := reusedVictim(t)
		if victim.Process.Pid != g.Pgid {
			t.Fatalf("%s: the victim is pid %d, not %d", tc.name, victim.Process.Pid, g.Pgid)
		}
		if err := tc.signal(g); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("%s: signalling the reaped group: %v, want ESRCH", tc.name, err)
		}
		if sig := victimSignal(t, victim); sig != syscall.SIGKILL {
			t.Errorf("%s: the victim, which got the group's number, died of %v", tc.name, sig)
		}
	}
	// A single process: os.FindProcess holds a pidfd.
	leader := startGroup(t, 0, "sleep", "1000")
	p, err := os.FindProcess(leader.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	_ = leader.Process.Kill()
	_ = leader.Wait()
	victim := startGroup(t, leader.Process.Pid, "sleep", "1000")
	if err := p.Signal(syscall.SIGUSR1); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("os.FindProcess's process after its pid was reused: %v, want ErrProcessDone", err)
	}
	if sig := victimSignal(t, victim); sig != syscall.SIGKILL {
		t.Errorf("the victim, which got the process's pid, died of %v", sig)
	}
}

// TestGroupKillsSurvivors: after its leader was reaped, a Group still
// reaches the members left in it (through the pidfd, and by the rule),
// and KillGroupAtCleanup kills them when the test ends.
func TestGroupKillsSurvivors(t *testing.T) {
	if !InPidNamespace(t) {
		return
	}
	for _, tc := range []struct {
		name   string
		signal func(g *Group) error
	}{
		{"pidfd", func(g *Group) error { return g.Signal(syscall.SIGUSR1) }},
		{"by number", func(g *Group) error { return g.byNumber(syscall.SIGUSR1, false) }},
		{"cleanup", nil},
	} {
		ok := t.Run(tc.name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pid")
			leader := startGroup(t, 0, "sh", "-c", "sleep 1000 & echo $! > "+pidFile)
			var g *Group
			if tc.signal == nil {
				g = KillGroupAtCleanup(t, leader.Process.Pid)
			} else {
				g = GroupOf(t, leader.Process.Pid)
			}
			if err := leader.Wait(); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(pidFile)
			if err != nil {
				t.Fatal(err)
			}
			member, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			survivor, err := os.FindProcess(member) // re-parented to this process, pid 1
			if err != nil {
				t.Fatal(err)
			}
			if tc.signal == nil {
				survivor.Release()
				return // the survivor is checked by the parent test, once this one's cleanups ran
			}
			t.Cleanup(func() { survivor.Kill(); survivor.Release() })
			if err := tc.signal(g); err != nil {
				t.Errorf("signalling the survivor: %v", err)
			}
			st, err := survivor.Wait()
			if err != nil || !st.Sys().(syscall.WaitStatus).Signaled() || st.Sys().(syscall.WaitStatus).Signal() != syscall.SIGUSR1 {
				t.Errorf("the survivor: %v %v, want killed by SIGUSR1", st, err)
			}
		})
		if !ok {
			return
		}
	}
	// The cleanup's survivor is a zombie child of this process (pid 1)
	// once the subtest's cleanups ran.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err != nil {
			t.Fatalf("the cleanup's survivor: %v", err)
		}
		if pid > 0 {
			if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Errorf("the cleanup's survivor (pid %d): %v, want killed", pid, ws)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the cleanup did not kill the survivor")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
