//go:build linux

package gitpolicy

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dirNode is a directory a walk read: what identifies its entries (its
// device, inode and change time) and what the walk found in it.
type dirNode struct {
	name     string
	dev, ino uint64
	ctime    unix.Timespec
	// trusted: its change time was older than racyMargin when the walk
	// began, so the same change time later means the same entries.
	trusted bool
	entries int        // names in it
	repo    repoKind   // what git finds in it
	subs    []*dirNode // its subdirectories but .git (none in a bare repository), by name
}

// repoKind says whether a directory is a repository's working tree or
// a bare repository (or, by names a case-insensitive directory folds
// to git's, both).
type repoKind uint8

const (
	noRepo   repoKind = 0
	dotGit   repoKind = 1 << iota // it holds a .git (directory, gitdir: file or other)
	bareRepo                      // it holds HEAD, objects and refs
)

// repoCand is a directory a walk found a repository in: its git
// directory is found at every check (a gitdir: file is read then).
type repoCand struct {
	dir  string
	kind repoKind
}

// racyMargin is how old a directory's change time must be, when a walk
// begins, for a later walk to trust an unchanged one: a change of its
// entries after the walk read it gives it a change time at least the
// time of the change less the file system's timestamp granularity (a
// clock tick, or a second on ext4 with small inodes), which is then
// newer than the one recorded. A directory changed within racyMargin
// of a walk is read again by the next.
const racyMargin = 2 * time.Second

// treeWalk is one walk of a root: it revalidates the tree an earlier
// walk recorded (prev), reading only the directories whose change
// time, device or inode differ or were too recent to trust, and every
// directory new since.
type treeWalk struct {
	start time.Time
	stop  *atomic.Bool // set: give up (nil: never)
	n     int          // directories looked at
	buf   []byte       // getdents buffer
	found []repoCand
	// missed says why the walk did not look everywhere (the bound, a
	// directory it could not open or read); "" when it did.
	missed string
}

// miss records why the walk did not look everywhere (the first reason
// kept).
func (w *treeWalk) miss(format string, a ...any) {
	if w.missed == "" {
		w.missed = fmt.Sprintf(format, a...)
	}
}

// walkTree walks root (no symlink followed, no .git entered, nothing
// below a bare repository), reusing what prev recorded where a
// directory is unchanged. It returns the repositories found, the tree
// for the next walk (partial when the walk missed directories: those
// it did not read are recorded untrusted, so the next walk tries them
// again) and why it missed some ("": it looked everywhere): past
// maxWalkDirs directories, or a directory it could not open, stat or
// read (one gone or replaced by a non-directory meanwhile holds no
// repository and is not missed). ok is false when stop was set.
func walkTree(root string, prev *dirNode, stop *atomic.Bool) (tree *dirNode, found []repoCand, missed string, ok bool) {
	w := &treeWalk{start: time.Now(), stop: stop, buf: make([]byte, 32<<10)}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Sprintf("%s could not be read (%v); repositories in it could not be found", root, err), true
	}
	w.n++
	tree = w.dir(fd, root, root, prev)
	if w.stopped() {
		return nil, nil, "", false
	}
	return tree, w.found, w.missed, true
}

func (w *treeWalk) stopped() bool { return w.stop != nil && w.stop.Load() }

// dir reads the directory open as fd (which it closes), at path, named
// name in its parent.
func (w *treeWalk) dir(fd int, name, path string, prev *dirNode) *dirNode {
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		w.miss("%s could not be read (%v); repositories in it could not be found", path, err)
		return &dirNode{name: name}
	}
	n := w.node(name, &st)
	if w.same(prev, n, path) {
		for _, s := range prev.subs {
			n.subs = append(n.subs, w.sub(fd, s.name, path, s))
		}
		return n
	}
	names, dirs, ok := w.read(fd, path)
	n.entries = len(names)
	n.trusted = n.trusted && ok // read again by the next walk
	has := func(name string) bool { _, ok := slices.BinarySearch(names, name); return ok }
	bare := has("HEAD") && has("objects") && has("refs")
	// In a case-insensitive directory (ext4 or tmpfs casefold: chattr
	// +F) git's lookup of .git or HEAD finds .GIT or head: such names
	// make a candidate too, which the check looks up as git does
	// (through the kernel); the walk still goes below them.
	if bare || hasFold(names, "head") && hasFold(names, "objects") && hasFold(names, "refs") {
		n.repo |= bareRepo
	}
	if hasFold(names, ".git") {
		n.repo |= dotGit
	}
	w.note(n, path)
	if bare {
		return n
	}
	var old []*dirNode
	if prev != nil {
		old = prev.subs
	}
	for _, d := range dirs {
		var p *dirNode
		if i, ok := slices.BinarySearchFunc(old, d, func(o *dirNode, name string) int { return strings.Compare(o.name, name) }); ok {
			p = old[i]
		}
		n.subs = append(n.subs, w.sub(fd, d, path, p))
	}
	return n
}

// node returns the node of a directory of status st.
func (w *treeWalk) node(name string, st *unix.Stat_t) *dirNode {
	return &dirNode{name: name, dev: st.Dev, ino: st.Ino, ctime: st.Ctim,
		trusted: time.Unix(st.Ctim.Unix()).Before(w.start.Add(-racyMargin))}
}

// same reports whether n, at path, is prev unchanged, and if so takes
// what prev recorded (but its subdirectories).
func (w *treeWalk) same(prev, n *dirNode, path string) bool {
	if prev == nil || !prev.trusted || prev.dev != n.dev || prev.ino != n.ino || prev.ctime != n.ctime {
		return false
	}
	n.entries, n.repo = prev.entries, prev.repo
	w.note(n, path)
	return true
}

// hasFold reports whether one of names folds to name (ſ to s, too).
func hasFold(names []string, name string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(n, name) })
}

// note records the repositories n holds.
func (w *treeWalk) note(n *dirNode, path string) {
	for _, k := range []repoKind{dotGit, bareRepo} {
		if n.repo&k != 0 {
			w.found = append(w.found, repoCand{dir: path, kind: k})
		}
	}
}

// sub walks the subdirectory name of the directory open as parent. One
// it cannot read (gone, replaced by a symlink or a file, unreadable)
// or does not reach (the walk stops, or has looked at maxWalkDirs
// directories) is recorded untrusted, so that the next walk tries it
// again; one it cannot open but for being gone or not a directory any
// more, or does not reach for the bound, is missed (w.miss).
func (w *treeWalk) sub(parent int, name, path string, prev *dirNode) *dirNode {
	if w.stopped() {
		return &dirNode{name: name}
	}
	if w.n >= maxWalkDirs {
		w.miss("the workspace has more than %d directories; repositories in it could not all be found", maxWalkDirs)
		return &dirNode{name: name}
	}
	p := path + "/" + name
	w.n++
	if prev != nil && prev.trusted {
		if n := w.unchanged(parent, name, p, prev); n != nil {
			return n
		}
	}
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if err != unix.ENOENT && err != unix.ENOTDIR && err != unix.ELOOP {
			w.miss("%s could not be read (%v); repositories in it could not be found", p, err)
		}
		return &dirNode{name: name}
	}
	return w.dir(fd, name, p, prev)
}

// unchanged returns the node of the subdirectory name of parent, at p,
// when it is prev unchanged, its subdirectories revalidated (nil when it
// changed): a stat tells for one with no subdirectories, one with some
// is opened only to reach them (O_PATH, cheaper than opening it to
// read).
func (w *treeWalk) unchanged(parent int, name, p string, prev *dirNode) *dirNode {
	var st unix.Stat_t
	if len(prev.subs) == 0 {
		if unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			return nil
		}
		if n := w.node(name, &st); w.same(prev, n, p) {
			return n
		}
		return nil
	}
	fd, err := unix.Openat(parent, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	if unix.Fstat(fd, &st) != nil {
		return nil
	}
	n := w.node(name, &st)
	if !w.same(prev, n, p) {
		return nil
	}
	for _, s := range prev.subs {
		n.subs = append(n.subs, w.sub(fd, s.name, p, s))
	}
	return n
}

// read returns the sorted names in the directory open as fd (at path)
// and, sorted too, those of its subdirectories but .git (from the
// entries' types, an lstat only where the file system gives none); ok
// is false when reading it failed (the names read before are returned,
// and the walk missed it).
func (w *treeWalk) read(fd int, path string) (names, dirs []string, ok bool) {
	ok = true
	for {
		k, err := unix.Getdents(fd, w.buf)
		if err != nil {
			w.miss("%s could not be read (%v); repositories in it could not be found", path, err)
			ok = false
		}
		if err != nil || k <= 0 {
			break
		}
		for b := w.buf[:k]; len(b) >= 19; {
			reclen := int(*(*uint16)(unsafe.Pointer(&b[16])))
			if reclen < 19 || reclen > len(b) {
				break
			}
			typ := b[18]
			name := b[19:reclen]
			if i := slices.Index(name, 0); i >= 0 {
				name = name[:i]
			}
			b = b[reclen:]
			s := string(name)
			if s == "." || s == ".." {
				continue
			}
			names = append(names, s)
			if s == ".git" {
				continue
			}
			if typ == unix.DT_UNKNOWN {
				var st unix.Stat_t
				if unix.Fstatat(fd, s, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
					typ = unix.DT_DIR
				}
			}
			if typ == unix.DT_DIR {
				dirs = append(dirs, s)
			}
		}
	}
	slices.Sort(names)
	slices.Sort(dirs)
	return names, dirs, ok
}
