//go:build linux

package layer

import (
	"errors"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Applying a modified file by exchange: renameat2(RENAME_EXCHANGE)
// swaps the upper entry and the real one in one step, so the real path
// gets the command's file (atomically, as a rename over it would) and
// the upper layer gets the file it replaced, which undo needs. Once a
// root's changes are applied its whole upper layer moves into the undo
// step (one rename), and what it still holds that is not kept for undo
// (files only copied up, refused changes, whiteouts) is removed in the
// background. Linking each replaced file into the store and renaming
// the new one over it, which this replaces, costs four times as much
// on an ext4 disk (BenchmarkCommit1000). Undo exchanges them back.

// exchanges reports whether changes of root i are applied by exchange:
// not for copies (the upper layer stays the job's), and only when the
// upper layer can move into the store (same file system), if there is
// one.
func (a *applier) exchanges(i int) bool {
	if a.copies {
		return false
	}
	if a.step == nil {
		return true
	}
	var u, s unix.Stat_t
	if unix.Fstat(a.s.upper[i].fd.Int(), &u) != nil || unix.Fstat(a.step.t.fd.Int(), &s) != nil {
		return false
	}
	return u.Dev == s.Dev
}

// exchange applies c, a file, symlink or FIFO that replaces one (before),
// by exchanging it with the real entry. It returns false when the file
// systems cannot exchange (then nothing changed).
func (a *applier) exchange(c *Change, e *entry, up, re *tree, before print) (bool, error) {
	if a.step != nil && e == nil {
		return false, nil // nowhere to note the replaced file
	}
	d, name := split(c.rel)
	ufd, err := up.dir(d)
	if err != nil {
		return false, err
	}
	rfd, err := re.dir(d)
	if err != nil {
		return false, err
	}
	for _, x := range c.ovl {
		_ = unix.Lremovexattr(up.path(c.rel), x)
	}
	err = unix.Renameat2(ufd, name, rfd, name, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		return false, nil
	}
	if err != nil {
		return false, &os.PathError{Op: "exchange", Path: c.Path, Err: err}
	}
	if e != nil {
		e.Blob = upperBlob(c.root, c.rel)
		a.step.bytes += before.Size
		a.moveUpper = true
	}
	return true, nil
}

// upperBlob names, in a step's directory, the file of root i's upper
// layer at rel.
func upperBlob(i int, rel string) string { return "u" + strconv.Itoa(i) + "/" + rel }

// keepUpper moves root i's upper layer, which holds the files its
// exchanges replaced, into the undo step, and has the rest of it
// removed in the background once the step is filed. Where the move
// fails, the replaced files are linked into the step one by one.
func (a *applier) keepUpper(i int) error {
	up := a.s.upper[i]
	name := "u" + strconv.Itoa(i)
	prefix := name + "/"
	var keep []string
	for _, e := range a.step.entries {
		if rel, ok := strings.CutPrefix(e.Blob, prefix); ok && e.Root == a.s.real[i].root {
			keep = append(keep, rel)
		}
	}
	if err := unix.Renameat(unix.AT_FDCWD, up.root, a.step.t.fd.Int(), name); err == nil {
		a.step.prune = append(a.step.prune, prune{dir: name, keep: keep})
		return nil
	}
	var errs []error
	for k, e := range a.step.entries {
		rel, ok := strings.CutPrefix(e.Blob, prefix)
		if !ok || e.Root != a.s.real[i].root {
			continue
		}
		blob := "x" + strconv.Itoa(k)
		d, n := split(rel)
		fd, err := up.dir(d)
		if err == nil {
			err = unix.Linkat(fd, n, a.step.t.fd.Int(), blob, 0)
		}
		if err != nil {
			err = copyEntry(up, rel, a.step.t, blob)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		e.Blob = blob
	}
	return errors.Join(errs...)
}

// prune is what a step must remove from an upper layer it took over:
// everything below dir but the kept paths.
type prune struct {
	dir  string
	keep []string
}

// run removes from t's directory p.dir what is not kept.
func (p prune) run(stepDir string) {
	t, err := openTree(stepDir + "/" + p.dir)
	if err != nil {
		return
	}
	defer t.close()
	keep := map[string]bool{}
	dirs := map[string]bool{"": true}
	for _, k := range p.keep {
		keep[k] = true
		for d, _ := split(k); d != ""; d, _ = split(d) {
			dirs[d] = true
		}
	}
	var walk func(rel string)
	walk = func(rel string) {
		names, err := t.names(rel)
		if err != nil {
			return
		}
		for _, n := range names {
			c := join(rel, n)
			switch {
			case keep[c]:
			case dirs[c]:
				walk(c)
			default:
				_ = removeEntry(t, c)
			}
		}
	}
	walk("")
}

// swap puts e's blob back by exchanging it with the real entry (both
// files, symlinks or FIFOs): the command's file goes where the blob
// was, and is removed with the step. It returns false when the file
// systems cannot exchange.
func (st *step) swap(e *entry, re *tree) (bool, error) {
	bd, bn := split(e.Blob)
	bfd, err := st.t.dir(bd)
	if err != nil {
		return false, err
	}
	d, name := split(e.Rel)
	fd, err := re.dir(d)
	if err != nil {
		return false, err
	}
	err = unix.Renameat2(bfd, bn, fd, name, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		return false, nil
	}
	if err != nil {
		return false, &os.PathError{Op: "exchange", Path: e.path(), Err: err}
	}
	return true, nil
}
