package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
)

// TestTurns: three commands of turn t1 (one of turn t2 between them)
// say their step and turn in their change line and are undone as one;
// redo puts them back; one step's chosen file is undone alone; an undo
// is no longer redone after a new change; a read-only git status is no
// step, so undo after it takes back the edit before it.
func TestTurns(t *testing.T) {
	needNamespaces(t)
	e := newEngine(t)
	dir := repo(t)
	ctx := context.Background()
	run := func(turn, cmd string) engine.Result {
		t.Helper()
		tc := workspaceWrite(dir)
		tc.Turn = turn
		r := e.Run(ctx, tc, engine.Input{Command: cmd})
		if r.Status != engine.StatusOK {
			t.Fatalf("%s: %s %q", cmd, r.Status, r.Output)
		}
		return r
	}
	undo := func(set func(*engine.ToolContext)) (engine.UndoResult, error) {
		tc := workspaceWrite(dir)
		set(&tc)
		return e.Undo(ctx, tc, 0)
	}
	exists := func(p string) bool { _, err := os.Stat(filepath.Join(dir, p)); return err == nil }
	if r := run("t1", "echo 1 > a.txt"); !strings.HasSuffix(r.Output, "[changed 1 file: A a.txt] (step 1, turn t1)") {
		t.Errorf("change line: %q", r.Output)
	}
	run("t2", "echo 1 > other.txt")
	run("t1", "echo 2 > a.txt && echo 1 > b.txt")
	if r := run("t1", "mkdir d && echo 1 > d/c.txt"); !strings.HasSuffix(r.Output, "(step 4, turn t1)") {
		t.Errorf("change line: %q", r.Output)
	}
	u, err := undo(func(tc *engine.ToolContext) { tc.UndoTurn = "t1" })
	if err != nil || u.Steps != 3 || u.Turn != "t1" {
		t.Fatalf("undo of turn t1: %+v %v", u, err)
	}
	if exists("a.txt") || exists("b.txt") || exists("d") || !exists("other.txt") {
		t.Errorf("after undoing t1: %q", u.Text())
	}
	if !strings.HasPrefix(u.Text(), "[undid turn t1 (steps 1, 3, 4): changed ") {
		t.Errorf("undo text: %q", u.Text())
	}
	if u, err = undo(func(tc *engine.ToolContext) { tc.Redo = true }); err != nil || !exists("d/c.txt") || !exists("b.txt") {
		t.Fatalf("redo: %+v %v", u, err)
	}
	if !strings.HasPrefix(u.Text(), "[redid steps 1, 3, 4: changed ") {
		t.Errorf("redo text: %q", u.Text())
	}
	if u, err = undo(func(tc *engine.ToolContext) { tc.UndoPaths = []string{"b.txt"} }); err != nil || exists("b.txt") || !exists("a.txt") {
		t.Fatalf("undo of b.txt: %+v %v", u, err)
	}
	if u.Text() != "[undid b.txt of step 3: changed 1 file: D b.txt]" {
		t.Errorf("path undo text: %q", u.Text())
	}
	run("t3", "echo 1 > z.txt")
	if _, err := undo(func(tc *engine.ToolContext) { tc.Redo = true }); !errors.Is(err, engine.ErrNothingToUndo) {
		t.Errorf("redo after a new change: %v", err)
	}
	if _, err := undo(func(tc *engine.ToolContext) { tc.UndoTurn, tc.Redo = "t1", true }); !errors.Is(err, engine.ErrBadInput) {
		t.Errorf("two selections: %v", err)
	}
	run("t4", "echo e > e.txt")
	if err := os.Chtimes(filepath.Join(dir, "README"), oldTime, oldTime); err != nil {
		t.Fatal(err)
	}
	if r := run("t4", "git status --short"); strings.Contains(r.Output, "(step") {
		t.Errorf("git status made a step: %q", r.Output)
	}
	if u, err = e.Undo(ctx, workspaceWrite(dir), 1); err != nil || exists("e.txt") {
		t.Errorf("undo after git status: %q %v", u.Text(), err)
	}
}

// oldTime is a modification time no file of a test has: touching
// README with it leaves the index's stat data stale, which git status
// then refreshes.
var oldTime = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
