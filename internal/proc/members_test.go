package proc_test

import (
	"bufio"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestProcessGroupSparesReusedNumber: once a command's shell was reaped
// and its group emptied, Process.GroupAlive, LiveMembers and SignalGroup
// do not take the group that got its number for the command's (through
// the pidfd, and by the rule used without it, after Release), while the
// number's functions (GroupAlive(pgid)) do: the victim here is the
// test's own, in a pid namespace of its own where it can be given the
// number.
func TestProcessGroupSparesReusedNumber(t *testing.T) {
	if !testenv.InPidNamespace(t) {
		return
	}
	for _, release := range []bool{false, true} {
		p := startSleep(t, nil)
		_ = p.SignalGroup(syscall.SIGKILL)
		if _, err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		if release {
			p.Release()
		}
		victim := startAt(t, p.Pid)
		if !proc.GroupAlive(p.Pid) {
			t.Fatalf("the victim's group %d is not alive by its number", p.Pid)
		}
		if p.GroupAlive() {
			t.Errorf("release %v: the reaped command's group is alive", release)
		}
		if ms := p.LiveMembers(); ms != nil {
			t.Errorf("release %v: the reaped command's group has members %v", release, ms)
		}
		if err := p.SignalGroup(syscall.SIGTERM); err != nil {
			t.Errorf("release %v: SignalGroup: %v", release, err)
		}
		if sig := diedOf(t, victim); sig != syscall.SIGUSR1 {
			t.Errorf("release %v: SignalGroup reached the group that got the command's number: the victim died of %v", release, sig)
		}
	}
}

// TestProcessGroupSurvivors: after a command's shell was reaped, its
// group's survivors are its live members, and SignalGroup reaches them
// (through the pidfd, and without it, after Release).
func TestProcessGroupSurvivors(t *testing.T) {
	if !testenv.InPidNamespace(t) {
		return
	}
	for _, release := range []bool{false, true} {
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
		orphan, err := os.FindProcess(member) // re-parented to this process, pid 1
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = orphan.Kill(); _ = orphan.Release() })
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
