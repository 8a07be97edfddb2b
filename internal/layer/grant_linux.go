//go:build linux

package layer

import (
	"errors"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
)

// Directories without permissions for their owner. A command may leave
// a directory that its owner cannot list, search or write (chmod 0 a,
// chmod 500 a): in the upper layer, where Diff must list it and Apply
// move entries out of it, and in the real tree, where Apply must reach
// the changes below it. An unprivileged engine cannot (it has no
// CAP_DAC_OVERRIDE), and root behaves the same way by the same code:
//
//   - Diff gives each such upper directory rwx for its owner (the
//     engine's own layer: the command's processes are gone) through an
//     O_PATH descriptor of it, and keeps the permissions the command
//     left ([Change.Mode], [Set.Lstat] and what Apply sets report
//     those). [Set.Close] gives them back, unless [Set.Apply] consumed
//     the layer (what is left of it goes into the undo step, which must
//     reach the replaced files below it, or is removed).
//   - Apply gives such a directory, in the real tree, rwx for its owner
//     too while it applies the changes below it, and its own
//     permissions once the root's changes are applied, deepest first
//     (the undo step records those).
//   - A real directory an earlier command left so (the next command
//     may chmod 755 it in its layer and write below it) is reached by
//     Diff and ApplyExact's check through reach: search permission for
//     its owner for the one lookup, its mode given back right after.
//
// What stays out of reach: an unprivileged engine's undo of a step that
// changed entries below a directory left mode 0 (its check and its
// restores look below the directory as it is now) refuses, naming them
// as changed since; root's works. And policy's own lookups of the real
// tree (gitpolicy's repository walk) do not reach below such a
// directory: unprivileged, changes are held for review while one is in
// the workspace (rule git-walk).

// ownerAll are the permission bits the engine needs on a directory it
// lists and changes.
const ownerAll = 0o700

// grant is an upper directory that Diff gave its owner rwx.
type grant struct {
	f    *fd.FD // O_PATH, of the directory itself
	mode uint32 // the permission bits the command left
}

// grant gives the upper directory rel (status st) rwx for its owner
// when it lacks one of them, and notes the permissions it had.
func (d *differ) grant(rel string, st *unix.Stat_t) error {
	if st.Mode&ownerAll == ownerAll {
		return nil
	}
	f, cur, err := d.up.openEntry(rel)
	if err != nil {
		return err
	}
	if err := d.up.chmod(rel, f, &cur, st.Mode&0o7777|ownerAll); err != nil {
		_ = f.Close()
		return err
	}
	if d.s.grants == nil {
		d.s.grants = make([]map[string]*grant, len(d.s.l.roots))
	}
	if d.s.grants[d.root] == nil {
		d.s.grants[d.root] = map[string]*grant{}
	}
	d.s.grants[d.root][rel] = &grant{f: f, mode: st.Mode & 0o7777}
	return nil
}

// leftMode returns mode (of the upper entry rel of root i) with the
// permission bits the command left, where Diff widened them.
func (s *Set) leftMode(i int, rel string, mode uint32) uint32 {
	if i < len(s.grants) {
		if g, ok := s.grants[i][rel]; ok {
			return mode&^0o7777 | g.mode
		}
	}
	return mode
}

// ungrant gives the upper directories their permissions back, unless
// Apply consumed the layer, and releases their descriptors.
func (s *Set) ungrant() {
	for i, m := range s.grants {
		for rel, g := range m {
			var cur unix.Stat_t
			if !s.consumed && unix.Fstat(g.f.Int(), &cur) == nil {
				_ = s.upper[i].chmod(rel, g.f, &cur, g.mode)
			}
			_ = g.f.Close()
		}
	}
	s.grants = nil
}

// settleLater notes that the real directory rel, which apply left with
// rwx for its owner, gets mode once the root's changes are applied.
func (a *applier) settleLater(rel string, mode uint32) {
	if a.settle == nil {
		a.settle = map[string]uint32{}
	}
	a.settle[rel] = mode & 0o7777
}

// settleTree notes the directories of the added tree rel of root i, as
// moved or copied into the real tree, whose permissions Diff widened.
func (a *applier) settleTree(i int, rel string) {
	if i >= len(a.s.grants) {
		return
	}
	for r, g := range a.s.grants[i] {
		if r == rel || below(r, rel) {
			a.settleLater(r, g.mode)
		}
	}
}

// settleRoot gives the real directories noted by settleLater their
// permissions, deepest first (a directory's own are set after those
// below it, which it may no longer let its owner reach), and fixes the
// prints of the undo step's entries of root re to what they are then.
func (a *applier) settleRoot(re *tree) {
	if len(a.settle) == 0 {
		return
	}
	rels := make([]string, 0, len(a.settle))
	for r := range a.settle {
		rels = append(rels, r)
	}
	slices.SortFunc(rels, func(x, y string) int { return comparePaths(y, x) })
	for _, r := range rels {
		f, cur, err := re.openEntry(r)
		if err != nil {
			continue // failed, or gone: nothing to settle
		}
		if cur.Mode&unix.S_IFMT == unix.S_IFDIR {
			_ = re.chmod(r, f, &cur, a.settle[r])
		}
		_ = f.Close()
	}
	if a.step == nil {
		return
	}
	fix := func(rel string, p *print) {
		if m, ok := a.settle[rel]; ok && p.isDir() {
			p.Mode = p.Mode&^0o7777 | m
		}
	}
	for _, e := range a.step.entries {
		if e.Root != re.root {
			continue
		}
		fix(e.Rel, &e.After)
		for sub, p := range e.Tree {
			fix(join(e.Rel, sub), &p)
			e.Tree[sub] = p
		}
	}
}

// reach runs f, a lookup of rel in t; when that fails with EACCES (a
// directory above rel, or rel itself when need is not 0, that its owner
// made unsearchable or unreadable: a command's applied chmod 0, which the
// command being diffed may have undone in its layer), it gives each such
// directory, from the root down, its owner's search permission (rel, a
// directory or a file, the bits need), runs f again, and gives them
// their modes back, deepest first. That moves their change times: a
// file of the real tree is not given permissions (its change time is
// what undo and ApplyExact check it by). Only the directories' owners gain anything meanwhile;
// a directory that is not the engine's (unprivileged) stays as it is,
// and f's first error stands.
func reach(t *tree, rel string, need uint32, f func() error) error {
	err := f()
	if !errors.Is(err, unix.EACCES) {
		return err
	}
	var undo []func()
	defer func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}()
	dirs := []string{""}
	for i := range len(rel) {
		if rel[i] == '/' {
			dirs = append(dirs, rel[:i])
		}
	}
	if need != 0 && rel != "" {
		dirs = append(dirs, rel)
	}
	for _, p := range dirs {
		want := uint32(0o100)
		if p == rel {
			want = need
		}
		g, cur, gerr := t.openEntry(p)
		if gerr != nil {
			return err
		}
		if cur.Mode&unix.S_IFMT != unix.S_IFDIR && p != rel || cur.Mode&want == want {
			_ = g.Close()
			continue
		}
		mode := cur.Mode & 0o7777
		if t.chmod(p, g, &cur, mode|want) != nil {
			_ = g.Close()
			return err
		}
		undo = append(undo, func() {
			var now unix.Stat_t
			if unix.Fstat(g.Int(), &now) == nil {
				_ = t.chmod(p, g, &now, mode)
			}
			_ = g.Close()
		})
	}
	return f()
}

// lstatReach is t.lstat through reach.
func lstatReach(t *tree, rel string) (st unix.Stat_t, ok bool, err error) {
	err = reach(t, rel, 0, func() error {
		var e error
		st, ok, e = t.lstat(rel)
		return e
	})
	return st, ok, err
}
