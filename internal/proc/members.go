package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// Member is a live process found in a process group.
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
		if err != nil || st.Pgrp != pgid || st.State == 'Z' || st.State == 'X' {
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

// ReadStat parses /proc/PID/stat.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
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
