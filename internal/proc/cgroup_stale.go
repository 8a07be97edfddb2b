package proc

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// removeStale removes the cgroups left under parent by engines whose
// process no longer exists (a crash skips Close), after ending what still
// runs there (see killStale): those commands' engine is gone, and its
// watchdog did not end them (it was killed too).
func removeStale(parent string) {
	dirs, _ := filepath.Glob(filepath.Join(parent, "bashvisor-*-*"))
	for _, d := range dirs {
		f := strings.Split(filepath.Base(d), "-")
		pid, err := strconv.Atoi(f[1])
		if err != nil || pid <= 0 || unix.Kill(pid, 0) == nil || !errors.Is(unix.Kill(pid, 0), unix.ESRCH) {
			continue
		}
		killStale(d)
		children, _ := os.ReadDir(d)
		for _, c := range children {
			if c.IsDir() {
				_ = os.Remove(filepath.Join(d, c.Name())) // fails (EBUSY) when populated
			}
		}
		_ = os.Remove(d)
	}
	_ = os.Remove(filepath.Join(parent, releasedName)) // fails (EBUSY) when populated
}

// killStale kills the processes in dead engine directory d and its
// command cgroups: with cgroup.kill where the directory has one (cgroup
// v2: every descendant at once), else (a v1 hierarchy) SIGKILL to each
// listed process, until none is left or 2 s passed. It kills nothing
// when one of them is outside this process's pid namespace (listed as
// pid 0): the engine that ran it was not one this process can judge dead
// by its pid (engines sharing a cgroup parent must share a pid namespace
// for the sweep to end anything).
func killStale(d string) {
	members := func() []int {
		var pids []int
		files := []string{filepath.Join(d, "cgroup.procs")}
		children, _ := os.ReadDir(d)
		for _, c := range children {
			if c.IsDir() {
				files = append(files, filepath.Join(d, c.Name(), "cgroup.procs"))
			}
		}
		for _, f := range files {
			data, _ := os.ReadFile(f)
			for w := range bytes.FieldsSeq(data) {
				if pid, err := strconv.Atoi(string(w)); err == nil {
					pids = append(pids, pid) // 0: outside this pid namespace
				}
			}
		}
		return pids
	}
	_, err := os.Stat(filepath.Join(d, "cgroup.kill"))
	v2 := err == nil
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		pids := members()
		if len(pids) == 0 || slices.Contains(pids, 0) {
			return
		}
		if v2 {
			_ = os.WriteFile(filepath.Join(d, "cgroup.kill"), []byte("1"), 0)
			for _, pid := range pids { // a process whose leader exited: cgroup.kill passes it over
				if st, err := ReadStat(pid); err == nil && st.State == 'Z' {
					_ = unix.Kill(pid, unix.SIGKILL)
				}
			}
			continue
		}
		for _, pid := range pids {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
}
