//go:build linux

package layer

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// print is what identifies one state of a path, to find out later
// whether anything changed it since: for a file, its inode and change
// time (every write, chmod, rename or link moves the change time); for
// a directory, its inode, permissions and owner (entries created or
// removed below it are not its own changes). Mode 0: absent.
type print struct {
	Mode     uint32
	Uid, Gid uint32
	Ino      uint64
	Size     int64
	Ctime    int64
}

func printOf(st *unix.Stat_t) print {
	p := print{Mode: st.Mode, Uid: st.Uid, Gid: st.Gid, Ino: st.Ino}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		p.Size, p.Ctime = st.Size, st.Ctim.Nano()
	}
	return p
}

func (p print) exists() bool    { return p.Mode != 0 }
func (p print) isDir() bool     { return p.Mode&unix.S_IFMT == unix.S_IFDIR }
func (p print) isRegular() bool { return p.Mode&unix.S_IFMT == unix.S_IFREG }

// statPrint returns the print of rel in t (zero if it does not exist).
func statPrint(t *tree, rel string) (print, error) {
	st, ok, err := t.lstat(rel)
	if err != nil || !ok {
		return print{}, err
	}
	return printOf(&st), nil
}

// tmpName returns a name for a file being made next to name.
func tmpName(name string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	n := name
	if len(n) > 200 {
		n = n[:200]
	}
	return "." + n + ".bashvisor-" + hex.EncodeToString(b)
}

// copyEntry copies the entry src/srel (a file, symlink or FIFO, or a
// directory with everything below it) to dst/drel, which must not
// exist, keeping permissions, owner (where allowed) and modification
// times. It writes to a temporary name first and renames it into
// place, so dst/drel appears whole or not at all (a directory's
// contents are copied below the temporary name).
func copyEntry(src *tree, srel string, dst *tree, drel string) error {
	st, ok, err := src.lstat(srel)
	if err != nil {
		return err
	}
	if !ok {
		return &os.PathError{Op: "copy", Path: src.path(srel), Err: os.ErrNotExist}
	}
	ddir, name := split(drel)
	dfd, err := dst.dir(ddir)
	if err != nil {
		return err
	}
	tmp := tmpName(name)
	if err := copyAs(src, srel, &st, dst, join(ddir, tmp)); err != nil {
		_ = removeEntry(dst, join(ddir, tmp))
		return err
	}
	if err := unix.Renameat(dfd, tmp, dfd, name); err != nil {
		_ = removeEntry(dst, join(ddir, tmp))
		return &os.PathError{Op: "rename", Path: dst.path(drel), Err: err}
	}
	return nil
}

// copyAs makes dst/drel a copy of src/srel (status st).
func copyAs(src *tree, srel string, st *unix.Stat_t, dst *tree, drel string) error {
	ddir, name := split(drel)
	dfd, err := dst.dir(ddir)
	if err != nil {
		return err
	}
	perm := st.Mode & 0o7777
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		if err := copyFile(src, srel, dfd, name, perm); err != nil {
			return err
		}
	case unix.S_IFLNK:
		target, err := src.readlink(srel)
		if err != nil {
			return err
		}
		if err := unix.Symlinkat(target, dfd, name); err != nil {
			return &os.PathError{Op: "symlink", Path: dst.path(drel), Err: err}
		}
	case unix.S_IFIFO:
		if err := unix.Mknodat(dfd, name, unix.S_IFIFO|perm, 0); err != nil {
			return &os.PathError{Op: "mkfifo", Path: dst.path(drel), Err: err}
		}
	case unix.S_IFDIR:
		if err := unix.Mkdirat(dfd, name, 0o700); err != nil {
			return &os.PathError{Op: "mkdir", Path: dst.path(drel), Err: err}
		}
		names, err := src.names(srel)
		if err != nil {
			return err
		}
		for _, n := range names {
			cst, ok, err := src.lstat(join(srel, n))
			if err != nil {
				return err
			}
			if ok {
				if err := copyAs(src, join(srel, n), &cst, dst, join(drel, n)); err != nil {
					return err
				}
			}
		}
	default:
		return &os.PathError{Op: "copy", Path: src.path(srel), Err: errors.New("not a file, directory, symlink or FIFO")}
	}
	f, cur, err := dst.openEntry(drel)
	if err != nil {
		return err
	}
	defer f.Close()
	return dst.setAttrs(drel, f, &cur, st)
}

// copyFile copies the regular file src/srel to a new file dfd/name.
func copyFile(src *tree, srel string, dfd int, name string, perm uint32) error {
	in, err := src.open(srel)
	if err != nil {
		return err
	}
	defer in.Close()
	fd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm&0o777)
	if err != nil {
		return &os.PathError{Op: "create", Path: name, Err: err}
	}
	out := os.NewFile(uintptr(fd), name)
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("layer: copy %s: %w", src.path(srel), err)
	}
	return nil
}

// removeEntry removes t/rel, a directory with everything below it.
func removeEntry(t *tree, rel string) error {
	d, name := split(rel)
	fd, err := t.dir(d)
	if err != nil {
		return err
	}
	err = unix.Unlinkat(fd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) {
		return &os.PathError{Op: "remove", Path: t.path(rel), Err: err}
	}
	// A directory: made writable and searchable first, through a
	// descriptor of it (never through a symlink), then emptied.
	if f, cur, err := t.openEntry(rel); err == nil {
		if cur.Mode&unix.S_IFMT == unix.S_IFDIR {
			_ = t.chmod(rel, f, &cur, 0o700)
		}
		_ = f.Close()
	}
	names, err := t.names(rel)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := removeEntry(t, join(rel, n)); err != nil {
			return err
		}
	}
	t.forget(rel)
	if err := unix.Unlinkat(fd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "remove", Path: t.path(rel), Err: err}
	}
	return nil
}
