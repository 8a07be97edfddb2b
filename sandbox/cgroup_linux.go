//go:build linux

package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/proc"
)

// cgroupBase is the directory under which per-command pids cgroups are
// created ("" when no pids controller is usable). Set by probe.
var cgroupBase string

// cgroupV2 says cgroupBase is on cgroup2 (else on the v1 pids hierarchy).
var cgroupV2 bool

// findPidsHierarchy returns the mount point of a cgroup hierarchy with the
// pids controller: a cgroup v1 "pids" mount, or a cgroup2 mount whose
// cgroup.controllers lists pids.
func findPidsHierarchy() (dir string, v2 bool, err error) {
	mounts, err := proc.Mounts()
	if err != nil {
		return "", false, err
	}
	var v2dirs []string
	for _, m := range mounts {
		switch m.FSType {
		case "cgroup":
			if slices.Contains(m.SuperOptions, "pids") {
				return m.Point, false, nil
			}
		case "cgroup2":
			v2dirs = append(v2dirs, m.Point)
		}
	}
	for _, d := range v2dirs {
		c, err := os.ReadFile(filepath.Join(d, "cgroup.controllers"))
		if err == nil && hasWord(string(c), "pids") {
			return d, true, nil
		}
	}
	return "", false, errors.New("no cgroup hierarchy with the pids controller is mounted")
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// probeCgroup sets cgroupBase when this process may create pids cgroups.
func probeCgroup() error {
	root, v2, err := findPidsHierarchy()
	if err != nil {
		return err
	}
	base := filepath.Join(root, "bashvisor")
	if err := os.Mkdir(base, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("cannot create %s: %w", base, err)
	}
	if v2 {
		// The pids controller must be enabled for the children of root and
		// of base. (Where the engine runs in a delegated subtree, root is the
		// mount point of that namespace.)
		ctl, _ := os.ReadFile(filepath.Join(root, "cgroup.subtree_control"))
		if !hasWord(string(ctl), "pids") {
			if err := os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), []byte("+pids"), 0); err != nil {
				return fmt.Errorf("cannot enable pids in %s: %w", root, err)
			}
		}
		if err := os.WriteFile(filepath.Join(base, "cgroup.subtree_control"), []byte("+pids"), 0); err != nil {
			return fmt.Errorf("cannot enable pids in %s: %w", base, err)
		}
	}
	// Try a real child: the helper writes its own pid into it later, which
	// needs write access to cgroup.procs.
	test := filepath.Join(base, fmt.Sprintf("probe-%d", os.Getpid()))
	_ = os.Remove(test)
	if err := os.Mkdir(test, 0o755); err != nil {
		return fmt.Errorf("cannot create a cgroup under %s: %w", base, err)
	}
	defer os.Remove(test)
	if err := unix.Access(filepath.Join(test, "pids.max"), unix.W_OK); err != nil {
		return fmt.Errorf("pids.max not writable under %s: %w", base, err)
	}
	if err := unix.Access(filepath.Join(test, "cgroup.procs"), unix.W_OK); err != nil {
		return fmt.Errorf("cgroup.procs not writable under %s: %w", base, err)
	}
	cgroupBase, cgroupV2 = base, v2
	return nil
}

// createCgroup creates the per-command pids cgroup and sets pids.max.
func createCgroup(name string, max int) (string, error) {
	dir := filepath.Join(cgroupBase, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	v := "max"
	if max > 0 {
		v = strconv.Itoa(max)
	}
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(v), 0); err != nil {
		_ = os.Remove(dir)
		return "", err
	}
	return dir, nil
}

// joinCgroup moves the calling process (all its threads) into dir.
func joinCgroup(dir string) error {
	return os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0)
}

// removeCgroup SIGKILLs every process still in the cgroup (leftovers that
// escaped the process group with setsid, or a fork bomb) and removes it.
func removeCgroup(dir string) error {
	if dir == "" {
		return nil
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("sandbox: remove cgroup %s: %w", dir, err)
		}
		killCgroup(dir)
		time.Sleep(2 * time.Millisecond)
	}
}

// killCgroup sends SIGKILL to every process listed in dir/cgroup.procs,
// through a pidfd that is opened and then checked to still belong to the
// cgroup, so a recycled pid is never signalled.
func killCgroup(dir string) {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	// The cgroup's name is unique (the scratch dir's random name); match it
	// at the end of a line of /proc/PID/cgroup whatever cgroup namespace
	// shortens the path to.
	suffix := []byte("/" + filepath.Base(dir) + "\n")
	for _, f := range strings.Fields(string(data)) {
		pid, err := strconv.Atoi(f)
		// Never the engine itself: with StartDirect one of its threads is
		// in the cgroup until it exits.
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		if cg, err := os.ReadFile("/proc/" + f + "/cgroup"); err == nil && bytes.Contains(cg, suffix) {
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		}
		_ = unix.Close(fd)
	}
}

// removeStale removes what engines that were killed left behind: scratch
// directories and pids cgroups named after an engine process that no
// longer exists (scratchPrefix + PID + "-"). Processes still in such a
// cgroup are restricted commands nobody manages any more: they are killed.
func removeStale() {
	root := ScratchRoot
	if root == "" {
		root = os.TempDir()
	}
	dead := func(name string) bool {
		rest, ok := strings.CutPrefix(name, scratchPrefix)
		if !ok {
			return false
		}
		pidStr, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		return ok && err == nil && pid > 0 && errors.Is(unix.Kill(pid, 0), unix.ESRCH)
	}
	if entries, err := os.ReadDir(root); err == nil {
		for _, e := range entries {
			if e.IsDir() && dead(e.Name()) {
				_ = removeScratch(filepath.Join(root, e.Name()))
			}
		}
	}
	if cgroupBase == "" {
		return
	}
	if entries, err := os.ReadDir(cgroupBase); err == nil {
		for _, e := range entries {
			if e.IsDir() && dead(e.Name()) {
				_ = removeCgroup(filepath.Join(cgroupBase, e.Name()))
			}
		}
	}
}
