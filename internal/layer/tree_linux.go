//go:build linux

package layer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
)

// tree is a directory tree reached only beneath its root: every lookup
// resolves with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|
// RESOLVE_NO_XDEV), so a symbolic link or a mount put into the real tree
// while the engine works there cannot redirect a read or a write
// outside it. Directory descriptors are cached by relative path.
type tree struct {
	root string
	fd   *fd.FD
	dirs map[string]*fd.FD
}

// maxCachedDirs bounds the open directory descriptors of a tree.
const maxCachedDirs = 256

func openTree(root string) (*tree, error) {
	f, err := fd.Open(root, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	return &tree{root: root, fd: f, dirs: map[string]*fd.FD{}}, nil
}

func (t *tree) close() {
	t.forget("")
	_ = t.fd.Close()
}

// dir returns an O_PATH descriptor of the directory rel ("" = the root),
// which the tree owns (until forget).
// It opens rel from its parent's descriptor when that is cached (as it
// is while a walk goes down), so that reaching a directory costs one
// lookup, not one per level.
func (t *tree) dir(rel string) (int, error) {
	if rel == "" {
		return t.fd.Int(), nil
	}
	if f, ok := t.dirs[rel]; ok {
		return f.Int(), nil
	}
	if len(t.dirs) >= maxCachedDirs {
		t.forget("")
	}
	base, name := t.fd, rel
	if d, n := split(rel); d != "" {
		if f, ok := t.dirs[d]; ok {
			base, name = f, n
		}
	}
	n, err := unix.Openat2(base.Int(), name, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: resolve,
	})
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: t.path(rel), Err: err}
	}
	t.dirs[rel] = fd.New(n)
	return n, nil
}

// forget drops the cached descriptors of rel and everything below it
// ("" = all), after rel was moved or removed.
func (t *tree) forget(rel string) {
	for k, f := range t.dirs {
		if rel == "" || k == rel || strings.HasPrefix(k, rel+"/") {
			_ = f.Close()
			delete(t.dirs, k)
		}
	}
}

func (t *tree) path(rel string) string {
	if rel == "" {
		return t.root
	}
	return t.root + "/" + rel
}

// split returns the directory and the name of rel.
func split(rel string) (string, string) {
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		return "", rel
	}
	return rel[:i], rel[i+1:]
}

// join joins a relative directory and a name.
func join(dir, name string) string {
	if dir == "" {
		return name
	}
	if name == "" {
		return dir
	}
	return dir + "/" + name
}

// lstat returns rel's status without following a final symlink; ok is
// false when it does not exist (or a parent is not a directory).
func (t *tree) lstat(rel string) (st unix.Stat_t, ok bool, err error) {
	if rel == "" {
		if err := unix.Fstat(t.fd.Int(), &st); err != nil {
			return st, false, &fs.PathError{Op: "stat", Path: t.root, Err: err}
		}
		return st, true, nil
	}
	d, name := split(rel)
	fd, err := t.dir(d)
	if err != nil {
		if missing(err) {
			return st, false, nil
		}
		return st, false, err
	}
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if missing(err) {
			return st, false, nil
		}
		return st, false, &fs.PathError{Op: "lstat", Path: t.path(rel), Err: err}
	}
	return st, true, nil
}

// missing reports whether err means that a path does not exist in the
// tree: it does not exist, a parent is not a directory, or reaching it
// would cross a mount (EXDEV) or a symlink (ELOOP) put there since
// (changes there fail when applied).
func missing(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) ||
		errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ELOOP)
}

// names lists the directory rel (unsorted).
func (t *tree) names(rel string) ([]string, error) {
	dir, err := t.dir(rel)
	if err != nil {
		return nil, err
	}
	n, err := unix.Openat(dir, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: t.path(rel), Err: err}
	}
	f := fd.New(n).File(t.path(rel))
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return names, nil
}

// open opens the file rel for reading (not following a final symlink).
func (t *tree) open(rel string) (*os.File, error) {
	d, name := split(rel)
	dir, err := t.dir(d)
	if err != nil {
		return nil, err
	}
	n, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: t.path(rel), Err: err}
	}
	return fd.New(n).File(t.path(rel)), nil
}

// readlink returns the target of the symlink rel.
func (t *tree) readlink(rel string) (string, error) {
	d, name := split(rel)
	fd, err := t.dir(d)
	if err != nil {
		return "", err
	}
	buf := make([]byte, 256)
	for {
		n, err := unix.Readlinkat(fd, name, buf)
		if err != nil {
			return "", &fs.PathError{Op: "readlink", Path: t.path(rel), Err: err}
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		buf = make([]byte, 2*len(buf))
	}
}

// fileMode converts a stat mode to an fs.FileMode (type and permission
// bits, setuid, setgid and sticky).
func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	}
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// isWhiteout reports whether st is an overlayfs whiteout (a character
// device 0/0).
func isWhiteout(st *unix.Stat_t) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0
}

// Overlayfs keeps its marks (opaque directories, whiteouts, the
// origin of a copied-up file, ...) in xattrs of the upper layer whose
// names start with its namespace's prefix: trusted.overlay. as root,
// user.overlay. with the userxattr option. Only that namespace is the
// mount's: the command cannot set it through the overlay (overlayfs
// refuses, or stores what a command sets there escaped, as
// <prefix>overlay.NAME). Any other *.overlay.* xattr in the upper layer
// (user.overlay.opaque on a trusted.overlay mount, or an escaped one)
// was set by the command, and is refused rather than read as a mark.

// ovlPrefix returns the overlay's own xattr prefix.
func ovlPrefix(userXattr bool) string {
	if userXattr {
		return "user.overlay."
	}
	return "trusted.overlay."
}

// xattrs are the overlay xattrs of one upper entry: the mount's own
// marks and the ones the command set (forged).
type xattrs struct {
	own, forged []string
	opaque      bool // the own opaque mark is set
	xwhiteouts  bool // opaque is "x": entries may be xattr whiteouts
	whiteout    bool // the own whiteout mark is set
}

// readXattrs lists the overlay xattrs of the upper entry at path, and
// reads the marks the overlay itself set (prefix: see ovlPrefix).
func readXattrs(path, prefix string) (xattrs, error) {
	var x xattrs
	buf := make([]byte, 1024)
	n, err := unix.Llistxattr(path, buf)
	if errors.Is(err, unix.ERANGE) {
		if n, err = unix.Llistxattr(path, nil); err == nil {
			buf = make([]byte, n)
			n, err = unix.Llistxattr(path, buf)
		}
	}
	if errors.Is(err, unix.ENOTSUP) {
		return x, nil
	}
	if err != nil {
		return x, &fs.PathError{Op: "listxattr", Path: path, Err: err}
	}
	for _, name := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
		switch {
		case strings.HasPrefix(name, prefix+"overlay."):
			x.forged = append(x.forged, name) // escaped: the command's
		case strings.HasPrefix(name, prefix):
			x.own = append(x.own, name)
			switch strings.TrimPrefix(name, prefix) {
			case "opaque":
				x.opaque = true
				v := make([]byte, 4)
				if n, err := unix.Lgetxattr(path, name, v); err == nil && string(v[:n]) == "x" {
					x.xwhiteouts = true
				}
			case "whiteout":
				x.whiteout = true
			}
		case isOverlayXattr(name):
			x.forged = append(x.forged, name)
		}
	}
	return x, nil
}

// isOverlayXattr reports whether name is "NAMESPACE.overlay.ANY".
func isOverlayXattr(name string) bool {
	ns, rest, ok := strings.Cut(name, ".")
	return ok && ns != "" && strings.HasPrefix(rest, "overlay.")
}
