package mcpserver

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// Turns through the official client: bash calls name their turn in
// _meta "bashvisor/turn", the change line says step and turn,
// bash_undo {turn} takes back the turn's three commands, bash_redo puts
// them back, bash_undo {paths} takes back one file, and a redo after a
// new change is refused.
func TestTurnsTool(t *testing.T) {
	needLandlock(t)
	testenv.Needf(t, testenv.Namespaces, sandbox.Probe().Namespaces, "no private namespaces: %s", sandbox.Probe())
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	s := newSetup(t, nil, Options{WorkingDir: dir, Sandbox: engine.Sandbox{Profile: engine.WorkspaceWrite}})
	ctx := context.Background()
	run := func(turn, cmd string) string {
		t.Helper()
		res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: toolBash, Arguments: map[string]any{"command": cmd}, Meta: mcp.Meta{metaTurn: turn}})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %s", cmd, err, text(res))
		}
		return text(res)
	}
	if out := run("t1", "echo 1 > a.txt"); !strings.Contains(out, "[changed 1 file: A a.txt] (step 1, turn t1)") {
		t.Errorf("change line: %q", out)
	}
	run("t2", "echo 1 > other.txt")
	run("t1", "echo 2 > a.txt && echo 1 > b.txt")
	run("t1", "echo 1 > c.txt")
	var u engine.UndoResult
	res, txt := call(t, ctx, s.cs, toolUndo, map[string]any{"turn": "t1"}, &u)
	validate(t, undoOutputSchema, res.StructuredContent)
	if res.IsError || u.Steps != 3 || fileExists(filepath.Join(dir, "a.txt")) || fileExists(filepath.Join(dir, "c.txt")) || !fileExists(filepath.Join(dir, "other.txt")) {
		t.Fatalf("undo of turn t1: %v %q %+v", res.IsError, txt, u)
	}
	if !strings.HasPrefix(txt, "[undid turn t1 (steps 1, 3, 4): changed 3 files: ") {
		t.Errorf("undo text: %q", txt)
	}
	res, txt = call(t, ctx, s.cs, toolRedo, map[string]any{}, nil)
	if res.IsError || !fileExists(filepath.Join(dir, "c.txt")) || !strings.HasPrefix(txt, "[redid steps 1, 3, 4: changed 3 files: ") {
		t.Fatalf("redo: %v %q", res.IsError, txt)
	}
	res, txt = call(t, ctx, s.cs, toolUndo, map[string]any{"paths": []string{"b.txt"}}, nil)
	if res.IsError || txt != "[undid b.txt of step 3: changed 1 file: D b.txt]" || fileExists(filepath.Join(dir, "b.txt")) || !fileExists(filepath.Join(dir, "a.txt")) {
		t.Fatalf("undo of b.txt: %v %q", res.IsError, txt)
	}
	run("t3", "echo 1 > z.txt")
	if res, txt := call(t, ctx, s.cs, toolRedo, map[string]any{}, nil); !res.IsError || !strings.HasPrefix(txt, "[error: nothing to undo: nothing to redo") {
		t.Errorf("redo after a new change: %v %q", res.IsError, txt)
	}
	for _, args := range []map[string]any{{"turn": "t1", "steps": 1}, {"paths": []string{}}, {"turn": ""}, {"paths": "a.txt"}} {
		if res, txt := call(t, ctx, s.cs, toolUndo, args, nil); !res.IsError || !strings.HasPrefix(txt, "[error: bad input: ") {
			t.Errorf("%v: %v %q", args, res.IsError, txt)
		}
	}
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: toolBash, Arguments: map[string]any{"command": "true"}, Meta: mcp.Meta{metaTurn: 7}})
	if err != nil || !res.IsError {
		t.Errorf("a turn that is not a string: %v %s", err, text(res))
	}
}
