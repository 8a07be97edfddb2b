//go:build linux

package layer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Reset makes l again what [New] makes for its roots, in the same
// directories: each upper and work directory is emptied (what the
// command wrote and did not apply, overlayfs's work directories and
// their volatile marks), the upper directories get their roots' mode
// and owner again, the roots' identity is read again, and what
// [Layer.Premount] or [Layer.Hold] kept is closed, so that l can be
// premounted and mounted for another command. Reusing a layer instead
// of removing it and making a new one saves its directories' creation
// and removal (on ext4 with the discard option, the removal of each
// directory frees a block the disk is told about at once).
//
// Call it only when nothing can still have l's overlays mounted: the
// command's processes are all gone (an overlay still mounted over an
// upper directory that a new overlay uses is undefined behaviour in
// overlayfs). It first waits, at most resetWait, for the threads that
// [Spec.MountedBy] named to end. It fails, and l must then be removed, when a root is gone
// or no longer a directory, or when a directory of l cannot be emptied
// or is gone; a failed Reset leaves l unfit for use ([Layer.Stale]).
func (l *Layer) Reset() error {
	if err := l.WaitUnmounted(resetWait); err != nil {
		return err
	}
	l.closePremount()
	l.pre, l.shared = nil, nil
	for i := range l.roots {
		r := &l.roots[i]
		fi, err := os.Lstat(r.path)
		if err != nil || !fi.IsDir() {
			r.dev, r.ino = 0, 0 // stale
			return fmt.Errorf("layer: root %s is gone or not a directory", r.path)
		}
		for j, d := range []string{r.upper, r.work, filepath.Join(l.dir, "p"+strconv.Itoa(i))} {
			if err := emptyDir(d, j == 2, j > 0); err != nil {
				r.dev, r.ino = 0, 0
				return fmt.Errorf("layer: reset: %w", err)
			}
		}
		if err := fitUpper(r.upper, fi, false); err != nil {
			r.dev, r.ino = 0, 0
			return fmt.Errorf("layer: reset: %w", err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		r.dev, r.ino = st.Dev, st.Ino
	}
	return nil
}

// emptyDir removes everything in directory d, which must exist unless
// mayLack (a premount work directory is made by the first Premount).
// It is cheap for what a Reset finds most: an empty directory (the
// upper layer of a command that changed nothing: one open, two
// getdents, one close) and, for an overlay's work directory (work: no
// command can write there), one that holds only what overlayfs made at
// mount (workMarks, removed by name). Never by name in an upper
// directory: a command may have put a symlink at "work" there.
func emptyDir(d string, mayLack, work bool) error {
	n, err := unix.Open(d, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if mayLack && err == unix.ENOENT {
		return nil
	}
	if err != nil {
		return &fs.PathError{Op: "open", Path: d, Err: err}
	}
	defer unix.Close(n)
	if work {
		removeWorkMarks(n)
	}
	buf := make([]byte, 4096)
	for {
		names, err := readNames(n, buf)
		if err != nil {
			return &fs.PathError{Op: "getdents", Path: d, Err: err}
		}
		if names == nil {
			return nil
		}
		for _, name := range names {
			if err := RemoveAll(filepath.Join(d, name)); err != nil {
				return err
			}
		}
	}
}

// workMarks are what overlayfs leaves in the work directory of a
// volatile overlay once it was mounted, deepest first: a Reset removes
// them by name (removeWorkMarks) rather than by walking the directory.
var workMarks = [...]struct {
	path string
	flag int
}{
	{"work/incompat/volatile/dirty", 0},
	{"work/incompat/volatile", unix.AT_REMOVEDIR},
	{"work/incompat", unix.AT_REMOVEDIR},
	{"work", unix.AT_REMOVEDIR},
}

// removeWorkMarks removes the workMarks below the directory dirfd,
// stopping at the first that fails (absent, or a directory that holds
// more: the caller's walk removes the rest).
func removeWorkMarks(dirfd int) {
	for _, m := range workMarks {
		if unix.Unlinkat(dirfd, m.path, m.flag) != nil {
			return
		}
	}
}

// readNames reads the next entries of the directory open as dirfd with
// one getdents64 call, without "." and "..": nil at its end.
func readNames(dirfd int, buf []byte) ([]string, error) {
	for {
		n, err := unix.Getdents(dirfd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return nil, nil
		}
		_, _, names := unix.ParseDirent(buf[:n], -1, nil)
		if names == nil {
			names = []string{} // only "." and "..": read on
		}
		return names, nil
	}
}

// resetWait bounds how long Reset waits for the threads of
// [Spec.MountedBy] to end.
const resetWait = 2 * time.Second

// WaitUnmounted waits, at most d, until the threads that
// [Spec.MountedBy] named ended (at once when there are none), so that
// [Layer.Reset] will not wait. It fails when one still runs after d.
func (l *Layer) WaitUnmounted(d time.Duration) error { return l.uses.wait(d) }

// MountedBy tells the layer that the calling process's thread tid is in
// a mount namespace where s's overlays are attached, and that the
// namespace, with the overlays, ends when the thread exits (the sandbox
// keeps the thread that made a command's namespace, so that the shell's
// exit does not wait for the namespace's teardown): [Layer.Reset] waits
// for it. It does nothing for a Spec that no [Layer] of this process
// made (a copy in another process).
func (s Spec) MountedBy(tid int) {
	if s.uses == nil {
		return
	}
	s.uses.mu.Lock()
	s.uses.tids = append(s.uses.tids, tid)
	s.uses.mu.Unlock()
}

// wait waits until every thread of t ended (nil-safe), at most d.
func (t *threads) wait(d time.Duration) error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	deadline := time.Now().Add(d)
	for len(t.tids) > 0 {
		if _, err := os.Lstat("/proc/self/task/" + strconv.Itoa(t.tids[0])); errors.Is(err, os.ErrNotExist) {
			t.tids = t.tids[1:]
			continue
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("layer: thread %d still has the overlays mounted", t.tids[0])
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}
