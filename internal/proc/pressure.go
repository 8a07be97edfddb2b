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
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	n, err := unix.Read(fd, buf)
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
