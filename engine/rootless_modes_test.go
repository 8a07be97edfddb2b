package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/engine"
)

// changeList renders a result's changes as "T a/ A b" for messages and
// comparisons.
func changeList(r engine.Result) string {
	var s []string
	for _, c := range r.Changes {
		s = append(s, c.Kind+" "+c.Path)
	}
	return strings.Join(s, " ")
}

// TestChmodZeroDirRoundTrip: in workspace-write, `chmod 0 a` on a
// directory with files below it applies, the next command of the
// conversation runs (the engine reads the layer it owns whatever
// permissions the command left there: it failed before with "layer:
// open .../u0/a: permission denied" as an unprivileged user), and
// `chmod 755 a` gives the files back, as root and as an unprivileged
// user (.ci/unprivileged). An unprivileged engine cannot read the
// real a while it is mode 0, so gitpolicy's repository walk misses it
// and holds the last change for a person's review (rule git-walk,
// fail closed), which the test accepts.
func TestChmodZeroDirRoundTrip(t *testing.T) {
	needNamespaces(t)
	e := newEngine(t)
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	// Registered after TempDir, so it runs first: the directory can be
	// removed whatever step failed.
	t.Cleanup(func() { os.Chmod(filepath.Join(dir, "a"), 0o755) })
	tc := engine.ToolContext{WorkingDir: dir, ConversationID: "modes",
		Sandbox: engine.Sandbox{Profile: engine.WorkspaceWrite}}
	root := os.Geteuid() == 0
	steps := []struct{ cmd, out, changes string }{
		{`mkdir -p a/b && echo x > a/b/f`, "[changed 1 file: A a/b/f]", "A a/b/f"},
		{`chmod 0 a`, "[changed 1 file: T a/]", "T a/"},
		{`true`, "", ""},
		{`chmod 755 a && cat a/b/f`, "x\n[changed 1 file: T a/]", "T a/"},
	}
	for _, s := range steps {
		r := e.Run(context.Background(), tc, engine.Input{Command: s.cmd})
		if !root && strings.HasPrefix(s.cmd, "chmod 755") {
			reviewWalkHold(t, e, tc, r)
			break
		}
		if r.Status != engine.StatusOK || r.Output != s.out || changeList(r) != s.changes {
			t.Fatalf("%s: %s %q changes %q, want ok %q changes %q", s.cmd, r.Status, r.Output, changeList(r), s.out, s.changes)
		}
		if s.cmd == `chmod 0 a` {
			if fi, err := os.Lstat(filepath.Join(dir, "a")); err != nil || fi.Mode() != os.ModeDir {
				t.Fatalf("after chmod 0 a: %v %v", fi.Mode(), err)
			}
		}
	}
	fi, err := os.Lstat(filepath.Join(dir, "a"))
	if err != nil || fi.Mode() != os.ModeDir|0o755 {
		t.Fatalf("a: %v %v", fi.Mode(), err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a", "b", "f")); string(b) != "x\n" {
		t.Fatalf("a/b/f: %q %v", b, err)
	}
}

// reviewWalkHold checks that r, the result of an unprivileged engine's
// `chmod 755 a && cat a/b/f` over a mode 0 a, ran and had its change
// held by gitpolicy's walk (which could not read a), and accepts it.
func reviewWalkHold(t *testing.T, e *engine.Engine, tc engine.ToolContext, r engine.Result) {
	t.Helper()
	if r.Status != engine.StatusOK || !strings.HasPrefix(r.Output, "x\n[refused a (git-walk): ") || r.Changes != nil {
		t.Fatalf("chmod 755 a: %s %q changes %q, want the change held by git-walk", r.Status, r.Output, changeList(r))
	}
	hs, err := e.Held(context.Background(), tc)
	if err != nil || len(hs) != 1 {
		t.Fatalf("held: %+v %v", hs, err)
	}
	r, err = e.Review(context.Background(), tc, hs[0].ID, hs[0].Digest, true)
	if err != nil || changeList(r) != "T a/" {
		t.Fatalf("accept: %q changes %q %v", r.Output, changeList(r), err)
	}
}
