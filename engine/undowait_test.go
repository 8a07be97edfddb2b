//go:build linux

package engine_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestCancelledUndoStopsWaitingForApply: while another engine process
// applies to the workspace (it holds the apply lock, for the 10 minutes
// an undo waits at most), an undo whose context ends (a cancelled
// bash_undo, a call timing out) returns then with the context's error,
// having changed nothing; once the other process let go, the undo
// succeeds.
func TestCancelledUndoStopsWaitingForApply(t *testing.T) {
	needNamespaces(t)
	e := newEngine(t)
	dir := repo(t)
	tc := workspaceWrite(dir)
	if r := e.Run(context.Background(), tc, engine.Input{Command: "echo new > new.txt"}); r.Status != engine.StatusOK {
		t.Fatalf("%s %q", r.Status, r.Output)
	}
	holder := exec.Command(os.Args[0], "-test.run=^TestCancelledCallStopsWaitingForApply$")
	holder.Env = append(os.Environ(), applyLockHolderEnv+"="+dir)
	holder.Stderr = os.Stderr
	stdin, _ := testenv.Piped(t, holder, "locked")

	start := time.Now() // before the deadline is set: it ends 1 s after this
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := e.Undo(ctx, tc, 1)
	if took := time.Since(start); took < time.Second || took > time.Minute {
		t.Errorf("the undo stopped waiting after %v with a 1 s context", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want the context's error", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "new.txt")); err != nil || string(b) != "new\n" {
		t.Errorf("the undo that stopped waiting changed new.txt: %q %v", b, err)
	}
	_ = stdin.Close()
	if err := holder.Wait(); err != nil {
		t.Fatalf("the holder: %v", err)
	}
	u, err := e.Undo(context.Background(), tc, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "new.txt")); err == nil || u.Text() != "[undid the last command: changed 1 file: D new.txt]" {
		t.Errorf("undo once free: new.txt still there (%v), %q", err, u.Text())
	}
}
