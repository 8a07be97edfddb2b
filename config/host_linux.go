package config

import (
	"math"

	"golang.org/x/sys/unix"
)

// defaultMemoryLimit is the default of [Limits.Memory]: half of the
// physical memory, at most 16 GiB (4 GiB if the size cannot be read).
func defaultMemoryLimit() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil || si.Totalram == 0 {
		return 4 << 30
	}
	return min(int64(si.Totalram)*int64(si.Unit)/2, 16<<30)
}

// openFiles is the process's soft limit on open files (the Go runtime
// raises it to the hard limit at start), or a large number when it cannot
// be read or is unlimited.
func openFiles() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(rl.Cur)
}
