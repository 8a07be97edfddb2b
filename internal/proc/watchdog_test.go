package proc_test

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// startSleep starts `sleep 60` in a session of its own, into cg when
// given, and returns it.
func startSleep(t *testing.T, cg *proc.Cgroup) *proc.Process {
	t.Helper()
	p, err := proc.Start(proc.Spec{Path: cgBash(t), Args: []string{"bash", "-c", "exec sleep 60"}, Dir: "/", Cgroup: cg, Output: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.SignalGroup(9)
		p.Wait()
	})
	return p
}

// TestWatchdogKillsOnDeath: when the engine's end of the pipe closes
// without a goodbye (the engine died), the watchdog kills the engine's
// cgroup and the process groups it was told about, and removes the
// cgroup directory.
func TestWatchdogKillsOnDeath(t *testing.T) {
	m := cgroups(t)
	cg, err := m.New("cmd-w")
	if err != nil {
		t.Fatal(err)
	}
	inCgroup := startSleep(t, cg)
	cg.CloseFD()
	grouped := startSleep(t, nil)
	untracked := startSleep(t, nil)
	wd, err := proc.StartWatchdog(cgBash(t), m)
	if err != nil {
		t.Fatal(err)
	}
	wd.Track(grouped.Pid)
	wd.Track(untracked.Pid)
	wd.Untrack(untracked.Pid)
	if err := wd.Abandon(); err != nil {
		t.Fatalf("watchdog: %v", err)
	}
	cgWaitGone(t, inCgroup.Pid, 5*time.Second)
	cgWaitGone(t, grouped.Pid, 5*time.Second)
	if !cgAlive(untracked.Pid) {
		t.Error("the watchdog killed a group the engine had untracked")
	}
	if _, err := os.Stat(m.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the engine's cgroup %s is still there: %v", m.Dir(), err)
	}
}

// TestWatchdogGoodbye: after a clean shutdown (Close) the watchdog exits
// and kills nothing: what still runs was left running on purpose.
func TestWatchdogGoodbye(t *testing.T) {
	p := startSleep(t, nil)
	wd, err := proc.StartWatchdog(cgBash(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	wd.Track(p.Pid)
	if err := wd.Close(); err != nil {
		t.Fatalf("watchdog: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	if !cgAlive(p.Pid) {
		t.Error("the watchdog killed a group after a clean shutdown")
	}
	if err := exec.Command("kill", "-0", strconv.Itoa(wd.Pid())).Run(); err == nil {
		t.Error("the watchdog still runs after Close")
	}
}

// TestWatchdogTrackWakesNothing: telling the watchdog about commands
// (Track, Untrack: two lines per command without cgroups) does not wake
// it for each line; it reads them in batches (watchdogPeriod), and still
// acts on every one when the engine dies (TestWatchdogKillsOnDeath).
func TestWatchdogTrackWakesNothing(t *testing.T) {
	wd, err := proc.StartWatchdog(cgBash(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer wd.Close()
	switches := func() int {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(wd.Pid()) + "/status")
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
				n, err := strconv.Atoi(strings.TrimSpace(v))
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
		t.Fatal("no voluntary_ctxt_switches in /proc/PID/status")
		return 0
	}
	time.Sleep(100 * time.Millisecond) // started and asleep
	const commands = 100
	before, start := switches(), time.Now()
	for i := range commands {
		wd.Track(1_000_000 + i) // no such pid: nothing is ever signalled
		wd.Untrack(1_000_000 + i)
		time.Sleep(time.Millisecond) // each line apart: a reader waiting on the pipe would wake for each
	}
	woke, took := switches()-before, time.Since(start)
	// One wake per period, and some slack for a loaded machine.
	if limit := int(took/(250*time.Millisecond)) + 10; woke > limit {
		t.Errorf("the watchdog woke %d times for %d commands' lines in %v (want at most %d)", woke, commands, took, limit)
	}
}

// TestStaleCgroupKilled: what an engine that no longer exists left
// running in its cgroups is killed by the next probe under the same
// parent, then removed.
func TestStaleCgroupKilled(t *testing.T) {
	m := cgroups(t)
	parent := filepath.Dir(m.Dir())
	dead, err := proc.Start(proc.Spec{Path: cgBash(t), Args: []string{"bash", "-c", "true"}, Dir: "/", Output: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	dead.Wait()
	stale := filepath.Join(parent, "bashvisor-"+strconv.Itoa(dead.Pid)+"-1")
	if err := os.MkdirAll(filepath.Join(stale, "cmd-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.Remove(filepath.Join(stale, "cmd-1"))
		os.Remove(stale)
	})
	left := startSleep(t, nil)
	if err := os.WriteFile(filepath.Join(stale, "cmd-1", "cgroup.procs"), []byte(strconv.Itoa(left.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	m2, err := proc.ProbeCgroups(testenv.CgroupParent())
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	cgWaitGone(t, left.Pid, 5*time.Second)
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale cgroup dir left: %v", err)
	}
}

// startAt starts `sleep 1000` as the leader of a session of its own at
// pid n, in testenv.InPidNamespace's namespace (retrying when a thread of
// the Go runtime took the number).
func startAt(t *testing.T, n int) *exec.Cmd {
	t.Helper()
	for range 20 {
		testenv.NextPid(t, n)
		cmd := exec.Command("sleep", "1000")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if cmd.Process.Pid == n {
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			return cmd
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	t.Fatalf("no process got pid %d in 20 tries", n)
	return nil
}

// diedOf sends SIGUSR1 to cmd (through its pidfd) and returns the signal
// that ended it: SIGUSR1, unless a fatal signal reached it before (the
// first decides the exit status when it is sent).
func diedOf(t *testing.T, cmd *exec.Cmd) syscall.Signal {
	t.Helper()
	_ = cmd.Process.Signal(syscall.SIGUSR1)
	var exit *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exit) || !exit.Sys().(syscall.WaitStatus).Signaled() {
		t.Fatalf("%v: %v", cmd.Args, err)
	}
	return exit.Sys().(syscall.WaitStatus).Signal()
}

// TestWatchdogSparesReusedGroup: a tracked group whose shell was reaped
// and whose number then went to another process's group is not killed
// when the engine dies (the victim here is the test's own, in a pid
// namespace of its own where it can be given the number); a tracked
// group whose shell was reaped but whose members remain is, and so is
// one whose shell still runs.
func TestWatchdogSparesReusedGroup(t *testing.T) {
	if !testenv.InPidNamespace(t) {
		return
	}
	reused := startSleep(t, nil)
	survivors, err := proc.Start(proc.Spec{Path: cgBash(t), Args: []string{"bash", "-c", "sleep 1000 & echo $!"}, Dir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = survivors.SignalGroup(syscall.SIGKILL); survivors.Release() })
	running := startSleep(t, nil)
	wd, err := proc.StartWatchdog(cgBash(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*proc.Process{reused, survivors, running} {
		wd.Track(p.Pid)
	}
	line, err := bufio.NewReader(survivors.Stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	survivors.Stdout.Close()
	member, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := survivors.Wait(); err != nil {
		t.Fatal(err)
	}
	orphan, err := os.FindProcess(member) // re-parented to this process, pid 1
	if err != nil {
		t.Fatal(err)
	}
	defer orphan.Release()
	_ = reused.SignalGroup(syscall.SIGKILL)
	if _, err := reused.Wait(); err != nil {
		t.Fatal(err)
	}
	// Start times are in clock ticks (1/100 s): a number taken again
	// within the tick its first owner started in is the same process to
	// /proc (see proc.Stat), which only a test that sets the next pid can
	// do. Let a tick pass so the victim is another process to the
	// watchdog (the test once failed, 1 run in ~10 as an unprivileged
	// user, when the whole test fit in one tick).
	time.Sleep(30 * time.Millisecond)
	victim := startAt(t, reused.Pid)
	if err := wd.Abandon(); err != nil {
		t.Fatalf("watchdog: %v", err)
	}
	if sig := diedOf(t, victim); sig != syscall.SIGUSR1 {
		t.Errorf("the watchdog killed the group that got a tracked group's number: it died of %v", sig)
	}
	if st, err := orphan.Wait(); err != nil || st.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("the survivor of a tracked group whose shell was reaped: %v %v, want killed", st, err)
	}
	cgWaitGone(t, running.Pid, 5*time.Second)
}
