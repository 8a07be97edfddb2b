package mcpserver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// bash_undo through the official client: the change report in the bash
// result's structured content, the undo's text and structured content,
// a named conversation's undo that cannot reach another conversation's
// commands, the conflict refusal, bad arguments.
func TestUndoTool(t *testing.T) {
	needLandlock(t)
	testenv.Needf(t, testenv.Namespaces, sandbox.Probe().Namespaces, "no private namespaces: %s", sandbox.Probe())
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	s := newSetup(t, nil, Options{WorkingDir: dir, Sandbox: engine.Sandbox{Profile: engine.WorkspaceWrite}})
	ctx := context.Background()
	r := bash(t, ctx, s.cs, map[string]any{"command": "echo one > a.txt && echo b > b.txt"})
	if r.Status != engine.StatusOK || !strings.HasSuffix(r.Output, "[changed 2 files: A a.txt, A b.txt]") ||
		len(r.Changes) != 2 || r.Changes[0] != (engine.Change{Path: "a.txt", Kind: "A", Size: 4}) {
		t.Fatalf("%s %q %+v", r.Status, r.Output, r.Changes)
	}
	// Another conversation of the same client changes a.txt later; its
	// undo takes back only its own command.
	other := mcp.Meta{metaConversation: "other"}
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: toolBash, Arguments: map[string]any{"command": "echo two > c.txt"}, Meta: other})
	if err != nil || res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	res, err = s.cs.CallTool(ctx, &mcp.CallToolParams{Name: toolUndo, Arguments: map[string]any{}, Meta: other})
	if err != nil || res.IsError || !strings.Contains(text(res), "D c.txt") {
		t.Fatalf("the other conversation's undo: %v %s", err, text(res))
	}
	if !fileExists(filepath.Join(dir, "a.txt")) || fileExists(filepath.Join(dir, "c.txt")) {
		t.Fatal("the other conversation's undo reached the wrong command")
	}
	var u engine.UndoResult
	res, txt := call(t, ctx, s.cs, toolUndo, map[string]any{"steps": 1}, &u)
	validate(t, undoOutputSchema, res.StructuredContent)
	if res.IsError || txt != "[undid the last command: changed 2 files: D a.txt, D b.txt]" || u.Steps != 1 || len(u.Changes) != 2 {
		t.Fatalf("%v %q %+v", res.IsError, txt, u)
	}
	if fileExists(filepath.Join(dir, "a.txt")) {
		t.Fatal("a.txt is still there")
	}
	// A conflict: the user changed the file after the command.
	bash(t, ctx, s.cs, map[string]any{"command": "echo three > a.txt"})
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("mine\n"), 0o644)
	res, txt = call(t, ctx, s.cs, toolUndo, map[string]any{}, nil)
	if !res.IsError || !strings.HasPrefix(txt, "[error: undo refused: "+filepath.Join(dir, "a.txt")+" changed after") {
		t.Fatalf("conflict: %v %q", res.IsError, txt)
	}
	for _, args := range []map[string]any{{"steps": 0}, {"steps": "1"}, {"step": 1}} {
		if res, txt := call(t, ctx, s.cs, toolUndo, args, nil); !res.IsError || !strings.HasPrefix(txt, "[error: bad input: ") {
			t.Errorf("%v: %v %q", args, res.IsError, txt)
		}
	}
	if res, txt := call(t, ctx, s.cs, toolUndo, map[string]any{"steps": 9}, nil); !res.IsError || !strings.HasPrefix(txt, "[error: nothing to undo: ") {
		t.Errorf("too many: %q", txt)
	}
}

func text(res *mcp.CallToolResult) string {
	if res == nil || len(res.Content) == 0 {
		return ""
	}
	if t, ok := res.Content[0].(*mcp.TextContent); ok {
		return t.Text
	}
	return ""
}

func fileExists(p string) bool { _, err := os.Lstat(p); return err == nil }
