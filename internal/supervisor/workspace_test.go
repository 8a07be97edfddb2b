package supervisor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/jobs"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestConversationOwnsItsWorkspace: the supervisor's record of a
// conversation owns its transactions and undo store. A workspace-write
// job's change comes back in its outcome; a background job's change
// reaches the workspace at the conversation's next call (a checkpoint,
// with the job frozen through the handle it gave its transaction at
// launch) and its report is listed; Undo takes a step back; ending the
// conversation removes the store, so nothing is left to undo.
func TestConversationOwnsItsWorkspace(t *testing.T) {
	testenv.NeedsTool(t, "bash")
	s := newSupervisor(t)
	if !s.Layers() {
		testenv.Need(t, testenv.Namespaces, errors.New("no workspace layers on this host"))
	}
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	layered := func(script string, bg bool) jobs.Request {
		return jobs.Request{Conversation: "c", Script: script, Command: script, Display: script, Dir: ws, Background: bg,
			Timeout: time.Minute, Sandbox: &jobs.Profile{Workspace: true, Layer: true}}
	}
	fg, err := s.Start(context.Background(), layered("echo one > a.txt", false))
	if err != nil {
		t.Fatal(err)
	}
	o := <-fg.Done()
	if o.Changes.Err != nil || o.Changes.Report == nil || len(o.Changes.Report.Applied) != 1 {
		t.Fatalf("outcome's changes: %+v %v", o.Changes.Report, o.Changes.Err)
	}
	bg, err := s.Start(context.Background(), layered("echo two > b.txt; echo ready; sleep 60", true))
	if err != nil {
		t.Fatal(err)
	}
	waitOutput(t, bg.OutputFile, "ready")
	s.Checkpoint("c")
	if b, _ := os.ReadFile(filepath.Join(ws, "b.txt")); string(b) != "two\n" {
		t.Fatalf("after a checkpoint the workspace has b.txt %q", b)
	}
	if st := s.Jobs("c"); len(st) != 1 || st[0].Changes.Report == nil || len(st[0].Changes.Report.Applied) != 1 {
		t.Fatalf("the running job's listed changes: %+v", st)
	}
	if _, _, err := s.Undo(context.Background(), "c", 2); !errors.Is(err, ErrUndoLive) {
		t.Fatalf("undo of a running job's checkpoint: %v", err)
	}
	if _, ok, err := s.Kill(context.Background(), "c", bg.ID); !ok || err != nil {
		t.Fatalf("kill: %v %v", ok, err)
	}
	undone, kept, err := s.Undo(context.Background(), "c", 2)
	if err != nil || kept != 2 || len(undone.Report.Applied) != 2 {
		t.Fatalf("undo: kept %d %+v %v", kept, undone.Report, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "a.txt")); !os.IsNotExist(err) {
		t.Fatalf("a.txt after undo: %v", err)
	}
	if _, err := s.EndConversation(context.Background(), "c"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Undo(context.Background(), "c", 1); !errors.Is(err, ErrNothingToUndo) {
		t.Fatalf("undo after the conversation ended: %v", err)
	}
}
