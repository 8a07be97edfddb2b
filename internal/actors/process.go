package actors

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/jobs"
	"github.com/bashvisor/bashvisor/internal/proc"
)

// --- the process group and the cgroup ---

// The job's processes: with a cgroup, exactly the cgroup's members (every
// descendant stays in it whatever it does with sessions and process
// groups); without one, the shell's process group, and for a sandboxed
// job the processes of its mount namespace too (proc.Freezer: they
// cannot leave it, whatever they do with sessions and process groups;
// finding them reads every process's /proc/PID/ns/mnt). Once the shell is
// reaped and its group is empty, the kernel may give the group's id to a
// new process group (pid_max is often 32768, and a busy host wraps it in
// a minute), so the group is named by the shell's pidfd, not by its
// number (proc.Process.SignalGroup, GroupAlive, LiveMembers), and with a
// cgroup it is not consulted after the shell exited.

// liveMembers lists the live processes of the job.
func (j *job) liveMembers() []proc.Member {
	if cg := j.l.cg; cg != nil {
		if !cg.Populated() { // cgroup.events is cheaper than cgroup.procs
			return nil
		}
		return cg.Members()
	}
	members := j.l.p.LiveMembers()
	for _, m := range j.l.fz.Members() {
		if !slices.ContainsFunc(members, func(o proc.Member) bool { return o.Pid == m.Pid }) {
			members = append(members, m)
		}
	}
	return members
}

// anyAlive reports whether a process of the job is still alive.
func (j *job) anyAlive() bool {
	if cg := j.l.cg; cg != nil {
		return cg.Populated()
	}
	return j.l.p.GroupAlive() || len(j.l.fz.Members()) > 0
}

// signalAll sends sig to every process of the job: the process group
// (while the shell is not reaped, or without a cgroup, its survivors
// after; never another group that got its number), and every member of
// the cgroup; SIGKILL is cgroup.kill.
func (j *job) signalAll(sig syscall.Signal) {
	cg := j.l.cg
	if !j.exited || cg == nil {
		_ = j.l.p.SignalGroup(sig)
	}
	if cg == nil {
		j.l.fz.Signal(sig) // processes of a sandboxed job that left the group
		return
	}
	if sig == syscall.SIGKILL {
		_ = cg.Kill()
		return
	}
	skip := j.l.p.Pid // already signalled as a group
	if j.exited {
		skip = 0
	}
	cg.Signal(sig, skip)
}

// members converts processes for an outcome.
func members(ms []proc.Member) []jobs.Member {
	if ms == nil {
		return nil
	}
	out := make([]jobs.Member, len(ms))
	for i, m := range ms {
		out[i] = jobs.Member(m)
	}
	return out
}

// liveUsage reads a running job's usage for its record (jobs.State.Live).
type liveUsage struct{ h *proc.Handle }

func (l liveUsage) Usage() jobs.Usage { return jobs.Usage(l.h.Usage()) }

// usage reads what the job used from its cgroup, and its CPU time from the
// shell's rusage without one (see proc.Usage).
func (j *job) usage() proc.Usage {
	var u proc.Usage
	if cg := j.l.cg; cg != nil {
		var err error
		if u, err = cg.Usage(); err != nil && j.res.Log != nil {
			j.res.Log.Warn("reading the job's resource usage", "job", j.spec.ID, "err", err)
		}
	}
	if j.state != nil && u.CPU == 0 {
		ru := &j.state.Rusage
		u.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return u
}

// exitStatus returns the exit code (128+n for signal n) and signal name.
func exitStatus(st *proc.Exit) (int, string) {
	if st.Status.Signaled() {
		return 128 + int(st.Status.Signal()), signalName(st.Status.Signal())
	}
	return st.ExitCode(), ""
}

// signalName returns "SIGKILL" style names.
func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return fmt.Sprintf("signal %d", int(s))
}

// forking reports whether a child of this process has not exec'd yet:
// it still runs in this process's address space (Go forks with
// CLONE_VM|CLONE_VFORK), so it shows this process's command name and
// address space size. Between its fork and its exec such a child
// (another command being started) holds a copy of every descriptor of
// the engine, the write ends of other commands' output pipes too, and on
// a loaded machine that can last longer than DrainWait (at load ~25-30,
// up to a second: cmd/demo's stress). A helper the engine started from
// its own binary (a sandbox world's connector) has an address space of
// its own. Children are read from /proc/self/task/*/children (each
// thread's); without that file (a kernel without CONFIG_PROC_CHILDREN)
// it reports false.
func forking() bool {
	files, _ := filepath.Glob("/proc/self/task/*/children")
	var kids []int
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for w := range strings.FieldsSeq(string(b)) {
			if pid, err := strconv.Atoi(w); err == nil {
				kids = append(kids, pid)
			}
		}
	}
	if len(kids) == 0 {
		return false
	}
	before, err := proc.ReadStat(os.Getpid())
	if err != nil {
		return false
	}
	for _, pid := range kids {
		st, err := proc.ReadStat(pid)
		if err != nil || st.Comm != before.Comm || st.State == 'Z' {
			continue
		}
		after, _ := proc.ReadStat(os.Getpid()) // the runtime may have grown the address space meanwhile
		if st.Vsize == before.Vsize || st.Vsize == after.Vsize {
			return true
		}
	}
	return false
}
