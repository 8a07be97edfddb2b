//go:build linux

package layer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Options describe the layer of one command.
type Options struct {
	// Roots are the directories the command may change: absolute paths of
	// existing directories (symlinks are resolved). A root below another
	// one is covered by the outer root's layer. A mount below a root is not
	// part of its layer (overlayfs does not cross mounts): in the command's
	// mount namespace the overlay hides it, and its contents are those of
	// the directory under it.
	Roots []string
	// Dir is where the per-command upper and work directories are made
	// (one subdirectory per command, removed by [Layer.Remove]). Its file
	// system must be able to hold an overlayfs upper layer: xattrs in the
	// trusted namespace as root, in the user namespace with UserXattr
	// (ext4, xfs, btrfs; tmpfs from Linux 6.6). When Dir is on the same
	// file system and mount as a root, [Set.Apply] moves the command's
	// files into place with rename(2); otherwise it copies them. Each
	// overlay mounted over Dir makes seven inodes there (overlayfs's
	// work directory, its volatile marks and its checks of the file
	// system), four of them kept until [Layer.Reset] or [Layer.Remove]:
	// on ext4 without a journal each new inode first skips every inode
	// of its block group freed in the last 60 s (up to 6 minutes), so
	// that this costs more CPU the more inodes are made and removed
	// there (by commands, and by anything else): a Premount and a Reset
	// took 0.5 to 5.8 ms of CPU in the /tmp of such a disk shared with
	// builds and tests (and up to 8.5 ms of wall time back to back:
	// freeing a directory's block waits for its discard on a disk
	// mounted with discard), 0.34 to 0.72 ms when Dir is marked as the
	// top of directory hierarchies (chattr +T, as package transact
	// marks its own: ext4 then puts each layer in a block group of its
	// own), and 0.15 to 0.52 ms on a tmpfs (BenchmarkPremountReset).
	Dir string
	// UserXattr mounts the overlay with the userxattr option, which an
	// overlay mounted inside a user namespace needs (an unprivileged
	// engine): overlayfs then keeps its whiteouts' and opaque
	// directories' marks in user.overlay.* xattrs.
	UserXattr bool
	// LockWait bounds how long [Set.Apply] waits for another process's
	// apply or undo on the same workspace (an abstract unix socket the
	// engines of one network namespace bind, named after the root's
	// device and inode; sandboxed commands, in namespaces of their own,
	// cannot hold it) before it fails with [ErrLocked], having applied
	// nothing. Zero: 10 minutes. Undo always waits that long.
	LockWait time.Duration
}

// Layer is the copy-on-write layer of one command over its roots: an
// overlayfs per root whose lower layer is the real directory and whose
// upper layer, a directory of the engine's, receives everything the
// command writes. Make it with [New] before the command starts, mount it
// in the command's mount namespace ([Layer.Mount]), and after the
// command ended compute its changes ([Layer.Diff]), apply what policy
// allows ([Set.Apply]) and remove it ([Layer.Remove]).
type Layer struct {
	dir       string
	roots     []root
	userXattr bool
	lockWait  time.Duration
	pre       *handoff // Premount's overlays, until Spec.Open takes them
	shared    *handoff // Premount's overlays again, for Share, until Unshare
	uses      *threads // threads whose exit unmounts its overlays (Spec.MountedBy)
}

// root is one overlay: the real directory and its upper and work dirs,
// and the real directory's identity when the layer was made.
type root struct {
	path, upper, work string
	dev, ino          uint64
}

// Roots returns the layer's roots: the outermost of [Options.Roots],
// absolute and free of symlinks, in the order the overlays are mounted.
func (l *Layer) Roots() []string {
	out := make([]string, len(l.roots))
	for i, r := range l.roots {
		out[i] = r.path
	}
	return out
}

// dirPrefix starts every per-command directory in Options.Dir.
const dirPrefix = "layer-"

// New makes the upper and work directories of a command's layer in
// opts.Dir. Each upper directory gets the mode and owner of its root,
// since an overlay's root directory shows the upper one's. Nothing is
// mounted yet.
func New(opts Options) (*Layer, error) {
	if len(opts.Roots) == 0 {
		return nil, errors.New("layer: no roots")
	}
	roots, err := outermost(opts.Roots)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(opts.Dir, dirPrefix)
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	l := &Layer{dir: dir, userXattr: opts.UserXattr, lockWait: opts.LockWait, uses: &threads{}}
	for i, p := range roots {
		fi, err := os.Stat(p)
		if err != nil {
			_ = l.Remove()
			return nil, fmt.Errorf("layer: root: %w", err)
		}
		n := strconv.Itoa(i)
		st := fi.Sys().(*syscall.Stat_t)
		r := root{path: p, upper: filepath.Join(dir, "u"+n), work: filepath.Join(dir, "w"+n), dev: st.Dev, ino: st.Ino}
		if err := makeUpper(r.upper, fi); err != nil {
			_ = l.Remove()
			return nil, fmt.Errorf("layer: %w", err)
		}
		if err := os.Mkdir(r.work, 0o700); err != nil {
			_ = l.Remove()
			return nil, fmt.Errorf("layer: %w", err)
		}
		l.roots = append(l.roots, r)
	}
	return l, nil
}

// Stale reports whether l, made ahead of time, no longer fits its
// roots: a root is gone or is another directory than when [New] made
// the layer (premade overlays have the old one as their lower layer),
// or its permissions or owner changed since (the overlay's root
// directory shows its upper directory's, copied from the root then),
// or an upper or work directory is gone. A stale layer must not be
// mounted: remove it and make a new one. It costs three lstat(2) calls
// per root.
func (l *Layer) Stale() bool {
	const bits = fs.ModePerm | fs.ModeSticky | fs.ModeSetgid
	for _, r := range l.roots {
		rfi, err := os.Lstat(r.path)
		if err != nil || !rfi.IsDir() {
			return true
		}
		if st := rfi.Sys().(*syscall.Stat_t); st.Dev != r.dev || st.Ino != r.ino {
			return true
		}
		ufi, err := os.Lstat(r.upper)
		if err != nil || !ufi.IsDir() || ufi.Mode()&bits != rfi.Mode()&bits {
			return true
		}
		ru, rg := owner(rfi)
		uu, ug := owner(ufi)
		if !ownerFits(uu, ug, ru, rg) {
			return true
		}
		if _, err := os.Lstat(r.work); err != nil {
			return true
		}
	}
	return false
}

// makeUpper creates an upper directory with the mode and owner of its
// root (an owner the engine may give: see lchownMay).
func makeUpper(p string, root fs.FileInfo) error {
	if err := os.Mkdir(p, 0o700); err != nil {
		return err
	}
	return fitUpper(p, root, true)
}

// fitUpper gives upper directory p the mode and owner of its root; made
// (just now, by this process), or else only what differs.
func fitUpper(p string, root fs.FileInfo, made bool) error {
	const bits = fs.ModePerm | fs.ModeSticky | fs.ModeSetgid
	uid, gid := owner(root)
	chown, chmod := uid != os.Geteuid() || gid != os.Getegid(), true
	if !made {
		ufi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if !ufi.IsDir() {
			return fmt.Errorf("upper directory %s is not a directory", p)
		}
		uu, ug := owner(ufi)
		chown = !ownerFits(uu, ug, uid, gid)
		chmod = chown || ufi.Mode()&bits != root.Mode()&bits // chown may clear set-id bits
	}
	if chown {
		if err := lchownMay(p, uid, gid); err != nil {
			return err
		}
	}
	if !chmod {
		return nil
	}
	return os.Chmod(p, root.Mode()&bits)
}

// outermost returns the roots, absolute with symlinks resolved, that
// are not below another one.
func outermost(paths []string) ([]string, error) {
	var clean []string
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("layer: root must be an absolute path: %q", p)
		}
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, fmt.Errorf("layer: root: %w", err)
		}
		if !slices.Contains(clean, r) {
			clean = append(clean, r)
		}
	}
	var out []string
	for _, r := range clean {
		if !slices.ContainsFunc(clean, func(o string) bool { return o != r && below(r, o) }) {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out, nil
}

// below reports whether p is strictly below dir.
func below(p, dir string) bool {
	return strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// Remove removes the layer's directories: whatever the command wrote
// that was not applied. Call it after the command's processes are gone
// and [Set.Apply] (if any) returned.
func (l *Layer) Remove() error {
	l.closePremount()
	if err := RemoveAll(l.dir); err != nil {
		return fmt.Errorf("layer: %w", err)
	}
	return nil
}

// RemoveStale removes what layers of engines that are no longer running
// left in dir (per-command directories whose engine was killed). Call it
// once at start, before any layer of this engine exists in dir.
func RemoveStale(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("layer: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), dirPrefix) {
			errs = append(errs, RemoveAll(filepath.Join(dir, e.Name())))
		}
	}
	return errors.Join(errs...)
}
