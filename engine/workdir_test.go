package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/bashvisor/bashvisor/engine"
)

// TestRelativeWorkingDir: a relative WorkingDir is the engine's
// directory's, unrestricted and sandboxed alike (a sandboxed command
// starts in its namespaces, where a relative path was taken from their
// root: review8 saw "tmp" run in the conversation's own /tmp).
func TestRelativeWorkingDir(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(base, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(base)
	e := newEngine(t)
	for _, sb := range []engine.Sandbox{{}, {Profile: engine.ReadOnly}} {
		if sb.On() {
			needNamespaces(t)
		}
		tc := engine.ToolContext{WorkingDir: "tmp", ConversationID: "rel", Sandbox: sb}
		r := e.Run(context.Background(), tc, engine.Input{Command: "pwd"})
		if want := filepath.Join(base, "tmp") + "\n"; r.Status != engine.StatusOK || r.Output != want {
			t.Errorf("profile %q: %s %q, want %q", sb.Profile, r.Status, r.Output, want)
		}
	}
}
