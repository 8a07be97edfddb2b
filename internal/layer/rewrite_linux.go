//go:build linux

package layer

import (
	"fmt"
	"io/fs"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
)

// Rewrite replaces what the command left in the regular file path (a
// change of s, in the upper layer) with b: what apply will put there.
// The file is written in place, its permissions, owner and times kept,
// and the change's Size follows. It is for a caller that must change
// what is applied (git's index without the caches git rebuilds) before
// it judges and applies s, while no command runs over the layer (a
// command would see, or overwrite, the rewrite).
func (s *Set) Rewrite(path string, b []byte) error {
	i, _, err := s.rel(path)
	if err != nil {
		return err
	}
	k, found := slices.BinarySearchFunc(s.Changes, path, func(c Change, p string) int { return comparePaths(c.Path, p) })
	if !found || s.Changes[k].Path != path || s.Changes[k].Kind == Deleted || !s.Changes[k].Mode.IsRegular() {
		return fmt.Errorf("layer: rewrite %s: not a regular file the command changed", path)
	}
	t, rel, err := s.find(path, true)
	if err != nil {
		return err
	}
	if t != s.upper[i] {
		return fmt.Errorf("layer: rewrite %s: not in the upper layer", path)
	}
	d, name := split(rel)
	dir, err := t.dir(d)
	if err != nil {
		return err
	}
	n, err := unix.Openat(dir, name, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: t.path(rel), Err: err}
	}
	f := fd.New(n)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(f.Int(), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("layer: rewrite %s: not a regular file (%v)", path, err)
	}
	if err := unix.Ftruncate(f.Int(), 0); err != nil {
		return &fs.PathError{Op: "truncate", Path: t.path(rel), Err: err}
	}
	for off := 0; off < len(b); {
		w, err := unix.Pwrite(f.Int(), b[off:], int64(off))
		if err != nil {
			return &fs.PathError{Op: "write", Path: t.path(rel), Err: err}
		}
		off += w
	}
	if err := unix.UtimesNanoAt(f.Int(), "", []unix.Timespec{st.Atim, st.Mtim}, unix.AT_EMPTY_PATH); err != nil {
		return &fs.PathError{Op: "utimes", Path: t.path(rel), Err: err}
	}
	s.Changes[k].Size = int64(len(b))
	return nil
}
