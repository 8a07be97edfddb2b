package config

import "golang.org/x/sys/unix"

// defaultMemoryLimit is the default of [Limits.Memory]: half of the
// physical memory, at most 16 GiB (4 GiB if the size cannot be read).
func defaultMemoryLimit() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil || si.Totalram == 0 {
		return 4 << 30
	}
	return min(int64(si.Totalram)*int64(si.Unit)/2, 16<<30)
}
