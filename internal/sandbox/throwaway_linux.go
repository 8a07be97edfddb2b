//go:build linux

package sandbox

import (
	"fmt"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
)

// throwawayCaches gives the command a view of its world's caches that it
// may write but nobody else ever reads (Options.ThrowawayCaches): over
// each cache (the world's cache directory, and each cache with a base
// at the base's path) an overlay whose lower layer is the cache as it is
// (every entry the conversation's ordinary commands cached is a hit) and
// whose upper layer is on a tmpfs that no path names, which goes away
// with the command's mount namespace. It runs after mountView, in the
// command's mount namespace (rootless: in the world's user namespace).
func throwawayCaches(cfg *helperConfig) error {
	caches := append([]string{filepath.Join(cfg.World.Dir, "cache")}, cfg.Caches...)
	n, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("throwaway caches: fsopen: %w", err)
	}
	fsctx := fd.New(n)
	defer fsctx.Close()
	for _, kv := range [][2]string{{"mode", "0700"}, {"size", strconv.FormatUint(cfg.ScratchBytes, 10)}, {"nr_inodes", strconv.FormatUint(cfg.ScratchFiles, 10)}} {
		if kv[1] == "0" {
			continue
		}
		if err := unix.FsconfigSetString(fsctx.Int(), kv[0], kv[1]); err != nil {
			return fmt.Errorf("throwaway caches: tmpfs %s: %w", kv[0], err)
		}
	}
	if err := unix.FsconfigCreate(fsctx.Int()); err != nil {
		return fmt.Errorf("throwaway caches: tmpfs: %w", err)
	}
	m, err := unix.Fsmount(fsctx.Int(), unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return fmt.Errorf("throwaway caches: fsmount: %w", err)
	}
	tmp := fd.New(m)
	defer tmp.Close() // the overlays keep the tmpfs
	// Overlayfs takes its layers by path: the detached tmpfs's through
	// this thread's descriptor of it.
	base := "/proc/thread-self/fd/" + strconv.Itoa(tmp.Int())
	for i, c := range caches {
		upper, work := "u"+strconv.Itoa(i), "w"+strconv.Itoa(i)
		for _, d := range []string{upper, work} {
			if err := unix.Mkdirat(tmp.Int(), d, 0o700); err != nil {
				return fmt.Errorf("throwaway caches: %w", err)
			}
		}
		o := "lowerdir=" + overlayEscape(c) + ",upperdir=" + base + "/" + upper + ",workdir=" + base + "/" + work +
			",index=off,metacopy=off,redirect_dir=nofollow"
		if cfg.World.Rootless {
			o += ",userxattr"
		}
		if err := unix.Mount("overlay", c, "overlay", unix.MS_NOSUID|unix.MS_NODEV, o); err != nil {
			return fmt.Errorf("throwaway view of the cache %s: %w", c, err)
		}
	}
	return nil
}
