//go:build linux

package layer_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/bashvisor/bashvisor/internal/layer"
	"github.com/bashvisor/bashvisor/internal/layer/layertest"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// ApplyCopies applies a running command's changes while it goes on over
// its layer: the real tree gets copies, the command keeps its files
// (and sees its own later writes), a second diff lists only what changed
// since, and the undo store keeps a step per checkpoint.
func TestApplyCopiesWhileRunning(t *testing.T) {
	w := newWorld(t)
	w.write(t, map[string]string{"a": "zero\n", "b": "gone soon\n", "keep": "k\n"})
	l := w.layer(t)
	st, err := layer.NewStore(filepath.Join(w.state, "undo"), layer.StoreLimits{})
	if err != nil {
		t.Fatal(err)
	}
	cmd := layertest.Command(t, l.Spec(), w.ws, w.env, `
		echo one > a; mkdir -p d/e; echo x > d/e/f; rm b; echo step1
		read _; cat a d/e/f; echo two > a; echo y > new; echo step2
		read _; cat a new; echo done`)
	in, out := testenv.Piped(t, cmd, "step1")
	next := func() string {
		t.Helper()
		if !out.Scan() {
			t.Fatalf("command ended early: %v", out.Err())
		}
		return out.Text()
	}
	checkpoint := func(want string) {
		t.Helper()
		s, err := l.Diff()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if got := w.kinds(s.Changes); got != want {
			t.Fatalf("changes:\n%s\nwant:\n%s", got, want)
		}
		res, err := s.ApplyCopies(context.Background(), nil, st, "checkpoint")
		if err != nil || len(res.Failed) > 0 {
			t.Fatalf("apply: %v %v", err, res.Failed)
		}
	}
	checkpoint("M a\nD b\nA d/\nA d/e/\nA d/e/f")
	if w.read(t, "a") != "one\n" || w.read(t, "d/e/f") != "x\n" || w.exists("b") {
		t.Fatal("first checkpoint not applied")
	}
	in.Write([]byte("\n"))
	for _, want := range []string{"one", "x", "step2"} {
		if got := next(); got != want {
			t.Fatalf("the command read %q, want %q: its files moved", got, want)
		}
	}
	checkpoint("M a\nA new")
	in.Write([]byte("\n"))
	for _, want := range []string{"two", "y", "done"} {
		if got := next(); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if w.read(t, "a") != "two\n" || w.read(t, "new") != "y\n" || w.read(t, "keep") != "k\n" {
		t.Fatal("second checkpoint not applied")
	}
	// The final diff (the command ended) has nothing left to apply.
	s, err := l.Diff()
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Changes) != 0 {
		t.Fatalf("after the checkpoints: %s", w.kinds(s.Changes))
	}
	s.Close()
	if n := len(st.Steps()); n != 2 {
		t.Fatalf("%d undo steps, want 2", n)
	}
	if _, err := st.Undo(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	if w.read(t, "a") != "zero\n" || w.read(t, "b") != "gone soon\n" || w.exists("new") || w.exists("d") {
		t.Fatal("undo of both checkpoints did not restore the tree")
	}
}
