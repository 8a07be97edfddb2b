//go:build linux

package layer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// Default bounds of a [Store], used when a [StoreLimits] field is zero.
const (
	// DefaultStoreBytes bounds the bytes a store keeps (256 MiB).
	DefaultStoreBytes = 256 << 20
	// DefaultStoreSteps bounds the steps a store keeps.
	DefaultStoreSteps = 50
)

// StoreLimits bound a [Store]. Past either bound the oldest steps are
// dropped; a step larger than Bytes on its own is not kept, and neither
// is any step before it (undo goes back step by step).
type StoreLimits struct {
	// Bytes bounds the size of the files kept (replaced or removed
	// files; a file the workspace still links elsewhere costs no disk,
	// but counts all the same).
	Bytes int64
	// Steps bounds the number of steps kept.
	Steps int
}

// Store keeps, per conversation, what applied changes replaced or
// removed, one step per [Set.Apply] that changed something, so that
// [Store.Undo] can put the last steps back. Commands that changed
// nothing are not steps. It lives in a directory of its own, best on
// the file system of the workspace and of the upper layers (then
// keeping a replaced file or a removed directory is a rename; otherwise
// they are copied). Its index is in memory: a new Store starts empty.
// What it no longer needs is removed in the background (see the package
// doc, "Undo"). It is safe for concurrent use; applying and undoing
// take turns.
type Store struct {
	mu    turn // applies and undos take turns
	dir   string
	lim   StoreLimits
	seq   int
	steps []*step // oldest first
	bytes int64
	sweep sweeper // removes dropped steps and undone entries
	// redo holds, per undo (newest last), the steps that put back what
	// it took out (see Redo); a new step empties it.
	redo      [][]*step
	redoBytes int64
	canon     func(path string, read func() ([]byte, error)) string
}

// NewStore makes a store in dir (created; what it held is removed).
func NewStore(dir string, lim StoreLimits) (*Store, error) {
	if lim.Bytes <= 0 {
		lim.Bytes = DefaultStoreBytes
	}
	if lim.Steps <= 0 {
		lim.Steps = DefaultStoreSteps
	}
	if err := RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("layer: store: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("layer: store: %w", err)
	}
	return &Store{mu: newTurn(), dir: dir, lim: lim}, nil
}

// StepInfo describes one kept step.
type StepInfo struct {
	// N numbers the step (1 for a store's first).
	N int
	// Label is the label [Set.Apply] was given (the command).
	Label string
	// Paths is the number of paths the step changed.
	Paths int
	// Bytes is what the step keeps.
	Bytes int64
	// Turn is the turn [Store.SetTurn] gave it ("": none).
	Turn string
}

// Steps lists the steps that can be undone, oldest first.
func (s *Store) Steps() []StepInfo {
	s.mu.lock()
	defer s.mu.unlock()
	out := make([]StepInfo, len(s.steps))
	for i, st := range s.steps {
		out[i] = StepInfo{N: st.n, Label: st.label, Paths: len(st.entries), Bytes: st.bytes, Turn: st.turn}
	}
	return out
}

// Remove removes the store and everything it keeps (the conversation
// ended), once its background removals are done.
func (s *Store) Remove() error {
	s.mu.lock()
	defer s.mu.unlock()
	for _, st := range s.steps {
		st.t.close()
	}
	s.dropRedo()
	s.steps, s.bytes = nil, 0
	s.sweep.wait()
	if err := RemoveAll(s.dir); err != nil {
		return fmt.Errorf("layer: store: %w", err)
	}
	return nil
}

// step is one applied change set's undo record.
type step struct {
	n       int
	label   string
	turn    string
	t       *tree // the step's directory
	entries []*entry
	bytes   int64
	prune   []prune // upper layers taken over, to empty but for the blobs
	broken  bool    // what some change replaced could not be kept
	// A step that takes back an undo: orig is the undone step's number,
	// partial says it took back only some of its paths, blobs numbers
	// what it keeps.
	orig    int
	partial bool
	blobs   int
	// moved: the step's directory went to the step that takes back its
	// undo (which removes it).
	moved bool
}

// entry is one path of a step: its state before and after, and the
// name in the step's directory of what it was before (if it existed and
// was not a directory that stayed one).
type entry struct {
	Root, Rel     string
	Before, After print
	Blob          string
	Tree          map[string]print // an added directory: what is below it
	// Canon is the store's canonical form of the file After was (see
	// Store.SetCanon; "": none): a file whose print differs but whose
	// canonical form is the same is as the step left it.
	Canon string
}

func (e *entry) path() string {
	if e.Rel == "" {
		return e.Root
	}
	return e.Root + "/" + e.Rel
}

func (s *Store) begin(label string) (*step, error) {
	s.seq++
	dir := s.dir + "/" + strconv.Itoa(s.seq)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("layer: store: %w", err)
	}
	t, err := openTree(dir)
	if err != nil {
		return nil, fmt.Errorf("layer: store: %w", err)
	}
	return &step{n: s.seq, label: label, t: t}, nil
}

func (st *step) add(e *entry) { st.entries = append(st.entries, e) }

// keep saves the real entry rel into the step (see applier.save).
func (st *step) keep(re *tree, rel string, before print, remove bool) (string, error) {
	blob := "b" + strconv.Itoa(len(st.entries))
	d, name := split(rel)
	fd, err := re.dir(d)
	if err != nil {
		return "", err
	}
	if remove {
		err = unix.Renameat(fd, name, st.t.fd.Int(), blob)
		if err == nil {
			re.forget(rel)
		} else if errors.Is(err, unix.EXDEV) {
			if err = copyEntry(re, rel, st.t, blob); err == nil {
				err = removeEntry(re, rel)
			}
		}
	} else {
		err = unix.Linkat(fd, name, st.t.fd.Int(), blob, 0)
		if err != nil {
			err = copyEntry(re, rel, st.t, blob)
		}
	}
	if err != nil {
		return "", fmt.Errorf("layer: keep %s for undo: %w", re.path(rel), err)
	}
	if before.isDir() {
		st.bytes += treeBytes(st.t, blob)
	} else {
		st.bytes += before.Size
	}
	return blob, nil
}

// putBack moves (or copies) e's blob back to its real path.
func (st *step) putBack(e *entry, re *tree) error {
	d, name := split(e.Rel)
	fd, err := re.dir(d)
	if err != nil {
		return err
	}
	bd, bn := split(e.Blob)
	bfd, err := st.t.dir(bd)
	if err != nil {
		return err
	}
	err = unix.Renameat(bfd, bn, fd, name)
	if errors.Is(err, unix.EXDEV) {
		return copyEntry(st.t, e.Blob, re, e.Rel)
	}
	if err != nil {
		return &os.PathError{Op: "rename", Path: e.path(), Err: err}
	}
	return nil
}

// commit files a finished step under the store's bounds and returns
// its number (0 if it was not kept).
func (s *Store) commit(st *step) (int, error) {
	s.canonEntries(st)
	if len(st.entries) == 0 {
		s.drop(st)
		return 0, nil
	}
	if st.bytes > s.lim.Bytes || st.broken {
		for len(s.steps) > 0 {
			s.drop(s.steps[0])
			s.steps = s.steps[1:]
		}
		s.drop(st)
		return 0, nil
	}
	s.dropRedo() // a new change: what was undone can no longer be redone
	s.steps = append(s.steps, st)
	s.bytes += st.bytes
	for _, p := range st.prune {
		dir := s.dir + "/" + strconv.Itoa(st.n)
		s.sweep.do(func() { p.run(dir) })
	}
	s.bound()
	return st.n, nil
}

// bound drops the oldest steps past the store's bounds.
func (s *Store) bound() {
	for len(s.steps) > s.lim.Steps || s.bytes > s.lim.Bytes {
		s.bytes -= s.steps[0].bytes
		s.drop(s.steps[0])
		s.steps = s.steps[1:]
	}
}

// drop forgets st; its directory is removed in the background.
func (s *Store) drop(st *step) {
	st.t.close()
	s.sweep.add(st.t.root)
}

// treeBytes sums the sizes of the regular files below t/rel.
func treeBytes(t *tree, rel string) int64 {
	var n int64
	_, below := treePrints(t, rel)
	for _, p := range below {
		if p.Mode&unix.S_IFMT == unix.S_IFREG {
			n += p.Size
		}
	}
	return n
}

// treePrints returns the print of the directory t/rel and of everything
// below it (keyed by path relative to rel), through reach (a directory
// without read or search permission for its owner, unprivileged).
func treePrints(t *tree, rel string) (print, map[string]print) {
	top, _ := statPrintReach(t, rel)
	out := map[string]print{}
	var walk func(sub string)
	walk = func(sub string) {
		var names []string
		dir := join(rel, sub)
		err := reach(t, dir, 0o500, func() error {
			var err error
			names, err = t.names(dir)
			return err
		})
		if err != nil {
			return
		}
		for _, n := range names {
			p, err := statPrintReach(t, join(rel, join(sub, n)))
			if err != nil || !p.exists() {
				continue
			}
			out[join(sub, n)] = p
			if p.isDir() {
				walk(join(sub, n))
			}
		}
	}
	walk("")
	return top, out
}

// ErrNothingToUndo is returned (wrapped) by [Store.Undo] when fewer
// steps are kept than asked for.
var ErrNothingToUndo = errors.New("layer: not that many steps to undo")

// Undo restores the real trees to before the last n steps: it checks
// first that every path those steps changed is still as the last of
// them left it (and, for a path changed by several of them, that
// nothing changed it in between), and refuses with a *ConflictError
// naming the paths that are not, changing nothing; then it takes out
// what the steps made (into a trash removed in the background) and puts
// back what they replaced (a replaced file by exchanging it with the
// one that replaced it), newest step first, and forgets the steps. It
// returns what it changed, as changes (an undone addition is Deleted,
// an undone deletion Added).
//
// A path that cannot be restored (an error other than a conflict) stops
// the undo there, failing with that error and what it changed so far:
// each path is restored whole or not at all, and every path not
// restored stays in its kept step (which keeps its number), so that
// Undo, once the cause is fixed, finishes the undo; Redo takes back
// what was restored. Nothing the steps replaced is lost.
//
// ctx bounds only the waits: for another apply or undo of the store,
// and for the workspace's apply lock (another process's apply, up to
// 10 minutes: see [ErrLocked]). When it ends during one, Undo fails
// with an error wrapping ErrLocked and ctx's error, having changed
// nothing: the steps stay kept, the workspace as it was. Once it holds
// both it undoes whatever ctx says.
func (s *Store) Undo(ctx context.Context, n int) ([]Change, error) {
	if err := s.mu.lockCtx(ctx, storeWait); err != nil {
		return nil, err
	}
	defer s.mu.unlock()
	if n <= 0 || n > len(s.steps) {
		return nil, fmt.Errorf("%w: %d asked, %d kept", ErrNothingToUndo, n, len(s.steps))
	}
	return s.undo(ctx, slices.Clone(s.steps[len(s.steps)-n:]), nil)
}

// storeWait is what a store's apply or undo waits for in its turn.
const storeWait = "another apply or undo of the undo store"

// undo takes back the entries pick selects (nil: all) of the kept
// steps sel (oldest first), as one: it refuses, changing nothing, when
// a path is not as they left it. A step left with no entries is
// forgotten, one left with some (not picked, or not restored: see
// revert) keeps them; the steps that would put back what the undo took
// out are kept for Redo. s.mu is held.
func (s *Store) undo(ctx context.Context, sel []*step, pick func(*entry) bool) ([]Change, error) {
	views := make([]*step, len(sel))
	for i, st := range sel {
		views[i] = st
		if pick != nil {
			v := *st
			v.entries = slices.DeleteFunc(slices.Clone(st.entries), func(e *entry) bool { return !pick(e) })
			views[i] = &v
		}
	}
	out, inv, done, err := s.revert(ctx, views, pick == nil)
	if len(done) == 0 {
		return nil, err
	}
	left := map[int]bool{} // the steps that keep entries
	for _, st := range sel {
		rest := slices.DeleteFunc(slices.Clone(st.entries), func(e *entry) bool { return done[e] })
		if len(rest) > 0 {
			st.entries, left[st.n] = rest, true
			continue
		}
		s.bytes -= st.bytes
		if !st.moved {
			s.drop(st)
		}
		s.steps = slices.DeleteFunc(s.steps, func(o *step) bool { return o == st })
	}
	if inv != nil {
		for _, st := range inv {
			st.partial = st.partial || left[st.orig]
			s.redoBytes += st.bytes
		}
		s.redo = append(s.redo, inv)
		for len(s.redo) > s.lim.Steps || s.redoBytes > s.lim.Bytes {
			s.dropRedoGroup(0)
		}
	}
	return out, err
}

// revert restores the steps sel (oldest first) as one (see Undo) and
// returns what it changed, the steps that take back the revert itself
// (nil when what it took out could not all be kept) and the entries it
// restored. With whole, sel are kept steps undone whole: each step's
// directory goes to the step that takes back its undo (what an exchange
// put back leaves there stays in place).
//
// It stops at the first entry it cannot restore (see stop): that entry
// and those after it (older) stay with their steps, whose blobs stay
// kept, and the steps made so far take back what it restored.
func (s *Store) revert(ctx context.Context, sel []*step, whole bool) ([]Change, []*step, map[*entry]bool, error) {
	u := &undoer{s: s, trees: map[string]*tree{}, whole: whole, restored: map[*entry]bool{}}
	defer u.close()
	var fds []int
	for _, st := range sel {
		for _, e := range st.entries {
			t, err := u.tree(e.Root)
			if err != nil {
				return nil, nil, nil, err
			}
			if !slices.Contains(fds, t.fd.Int()) {
				fds = append(fds, t.fd.Int())
			}
		}
	}
	unlock, err := lockRoots(ctx, fds, 0) // applies and undos on a workspace take turns
	if err != nil {
		return nil, nil, nil, err
	}
	defer unlock()
	if err := u.check(sel); err != nil {
		return nil, nil, nil, err
	}
	var errs []error
	var failed *step
	for i := len(sel) - 1; i >= 0 && failed == nil; i-- {
		st := sel[i]
		if err := u.begin(st); err != nil {
			errs = append(errs, err)
		}
		for k := len(st.entries) - 1; k >= 0; k-- {
			if err := u.restoreReach(st, st.entries[k]); err != nil {
				errs = append(errs, err)
				failed = st
				break
			}
		}
	}
	u.reprint(s.steps)
	u.chain()
	out := u.done
	slices.SortFunc(out, func(a, b Change) int { return comparePaths(a.Path, b.Path) })
	if err := u.stop(failed); err != nil {
		errs = append(errs, err)
	}
	if u.broken || len(errs) > 0 && len(u.restored) == 0 {
		for _, st := range u.inv {
			if failed == nil || st.t != failed.t {
				s.drop(st)
			}
		}
		if failed != nil {
			failed.moved = false
		}
		u.inv = nil
	}
	return out, u.inv, u.restored, errors.Join(errs...)
}

type undoer struct {
	s     *Store
	trees map[string]*tree
	done  []Change
	// inv are the steps that take back what the undo did, one per step
	// undone, in the order undone; cur is the one being made: what the
	// undo takes out of the real trees goes there (moved, or linked
	// before a rename replaces it), so that nothing is removed on the
	// undo's path.
	inv    []*step
	cur    *step
	broken bool // something taken out could not be kept: no redo
	whole  bool // Store.revert's
	// restored are the entries restored, and undone the same in the
	// order restored (newest first).
	restored map[*entry]bool
	undone   []*entry
}

func (u *undoer) close() {
	for _, t := range u.trees {
		t.close()
	}
}

// begin starts the step that takes back the undo of st.
func (u *undoer) begin(st *step) error {
	var inv *step
	if u.whole {
		inv = &step{n: st.n, label: st.label, t: st.t, blobs: st.blobs}
		st.moved = true
	} else {
		var err error
		if inv, err = u.s.begin(st.label); err != nil {
			u.broken = true
			return err
		}
	}
	inv.turn, inv.orig = st.turn, st.n
	u.inv = append(u.inv, inv)
	u.cur = inv
	return nil
}

// chain makes each step being made expect, for a path a later one
// changes too, what the later one found (the state between them), as
// the steps a command makes do.
func (u *undoer) chain() {
	next := map[string]print{}
	for j := len(u.inv) - 1; j >= 0; j-- {
		for _, e := range u.inv[j].entries {
			if p, ok := next[e.path()]; ok {
				e.After = p
			}
		}
		for _, e := range u.inv[j].entries {
			next[e.path()] = e.Before
		}
	}
}

// keepName returns the step being made and a new name in it (nil: none
// is being made).
func (u *undoer) keepName() (*tree, string) {
	if u.cur == nil {
		return nil, ""
	}
	u.cur.blobs++
	return u.cur.t, "r" + strconv.Itoa(u.cur.blobs)
}

// putBack puts e's path back as it was before st: a file that replaced
// one is exchanged with it; anything else is taken out (see takeOut)
// and the blob, if any, renamed into place. It returns where in the
// step being made what it took out went ("": nowhere).
func (u *undoer) putBack(st *step, e *entry, t *tree) (string, error) {
	replaced := e.Blob != "" && e.After.exists() && !e.After.isDir() && !e.Before.isDir()
	if replaced {
		if ok, err := st.swap(e, t); ok || err != nil {
			if err != nil || u.cur == nil {
				return "", err
			}
			if u.cur.t == st.t {
				return e.Blob, nil // the command's file is now the blob, in place
			}
			// The command's file is now the blob: it goes to the step
			// being made.
			tr, name := u.keepName()
			bd, bn := split(e.Blob)
			bfd, err := st.t.dir(bd)
			if err == nil {
				err = unix.Renameat(bfd, bn, tr.fd.Int(), name)
			}
			if err != nil {
				u.broken = true
				return "", nil
			}
			return name, nil
		}
	}
	var kept string
	if e.After.exists() {
		// A file replaced by a file stays until the blob's rename
		// replaces it.
		var err error
		if kept, err = u.takeOut(t, e.Rel, replaced); err != nil {
			return "", err
		}
	}
	if e.Blob != "" {
		if err := st.putBack(e, t); err != nil {
			u.untake(t, e.Rel, kept, replaced)
			return "", err
		}
	}
	return kept, nil
}

// takeOut takes the real entry rel out of the way of what an undo puts
// back, into the step being made. A file that a blob replaces is
// linked there and left in place (the blob's rename then replaces it
// atomically, and nothing is freed on the undo's path); anything else
// is moved there (a directory whole). Where that is not possible
// (another file system, a link not allowed), it is removed; not when a
// permission is missing (EACCES, EPERM: the error is returned, and
// restoreReach gives the permission).
func (u *undoer) takeOut(t *tree, rel string, replaced bool) (string, error) {
	d, name := split(rel)
	fd, err := t.dir(d)
	if err != nil {
		return "", err
	}
	if tr, kn := u.keepName(); tr != nil {
		if replaced {
			err = unix.Linkat(fd, name, tr.fd.Int(), kn, 0)
		} else if err = unix.Renameat(fd, name, tr.fd.Int(), kn); err == nil {
			t.forget(rel)
		}
		if err == nil {
			return kn, nil
		}
		if !mayRemove(err) {
			return "", &os.PathError{Op: "undo", Path: t.path(rel), Err: err}
		}
	}
	u.broken = true
	if err := removeEntry(t, rel); err != nil {
		return "", err
	}
	t.forget(rel)
	return "", nil
}

func (u *undoer) tree(root string) (*tree, error) {
	if t, ok := u.trees[root]; ok {
		return t, nil
	}
	t, err := openTree(root)
	if err != nil {
		return nil, err
	}
	u.trees[root] = t
	return t, nil
}

// check verifies the steps sel (oldest first) against the real trees.
func (u *undoer) check(sel []*step) error {
	// expect: for each path a newer step touched, the state that step's
	// undo will leave (its Before), which the older step's After must
	// equal.
	expect := map[string]print{}
	var conflicts []string
	for i := len(sel) - 1; i >= 0; i-- {
		for _, e := range sel[i].entries {
			t, err := u.tree(e.Root)
			if err != nil {
				return err
			}
			if !u.matches(t, e, expect) {
				conflicts = append(conflicts, e.path())
			}
		}
		for _, e := range sel[i].entries {
			expect[e.path()] = e.Before
			for rel := range e.Tree {
				expect[e.path()+"/"+rel] = print{}
			}
		}
	}
	if len(conflicts) > 0 {
		slices.Sort(conflicts)
		return &ConflictError{Paths: slices.Compact(conflicts)}
	}
	return nil
}

// matches reports whether e's path is as e left it, given the states
// newer steps' undo will leave (expect).
func (u *undoer) matches(t *tree, e *entry, expect map[string]print) bool {
	state := func(rel string) print {
		if p, ok := expect[t.path(rel)]; ok {
			return p
		}
		p, err := statPrintReach(t, rel)
		if err != nil {
			return print{Mode: ^uint32(0)} // unreadable: never equal
		}
		return p
	}
	if !samePrint(state(e.Rel), e.After) && !u.sameCanon(t, e, expect) {
		return false
	}
	if e.Tree == nil {
		return true
	}
	for rel, p := range e.Tree {
		if !samePrint(state(join(e.Rel, rel)), p) {
			return false
		}
	}
	// Nothing new below it, unless a newer step made it.
	_, now := treePrints(t, e.Rel)
	for rel := range now {
		if _, ok := e.Tree[rel]; !ok && state(join(e.Rel, rel)).exists() {
			return false
		}
	}
	return true
}

func samePrint(a, b print) bool { return a == b }

// restore undoes one entry of st.
func (u *undoer) restore(st *step, e *entry) error {
	t, err := u.tree(e.Root)
	if err != nil {
		return err
	}
	c := Change{Path: e.path(), Kind: TypeChanged, Mode: fileMode(e.Before.Mode), Size: e.Before.Size}
	var kept string
	switch {
	case e.After.isDir() && e.Before.isDir():
		// Only its permissions or owner changed: through a descriptor
		// of the directory the step changed.
		f, cur, err := t.openEntry(e.Rel)
		if err != nil {
			return err
		}
		defer f.Close()
		if cur.Mode&unix.S_IFMT != unix.S_IFDIR || cur.Ino != e.After.Ino {
			return &os.PathError{Op: "undo", Path: e.path(), Err: errChanged}
		}
		if err := t.chownChmod(e.Rel, f, &cur, e.Before.Uid, e.Before.Gid, e.Before.Mode); err != nil {
			return err
		}
	default:
		if kept, err = u.putBack(st, e, t); err != nil {
			return err
		}
		switch {
		case !e.Before.exists():
			c.Kind, c.Mode, c.Size = Deleted, fileMode(e.After.Mode), e.After.Size
		case !e.After.exists():
			c.Kind = Added
		case e.Before.Mode&unix.S_IFMT == e.After.Mode&unix.S_IFMT:
			c.Kind = Modified
		}
	}
	if !c.Mode.IsRegular() {
		c.Size = 0
	}
	u.done = append(u.done, c)
	u.restored[e] = true
	u.undone = append(u.undone, e)
	u.inverse(t, e, kept)
	return nil
}

// inverse adds to the step being made the entry that takes back the
// undo of e (what it took out is kept as blob).
func (u *undoer) inverse(t *tree, e *entry, blob string) {
	if u.cur == nil {
		return
	}
	ie := &entry{Root: e.Root, Rel: e.Rel, Before: e.After, Blob: blob}
	if e.After.exists() && !(e.After.isDir() && e.Before.isDir()) && blob == "" {
		u.broken = true // what the step made is gone
	}
	now, err := statPrint(t, e.Rel)
	if err != nil {
		u.broken = true
	}
	ie.After = now
	if now.isDir() && !e.After.isDir() {
		ie.After, ie.Tree = treePrints(t, e.Rel)
	}
	if blob != "" {
		if e.After.isDir() {
			u.cur.bytes += treeBytes(u.cur.t, blob)
		} else {
			u.cur.bytes += e.After.Size
		}
	}
	u.cur.add(ie)
}
