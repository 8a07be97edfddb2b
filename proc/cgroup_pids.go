package proc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The pids limit of a command (pids.max: processes and threads at once) is
// set where the host offers the pids controller: on the command's cgroup v2
// itself when the controller can be enabled for the engine's cgroups there
// (a pure cgroup v2 host with the controller delegated), otherwise in a
// cgroup of the cgroup v1 pids hierarchy (a hybrid host), which the
// command's processes must then also be placed into (see [Cgroup.PidsDir]).

// probePids finds where m can set pids.max; it leaves m without a pids
// limit when the host offers none.
func (m *Cgroups) probePids() {
	// cgroup v2: the controller must be enabled in the parent's
	// subtree_control for m.dir, and then in m.dir's for the commands.
	if hasWord(readString(filepath.Join(m.home, "cgroup.controllers")), "pids") {
		sub := filepath.Join(m.home, "cgroup.subtree_control")
		if !hasWord(readString(sub), "pids") {
			// Fails (EBUSY) when the parent holds processes, as the
			// engine's own cgroup usually does; CgroupParent can name a
			// delegated subtree where it works.
			_ = os.WriteFile(sub, []byte("+pids"), 0)
		}
		if hasWord(readString(sub), "pids") &&
			os.WriteFile(filepath.Join(m.dir, "cgroup.subtree_control"), []byte("+pids"), 0) == nil {
			m.pidsV2 = true
			return
		}
	}
	// cgroup v1: the engine's own cgroup in the pids hierarchy.
	mount, root, err := v1Mount("pids")
	if err != nil {
		return
	}
	own, err := ownV1Cgroup("pids")
	if err != nil {
		return
	}
	if root != "/" {
		own = strings.TrimPrefix(own, root)
	}
	home := filepath.Join(mount, own)
	removeStale(home)
	dir := filepath.Join(home, filepath.Base(m.dir))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return
	}
	m.pidsV1, m.pidsV1Home = dir, home
}

// PidsLimit reports whether [Cgroup.SetPidsMax] can limit a command's
// processes on this host.
func (m *Cgroups) PidsLimit() bool { return m.pidsV2 || m.pidsV1 != "" }

// SetPidsMax limits the command to n processes and threads at once (n <= 0:
// no limit). On a host where the limit lives in the cgroup v1 pids
// hierarchy it creates the command's cgroup there, which [Cgroup.PidsDir]
// then names: the command's processes must be placed into it. It fails when
// the host offers no pids limit ([Cgroups.PidsLimit]).
func (c *Cgroup) SetPidsMax(n int) error {
	v := "max"
	if n > 0 {
		v = strconv.Itoa(n)
	}
	switch {
	case c.m.pidsV2:
		if err := os.WriteFile(filepath.Join(c.dir, "pids.max"), []byte(v), 0); err != nil {
			return fmt.Errorf("pids.max: %w", err)
		}
		c.mu.Lock()
		c.pidsV2Set = n > 0
		c.mu.Unlock()
		return nil
	case c.m.pidsV1 != "":
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.pidsDir == "" {
			dir := filepath.Join(c.m.pidsV1, filepath.Base(c.dir))
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return fmt.Errorf("pids cgroup: %w", err)
			}
			c.pidsDir = dir
		}
		if err := os.WriteFile(filepath.Join(c.pidsDir, "pids.max"), []byte(v), 0); err != nil {
			return fmt.Errorf("pids.max: %w", err)
		}
		return nil
	}
	return errors.New("no pids controller available for the engine's cgroups")
}

// PidsDir is the command's cgroup in the cgroup v1 pids hierarchy after
// SetPidsMax on a hybrid host: a process is placed into it by writing its
// pid to PidsDir/cgroup.procs (a clone into the cgroup v2 does not place it
// there). It is "" when the limit is on the cgroup v2 itself or there is
// none.
func (c *Cgroup) PidsDir() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pidsDir
}

// removePids removes the command's v1 pids cgroup, moving what is left in
// it to the engine's when release is set. It reports whether the directory
// is gone.
func (c *Cgroup) removePids(release bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pidsDir == "" {
		return true
	}
	if release {
		for _, pid := range readPids(filepath.Join(c.pidsDir, "cgroup.procs")) {
			_ = os.WriteFile(filepath.Join(c.m.pidsV1Home, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
		}
	}
	if err := os.Remove(c.pidsDir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false
	}
	c.pidsDir = ""
	return true
}

// resetPids undoes SetPidsMax on a cgroup about to be reused.
func (c *Cgroup) resetPids() bool {
	c.mu.Lock()
	set := c.pidsV2Set
	c.pidsV2Set = false
	c.mu.Unlock()
	if set && os.WriteFile(filepath.Join(c.dir, "pids.max"), []byte("max"), 0) != nil {
		return false
	}
	return c.removePids(false)
}

// v1Mount returns the mount point and root of the cgroup v1 hierarchy of
// controller.
func v1Mount(controller string) (mount, root string, err error) {
	mounts, err := Mounts()
	if err != nil {
		return "", "", err
	}
	for _, m := range mounts {
		if m.FSType == "cgroup" && slices.Contains(m.SuperOptions, controller) {
			return m.Point, m.Root, nil
		}
	}
	return "", "", fmt.Errorf("no cgroup v1 %s hierarchy is mounted", controller)
}

// ownV1Cgroup returns the calling process's path in the v1 hierarchy of
// controller ("N:controller[,...]:PATH" in /proc/self/cgroup).
func ownV1Cgroup(controller string) (string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && slices.Contains(strings.Split(f[1], ","), controller) {
			return f[2], nil
		}
	}
	return "", fmt.Errorf("no %s entry in /proc/self/cgroup", controller)
}

func readString(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func hasWord(s, w string) bool { return slices.Contains(strings.Fields(s), w) }
