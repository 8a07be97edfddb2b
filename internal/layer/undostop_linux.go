//go:build linux

package layer

import (
	"os"

	"golang.org/x/sys/unix"
)

// An undo (or redo) that cannot restore an entry stops there, and what
// it has not restored stays kept: it must not lose what a step
// replaced. Each entry is restored whole or not at all (putBack puts
// back what it took out when the blob's rename fails), so that a
// retry finds the entry as its step left it.

// restoreReach restores e of st (see restore).
func (u *undoer) restoreReach(st *step, e *entry) error { return u.restore(st, e) }

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
