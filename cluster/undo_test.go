package cluster_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/cluster"
	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// needWorkspaceWrite skips without Landlock and private namespaces (the
// executors' engines run workspace-write commands with them), and fails
// instead when REQUIRE_LANDLOCK=1 or REQUIRE_NAMESPACES=1 (CI).
func needWorkspaceWrite(t *testing.T) {
	t.Helper()
	c := sandbox.Probe()
	testenv.Needf(t, testenv.Landlock, c.Available(), "restricted mode unavailable: %s", c)
	testenv.Needf(t, testenv.Namespaces, c.Namespaces, "no private namespaces for sandboxed commands: %s", c)
}

// undoSide is one side of TestUndoThroughFront: a runner that undoes and
// its working directory.
type undoSide struct {
	r interface {
		engine.Runner
		Undo(context.Context, engine.ToolContext, int) (engine.UndoResult, error)
	}
	dir string
}

// TestUndoThroughFront: a workspace-write command through a front
// changes the workspace on the executor; Undo through the front takes it
// back; a second Undo has nothing to undo; a file changed since is a
// conflict, refused with its path and changing nothing. Each answer —
// result, text, error text and kind — is what a local engine answers for
// the same calls in a directory of its own.
func TestUndoThroughFront(t *testing.T) {
	needWorkspaceWrite(t)
	if inFreshProcess(t) {
		return
	}
	_, c, fdir := oneExecutor(t)
	local, err := engine.New(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = local.Shutdown(context.Background()) })
	ctx := context.Background()
	sides := []undoSide{{c, fdir}, {local, t.TempDir()}}
	for i := range sides {
		sides[i].dir, _ = filepath.EvalSymlinks(sides[i].dir)
		if err := os.WriteFile(filepath.Join(sides[i].dir, "a.txt"), []byte("orig\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tcOf := func(s undoSide, conv string) engine.ToolContext {
		return engine.ToolContext{WorkingDir: s.dir, ConversationID: conv, Sandbox: engine.Sandbox{Profile: engine.WorkspaceWrite}}
	}
	read := func(s undoSide, name string) string {
		b, err := os.ReadFile(filepath.Join(s.dir, name))
		if err != nil {
			return "(" + err.Error() + ")"
		}
		return string(b)
	}
	type answer struct {
		u   engine.UndoResult
		err error
	}
	undo := func(conv string, steps int) [2]answer {
		var out [2]answer
		for i, s := range sides {
			out[i].u, out[i].err = s.r.Undo(ctx, tcOf(s, conv), steps)
		}
		return out
	}
	run := func(conv, command string) {
		t.Helper()
		var rs [2]engine.Result
		for i, s := range sides {
			rs[i] = s.r.Run(ctx, tcOf(s, conv), engine.Input{Command: command})
		}
		if rs[0].Status != engine.StatusOK || rs[0].Output != rs[1].Output || !reflect.DeepEqual(rs[0].Changes, rs[1].Changes) {
			t.Fatalf("%q: front %s %q %+v; local %s %q %+v", command, rs[0].Status, rs[0].Output, rs[0].Changes, rs[1].Status, rs[1].Output, rs[1].Changes)
		}
	}
	const conv = "undo"

	run(conv, "echo new > a.txt && echo b > b.txt")
	if got := read(sides[0], "a.txt") + read(sides[0], "b.txt"); got != "new\nb\n" {
		t.Fatalf("the command through the front did not change the workspace: %q", got)
	}
	a := undo(conv, 1)
	if a[0].err != nil || a[1].err != nil {
		t.Fatalf("undo: front %v, local %v", a[0].err, a[1].err)
	}
	if !reflect.DeepEqual(a[0].u, a[1].u) || a[0].u.Text() != "[undid the last command: changed 2 files: M a.txt, D b.txt]" ||
		a[0].u.Steps != 1 || len(a[0].u.Changes) != 2 {
		t.Fatalf("undo: front %+v, local %+v", a[0].u, a[1].u)
	}
	if got := read(sides[0], "a.txt"); got != "orig\n" || !strings.HasPrefix(read(sides[0], "b.txt"), "(") {
		t.Fatalf("after undo through the front: a.txt %q, b.txt %q", got, read(sides[0], "b.txt"))
	}

	// Nothing left: the sentinel, the engine's words.
	a = undo(conv, 1)
	if !errors.Is(a[0].err, engine.ErrNothingToUndo) || a[1].err == nil || a[0].err.Error() != a[1].err.Error() {
		t.Fatalf("second undo: front %v, local %v", a[0].err, a[1].err)
	}
	// A conversation that ran nothing anywhere: the same.
	if a = undo("never-ran", 2); !errors.Is(a[0].err, engine.ErrNothingToUndo) || a[1].err == nil || a[0].err.Error() != a[1].err.Error() {
		t.Fatalf("undo of a conversation that never ran: front %v, local %v", a[0].err, a[1].err)
	}
	if a = undo(conv, 0); !errors.Is(a[0].err, engine.ErrBadInput) || a[1].err == nil || a[0].err.Error() != a[1].err.Error() {
		t.Fatalf("steps 0: front %v, local %v", a[0].err, a[1].err)
	}

	// A conflict: the user changed the file after the command.
	run(conv, "echo three > a.txt")
	for _, s := range sides {
		if err := os.WriteFile(filepath.Join(s.dir, "a.txt"), []byte("mine\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a = undo(conv, 1)
	var ce *engine.UndoConflictError
	if !errors.As(a[0].err, &ce) || !errors.Is(a[0].err, engine.ErrUndoConflict) ||
		!reflect.DeepEqual(ce.Paths, []string{filepath.Join(sides[0].dir, "a.txt")}) {
		t.Fatalf("conflict through the front: %#v", a[0].err)
	}
	if a[1].err == nil || a[0].err.Error() != strings.ReplaceAll(a[1].err.Error(), sides[1].dir, sides[0].dir) {
		t.Fatalf("conflict: front %q, local %v", a[0].err, a[1].err)
	}
	if got := read(sides[0], "a.txt"); got != "mine\n" {
		t.Fatalf("a refused undo changed a.txt: %q", got)
	}
}

// TestUndoTwoFronts: the front that undoes need not be the one that ran
// the command: front B, which never saw the conversation, finds the
// executor that holds it and undoes there what front A's command
// changed.
func TestUndoTwoFronts(t *testing.T) {
	needWorkspaceWrite(t)
	if inFreshProcess(t) {
		return
	}
	mark := t.Name()
	ex := startExecutor(t, execSpec{name: "exec-1", mark: mark})
	t.Cleanup(func() { ex.stop(); waitNoLeftovers(t, mark) })
	env := []string{"BV_EXECUTORS=" + ex.addr, "BV_WAIT=1", "BV_KEEP=1"}
	a, b := startFront(t, "A", env...), startFront(t, "B", env...)
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	const conv = "undo-two"
	r := a.do(frontRequest{Op: "run", Conv: conv, Dir: dir, Command: "echo a > a.txt", Profile: engine.WorkspaceWrite}).Result
	if r.Status != engine.StatusOK || !strings.HasSuffix(r.Output, "[changed 1 file: A a.txt]") {
		t.Fatalf("through A: %s %q", r.Status, r.Output)
	}
	u := b.do(frontRequest{Op: "undo", Conv: conv, Dir: dir, N: 1})
	if u.Err != "" || u.Text != "[undid the last command: changed 1 file: D a.txt]" || u.Undo.Steps != 1 ||
		!reflect.DeepEqual(u.Undo.Changes, []engine.Change{{Path: "a.txt", Kind: "D", Size: 2}}) {
		t.Fatalf("undo through B: %+v", u)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a.txt after the undo through B: %v", err)
	}
	if u := a.do(frontRequest{Op: "undo", Conv: conv, Dir: dir, N: 1}); !strings.HasPrefix(u.Err, "nothing to undo: 1 step asked for, 0 kept") {
		t.Fatalf("undo again through A: %+v", u)
	}
}

// TestUndoLostExecutor: the undo store of a conversation is on its
// executor; once the front declared that executor lost (frozen by
// SIGSTOP here), there is nothing to undo, and the error says why.
func TestUndoLostExecutor(t *testing.T) {
	needWorkspaceWrite(t)
	if inFreshProcess(t) {
		return
	}
	ex, c, dir := oneExecutor(t)
	dir, _ = filepath.EvalSymlinks(dir)
	tc := engine.ToolContext{WorkingDir: dir, ConversationID: "lost", Sandbox: engine.Sandbox{Profile: engine.WorkspaceWrite}}
	if r := c.Run(context.Background(), tc, engine.Input{Command: "echo a > a.txt"}); r.Status != engine.StatusOK {
		t.Fatalf("%s %q", r.Status, r.Output)
	}
	ex.signal(syscall.SIGSTOP)
	var err error
	// Until the front declared it lost, an undo waits for it and answers
	// that it is lost; then the conversation runs nowhere.
	testenv.Eventually(t, 20*time.Second, func() bool {
		_, err = c.Undo(context.Background(), tc, 1)
		return errors.Is(err, engine.ErrNothingToUndo)
	}, "undo on a frozen executor: %v", testenv.Last(&err))
	if !errors.Is(err, cluster.ErrExecutorLost) || !strings.Contains(err.Error(), "executor exec-1 kept them and stopped answering") {
		t.Errorf("undo after the loss: %v", err)
	}
	ex.signal(syscall.SIGCONT)
	select {
	case <-ex.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("the frozen executor did not fence and exit after SIGCONT\n%s", ex.stderr)
	}
}
