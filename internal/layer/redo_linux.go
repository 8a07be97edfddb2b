//go:build linux

package layer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// ErrNothingToRedo is returned (wrapped) by [Store.Redo] when no undo
// is kept to take back: none was made, or a step was added since.
var ErrNothingToRedo = errors.New("layer: nothing to redo")

// SetTurn records the turn (the client's name for the calls that
// answer one message) of step n; [Store.UndoTurn] undoes a turn's
// steps.
func (s *Store) SetTurn(n int, turn string) {
	s.mu.lock()
	defer s.mu.unlock()
	for _, st := range s.steps {
		if st.n == n {
			st.turn = turn
		}
	}
}

// SetCanon sets how the store tells a file that changed only in ways
// that do not matter: canon returns a canonical form of the file at
// path, reading it with read, or "" for a path it does not know (then
// read is not called). A step does not keep a path whose canonical form
// its change left as it was (git's index after a stat refresh), and
// Undo takes a path whose canonical form is what the step left as
// unchanged.
func (s *Store) SetCanon(canon func(path string, read func() ([]byte, error)) string) {
	s.mu.lock()
	defer s.mu.unlock()
	s.canon = canon
}

// canonEntries records the canonical form of st's files as they are
// now, and drops from st the entries whose canonical form did not
// change. s.mu is held.
func (s *Store) canonEntries(st *step) {
	if s.canon == nil {
		return
	}
	st.entries = slices.DeleteFunc(st.entries, func(e *entry) bool {
		if !e.After.isRegular() {
			return false
		}
		path := e.path()
		e.Canon = s.canon(path, func() ([]byte, error) { return os.ReadFile(path) })
		if e.Canon == "" || e.Blob == "" || !e.Before.isRegular() {
			return false
		}
		blob := st.t.path(e.Blob)
		if s.canon(path, func() ([]byte, error) { return os.ReadFile(blob) }) != e.Canon {
			return false
		}
		st.bytes -= e.Before.Size
		return true
	})
}

// sameCanon reports whether e's path, which no newer step undone with
// it changed, has the canonical form e's step left.
func (u *undoer) sameCanon(t *tree, e *entry, expect map[string]print) bool {
	path := t.path(e.Rel)
	if _, ok := expect[path]; ok || e.Canon == "" || u.s.canon == nil {
		return false
	}
	return u.s.canon(path, func() ([]byte, error) { return os.ReadFile(path) }) == e.Canon
}

// UndoTurn undoes every kept step of turn, newest first, as one (as
// Undo: it refuses on a conflict, changing nothing, and stops at a path
// it cannot restore, keeping the rest). It fails wrapping
// ErrNothingToUndo when no kept step has that turn. ctx bounds its
// waits as Undo's.
func (s *Store) UndoTurn(ctx context.Context, turn string) ([]Change, error) {
	if err := s.mu.lockCtx(ctx, storeWait); err != nil {
		return nil, err
	}
	defer s.mu.unlock()
	var sel []*step
	for _, st := range s.steps {
		if st.turn == turn {
			sel = append(sel, st)
		}
	}
	if turn == "" || len(sel) == 0 {
		return nil, fmt.Errorf("%w: no kept step of turn %q", ErrNothingToUndo, turn)
	}
	return s.undo(ctx, sel, nil)
}

// TurnSteps returns the numbers of the kept steps of turn, oldest
// first.
func (s *Store) TurnSteps(turn string) []int {
	s.mu.lock()
	defer s.mu.unlock()
	var out []int
	for _, st := range s.steps {
		if st.turn == turn {
			out = append(out, st.n)
		}
	}
	return out
}

// PathsStep returns the number of the newest kept step that changed
// any of paths (absolute; a directory stands for what the step changed
// below it). It fails wrapping ErrNothingToUndo when none did, or that
// step did not change every one.
func (s *Store) PathsStep(paths []string) (int, error) {
	s.mu.lock()
	defer s.mu.unlock()
	st, err := s.pathsStep(paths)
	if err != nil {
		return 0, err
	}
	return st.n, nil
}

// picks reports whether e is at p or below it.
func picks(e *entry, p string) bool {
	ep := e.path()
	return ep == p || strings.HasPrefix(ep, strings.TrimSuffix(p, "/")+"/")
}

// pathsStep is PathsStep's step. s.mu is held.
func (s *Store) pathsStep(paths []string) (*step, error) {
	for i := len(s.steps) - 1; i >= 0; i-- {
		st := s.steps[i]
		var missing []string
		for _, p := range paths {
			if !slices.ContainsFunc(st.entries, func(e *entry) bool { return picks(e, p) }) {
				missing = append(missing, p)
			}
		}
		switch {
		case len(missing) == len(paths):
			continue
		case len(missing) > 0:
			return nil, fmt.Errorf("%w: step %d did not change %s", ErrNothingToUndo, st.n, strings.Join(missing, ", "))
		}
		return st, nil
	}
	for i := len(s.steps) - 1; i >= 0; i-- {
		for _, e := range s.steps[i].entries {
			for _, p := range paths {
				if _, ok := e.Tree[strings.TrimPrefix(p, e.path()+"/")]; ok && strings.HasPrefix(p, e.path()+"/") {
					return nil, fmt.Errorf("%w: step %d added %s with its new directory %s: undo the directory", ErrNothingToUndo, s.steps[i].n, p, e.path())
				}
			}
		}
	}
	return nil, fmt.Errorf("%w: no kept step changed %s", ErrNothingToUndo, strings.Join(paths, ", "))
}

// UndoPaths undoes, of the step PathsStep names, only what it changed
// at paths, as Undo (refusing on a conflict, stopping at a path it
// cannot restore); the step keeps the rest. It
// returns what it changed and the step's number. ctx bounds its waits
// as Undo's.
func (s *Store) UndoPaths(ctx context.Context, paths []string) ([]Change, int, error) {
	if err := s.mu.lockCtx(ctx, storeWait); err != nil {
		return nil, 0, err
	}
	defer s.mu.unlock()
	st, err := s.pathsStep(paths)
	if err != nil {
		return nil, 0, err
	}
	pick := func(e *entry) bool {
		return slices.ContainsFunc(paths, func(p string) bool { return picks(e, p) })
	}
	out, err := s.undo(ctx, []*step{st}, pick)
	return out, st.n, err
}

// RedoSteps returns the numbers of the steps Redo would put back.
func (s *Store) RedoSteps() []int {
	s.mu.lock()
	defer s.mu.unlock()
	if len(s.redo) == 0 {
		return nil
	}
	var out []int
	for _, st := range s.redo[len(s.redo)-1] {
		out = append(out, st.orig)
	}
	return out
}

// Redo takes back the last undo that is kept (every step it undid, as
// one, as Undo: it refuses with a *ConflictError, changing nothing,
// when a path is not as the undo left it), and keeps its steps again
// for Undo. Undos are kept until a new step is added (as in an
// editor), within the store's bounds. It fails wrapping
// ErrNothingToRedo when none is kept, and returns what it changed and
// the steps' numbers. ctx bounds its waits as Undo's (a redo that
// stopped waiting changed nothing, and is still kept). A redo that
// cannot put a path back stops there, as Undo does: what it put back
// is kept for Undo (under new numbers where a step was put back in
// part), and what it did not stays kept for Redo.
func (s *Store) Redo(ctx context.Context) ([]Change, []int, error) {
	if err := s.mu.lockCtx(ctx, storeWait); err != nil {
		return nil, nil, err
	}
	defer s.mu.unlock()
	if len(s.redo) == 0 {
		return nil, nil, ErrNothingToRedo
	}
	g := s.redo[len(s.redo)-1]
	out, back, done, err := s.revert(ctx, g, true)
	if len(done) == 0 {
		return nil, nil, err
	}
	rest := s.redoLeft(g, done)
	var ns []int
	for j, st := range back {
		switch src := g[len(g)-1-j]; {
		case slices.Contains(rest, src): // the rest of it stays for Redo
			s.seq++
			st.n = s.seq
		case !src.partial:
			st.n = src.orig // the step is back under its number
		}
		st.orig, st.partial = 0, false
		s.steps = append(s.steps, st)
		s.bytes += st.bytes
		ns = append(ns, st.n)
	}
	s.bound()
	return out, ns, err
}

// redoLeft keeps, of the last redo group g, the steps with entries
// that a redo did not restore (not in done), with those entries
// (partial then), and returns them; the group is forgotten when none
// is left.
func (s *Store) redoLeft(g []*step, done map[*entry]bool) []*step {
	var rest []*step
	for _, st := range g {
		left := slices.DeleteFunc(slices.Clone(st.entries), func(e *entry) bool { return done[e] })
		switch {
		case len(left) == 0:
			s.redoBytes -= st.bytes
			if !st.moved {
				s.drop(st)
			}
		case len(left) < len(st.entries):
			st.entries, st.partial = left, true
			fallthrough
		default:
			rest = append(rest, st)
		}
	}
	if len(rest) == 0 {
		s.redo = s.redo[:len(s.redo)-1]
	} else {
		s.redo[len(s.redo)-1] = rest
	}
	return rest
}

// dropRedoGroup forgets the redo group i.
func (s *Store) dropRedoGroup(i int) {
	for _, st := range s.redo[i] {
		s.redoBytes -= st.bytes
		if !st.moved {
			s.drop(st)
		}
	}
	s.redo = slices.Delete(s.redo, i, i+1)
}

// RedoBytes is what the undos kept for Redo keep, in bytes.
func (s *Store) RedoBytes() int64 {
	s.mu.lock()
	defer s.mu.unlock()
	return s.redoBytes
}

// dropRedo forgets every undo kept for Redo.
func (s *Store) dropRedo() {
	for len(s.redo) > 0 {
		s.dropRedoGroup(0)
	}
}
