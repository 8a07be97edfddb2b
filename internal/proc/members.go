package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
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
