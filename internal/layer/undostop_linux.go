//go:build linux

package layer

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// An undo (or redo) that cannot restore an entry stops there, and what
// it has not restored stays kept: it must not lose what a step
// replaced. Each entry is restored whole or not at all (putBack puts
// back what it took out when the blob's rename fails), so that a
// retry finds the entry as its step left it. An unprivileged engine
// restores through reach: a directory of the real tree that a step
// left without write permission for its owner (chmod 500), above an
// entry it puts back, gets it for the one restore, and so does a
// directory the undo moves between parents (rename(2) updates its
// "..").

// restoreReach restores e of st (see restore) through reach: the
// directory e's path is in gets write and search permission for its
// owner, its ancestors search permission, a directory taken out of the
// real tree or put back from the step's directory write permission,
// each for the one restore (only where the restore fails with EACCES;
// see reach). The restore is tried again after each widening, so it
// changes nothing when it fails.
func (u *undoer) restoreReach(st *step, e *entry) error {
	t, err := u.tree(e.Root)
	if err != nil {
		return err
	}
	f := func() error { return u.restore(st, e) }
	if e.Blob != "" && e.Before.isDir() {
		inner := f
		f = func() error { return reach(st.t, e.Blob, 0o200, inner) }
	}
	if e.After.isDir() && !e.Before.isDir() && e.Rel != "" {
		inner := f
		f = func() error { return reach(t, e.Rel, 0o200, inner) }
	}
	if d, _ := split(e.Rel); d != "" {
		return reach(t, d, 0o300, f)
	}
	return f()
}

// stop settles the step failed (nil: none), whose entries were being
// restored when one could not be: it stays kept with the entries not
// restored, their blobs kept. Undone whole, it shares its directory
// with the step being made (see begin): if none of its entries was
// restored, that one is forgotten and the step keeps the directory
// (and not moved); otherwise the blobs of the entries not restored
// move to a new directory of the step, and the step being made keeps
// the old one. When they cannot move, the step keeps the old directory
// and the steps being made are forgotten (no redo: revert, broken).
func (u *undoer) stop(failed *step) error {
	if failed == nil || !u.whole || !failed.moved {
		return nil
	}
	var rest []*entry
	for _, e := range failed.entries {
		if !u.restored[e] {
			rest = append(rest, e)
		}
	}
	if len(rest) == len(failed.entries) {
		failed.moved = false
		if n := len(u.inv); n > 0 && u.inv[n-1].t == failed.t {
			u.inv = u.inv[:n-1]
		}
		u.cur = nil
		return nil
	}
	if u.broken {
		return nil
	}
	if err := u.s.split(failed, rest); err != nil {
		u.broken = true
		return err
	}
	return nil
}

// split moves the blobs of the entries rest of st to a new directory,
// which becomes st's; on failure it moves back those it moved and
// leaves st as it was.
func (s *Store) split(st *step, rest []*entry) error {
	nst, err := s.begin(st.label)
	if err != nil {
		return err
	}
	var moved []string
	for _, e := range rest {
		if e.Blob == "" {
			continue
		}
		if err = moveBlob(st.t, nst.t, e.Blob); err != nil {
			break
		}
		moved = append(moved, e.Blob)
	}
	if err != nil {
		for _, b := range moved {
			_ = moveBlob(nst.t, st.t, b)
		}
		s.drop(nst)
		return err
	}
	st.t, st.moved = nst.t, false
	return nil
}

// moveBlob renames the blob rel of the step directory from to the same
// name in to (a directory through reach: rename(2) writes its "..").
func moveBlob(from, to *tree, rel string) error {
	if d, _ := split(rel); d != "" {
		if err := os.MkdirAll(to.path(d), 0o700); err != nil {
			return err
		}
	}
	err := reach(from, rel, 0o200, func() error {
		return os.Rename(from.path(rel), to.path(rel))
	})
	from.forget(rel)
	return err
}

// untake puts back what takeOut took out of the real entry rel of t
// into kept (the step being made) when what was to replace it could not
// be put there: a moved entry is moved back, a link removed.
func (u *undoer) untake(t *tree, rel, kept string, replaced bool) {
	if kept == "" || u.cur == nil {
		return
	}
	if replaced {
		_ = unix.Unlinkat(u.cur.t.fd.Int(), kept, 0)
		return
	}
	d, name := split(rel)
	if fd, err := t.dir(d); err == nil {
		if unix.Renameat(u.cur.t.fd.Int(), kept, fd, name) != nil {
			u.broken = true // it stays in the step being made
		}
	}
}

// mayRemove reports whether takeOut, having failed to keep the entry
// (err), may remove it instead: not when its owner lacks a permission
// (restoreReach gives it and tries again).
func mayRemove(err error) bool { return !errors.Is(err, unix.EACCES) }

// reprint updates, after entries were restored (undone), what the
// steps kept before them expect each path to look like now: the undo put
// back what those steps left, but a file put back is not quite as it
// was (applying the newer step linked it into the store, undoing it
// renamed it back: both move its change time). Without this, undoing
// the step before next would find the file "changed since".
//
// It updates the entries of steps that were not restored (steps kept,
// or left in part by an undo that stopped).
func (u *undoer) reprint(steps []*step) {
	was := map[string]print{} // what the oldest undone step found
	for _, e := range u.undone {
		was[e.path()] = e.Before
	}
	now := func(root, rel string, p print) print {
		path := root
		if rel != "" {
			path += "/" + rel
		}
		w, ok := was[path]
		if !ok || !samePrint(w, p) || !p.exists() {
			return p
		}
		t, err := u.tree(root)
		if err != nil {
			return p
		}
		if cur, err := statPrintReach(t, rel); err == nil && sameButTime(cur, p) {
			return cur
		}
		return p
	}
	for _, st := range steps {
		for _, e := range st.entries {
			if u.restored[e] {
				continue
			}
			e.After = now(e.Root, e.Rel, e.After)
			for rel, p := range e.Tree {
				e.Tree[rel] = now(e.Root, join(e.Rel, rel), p)
			}
		}
	}
}

// sameButTime reports whether two prints differ at most in their change
// time.
func sameButTime(a, b print) bool {
	a.Ctime = b.Ctime
	return a == b
}

// statPrintReach is statPrint through reach: the print of an entry
// below a directory its owner cannot search (a step's chmod 0), for
// an unprivileged engine.
func statPrintReach(t *tree, rel string) (print, error) {
	st, ok, err := lstatReach(t, rel)
	if err != nil || !ok {
		return print{}, err
	}
	return printOf(&st), nil
}
