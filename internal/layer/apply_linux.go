//go:build linux

package layer

import (
	"errors"
	"os"
	"slices"

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
// when nothing below it is refused; a deleted one is moved aside whole.
// Overlayfs's private xattrs are removed from what moves.
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
// mount point in the real tree fails rather than write elsewhere.
// Apply consumes the upper layers; call it once, then [Layer.Remove].
func (s *Set) Apply(refused []string, st *Store, label string) (*Result, error) {
	return s.apply(refused, st, label, false)
}

// ApplyCopies is [Set.Apply] for a layer that is still mounted and in
// use (a background job's, at a checkpoint): it copies every entry from
// the upper layer into the real tree, leaving the upper layer as it is
// (its files stay the job's, its overlayfs marks in place), so the job
// runs on over it. A later Diff of the same layer does not list what
// was copied again while the upper entry stays as it was (the copy has
// its size, times and permissions). The caller makes sure nothing
// writes the upper layer meanwhile (it freezes the job).
func (s *Set) ApplyCopies(refused []string, st *Store, label string) (*Result, error) {
	return s.apply(refused, st, label, true)
}

func (s *Set) apply(refused []string, st *Store, label string, copies bool) (*Result, error) {
	a := &applier{s: s, refused: refused, res: &Result{Applied: make([]Change, 0, len(s.Changes))}, copies: copies}
	if st != nil {
		st.mu.Lock()
		defer st.mu.Unlock()
		step, err := st.begin(label)
		if err != nil {
			return nil, err
		}
		a.step = step
	}
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
	s       *Set
	refused []string
	res     *Result
	step    *step
	trees   []pending // added directories made entry by entry
	copies  bool      // ApplyCopies: the upper layer stays as it is
	whole   string    // rel of the added directory last renamed whole
	failed  string    // rel of the added directory last failed
	// exch: the root's replaced files are exchanged; moveUpper: some
	// were, so its upper layer goes into the step (see exchange).
	exch, moveUpper bool
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

// isRefused reports whether c is refused, or below a refused added
// directory.
func (a *applier) isRefused(c *Change) bool {
	for _, r := range a.refused {
		if r == c.Path {
			return true
		}
		if below(c.Path, r) {
			if i, ok := slices.BinarySearchFunc(a.s.Changes, r, func(x Change, p string) int { return comparePaths(x.Path, p) }); ok {
				if pc := a.s.Changes[i]; pc.newTree || pc.Kind == Deleted {
					return true
				}
			}
		}
	}
	return false
}

// hasRefusedBelow reports whether a refused path lies below c.
func (a *applier) hasRefusedBelow(c *Change) bool {
	return slices.ContainsFunc(a.refused, func(r string) bool { return below(r, c.Path) })
}

func (a *applier) root(i int) {
	up, re := a.s.upper[i], a.s.real[i]
	a.whole, a.failed, a.trees = "", "", nil
	a.exch, a.moveUpper = a.exchanges(i), false
	for k := range a.s.Changes {
		c := &a.s.Changes[k]
		if c.root != i || a.isRefused(c) {
			continue
		}
		if a.whole != "" && below(c.rel, a.whole) {
			a.res.Applied = append(a.res.Applied, *c) // moved with its directory
			continue
		}
		if a.failed != "" && below(c.rel, a.failed) {
			a.res.Failed = append(a.res.Failed, Failure{Change: *c, Err: errParentFailed})
			continue
		}
		if err := a.change(c, up, re); err != nil {
			a.res.Failed = append(a.res.Failed, Failure{Change: *c, Err: err})
			if c.newTree {
				a.failed = c.rel // nothing below it can go in
			}
			continue
		}
		a.res.Applied = append(a.res.Applied, *c)
	}
	for _, p := range a.trees {
		p.e.After, p.e.Tree = treePrints(re, p.rel)
	}
	if a.moveUpper && a.step != nil && a.keepUpper(i) != nil {
		a.step.broken = true // not undoable: the step is not kept
	}
}

// inPending reports whether rel lies below an added directory made
// entry by entry (its undo entry covers rel).
func (a *applier) inPending(rel string) bool {
	return slices.ContainsFunc(a.trees, func(p pending) bool { return below(rel, p.rel) })
}

// change applies one change.
func (a *applier) change(c *Change, up, re *tree) error {
	var e *entry
	if a.step != nil && !a.inPending(c.rel) {
		e = &entry{Root: re.root, Rel: c.rel}
	}
	before, err := statPrint(re, c.rel)
	if err != nil {
		return err
	}
	if e != nil {
		e.Before = before
	}
	switch {
	case c.Kind == Deleted:
		if !before.exists() {
			return nil // gone already
		}
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
		if c.newTree && a.hasRefusedBelow(c) {
			return a.mkdir(c, e, up, re)
		}
		if err := a.put(c, up, re); err != nil {
			a.restore(e, re)
			return err
		}
		if c.newTree {
			a.whole = c.rel
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

// mkdir makes an added directory whose entries are applied one by one.
func (a *applier) mkdir(c *Change, e *entry, up, re *tree) error {
	st, _, err := up.lstat(c.rel)
	if err != nil {
		return err
	}
	d, name := split(c.rel)
	fd, err := re.dir(d)
	if err != nil {
		return err
	}
	if err := unix.Mkdirat(fd, name, 0o700); err != nil {
		return &os.PathError{Op: "mkdir", Path: c.Path, Err: err}
	}
	if err := setAttrs(fd, name, &st); err != nil {
		return err
	}
	if e != nil {
		a.trees = append(a.trees, pending{e: e, rel: c.rel})
		a.step.add(e)
	}
	return nil
}

// dirAttrs gives an existing directory the upper one's permissions and
// owner.
func (a *applier) dirAttrs(c *Change, up, re *tree) error {
	st, _, err := up.lstat(c.rel)
	if err != nil {
		return err
	}
	d, name := split(c.rel)
	fd, err := re.dir(d)
	if err != nil {
		return err
	}
	if name == "" {
		fd, name = re.fd, "."
	}
	if err := unix.Fchownat(fd, name, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil && !errors.Is(err, unix.EPERM) {
		return &os.PathError{Op: "chown", Path: c.Path, Err: err}
	}
	if err := unix.Fchmodat(fd, name, st.Mode&0o7777, 0); err != nil {
		return &os.PathError{Op: "chmod", Path: c.Path, Err: err}
	}
	return nil
}

// put moves (or copies) the upper entry of c over its real path.
func (a *applier) put(c *Change, up, re *tree) error {
	if a.copies {
		// A copy carries no xattrs, overlayfs's included.
		return copyEntry(up, c.rel, re, c.rel)
	}
	for _, x := range c.ovl {
		_ = unix.Lremovexattr(up.path(c.rel), x)
	}
	if c.newTree {
		// Below an added directory, only directories carry overlayfs's
		// marks (opaque, impure); each is a change of its own.
		for k := range a.s.Changes {
			b := &a.s.Changes[k]
			if b.root == c.root && below(b.rel, c.rel) {
				for _, x := range b.ovl {
					_ = unix.Lremovexattr(up.path(b.rel), x)
				}
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
