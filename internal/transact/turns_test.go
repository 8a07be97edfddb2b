//go:build linux

package transact_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/layer"
	"github.com/bashvisor/bashvisor/internal/layer/layertest"
	"github.com/bashvisor/bashvisor/internal/transact"
)

// runTurn runs script as a command of turn.
func (f *fixture) runTurn(t *testing.T, script, turn string) *transact.Report {
	t.Helper()
	roots, err := transact.Roots(f.ws)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := f.c.Begin(roots, script)
	if err != nil {
		t.Fatal(err)
	}
	tx.SetTurn(turn)
	if out, err := layertest.Run(t, tx.Spec(), f.ws, f.env, script); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	rep, err := tx.Commit(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// staleStat makes README's stat data differ from the index's, its
// content the same, so that git status refreshes the index.
func (f *fixture) staleStat(t *testing.T) {
	t.Helper()
	old := time.Now().Add(-time.Duration(len(f.read("README"))+1) * time.Hour)
	if err := os.Chtimes(filepath.Join(f.ws, "README"), old, old); err != nil {
		t.Fatal(err)
	}
}

// TestStatusIsNoStep: a git status that only refreshes the index's stat
// data applies (the index is rewritten) but is no undo step, so undo
// takes back the edit before it; and after git add, git status and
// undo take back the add (the refreshed index is not "changed since").
func TestStatusIsNoStep(t *testing.T) {
	for _, tc := range []struct{ name, edit string }{
		{"edit", "echo e > e.txt"},
		{"add", "echo x > x.txt && git add x.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.staleStat(t)
			if rep := f.run(t, tc.edit); rep.Step == 0 {
				t.Fatalf("%s made no step", tc.edit)
			}
			index, _ := os.ReadFile(filepath.Join(f.ws, ".git/index"))
			f.staleStat(t)
			rep := f.run(t, "git status")
			if now, _ := os.ReadFile(filepath.Join(f.ws, ".git/index")); string(now) == string(index) {
				t.Fatalf("git status did not rewrite the index (applied %s)", kinds(f.ws, rep.Applied))
			}
			if rep.Step != 0 {
				t.Fatalf("git status made step %d (applied %s)", rep.Step, kinds(f.ws, rep.Applied))
			}
			undone, err := f.c.Undo(context.Background(), 1)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{"e.txt", "x.txt"} {
				if _, err := os.Stat(filepath.Join(f.ws, p)); err == nil {
					t.Errorf("%s still there after undo (undid %s)", p, kinds(f.ws, undone))
				}
			}
			out, err := exec.Command("git", "-C", f.ws, "diff", "--cached", "--name-only").CombinedOutput()
			if err != nil || len(out) > 0 {
				t.Errorf("staged after undo: %q %v", out, err)
			}
		})
	}
}

// TestUndoAfterHostStatus: a git status run outside the sandbox after
// git add refreshes the index; undo of the add takes it for unchanged.
func TestUndoAfterHostStatus(t *testing.T) {
	f := newFixture(t)
	f.run(t, "echo x > x.txt && git add x.txt")
	index, _ := os.ReadFile(filepath.Join(f.ws, ".git/index"))
	f.staleStat(t)
	f.git(t, "status")
	if now, _ := os.ReadFile(filepath.Join(f.ws, ".git/index")); string(now) == string(index) {
		t.Fatal("git status did not rewrite the index")
	}
	if _, err := f.c.Undo(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", f.ws, "diff", "--cached", "--name-only").CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("staged after undo: %q %v", out, err)
	}
}

// TestStatusThatStagesIsAStep: an index rewrite that changes an entry
// (git add of a file whose content changed) stays a step.
func TestStatusThatStagesIsAStep(t *testing.T) {
	f := newFixture(t)
	if rep := f.run(t, "echo more >> README && git add README"); rep.Step == 0 || !strings.Contains(kinds(f.ws, rep.Applied), ".git/index") {
		t.Fatalf("git add: step %d, applied %s", rep.Step, kinds(f.ws, rep.Applied))
	}
}

// TestTurnUndoRedo: three commands of one turn (another turn's between
// them) are undone as one; redo puts them back; a change after an undo
// drops it for redo.
func TestTurnUndoRedo(t *testing.T) {
	f := newFixture(t)
	f.runTurn(t, "echo 1 > a.txt", "t1")
	f.runTurn(t, "echo 1 > other.txt", "t2")
	f.runTurn(t, "echo 2 > a.txt && echo 1 > b.txt", "t1")
	if rep := f.runTurn(t, "mkdir d && echo 1 > d/c.txt", "t1"); rep.Turn != "t1" || rep.Step != 4 {
		t.Fatalf("report: step %d, turn %q", rep.Step, rep.Turn)
	}
	_, ns, err := f.c.Revert(context.Background(), transact.Selection{Turn: "t1"})
	if err != nil || len(ns) != 3 {
		t.Fatalf("undo turn: %v %v", ns, err)
	}
	for _, p := range []string{"a.txt", "b.txt", "d"} {
		if _, err := os.Stat(filepath.Join(f.ws, p)); err == nil {
			t.Errorf("%s still there", p)
		}
	}
	if f.read("other.txt") != "1\n" {
		t.Error("turn t2's file undone too")
	}
	if _, ns, err = f.c.Revert(context.Background(), transact.Selection{Redo: true}); err != nil || len(ns) != 3 || f.read("a.txt") != "2\n" || f.read("d/c.txt") != "1\n" {
		t.Fatalf("redo: %v %v a=%q", ns, err, f.read("a.txt"))
	}
	if _, ns, err = f.c.Revert(context.Background(), transact.Selection{Paths: []string{filepath.Join(f.ws, "b.txt")}}); err != nil || len(ns) != 1 || ns[0] != 3 {
		t.Fatalf("undo of b.txt: %v %v", ns, err)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "b.txt")); err == nil || f.read("a.txt") != "2\n" {
		t.Errorf("undo of b.txt: b.txt there %v, a.txt %q", err == nil, f.read("a.txt"))
	}
	f.runTurn(t, "echo 3 > z.txt", "t3")
	if _, _, err := f.c.Revert(context.Background(), transact.Selection{Redo: true}); !errors.Is(err, layer.ErrNothingToRedo) {
		t.Errorf("redo after a new change: %v", err)
	}
}
