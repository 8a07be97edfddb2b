//go:build linux

package sandbox

import (
	"fmt"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
)

// A throwaway view (Options.ThrowawayCaches) gives the command its
// world's /tmp and caches to read and write, while what it writes there
// reaches no other command: over each (the world's tmp directory, its
// cache directory, and each cache with a base at the base's path) an
// overlay whose lower layer is the directory as it is (every file the
// conversation's ordinary commands left in /tmp, every entry they cached,
// is there) and whose upper layer is on a tmpfs that no path names, which
// goes away with the command's mount namespace. In a world the command's
// $TMPDIR is its /tmp (setScratch), so the one overlay covers both.
//
// The tmpfs is the command's own, of Limits.ScratchBytes and
// ScratchFiles: it is not counted in the conversation's quota, so each
// contained command running at the same time may write that much more
// (in memory, charged to the command's memory cgroup where there is one).

// throwawayFS makes the detached tmpfs that holds a throwaway view's upper
// layers, in the command's mount namespace (rootless: in the world's user
// namespace).
func throwawayFS(cfg *helperConfig) (*fd.FD, error) {
	n, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("throwaway view: fsopen: %w", err)
	}
	fsctx := fd.New(n)
	defer fsctx.Close()
	for _, kv := range [][2]string{{"mode", "0700"}, {"size", strconv.FormatUint(cfg.ScratchBytes, 10)}, {"nr_inodes", strconv.FormatUint(cfg.ScratchFiles, 10)}} {
		if kv[1] == "0" {
			continue
		}
		if err := unix.FsconfigSetString(fsctx.Int(), kv[0], kv[1]); err != nil {
			return nil, fmt.Errorf("throwaway view: tmpfs %s: %w", kv[0], err)
		}
	}
	if err := unix.FsconfigCreate(fsctx.Int()); err != nil {
		return nil, fmt.Errorf("throwaway view: tmpfs: %w", err)
	}
	m, err := unix.Fsmount(fsctx.Int(), unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return nil, fmt.Errorf("throwaway view: fsmount: %w", err)
	}
	return fd.New(m), nil
}

// throwawayOver mounts on dir an overlay whose lower layer is dir as it
// is and whose upper and work directories are new ones, named after
// name, on the throwaway tmpfs tmp. The overlay's root shows the upper
// directory's mode and owner, which are made dir's (/tmp stays 1777).
func throwawayOver(tmp *fd.FD, name, dir string, rootless bool) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return fmt.Errorf("throwaway view of %s: %w", dir, err)
	}
	// Overlayfs takes its layers by path: the detached tmpfs's through
	// this thread's descriptor of it.
	base := "/proc/thread-self/fd/" + strconv.Itoa(tmp.Int())
	upper, work := "u"+name, "w"+name
	for _, d := range []string{upper, work} {
		if err := unix.Mkdirat(tmp.Int(), d, 0o700); err != nil {
			return fmt.Errorf("throwaway view of %s: %w", dir, err)
		}
	}
	// EINVAL: an owner the user namespace does not map (rootless), which
	// nobody in it could be; the upper stays the helper's.
	if err := unix.Fchownat(tmp.Int(), upper, int(st.Uid), int(st.Gid), 0); err != nil && err != unix.EINVAL {
		return fmt.Errorf("throwaway view of %s: %w", dir, err)
	}
	if err := unix.Fchmodat(tmp.Int(), upper, st.Mode&0o7777, 0); err != nil {
		return fmt.Errorf("throwaway view of %s: %w", dir, err)
	}
	o := "lowerdir=" + overlayEscape(dir) + ",upperdir=" + base + "/" + upper + ",workdir=" + base + "/" + work +
		",index=off,metacopy=off,redirect_dir=nofollow"
	if rootless {
		o += ",userxattr"
	}
	if err := unix.Mount("overlay", dir, "overlay", unix.MS_NOSUID|unix.MS_NODEV, o); err != nil {
		return fmt.Errorf("throwaway view of %s: %w", dir, err)
	}
	return nil
}

// throwawayTmp covers the world's tmp directory with a throwaway overlay,
// before mountView clones it onto /tmp.
func throwawayTmp(cfg *helperConfig, tmp *fd.FD) error {
	return throwawayOver(tmp, "tmp", cfg.World.Dir+"/tmp", cfg.World.Rootless)
}

// throwawayCaches covers the world's caches with throwaway overlays. It
// runs after mountView, which attached them.
func throwawayCaches(cfg *helperConfig, tmp *fd.FD) error {
	caches := append([]string{filepath.Join(cfg.World.Dir, "cache")}, cfg.Caches...)
	for i, c := range caches {
		if err := throwawayOver(tmp, strconv.Itoa(i), c, cfg.World.Rootless); err != nil {
			return err
		}
	}
	return nil
}
