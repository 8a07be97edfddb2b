//go:build linux

package layer

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
)

// Directories without permissions for their owner. A command may leave
// a directory that its owner cannot list, search or write (chmod 0 a,
// chmod 500 a): in the upper layer, where Diff must list it and Apply
// move entries out of it, and in the real tree, where Apply must reach
// the changes below it. An unprivileged engine cannot (it has no
// CAP_DAC_OVERRIDE; root has it and needs none of what follows, which
// it skips: see overrides):
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
//   - Undo and Redo check and restore each path through reach
//     (statPrintReach, restoreReach): a real directory a step left
//     without permissions (chmod 0, chmod 500) gets search permission
//     for a lookup below it, write permission for the one restore of a
//     path in it, and so does a directory moved between the real tree
//     and the store (rename(2) writes its ".."); the modes the step
//     recorded are set as the entries that changed them are restored.
//
// What stays out of reach: policy's own lookups of the real tree
// (gitpolicy's repository walk) do not reach below such a directory:
// unprivileged, changes are held for review while one is in the
// workspace (rule git-walk).

// ownerAll are the permission bits the engine needs on a directory it
// lists and changes.
const ownerAll = 0o700

// overrides reports whether the engine has CAP_DAC_OVERRIDE (root, as
// a rule): it reads, searches and writes every directory whatever its
// mode, so Diff, Apply and reach leave permissions alone (grant, reach
// and accessible do nothing), as before directories without
// permissions were handled. It is read once, from the process's
// effective capabilities (capget); an engine that gains or drops the
// capability later keeps the first answer. In a user namespace the
// capability does not reach a directory whose owner is not mapped
// there, but neither could the engine chmod it.
var overrides = sync.OnceValue(func() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) != nil {
		return false // then widen, as an unprivileged engine does
	}
	return data[0].Effective&(1<<unix.CAP_DAC_OVERRIDE) != 0
})

// grant is an upper directory that Diff gave rwx for its owner. It is
// found again by its path and id (no descriptor is held: a command may
// leave thousands of such directories, a Go module cache's).
type grant struct {
	id   id     // the upper directory's
	mode uint32 // the permission bits the command left
}

// grant gives the upper directory rel (status st) rwx for its owner
// when it lacks one of them, and notes the permissions it had. A
// setgid directory whose group is not the engine's loses S_ISGID to
// the widening (the kernel clears it on a chmod by a non-member);
// Diff reports the mode the command left all the same, and Apply sets
// that one on the real directory (where the same rule applies).
func (d *differ) grant(rel string, st *unix.Stat_t) error {
	if st.Mode&ownerAll == ownerAll || overrides() {
		return nil
	}
	f, cur, err := d.up.openEntry(rel)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := d.up.chmod(rel, f, &cur, st.Mode&0o7777|ownerAll); err != nil {
		return err
	}
	if d.s.grants == nil {
		d.s.grants = make([]map[string]*grant, len(d.s.l.roots))
	}
	if d.s.grants[d.root] == nil {
		d.s.grants[d.root] = map[string]*grant{}
	}
	d.s.grants[d.root][rel] = &grant{id: idOf(&cur, true), mode: st.Mode & 0o7777}
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

// ungrant gives the upper directories their permissions back, deepest
// first (a directory's own after those below it, which it may no longer
// let its owner reach), unless Apply consumed the layer. Each is opened
// again by its path and must still be the directory Diff widened.
func (s *Set) ungrant() {
	for i, m := range s.grants {
		if s.consumed {
			break
		}
		for _, rel := range deepestFirst(m) {
			if f, cur, err := s.upper[i].openSame(rel, m[rel].id); err == nil {
				_ = s.upper[i].chmod(rel, f, &cur, m[rel].mode)
				_ = f.Close()
			}
		}
	}
	s.grants = nil
}

// deepestFirst returns m's keys, paths, each after those below it.
func deepestFirst[V any](m map[string]V) []string {
	rels := make([]string, 0, len(m))
	for r := range m {
		rels = append(rels, r)
	}
	slices.SortFunc(rels, func(x, y string) int { return comparePaths(y, x) })
	return rels
}

// settled is a real directory that apply left with rwx for its owner:
// the directory it made or changed (id), and the permissions it gets
// once the root's changes are applied.
type settled struct {
	id   id
	mode uint32
}

// settleLater notes that the real directory rel (status st), which
// apply made or changed and left with rwx for its owner, gets mode once
// the root's changes are applied.
func (a *applier) settleLater(rel string, st *unix.Stat_t, mode uint32) {
	if a.settle == nil {
		a.settle = map[string]settled{}
	}
	a.settle[rel] = settled{id: idOf(st, true), mode: mode & 0o7777}
}

// settleTree notes the directories of the added tree rel of root i, as
// moved or copied into the real tree (by re), whose permissions Diff
// widened.
func (a *applier) settleTree(i int, re *tree, rel string) {
	if i >= len(a.s.grants) {
		return
	}
	for r, g := range a.s.grants[i] {
		if r != rel && !below(r, rel) {
			continue
		}
		if st, ok, err := re.lstat(r); err == nil && ok && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			a.settleLater(r, &st, g.mode)
		}
	}
}

// errSettle is the failure of a directory change whose permissions
// could not be set once the changes below it were applied.
var errSettle = errors.New("its permissions could not be set after the changes below it")

// settleRoot gives the real directories noted by settleLater their
// permissions, deepest first (a directory's own are set after those
// below it, which it may no longer let its owner reach), each through
// a descriptor of the directory apply made or changed (one that is
// gone or replaced meanwhile is left alone), and fixes the prints of
// the undo step's entries of root re to what they are then. A
// directory whose permissions cannot be set keeps rwx for its owner,
// and its change is also in [Result.Failed].
func (a *applier) settleRoot(i int, re *tree) {
	if len(a.settle) == 0 {
		return
	}
	now := map[string]print{}
	for _, r := range deepestFirst(a.settle) {
		f, cur, err := re.openSame(r, a.settle[r].id)
		if err != nil {
			continue // gone or replaced: not the directory apply made
		}
		err = re.chmod(r, f, &cur, a.settle[r].mode)
		if err == nil {
			err = unix.Fstat(f.Int(), &cur)
		}
		_ = f.Close()
		now[r] = printOf(&cur)
		if err != nil {
			a.failSettle(i, r, err)
		}
	}
	if a.step == nil {
		return
	}
	fix := func(rel string, p *print) {
		if n, ok := now[rel]; ok && p.isDir() && p.Ino == n.Ino {
			*p = n
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

// failSettle adds the applied change of the directory rel of root i,
// whose permissions could not be set (err), to the failed ones.
func (a *applier) failSettle(i int, rel string, err error) {
	for _, c := range a.res.Applied {
		if c.root == i && c.rel == rel {
			a.res.Failed = append(a.res.Failed, Failure{Change: c, Err: fmt.Errorf("%w: %w", errSettle, err)})
			return
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
// and f's first error stands. So does a setgid directory whose group is
// not the engine's: a chmod by a non-member clears S_ISGID for good.
//
// A mode is given back only while it is still the widened one: a
// chmod meanwhile (another conversation's apply, which holds the apply
// lock that Diff does not take; the user) stands. Reaches of one
// process that widen the same directory at once share the widening
// (see widenings): the last one to end gives the mode back. Two engine
// processes reaching one directory at once may leave it widened.
func reach(t *tree, rel string, need uint32, f func() error) error {
	err := f()
	if !errors.Is(err, unix.EACCES) || overrides() {
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
		if cur.Mode&unix.S_IFMT != unix.S_IFDIR && p != rel {
			_ = g.Close()
			continue
		}
		w, werr := widen(t, p, g, &cur, want)
		if werr != nil {
			_ = g.Close()
			return err
		}
		if w == nil {
			_ = g.Close()
			continue
		}
		undo = append(undo, func() {
			w.end(t, p, g)
			_ = g.Close()
		})
	}
	return f()
}

// widenings are the directories that reaches of this process have
// widened and not yet given back, by device and inode.
var widenings = struct {
	mu sync.Mutex
	m  map[[2]uint64]*widening
}{m: map[[2]uint64]*widening{}}

// widening is a directory that n reaches use widened: from mode to
// wide.
type widening struct {
	key        [2]uint64
	n          int
	mode, wide uint32
}

// widen gives the entry p of t (open as g, status cur) the permission
// bits want, or joins a reach of this process that widened it. It
// returns nil when the entry has them and no reach widened it. cur is
// read again under the lock: another reach may have given the entry its
// mode back since.
func widen(t *tree, p string, g *fd.FD, cur *unix.Stat_t, want uint32) (*widening, error) {
	key := [2]uint64{cur.Dev, cur.Ino}
	widenings.mu.Lock()
	defer widenings.mu.Unlock()
	if err := unix.Fstat(g.Int(), cur); err != nil {
		return nil, err
	}
	w := widenings.m[key]
	if w == nil && cur.Mode&want == want {
		return nil, nil
	}
	if cur.Mode&unix.S_ISGID != 0 && !inGroup(cur.Gid) {
		return nil, errSetgid
	}
	if cur.Mode&want != want {
		wide := cur.Mode&0o7777 | want
		if err := t.chmod(p, g, cur, wide); err != nil {
			return nil, err
		}
		if w != nil {
			w.wide = wide
		}
		if w == nil {
			w = &widening{key: key, mode: cur.Mode & 0o7777, wide: wide}
			widenings.m[key] = w
		}
	}
	w.n++
	return w, nil
}

// end ends a reach's use of w (the entry p of t, open as g): the last
// one gives the entry its mode back if it still has the widened one.
func (w *widening) end(t *tree, p string, g *fd.FD) {
	widenings.mu.Lock()
	defer widenings.mu.Unlock()
	if w.n--; w.n > 0 {
		return
	}
	delete(widenings.m, w.key)
	var now unix.Stat_t
	if unix.Fstat(g.Int(), &now) == nil && now.Mode&0o7777 == w.wide {
		_ = t.chmod(p, g, &now, w.mode)
	}
}

// errSetgid is why reach leaves a setgid directory whose group is not
// the engine's as it is.
var errSetgid = errors.New("a chmod would clear its setgid bit")

// inGroup reports whether the engine's process is in group gid (so a
// chmod of its own file keeps S_ISGID).
func inGroup(gid uint32) bool {
	if int(gid) == os.Getegid() {
		return true
	}
	gs, _ := os.Getgroups()
	return slices.Contains(gs, int(gid))
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
