package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Member is a live process found in a process group, a cgroup or a
// mount namespace: one with a thread that has not exited, its leader
// thread or another.
type Member struct {
	Pid  int
	Comm string // the kernel's command name, at most 15 bytes
}

// String formats a member as "comm (pid N)".
func (m Member) String() string { return fmt.Sprintf("%s (pid %d)", m.Comm, m.Pid) }

// scanGroup lists the live members of pgid; with first it stops at the
// first one found.
func scanGroup(pgid int, first bool) []Member {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	var out []Member
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		st, err := ReadStat(pid)
		if err != nil || st.Pgrp != pgid || !alive(pid, st) {
			continue
		}
		out = append(out, Member{Pid: pid, Comm: st.Comm})
		if first {
			break
		}
	}
	return out
}

// Stat is the part of /proc/PID/stat that proc uses.
type Stat struct {
	Comm    string
	State   byte
	Ppid    int
	Pgrp    int
	Session int
	// Start is when the process started, in clock ticks after boot
	// (field 22): with the pid, it names one process, as no two processes
	// that have the same pid start at the same tick — short of a pid
	// namespace whose owner sets the next pid (ns_last_pid), the pid space
	// cannot be gone round within one tick (10 ms).
	Start uint64
	// Vsize is the size of its address space in bytes (field 23): two
	// processes that share one (a vfork child before its exec) show the
	// same.
	Vsize uint64
}

// ReadStat parses /proc/PID/stat. Its State is the leader thread's: a
// process whose leader exited is a zombie ('Z') there while its other
// threads may still run.
func ReadStat(pid int) (Stat, error) {
	return parseStat(pid, "/proc/"+strconv.Itoa(pid)+"/stat")
}

// readTaskStat parses the stat of thread tid of pid.
func readTaskStat(pid, tid int) (Stat, error) {
	return parseStat(pid, "/proc/"+strconv.Itoa(pid)+"/task/"+strconv.Itoa(tid)+"/stat")
}

func parseStat(pid int, path string) (Stat, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Stat{}, err
	}
	// pid (comm) state ppid pgrp session ...; comm may contain spaces and ')'.
	lp, rp := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if lp < 0 || rp < lp || rp+2 >= len(b) {
		return Stat{}, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	st := Stat{Comm: string(b[lp+1 : rp])}
	f := bytes.Fields(b[rp+2:])
	if len(f) < 4 || len(f[0]) != 1 {
		return Stat{}, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	st.State = f[0][0]
	st.Ppid, _ = strconv.Atoi(string(f[1]))
	st.Pgrp, _ = strconv.Atoi(string(f[2]))
	st.Session, _ = strconv.Atoi(string(f[3]))
	if len(f) > 20 {
		st.Start, _ = strconv.ParseUint(string(f[19]), 10, 64)
		st.Vsize, _ = strconv.ParseUint(string(f[20]), 10, 64)
	}
	return st, nil
}

// alive reports whether process pid, whose stat is st, has a thread that
// has not exited. A process lives while any of its threads does: one
// whose leader thread exited (pthread_exit, SYS_exit) shows as a zombie
// ('Z') in its stat while its other threads run on, and it still writes
// files, holds descriptors and can be signalled (through its pid; the
// kernel picks a live thread). Only then are its tasks
// (/proc/PID/task) read.
func alive(pid int, st Stat) bool {
	if st.State != 'Z' && st.State != 'X' {
		return true
	}
	_, ok := liveThread(pid)
	return ok
}

// liveThread returns a thread of pid other than its leader that has not
// exited, if any.
func liveThread(pid int) (int, bool) {
	for _, tid := range threads(pid) {
		if tid == pid {
			continue
		}
		if st, err := readTaskStat(pid, tid); err == nil && st.State != 'Z' && st.State != 'X' {
			return tid, true
		}
	}
	return 0, false
}

// threads lists the thread ids of pid (nil when it is gone).
func threads(pid int) []int {
	d, err := os.Open("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	tids := make([]int, 0, len(names))
	for _, n := range names {
		if tid, err := strconv.Atoi(n); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids
}

// signalOwnGroup sends sig (0: none, a probe) to the process group p
// leads, and to no other: ESRCH when it has no process left. The group
// is named by the leader's pidfd (pidfd_send_signal with
// PIDFD_SIGNAL_PROCESS_GROUP, Linux 6.9), that is by the kernel's struct
// pid, not by its number: after Wait reaped the leader it still reaches
// the members left in the group, and once the group emptied and its
// number went to another process it reaches nothing, as the kernel
// never gives a group back the number it lost.
//
// Without that (an older kernel, or after Release), the number is
// signalled only while the leader is not reaped (a zombie keeps the
// number), or once it was when no process has the leader's pid: a
// member left in the group keeps the number reserved as a group id, so a
// process with that pid means the group emptied and the number went to
// another process. What that rule cannot see: the number taken by a
// process that made it its group id and exited, leaving members, all
// since the group emptied; and a group that empties in the instant
// between Wait's reaping and its noting it.
//
// After Wait, ESRCH means the group is gone for good (a group never gets
// back the number it lost, nor members once it had none): the pidfd is
// closed, and later calls answer ESRCH at once.
func (p *Process) signalOwnGroup(sig syscall.Signal) error {
	if p.gone.Load() {
		return unix.ESRCH
	}
	err := p.signalGroupOnce(sig)
	if errors.Is(err, unix.ESRCH) && p.reaped.Load() && p.gone.CompareAndSwap(false, true) {
		p.closePidfd()
	}
	return err
}

// signalGroupOnce is signalOwnGroup's signal.
func (p *Process) signalGroupOnce(sig syscall.Signal) error {
	if p.pidfd != nil {
		if rc, err := p.pidfd.SyscallConn(); err == nil {
			serr := errors.ErrUnsupported
			if err := rc.Control(func(fd uintptr) {
				serr = unix.PidfdSendSignal(int(fd), sig, nil, unix.PIDFD_SIGNAL_PROCESS_GROUP)
			}); err == nil && !errors.Is(serr, unix.EINVAL) {
				return serr
			}
		}
	}
	if p.reaped.Load() && pidExists(p.Pid) {
		return unix.ESRCH // the number is another process's now
	}
	return unix.Kill(-p.Pid, sig)
}

// GroupAlive reports whether the process group p leads has a live member
// (see GroupAlive), before and after Wait reaped the leader, never
// counting another group that got its number since (see
// signalOwnGroup).
func (p *Process) GroupAlive() bool {
	return p.groupMembers(true) != nil
}

// LiveMembers lists the live members of the group p leads (see
// GroupAlive).
func (p *Process) LiveMembers() []Member {
	return p.groupMembers(false)
}

// groupMembers scans /proc for the group's live members (with first,
// stops at the first) when signalOwnGroup finds it has members at all.
// The scan reads members by number: a probe after it confirms that the
// number still named p's group throughout (an emptied group never gets
// members again).
func (p *Process) groupMembers(first bool) []Member {
	if p.Pid <= 1 {
		return nil
	}
	if err := p.signalOwnGroup(0); err != nil && !errors.Is(err, unix.EPERM) {
		return nil
	}
	ms := scanGroup(p.Pid, first)
	if ms == nil {
		return nil
	}
	if err := p.signalOwnGroup(0); err != nil && !errors.Is(err, unix.EPERM) {
		return nil
	}
	return ms
}

// pidExists reports whether some process or thread (a zombie too) has
// the number pid.
func pidExists(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}
