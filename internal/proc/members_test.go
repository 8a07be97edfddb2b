package proc_test

import (
	"bufio"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestProcessGroupSparesReusedNumber: once a command's shell was reaped
// and its group emptied, Process.GroupAlive, LiveMembers and SignalGroup
// do not take the group that got its number for the command's, while
// the number's functions (GroupAlive(pgid)) do: the victim here is the
// test's own, in a pid namespace of its own where it can be given the
// number. The group empties before Wait (Wait notes it gone), or after
// it, its last survivor ended by the test (the pidfd tells), and so
// after Release (the rule without a pidfd tells).
func TestProcessGroupSparesReusedNumber(t *testing.T) {
	if !testenv.InPidNamespace(t) {
		return
	}
	for _, tc := range []struct {
		name              string
		survivor, release bool
	}{{"emptied before Wait", false, false}, {"emptied after Wait", true, false}, {"emptied after Release", true, true}} {
		p, orphan := startWithSurvivor(t, tc.survivor)
		if !tc.survivor {
			_ = p.SignalGroup(syscall.SIGKILL)
		}
		if _, err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		if tc.release {
			p.Release()
		}
		if orphan != nil {
			_ = orphan.Kill()
			if _, err := orphan.Wait(); err != nil {
				t.Fatal(err)
			}
		}
		victim := startAt(t, p.Pid)
		if !proc.GroupAlive(p.Pid) {
			t.Fatalf("%s: the victim's group %d is not alive by its number", tc.name, p.Pid)
		}
		if p.GroupAlive() {
			t.Errorf("%s: the reaped command's group is alive", tc.name)
		}
		if ms := p.LiveMembers(); ms != nil {
			t.Errorf("%s: the reaped command's group has members %v", tc.name, ms)
		}
		if err := p.SignalGroup(syscall.SIGTERM); err != nil {
			t.Errorf("%s: SignalGroup: %v", tc.name, err)
		}
		if sig := diedOf(t, victim); sig != syscall.SIGUSR1 {
			t.Errorf("%s: SignalGroup reached the group that got the command's number: the victim died of %v", tc.name, sig)
		}
	}
}

// startWithSurvivor starts a shell that leaves `sleep 1000` in its group
// and exits, and returns it with the sleep (re-parented to this process,
// pid 1 of testenv.InPidNamespace's namespace); without survivor, a shell
// that runs `sleep 1000` itself.
func startWithSurvivor(t *testing.T, survivor bool) (*proc.Process, *os.Process) {
	t.Helper()
	if !survivor {
		return startSleep(t, nil), nil
	}
	p, err := proc.Start(proc.Spec{Path: cgBash(t), Args: []string{"bash", "-c", "sleep 1000 & echo $!"}, Dir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(p.Stdout).ReadString('\n')
	p.Stdout.Close()
	if err != nil {
		t.Fatal(err)
	}
	member, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := os.FindProcess(member)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = orphan.Kill(); _ = orphan.Release() })
	return p, orphan
}

// TestProcessGroupSurvivors: after a command's shell was reaped, its
// group's survivors are its live members, and SignalGroup reaches them
// (through the pidfd, and without it, after Release).
func TestProcessGroupSurvivors(t *testing.T) {
	if !testenv.InPidNamespace(t) {
		return
	}
	for _, release := range []bool{false, true} {
		p, orphan := startWithSurvivor(t, true)
		member := orphan.Pid
		if _, err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		if release {
			p.Release()
		}
		if !p.GroupAlive() {
			t.Errorf("release %v: a group with a survivor is not alive", release)
		}
		if ms := p.LiveMembers(); !slices.ContainsFunc(ms, func(m proc.Member) bool { return m.Pid == member }) {
			t.Errorf("release %v: members %v, want the survivor %d", release, ms, member)
		}
		if err := p.SignalGroup(syscall.SIGUSR1); err != nil {
			t.Errorf("release %v: SignalGroup: %v", release, err)
		}
		if st, err := orphan.Wait(); err != nil || st.Sys().(syscall.WaitStatus).Signal() != syscall.SIGUSR1 {
			t.Errorf("release %v: the survivor: %v %v, want ended by SIGUSR1", release, st, err)
		}
	}
}

// TestReleaseDuringWait: Release while Wait waits (a job detached at
// shutdown) leaves the pidfd to Wait, which still reaps the shell and
// reports how it ended; the group is still signalled through the pidfd
// meanwhile.
func TestReleaseDuringWait(t *testing.T) {
	p := startSleep(t, nil)
	exited := make(chan *proc.Exit, 1)
	go func() { st, _ := p.Wait(); exited <- st }()
	p.Release()
	if err := p.SignalGroup(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	select {
	case st := <-exited:
		if st == nil || !st.Status.Signaled() || st.Status.Signal() != syscall.SIGUSR1 {
			t.Errorf("Wait after Release: %+v", st)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Wait did not return")
	}
	if p.GroupAlive() {
		t.Error("the group is alive after its shell ended")
	}
}
