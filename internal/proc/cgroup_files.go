package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
)

// The accounting files of a command's cgroup: where each is, and reading
// them through descriptors kept open.

// path is where accounting file f of the command is.
func (c *Cgroup) path(f int) string {
	v2 := func(i int) bool { return c.m.ctl[i].v2 }
	switch f {
	case fileCPU:
		return filepath.Join(c.dir, "cpu.stat")
	case fileMemPeak:
		if v2(ctlMemory) {
			return filepath.Join(c.dir, "memory.peak")
		}
		return filepath.Join(c.v1[ctlMemory], "memory.max_usage_in_bytes")
	case fileMemNow:
		if v2(ctlMemory) {
			return filepath.Join(c.dir, "memory.current")
		}
		return filepath.Join(c.v1[ctlMemory], "memory.usage_in_bytes")
	case fileMemOOM:
		if v2(ctlMemory) {
			return filepath.Join(c.dir, "memory.events")
		}
		return filepath.Join(c.v1[ctlMemory], "memory.oom_control")
	default:
		return filepath.Join(c.ctlDir(ctlPids), "pids.peak")
	}
}

// read reads accounting file f into buf, opening it once; c.mu is held.
// The memory peak is opened read-write: on cgroup v2 a reset applies to
// reads through the same descriptor only.
func (c *Cgroup) read(f int, buf []byte) ([]byte, error) {
	if !c.files[f].Valid() {
		flags := unix.O_RDONLY
		if f == fileMemPeak {
			flags = unix.O_RDWR
		}
		o, err := fd.Open(c.path(f), flags, 0)
		if errors.Is(err, unix.EACCES) && flags == unix.O_RDWR {
			// A read-only memory.peak (before Linux 6.12) that this
			// user may not open for writing: read it without reset.
			o, err = fd.Open(c.path(f), unix.O_RDONLY, 0)
		}
		if err != nil {
			return nil, err
		}
		c.files[f] = o
	}
	n, err := unix.Pread(c.files[f].Int(), buf, 0)
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: c.path(f), Err: err}
	}
	return buf[:n], nil
}

// readInt reads a file that holds one number.
func (c *Cgroup) readInt(f int) (int64, error) {
	var buf [32]byte
	b, err := c.read(f, buf[:])
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", c.path(f), err)
	}
	return n, nil
}

// readCPU reads usage_usec from cpu.stat.
func (c *Cgroup) readCPU() (time.Duration, error) {
	var buf [512]byte
	b, err := c.read(fileCPU, buf[:])
	if err != nil {
		return 0, err
	}
	n, err := field(b, "usage_usec")
	if err != nil {
		return 0, fmt.Errorf("%s: %w", c.path(fileCPU), err)
	}
	return time.Duration(n) * time.Microsecond, nil
}

// readOOMKills reads oom_kill from memory.events or memory.oom_control.
func (c *Cgroup) readOOMKills() (int, error) {
	var buf [256]byte
	b, err := c.read(fileMemOOM, buf[:])
	if err != nil {
		return 0, err
	}
	n, err := field(b, "oom_kill")
	if err != nil {
		return 0, fmt.Errorf("%s: %w", c.path(fileMemOOM), err)
	}
	return int(n), nil
}

// resetMemPeak resets the memory peak to the memory charged now: write 0
// to memory.max_usage_in_bytes (v1), or anything to memory.peak (v2,
// Linux 6.12+; the reset holds for reads through the same descriptor).
//
// Before Linux 6.12 memory.peak cannot be reset, and before 5.19 there is
// none. Such a peak is still fresh enough when it is at most
// recycleMemory: the next command's peak then includes at most what
// [Usage.PeakMemory] already allows for (earlier commands' leftovers, at
// most 2 MiB), so resetMemPeak reports success for it too.
func (c *Cgroup) resetMemPeak() error {
	if _, err := c.read(fileMemPeak, make([]byte, 32)); err != nil { // opens it
		if c.m.ctl[ctlMemory].v2 && errors.Is(err, os.ErrNotExist) {
			return nil // no memory.peak (before Linux 5.19): nothing to reset
		}
		return err
	}
	_, err := unix.Pwrite(c.files[fileMemPeak].Int(), []byte("0"), 0)
	if err != nil && c.m.ctl[ctlMemory].v2 {
		if peak, rerr := c.readInt(fileMemPeak); rerr == nil && peak <= recycleMemory {
			return nil
		}
	}
	if err != nil {
		return &os.PathError{Op: "reset", Path: c.path(fileMemPeak), Err: err}
	}
	return nil
}

// field returns the value of the line "name N" of a flat keyed file.
func field(b []byte, name string) (int64, error) {
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte(name+" ")); ok {
			return strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s", name)
}
