package proc

import (
	"os"
	"strconv"
	"strings"
)

// Mount is one line of /proc/self/mountinfo.
type Mount struct {
	Root         string   // the mounted directory within its filesystem
	Point        string   // where it is mounted
	FSType       string   // e.g. "cgroup2", "cgroup"
	SuperOptions []string // e.g. ["rw", "pids"] for a cgroup v1 pids mount
}

// Mounts parses /proc/self/mountinfo.
func Mounts() ([]Mount, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []Mount
	for line := range strings.SplitSeq(string(data), "\n") {
		// 41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 1 {
			continue
		}
		m := Mount{Root: unescapeMount(pf[3]), Point: unescapeMount(pf[4]), FSType: qf[0]}
		if len(qf) >= 3 {
			m.SuperOptions = strings.Split(qf[2], ",")
		}
		out = append(out, m)
	}
	return out, nil
}

// unescapeMount undoes the octal escapes (\040 for space) of mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
