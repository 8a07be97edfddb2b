package testenv

import (
	"errors"
	"os"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Pids are reused. pid_max is 32768 on CI and on many hosts, and the suite
// forks hundreds of processes a second, so the kernel hands a number out
// again about every minute, and sooner for a number allocated long ago
// (the allocator goes round, not back to the lowest free number). A test
// must not signal a pid, or -pgid, it learned before unless it knows the
// number still names its process: a cleanup that kills -pgid after the
// leader was reaped and its group emptied may kill another package's
// test. The safe ways:
//
//   - a single process: os.FindProcess(pid) while the process is known to
//     be alive (it holds a pidfd; Signal and Kill never reach another
//     process), or cmd.Process, which holds one too;
//   - a process group: [KillGroupAtCleanup], or a [Group] from [GroupOf],
//     taken while its leader is known not to be reaped.

// Group is the process group of a command a test started in a group of
// its own (Setpgid or Setsid: the group's id is the leader's pid). It
// holds a pidfd of the leader, so it can signal the group's survivors
// after the leader was reaped, and never a group that got the number
// since: on Linux 6.9 and later exactly (pidfd_send_signal with
// PIDFD_SIGNAL_PROCESS_GROUP names the group by the leader's struct pid,
// not by its number); before that by the rule of [Group.Signal].
type Group struct {
	// Pgid is the group's id, the leader's pid.
	Pgid int
	fd   *os.File // the leader's pidfd; nil when it was reaped before GroupOf
}

// GroupOf returns the process group led by pid, which must be the
// leader of a group of its own that is not reaped yet (call it after
// cmd.Start and before cmd.Wait, or while the engine's job is known to
// run). Its pidfd is closed when the test ends, or by Close: cleanups
// registered after GroupOf, which run before that, signal through it;
// after it, Signal goes by the rule for kernels without group pidfd
// signals (see there).
func GroupOf(t testing.TB, pid int) *Group {
	t.Helper()
	g := &Group{Pgid: pid}
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case err == nil:
		g.fd = os.NewFile(uintptr(fd), "pidfd")
		t.Cleanup(g.Close)
	case !errors.Is(err, unix.ESRCH):
		t.Fatalf("pidfd_open %d: %v", pid, err)
	}
	return g
}

// KillGroupAtCleanup kills the process group led by pid (see [GroupOf])
// when the test ends: its survivors after the leader was reaped, and
// nothing when the number names another group by then.
func KillGroupAtCleanup(t testing.TB, pid int) *Group {
	t.Helper()
	g := GroupOf(t, pid)
	t.Cleanup(g.Kill)
	return g
}

// Close closes the pidfd (a test that counts its descriptors closes it
// once it is done with the group).
func (g *Group) Close() {
	if g.fd != nil {
		_ = g.fd.Close()
	}
}

// Kill sends SIGKILL to the group (see [Group.Signal]), ignoring the
// error: for cleanups.
func (g *Group) Kill() { _ = g.Signal(syscall.SIGKILL) }

// Signal sends sig to every process of the group, and to no other: it
// returns ESRCH when the group has no process left (or its number
// names another group now). Without kernel support for signalling a
// group through a pidfd (before Linux 6.9), or after Close, or when the
// leader was reaped before GroupOf, the number is signalled only
// while the leader is not reaped (a zombie keeps the number), or once it
// was when no process has the leader's pid: a survivor of the group
// keeps the number reserved as a group id, so a process with that pid
// means the group emptied and the number went to another process. What
// that rule cannot see: the number reused by a process that made it its
// group id and exited, leaving members, all before Signal.
func (g *Group) Signal(sig syscall.Signal) error {
	if g.fd != nil {
		rc, err := g.fd.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.PidfdSendSignal(int(fd), sig, nil, unix.PIDFD_SIGNAL_PROCESS_GROUP)
			if errors.Is(serr, unix.EINVAL) { // before Linux 6.9
				serr = g.byNumber(sig, unix.PidfdSendSignal(int(fd), 0, nil, 0) == nil)
			}
		}); err == nil {
			return serr
		} // closed: by the rule
	}
	return g.byNumber(sig, false)
}

// byNumber signals -Pgid by the rule of Signal; unreaped says the leader
// is known not to be reaped.
func (g *Group) byNumber(sig syscall.Signal, unreaped bool) error {
	if !unreaped && pidExists(g.Pgid) {
		return syscall.ESRCH // the number is another process's now
	}
	return syscall.Kill(-g.Pgid, sig)
}

// pidExists reports whether some process (a zombie too) has pid.
func pidExists(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// KillAtCleanup kills process pid, which must be alive now (or a zombie
// not yet reaped), when the test ends, through a pidfd taken now: never
// another process that got the number since. A process that ended by
// then is left alone.
func KillAtCleanup(t testing.TB, pid int) {
	t.Helper()
	p, err := os.FindProcess(pid) // a pidfd on Linux; ended: a done process
	if err != nil {
		t.Fatalf("os.FindProcess(%d): %v", pid, err)
	}
	t.Cleanup(func() {
		_ = p.Kill()
		_ = p.Release()
	})
}
