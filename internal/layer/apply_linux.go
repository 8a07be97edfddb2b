//go:build linux

package layer

import (
	"context"
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// Result is what [Set.Apply] did.
type Result struct {
	// Applied are the changes now in the real tree, in the order of
	// [Set.Changes].
	Applied []Change
	// Failed are changes that could not be applied (the real tree
	// changed meanwhile, a mount or a symlink now stands in the way,
	// the disk is full); the real paths are as they were.
	Failed []Failure
	// Refused are changes the layer itself does not apply, whatever
	// the caller allows: their error is [ErrOverlayXattr] or
	// [ErrTooDeep] (wrapped). A refused added directory takes
	// everything below it along (listed once).
	Refused []Failure
	// Step is the undo step that holds what the changes replaced (see
	// [Store.Undo]); 0 when nothing was applied or no store was given,
	// or when the step was too large for the store's bounds.
	Step int
}

// Failure is a change that could not be applied.
type Failure struct {
	Change Change
	Err    error
}

// Apply makes the set's changes in the real tree, except the refused
// ones (absolute paths, as [Change.Path]; a refused added directory
// takes everything below it along). Each file, symlink or FIFO that
// replaces one is exchanged with it (renameat2 RENAME_EXCHANGE: an
// atomic replace that keeps the inode with its permissions, owner and
// times, and leaves the replaced file in the upper layer); one that is
// new is renamed into place; when the upper layer is on another file
// system, or cannot exchange, each is copied next to its real path and
// renamed into place. An added directory is renamed into place whole
// when its upper directory holds exactly the changes listed below it
// and none of them is refused (else it is made and filled entry by
// entry); a deleted one is moved aside whole. Overlayfs's private
// xattrs are removed from what moves. Changes the layer refuses itself
// (see [Result.Refused]) are never applied, whatever refused says.
//
// Whatever a change replaces or removes is kept in st as one undo step
// labelled label: the upper layer, which now holds the replaced files,
// moves into the step (on the same file system; the rest of it is
// removed in the background); removed entries are moved there; on
// another file system they are linked or copied. st may be nil: then
// nothing is kept (the replaced files go with the upper layer).
//
// Paths in the real tree are resolved beneath their root without
// following symlinks or crossing mounts: a change below a symlink or a
// mount point in the real tree fails rather than write elsewhere, and
// so does a change whose real entry is no longer the one Diff saw
// (device, inode, type). Applies and undos on one workspace take turns
// (see "What is applied" in the package doc): when another apply holds
// the workspace, Apply waits for it up to [Options.LockWait] or until
// ctx ends, then fails with an error wrapping [ErrLocked] (and ctx's
// error when ctx ended), having applied nothing. A workspace that is
// free is applied to even when ctx has ended: ctx bounds the wait, not
// the apply.
// Apply consumes the upper layers; call it once, then [Layer.Remove].
func (s *Set) Apply(ctx context.Context, refused []string, st *Store, label string) (*Result, error) {
	return s.apply(ctx, refused, st, label, false, false)
}

// ApplyCopies is [Set.Apply] for a layer that is still mounted and in
// use (a background job's, at a checkpoint): it copies every entry from
// the upper layer into the real tree, leaving the upper layer as it is
// (its files stay the job's, its overlayfs marks in place), so the job
// runs on over it. A later Diff of the same layer does not list what
// was copied again while the upper entry stays as it was (the copy has
// its size, times and permissions). The caller makes sure nothing
// writes the upper layer meanwhile (it freezes the job).
func (s *Set) ApplyCopies(ctx context.Context, refused []string, st *Store, label string) (*Result, error) {
	return s.apply(ctx, refused, st, label, true, false)
}

// ApplyExact is [Set.Apply] for changes a person reviewed (an accepted
// held change set): it applies them only onto the real entries exactly
// as Diff saw them — not only the same device, inode and type, but the
// same permissions, owner, and for anything but a directory the same
// size and modification and change times (a write in place keeps the
// inode; see stamp). It checks every change's real entry first, under
// the workspace's apply lock, and applies nothing when one differs: a
// *ConflictError naming them. Then, as it goes, it checks each again
// immediately before changing it (through the descriptor of its
// directory): a write in that last moment makes that change fail
// (Result.Failed) rather than overwrite it.
func (s *Set) ApplyExact(ctx context.Context, refused []string, st *Store, label string) (*Result, error) {
	return s.apply(ctx, refused, st, label, false, true)
}

func (s *Set) apply(ctx context.Context, refused []string, st *Store, label string, copies, exact bool) (*Result, error) {
	a := &applier{s: s, res: &Result{Applied: make([]Change, 0, len(s.Changes))}, copies: copies, exact: exact}
	if st != nil {
		if err := st.mu.lockCtx(ctx, storeWait); err != nil {
			return nil, err
		}
		defer st.mu.unlock()
	}
	fds := make([]int, len(s.real))
	for i, t := range s.real {
		fds[i] = t.fd.Int()
	}
	unlock, err := lockRoots(ctx, fds, s.l.lockWait)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if !copies {
		if err := s.flushRewrites(); err != nil {
			return nil, err
		}
	}
	a.plan(refused)
	if exact {
		if paths := a.changed(); len(paths) > 0 {
			return nil, &ConflictError{Paths: paths}
		}
	}
	if st != nil {
		step, err := st.begin(label)
		if err != nil {
			return nil, err
		}
		a.step = step
	}
	s.consumed = !copies
	for i := range s.l.roots {
		// Directories are looked up afresh: the real tree may have
		// changed since Diff.
		s.real[i].forget("")
		a.root(i)
	}
	if a.step != nil {
		n, err := st.commit(a.step)
		if err != nil {
			return a.res, err
		}
		a.res.Step = n
	}
	return a.res, nil
}

type applier struct {
	s      *Set
	res    *Result
	step   *step
	trees  []pending // added directories made entry by entry
	copies bool      // ApplyCopies: the upper layer stays as it is
	exact  bool      // ApplyExact: real entries are checked by their stamp too
	// end[k] is the index in s.Changes past change k's subtree (the
	// changes below a directory follow it); refused[k] says whether k
	// is refused itself, nRefused[k] how many before k are.
	end      []int
	refused  []bool
	nRefused []int
	// Changes before these indices are inside an added directory that
	// was refused, moved whole, failed, or is made entry by entry.
	coverEnd, wholeEnd, failedEnd, pendingEnd int
	// exch: the root's replaced files are exchanged; moveUpper: some
	// were, so its upper layer goes into the step (see exchange).
	exch, moveUpper bool
	// settle are the root's real directories that get their
	// permissions once its changes are applied (see settleRoot).
	settle map[string]settled
}

// errParentFailed is the failure of a change below an added directory
// that could not be made.
var errParentFailed = errors.New("its directory could not be made")

// pending is an added directory whose entries are applied one by one
// (something below it was refused); its undo entry is made at the end.
type pending struct {
	e   *entry
	rel string
}

// plan finds each change's subtree and which changes are refused: by
// the caller (refused paths), or by the layer (Change.refuse). Its cost
// is linear in the changes.
func (a *applier) plan(paths []string) {
	cs := a.s.Changes
	n := len(cs)
	a.end, a.refused, a.nRefused = make([]int, n), make([]bool, n), make([]int, n+1)
	set := make(map[string]bool, len(paths))
	for _, p := range paths {
		set[p] = true
	}
	var stack []int
	for k := range cs {
		for len(stack) > 0 && !below(cs[k].Path, cs[stack[len(stack)-1]].Path) {
			a.end[stack[len(stack)-1]] = k
			stack = stack[:len(stack)-1]
		}
		stack = append(stack, k)
		a.refused[k] = set[cs[k].Path] || cs[k].refuse != nil
		a.nRefused[k+1] = a.nRefused[k]
		if a.refused[k] {
			a.nRefused[k+1]++
		}
	}
	for _, k := range stack {
		a.end[k] = n
	}
}

// changed returns the paths of the changes to apply whose real entry is
// not what Diff saw (by id and stamp), sorted as the changes are.
func (a *applier) changed() []string {
	for _, re := range a.s.real {
		re.forget("") // looked up afresh: the real tree may have changed since Diff
	}
	var out []string
	for k := range a.s.Changes {
		c := &a.s.Changes[k]
		if a.refused[k] {
			continue
		}
		st, ok, err := lstatReach(a.s.real[c.root], c.rel)
		if err != nil || idOf(&st, ok) != c.was || stampOf(&st, ok, c.Kind == Deleted) != c.at {
			out = append(out, c.Path)
		}
	}
	return out
}

// refusedBelow reports whether a change below change k is refused.
func (a *applier) refusedBelow(k int) bool { return a.nRefused[a.end[k]]-a.nRefused[k+1] > 0 }

func (a *applier) root(i int) {
	up, re := a.s.upper[i], a.s.real[i]
	a.coverEnd, a.wholeEnd, a.failedEnd, a.pendingEnd, a.trees = 0, 0, 0, 0, nil
	a.exch, a.moveUpper, a.settle = a.exchanges(i), false, nil
	for k := range a.s.Changes {
		c := &a.s.Changes[k]
		switch {
		case c.root != i || k < a.coverEnd:
			continue // another root's, or below a refused directory
		case a.refused[k]:
			if c.refuse != nil {
				a.res.Refused = append(a.res.Refused, Failure{Change: *c, Err: c.refuse})
			}
			if c.newTree || c.Kind == Deleted {
				a.coverEnd = a.end[k]
			}
			continue
		case k < a.wholeEnd:
			a.res.Applied = append(a.res.Applied, *c) // moved with its directory
			continue
		case k < a.failedEnd:
			a.res.Failed = append(a.res.Failed, Failure{Change: *c, Err: errParentFailed})
			continue
		}
		if err := a.change(k, c, up, re); err != nil {
			a.res.Failed = append(a.res.Failed, Failure{Change: *c, Err: err})
			if c.newTree {
				a.failedEnd = a.end[k] // nothing below it can go in
			}
			continue
		}
		a.res.Applied = append(a.res.Applied, *c)
	}
	for _, p := range a.trees {
		p.e.After, p.e.Tree = treePrints(re, p.rel)
	}
	a.settleRoot(i, re)
	if a.moveUpper && a.step != nil && a.keepUpper(i) != nil {
		a.step.broken = true // not undoable: the step is not kept
	}
}

// change applies change k (c), after checking that its real entry is
// the one Diff compared it with.
func (a *applier) change(k int, c *Change, up, re *tree) error {
	var e *entry
	if a.step != nil && k >= a.pendingEnd {
		e = &entry{Root: re.root, Rel: c.rel}
	}
	st, ok, err := re.lstat(c.rel)
	if err != nil {
		return err
	}
	if c.Kind == Deleted && !ok {
		return nil // gone already
	}
	if idOf(&st, ok) != c.was || a.exact && stampOf(&st, ok, c.Kind == Deleted) != c.at {
		return &os.PathError{Op: "apply", Path: c.Path, Err: errChanged}
	}
	var before print
	if ok {
		before = printOf(&st)
	}
	if e != nil {
		e.Before = before
	}
	switch {
	case c.Kind == Deleted:
		if err := a.save(e, re, c.rel, before, true); err != nil {
			return err
		}
	case c.Mode.IsDir() && !c.newTree:
		if err := a.dirAttrs(c, up, re); err != nil {
			return err
		}
	default:
		if a.exch && before.exists() && !before.isDir() && !c.newTree {
			done, err := a.exchange(c, e, up, re, before)
			if err != nil {
				return err
			}
			if done {
				break
			}
		}
		if before.exists() && (before.isDir() || c.newTree) {
			// A type change: the old entry goes aside first.
			if err := a.save(e, re, c.rel, before, true); err != nil {
				return err
			}
		} else if before.exists() {
			if err := a.save(e, re, c.rel, before, false); err != nil {
				return err
			}
		}
		if c.newTree && (c.partial || a.refusedBelow(k)) {
			return a.mkdir(k, c, e, up, re)
		}
		if err := a.put(k, c, up, re); err != nil {
			a.restore(e, re)
			return err
		}
		if c.newTree {
			a.wholeEnd = a.end[k]
			a.settleTree(c.root, re, c.rel)
		}
	}
	if e == nil {
		return nil
	}
	if c.newTree {
		e.After, e.Tree = treePrints(re, c.rel)
	} else if e.After, err = statPrint(re, c.rel); err != nil {
		return err
	}
	a.step.add(e)
	return nil
}

// mkdir makes an added directory (change k) whose entries are applied
// one by one: something below it is refused, or its upper directory
// holds more than the changes below it.
func (a *applier) mkdir(k int, c *Change, e *entry, up, re *tree) error {
	ust, _, err := up.lstat(c.rel)
	if err != nil {
		return err
	}
	mode := a.s.leftMode(c.root, c.rel, ust.Mode)
	ust.Mode = accessible(mode)
	d, name := split(c.rel)
	dir, err := re.dir(d)
	if err != nil {
		return err
	}
	if err := unix.Mkdirat(dir, name, 0o700); err != nil {
		return &os.PathError{Op: "mkdir", Path: c.Path, Err: err}
	}
	f, cur, err := re.openEntry(c.rel)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := re.setAttrs(c.rel, f, &cur, &ust); err != nil {
		return err
	}
	a.settleIf(c.rel, &cur, mode)
	if e != nil {
		a.trees = append(a.trees, pending{e: e, rel: c.rel})
		a.pendingEnd = a.end[k]
		a.step.add(e)
	}
	return nil
}

// dirAttrs gives an existing directory the upper one's permissions and
// owner, through a descriptor of the directory Diff saw.
func (a *applier) dirAttrs(c *Change, up, re *tree) error {
	ust, _, err := up.lstat(c.rel)
	if err != nil {
		return err
	}
	f, cur, err := re.openSame(c.rel, c.was)
	if err != nil {
		return err
	}
	defer f.Close()
	mode := a.s.leftMode(c.root, c.rel, ust.Mode)
	if err := re.chownChmod(c.rel, f, &cur, ust.Uid, ust.Gid, accessible(mode)); err != nil {
		return err
	}
	a.settleIf(c.rel, &cur, mode)
	return nil
}

// accessible returns the mode a real directory whose mode is to be mode
// has while the changes below it are applied: with rwx for its owner
// (unless the engine overrides permissions).
func accessible(mode uint32) uint32 {
	if overrides() {
		return mode
	}
	return mode | ownerAll
}

// settleIf notes the real directory rel (status st), which apply made
// or changed, for settleRoot when accessible widened its mode.
func (a *applier) settleIf(rel string, st *unix.Stat_t, mode uint32) {
	if accessible(mode) != mode {
		a.settleLater(rel, st, mode)
	}
}

// put moves (or copies) the upper entry of c over its real path.
func (a *applier) put(k int, c *Change, up, re *tree) error {
	if a.copies {
		if b, ok := a.s.rewrites[c.Path]; ok {
			return copyRewritten(up, re, c.rel, b)
		}
		// A copy carries no xattrs, overlayfs's included.
		return copyEntry(up, c.rel, re, c.rel)
	}
	for _, x := range c.ovl {
		_ = unix.Lremovexattr(up.path(c.rel), x)
	}
	if c.newTree {
		// Below an added directory, only directories carry overlayfs's
		// marks (opaque, impure); each is a change of its own.
		for _, b := range a.s.Changes[k+1 : a.end[k]] {
			for _, x := range b.ovl {
				_ = unix.Lremovexattr(up.path(b.rel), x)
			}
		}
	}
	d, name := split(c.rel)
	ufd, err := up.dir(d)
	if err != nil {
		return err
	}
	rfd, err := re.dir(d)
	if err != nil {
		return err
	}
	err = unix.Renameat(ufd, name, rfd, name)
	if errors.Is(err, unix.EXDEV) {
		return copyEntry(up, c.rel, re, c.rel)
	}
	if err != nil {
		return &os.PathError{Op: "rename", Path: c.Path, Err: err}
	}
	if c.newTree {
		up.forget(c.rel)
	}
	return nil
}

// save keeps the real entry rel (print before) in the undo step and, if
// remove, removes it from the real tree. A file that stays (it is about
// to be replaced by a rename) is hard-linked into the store, or copied;
// one that goes is moved there, or copied and removed.
func (a *applier) save(e *entry, re *tree, rel string, before print, remove bool) error {
	if a.step == nil || e == nil {
		if remove {
			return removeEntry(re, rel)
		}
		return nil
	}
	blob, err := a.step.keep(re, rel, before, remove)
	if err != nil {
		return err
	}
	e.Blob = blob
	return nil
}

// restore puts back what save moved aside, after the change failed.
func (a *applier) restore(e *entry, re *tree) {
	if e == nil || e.Blob == "" || a.step == nil {
		return
	}
	if _, ok, _ := re.lstat(e.Rel); ok {
		return // still there (it was linked, not moved)
	}
	_ = a.step.putBack(e, re)
	e.Blob = ""
}
