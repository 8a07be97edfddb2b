//go:build linux

package layer

import (
	"fmt"
	"io/fs"
	"os"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
)

// Rewrite makes b what apply puts at the regular file path (a change
// of s) in place of what the command left there: the change's Size
// follows, and Open and ReadFile of path after the command read b. It
// is for a caller that must change what is applied (git's index without
// the caches git rebuilds) before it judges and applies s. inPlace
// writes b into the upper file now, its permissions, owner and times
// kept: for a layer no command runs over (a held change set's later
// Diff sees it too). Otherwise the upper file stays as it is (a job
// still running over the layer, at a checkpoint, sees its own file):
// [Set.ApplyCopies] puts b in the real tree, with the upper file's
// permissions, owner and times, and a later Diff lists the file again;
// [Set.Apply] and [Set.ApplyExact] write b into the upper file first.
func (s *Set) Rewrite(path string, b []byte, inPlace bool) error {
	k, err := s.rewritable(path)
	if err != nil {
		return err
	}
	if inPlace {
		if err := s.writeUpper(path, b); err != nil {
			return err
		}
	} else {
		if s.rewrites == nil {
			s.rewrites = map[string][]byte{}
		}
		s.rewrites[path] = b
	}
	s.Changes[k].Size = int64(len(b))
	return nil
}

// rewritable returns the index in s.Changes of the regular file path,
// which the command left in the upper layer.
func (s *Set) rewritable(path string) (int, error) {
	i, _, err := s.rel(path)
	if err != nil {
		return 0, err
	}
	k, found := slices.BinarySearchFunc(s.Changes, path, func(c Change, p string) int { return comparePaths(c.Path, p) })
	if !found || s.Changes[k].Path != path || s.Changes[k].Kind == Deleted || !s.Changes[k].Mode.IsRegular() {
		return 0, fmt.Errorf("layer: rewrite %s: not a regular file the command changed", path)
	}
	t, _, err := s.find(path, true)
	if err != nil {
		return 0, err
	}
	if t != s.upper[i] {
		return 0, fmt.Errorf("layer: rewrite %s: not in the upper layer", path)
	}
	return k, nil
}

// flushRewrites writes what Rewrite recorded into the upper files, for
// an apply that moves them.
func (s *Set) flushRewrites() error {
	for path, b := range s.rewrites {
		if err := s.writeUpper(path, b); err != nil {
			return err
		}
	}
	return nil
}

// writeUpper writes b into the upper file path in place, keeping its
// permissions, owner and times.
func (s *Set) writeUpper(path string, b []byte) error {
	i, _, err := s.rel(path)
	if err != nil {
		return err
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
	return nil
}

// copyRewritten puts b at re/rel, with the permissions, owner and times
// of up/rel (the upper file Rewrite replaced), by a temporary name
// renamed into place (as copyEntry does).
func copyRewritten(up *tree, re *tree, rel string, b []byte) error {
	st, ok, err := up.lstat(rel)
	if err != nil {
		return err
	}
	if !ok || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return &fs.PathError{Op: "copy", Path: up.path(rel), Err: fs.ErrNotExist}
	}
	d, name := split(rel)
	dfd, err := re.dir(d)
	if err != nil {
		return err
	}
	tmp := tmpName(name)
	if err := writeNew(re, join(d, tmp), dfd, tmp, b, &st); err != nil {
		_ = removeEntry(re, join(d, tmp))
		return err
	}
	if err := unix.Renameat(dfd, tmp, dfd, name); err != nil {
		_ = removeEntry(re, join(d, tmp))
		return &fs.PathError{Op: "rename", Path: re.path(rel), Err: err}
	}
	return nil
}

// writeNew makes the new file t/rel (name in directory dfd) hold b,
// with the permissions, owner and times of st.
func writeNew(t *tree, rel string, dfd int, name string, b []byte, st *unix.Stat_t) error {
	n, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, st.Mode&0o777)
	if err != nil {
		return &fs.PathError{Op: "create", Path: t.path(rel), Err: err}
	}
	out := os.NewFile(uintptr(n), name)
	_, err = out.Write(b)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return &fs.PathError{Op: "write", Path: t.path(rel), Err: err}
	}
	f, cur, err := t.openEntry(rel)
	if err != nil {
		return err
	}
	defer f.Close()
	return t.setAttrs(rel, f, &cur, st)
}
