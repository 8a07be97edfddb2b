package cluster_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/engine"
)

// TestTurnsThroughFront: a front forwards the turn of its runs and the
// undo's choice: the executor's change line names step and turn, an
// undo of a turn takes back its two commands there, a redo puts them
// back, an undo of one path takes back that file only, and a redo after
// a new change is refused.
func TestTurnsThroughFront(t *testing.T) {
	needWorkspaceWrite(t)
	if inFreshProcess(t) {
		return
	}
	_, c, dir := oneExecutor(t)
	dir, _ = filepath.EvalSymlinks(dir)
	ctx := context.Background()
	tcOf := func(turn string) engine.ToolContext {
		return engine.ToolContext{WorkingDir: dir, ConversationID: "turns", Turn: turn, Sandbox: engine.Sandbox{Profile: engine.WorkspaceWrite}}
	}
	run := func(turn, cmd string) string {
		t.Helper()
		r := c.Run(ctx, tcOf(turn), engine.Input{Command: cmd})
		if r.Status != engine.StatusOK {
			t.Fatalf("%s: %s %q", cmd, r.Status, r.Output)
		}
		return r.Output
	}
	exists := func(p string) bool { _, err := os.Stat(filepath.Join(dir, p)); return err == nil }
	if out := run("t1", "echo 1 > a.txt"); !strings.HasSuffix(out, "[changed 1 file: A a.txt] (step 1, turn t1)") {
		t.Errorf("change line: %q", out)
	}
	run("t1", "echo 1 > b.txt")
	tc := tcOf("")
	tc.UndoTurn = "t1"
	u, err := c.Undo(ctx, tc, 0)
	if err != nil || u.Turn != "t1" || len(u.StepNumbers) != 2 || exists("a.txt") || exists("b.txt") {
		t.Fatalf("undo of turn t1: %+v %v", u, err)
	}
	tc = tcOf("")
	tc.Redo = true
	if u, err = c.Undo(ctx, tc, 0); err != nil || !u.Redo || !exists("a.txt") || !exists("b.txt") {
		t.Fatalf("redo: %+v %v", u, err)
	}
	tc = tcOf("")
	tc.UndoPaths = []string{"a.txt"}
	if u, err = c.Undo(ctx, tc, 0); err != nil || exists("a.txt") || !exists("b.txt") || u.Text() != "[undid a.txt of step 1: changed 1 file: D a.txt]" {
		t.Fatalf("undo of a.txt: %q %v", u.Text(), err)
	}
	run("t2", "echo 1 > c.txt")
	tc = tcOf("")
	tc.Redo = true
	if _, err := c.Undo(ctx, tc, 0); !errors.Is(err, engine.ErrNothingToUndo) {
		t.Errorf("redo after a new change: %v", err)
	}
}
