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

// What a command wants of the CPU, for admission control: its CPU time
// and its pressure stall, and the kernel's pressure files.

// CPUDemand returns two counters of the command's processes, for a caller
// that measures how much CPU a command wants by their differences over an
// interval: the CPU time they used (as CPU), and the time during which at
// least one of them was ready to run but waited for a CPU (the kernel's
// pressure stall information, "some" total in cpu.pressure). A kernel
// without pressure stall information (CONFIG_PSI off, or psi=0) has no
// cpu.pressure: stall is then 0 and ok false. It opens the files for each
// read (about 10 µs each) and keeps nothing open, so that it may be called
// from another goroutine at any time, even after the cgroup is removed
// (an error then).
func (c *Cgroup) CPUDemand() (cpu, stall time.Duration, ok bool, err error) {
	var buf [512]byte
	b, err := readFile(filepath.Join(c.dir, "cpu.stat"), buf[:])
	if err != nil {
		return 0, 0, false, err
	}
	n, err := field(b, "usage_usec")
	if err != nil {
		return 0, 0, false, fmt.Errorf("%s: %w", filepath.Join(c.dir, "cpu.stat"), err)
	}
	cpu = time.Duration(n) * time.Microsecond
	b, err = readFile(filepath.Join(c.dir, "cpu.pressure"), buf[:])
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.EOPNOTSUPP) {
			return cpu, 0, false, nil
		}
		return cpu, 0, false, err
	}
	us, err := PressureTotal(b)
	if err != nil {
		return cpu, 0, false, fmt.Errorf("%s: %w", filepath.Join(c.dir, "cpu.pressure"), err)
	}
	return cpu, time.Duration(us) * time.Microsecond, true, nil
}

// readFile reads a small file into buf, opening and closing it.
func readFile(path string, buf []byte) ([]byte, error) {
	f, err := fd.Open(path, unix.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := unix.Read(f.Int(), buf)
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	}
	return buf[:n], nil
}

// PressureTotal returns the "some" line's total (µs) of a pressure file
// (cpu.pressure, /proc/pressure/memory):
//
//	some avg10=0.00 avg60=0.00 avg300=0.00 total=12345
func PressureTotal(b []byte) (int64, error) {
	v, err := pressureField(b, "total=")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

// PressureAvg10 returns the "some" line's avg10 (percent) of a pressure
// file.
func PressureAvg10(b []byte) (float64, error) {
	v, err := pressureField(b, "avg10=")
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(v, 64)
}

func pressureField(b []byte, name string) (string, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	if !bytes.HasPrefix(line, []byte("some ")) {
		return "", errors.New("no \"some\" line")
	}
	for f := range bytes.FieldsSeq(line) {
		if v, ok := bytes.CutPrefix(f, []byte(name)); ok {
			return string(v), nil
		}
	}
	return "", fmt.Errorf("no some %s", name)
}

// TreeDemand returns, for a command without a cgroup, the counters
// [Cgroup.CPUDemand] returns for one with: over process pid (the
// command's shell) and its descendants, found through
// /proc/PID/task/TID/children, the CPU time their threads used (schedstat)
// plus what the children they reaped used (cutime, cstime), and the time
// their threads waited for a CPU (schedstat's run delay). A process that
// left the tree (setsid and double fork: reparented) no longer counts, nor
// does the time of one that ended before a process of the tree reaped it.
// ok is false where the kernel keeps no schedstat (no wait time then).
// It fails when pid is gone.
func TreeDemand(pid int) (cpu, wait time.Duration, ok bool, err error) {
	ok = true
	stack := []int{pid}
	seen := map[int]bool{}
	var buf [4096]byte
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[p] {
			continue
		}
		seen[p] = true
		dir := "/proc/" + strconv.Itoa(p)
		b, rerr := readFile(dir+"/stat", buf[:])
		if rerr != nil {
			if p == pid {
				return 0, 0, false, rerr
			}
			continue // ended meanwhile
		}
		cpu += reapedCPU(b)
		tasks, _ := os.ReadDir(dir + "/task")
		for _, t := range tasks {
			tdir := dir + "/task/" + t.Name()
			if b, err := readFile(tdir+"/schedstat", buf[:]); err == nil {
				f := bytes.Fields(b)
				if len(f) >= 2 {
					run, _ := strconv.ParseInt(string(f[0]), 10, 64)
					delay, _ := strconv.ParseInt(string(f[1]), 10, 64)
					cpu += time.Duration(run)
					wait += time.Duration(delay)
				}
			} else {
				ok = false
			}
			if b, err := readFile(tdir+"/children", buf[:]); err == nil {
				for c := range bytes.FieldsSeq(b) {
					if n, err := strconv.Atoi(string(c)); err == nil {
						stack = append(stack, n)
					}
				}
			}
		}
	}
	return cpu, wait, ok, nil
}

// userHZ is the unit of the times in /proc/PID/stat (USER_HZ, 100 on
// every Linux ABI).
const userHZ = 100

// reapedCPU is the CPU time of the reaped children in a /proc/PID/stat
// line (cutime and cstime, the 16th and 17th fields).
func reapedCPU(stat []byte) time.Duration {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(stat[i+1:]) // f[0] is the 3rd field, state
	if len(f) < 15 {
		return 0
	}
	cu, _ := strconv.ParseInt(string(f[13]), 10, 64)
	cs, _ := strconv.ParseInt(string(f[14]), 10, 64)
	return time.Duration(cu+cs) * time.Second / userHZ
}
