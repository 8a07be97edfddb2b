//go:build linux

package layer_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/layer"
)

// TestRedo: undo then redo of a step of every kind of change leaves
// the workspace as the step left it, and undoing it again as it was
// before; two steps undone as one are redone as one.
func TestRedo(t *testing.T) {
	w := newWorld(t)
	w.write(t, kindsFiles)
	st := w.store(t, layer.StoreLimits{})
	before := snapshot(t, w.ws)
	w.step(t, st, kindsScript)
	after := snapshot(t, w.ws)
	w.step(t, st, "echo more >> mod.txt; echo q > q")
	last := snapshot(t, w.ws)
	check := func(what string, want map[string]string) {
		t.Helper()
		if d := diffSnapshots(want, snapshot(t, w.ws)); len(d) > 0 {
			t.Errorf("%s:\n%s", what, strings.Join(d, "\n"))
		}
	}
	if _, err := st.Undo(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	check("after undo", before)
	if ns := st.RedoSteps(); len(ns) != 2 {
		t.Fatalf("redo would put back %v", ns)
	}
	_, ns, err := st.Redo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	check("after redo", last)
	if len(ns) != 2 || ns[0] != 1 || ns[1] != 2 {
		t.Errorf("redo put back steps %v, want [1 2]", ns)
	}
	if _, _, err := st.Redo(context.Background()); !errors.Is(err, layer.ErrNothingToRedo) {
		t.Errorf("second redo: %v", err)
	}
	for i := range 3 { // what each undo and redo keeps is named apart
		if _, err := st.Undo(context.Background(), 2); err != nil {
			t.Fatalf("undo %d: %v", i, err)
		}
		check("after undo again", before)
		if _, _, err := st.Redo(context.Background()); err != nil {
			t.Fatalf("redo %d: %v", i, err)
		}
		check("after redo again", last)
	}
	if _, err := st.Undo(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	check("after undoing the redone last step", after)
	if _, err := st.Undo(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	check("after undoing the redone first step", before)
}

// TestRedoLostAfterNewStep: a step applied after an undo drops it for
// redo (as in an editor); a redo of a path changed since is refused.
func TestRedoLostAfterNewStep(t *testing.T) {
	w := newWorld(t)
	w.write(t, map[string]string{"a": "0"})
	st := w.store(t, layer.StoreLimits{})
	w.step(t, st, "echo 1 > a")
	if _, err := st.Undo(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	w.write(t, map[string]string{"a": "user"})
	var ce *layer.ConflictError
	if _, _, err := st.Redo(context.Background()); !errors.As(err, &ce) || w.read(t, "a") != "user" {
		t.Fatalf("redo over a changed path: %v, a = %q", err, w.read(t, "a"))
	}
	w.step(t, st, "echo 2 > b")
	if _, _, err := st.Redo(context.Background()); !errors.Is(err, layer.ErrNothingToRedo) {
		t.Fatalf("redo after a new step: %v", err)
	}
}

// TestUndoTurn: the steps of one turn are undone as one, though another
// turn's step lies between them, and not at all when one of its paths
// changed since.
func TestUndoTurn(t *testing.T) {
	w := newWorld(t)
	w.write(t, map[string]string{"a": "0", "b": "0", "c": "0"})
	st := w.store(t, layer.StoreLimits{})
	turn := func(script, name string) {
		res := w.step(t, st, script)
		st.SetTurn(res.Step, name)
	}
	turn("echo 1 > a", "t1")
	turn("echo 1 > c", "t2")
	turn("echo 1 > b; mkdir d; echo 1 > d/e", "t1")
	turn("echo 2 > a", "t1")
	if got := st.TurnSteps("t1"); len(got) != 3 {
		t.Fatalf("turn t1's steps: %v", got)
	}
	if _, err := st.UndoTurn(context.Background(), "t1"); err != nil {
		t.Fatal(err)
	}
	if w.read(t, "a") != "0" || w.read(t, "b") != "0" || w.exists("d") || w.read(t, "c") != "1\n" {
		t.Errorf("after undoing t1: a=%q b=%q d=%v c=%q", w.read(t, "a"), w.read(t, "b"), w.exists("d"), w.read(t, "c"))
	}
	if steps := st.Steps(); len(steps) != 1 || steps[0].Turn != "t2" {
		t.Errorf("kept %+v", steps)
	}
	if _, _, err := st.Redo(context.Background()); err != nil || w.read(t, "a") != "2\n" || w.read(t, "d/e") != "1\n" {
		t.Fatalf("redo of the turn: %v", err)
	}
	w.write(t, map[string]string{"b": "user"})
	var ce *layer.ConflictError
	if _, err := st.UndoTurn(context.Background(), "t1"); !errors.As(err, &ce) || w.read(t, "a") != "2\n" {
		t.Errorf("undo of a turn whose file changed since: %v (a=%q)", err, w.read(t, "a"))
	}
	if _, err := st.UndoTurn(context.Background(), "t9"); !errors.Is(err, layer.ErrNothingToUndo) {
		t.Errorf("undo of an unknown turn: %v", err)
	}
}

// TestUndoPaths: one step's chosen files are undone, the rest of the
// step stays (and can be undone later); redo puts the chosen ones back.
func TestUndoPaths(t *testing.T) {
	w := newWorld(t)
	w.write(t, map[string]string{"a": "0", "b": "0"})
	st := w.store(t, layer.StoreLimits{})
	w.step(t, st, "echo 1 > a; echo 1 > b; mkdir d; echo 1 > d/e; echo 1 > n")
	_, n, err := st.UndoPaths(context.Background(), []string{filepath.Join(w.ws, "a"), filepath.Join(w.ws, "d")})
	if err != nil || n != 1 {
		t.Fatalf("undo paths: step %d, %v", n, err)
	}
	if w.read(t, "a") != "0" || w.exists("d") || w.read(t, "b") != "1\n" || w.read(t, "n") != "1\n" {
		t.Errorf("after undoing a and d: a=%q d=%v b=%q", w.read(t, "a"), w.exists("d"), w.read(t, "b"))
	}
	if _, _, err := st.UndoPaths(context.Background(), []string{filepath.Join(w.ws, "b"), filepath.Join(w.ws, "zz")}); !errors.Is(err, layer.ErrNothingToUndo) || w.read(t, "b") != "1\n" {
		t.Errorf("undo of a path the step did not change: %v", err)
	}
	if _, _, err := st.Redo(context.Background()); err != nil || w.read(t, "a") != "1\n" || w.read(t, "d/e") != "1\n" {
		t.Fatalf("redo: %v", err)
	}
	if _, err := st.Undo(context.Background(), 2); err != nil || w.read(t, "a") != "0" || w.read(t, "b") != "0" || w.exists("n") || w.exists("d") {
		t.Errorf("undo of the rest and the redone paths: %v", err)
	}
	w.step(t, st, "mkdir n2 && echo 1 > n2/f")
	if _, _, err := st.UndoPaths(context.Background(), []string{filepath.Join(w.ws, "n2/f")}); !errors.Is(err, layer.ErrNothingToUndo) || !strings.Contains(err.Error(), "with its new directory") || !w.exists("n2/f") {
		t.Errorf("undo of a file of a new directory: %v", err)
	}
}
