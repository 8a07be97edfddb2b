//go:build linux

package layer_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/bashvisor/bashvisor/internal/layer/layertest"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestRewrite: a rewritten change applies with the new content, its
// mode and modification time kept, its Size following; a path the
// command removed or did not change cannot be rewritten.
func TestRewrite(t *testing.T) {
	w := newWorld(t)
	w.write(t, map[string]string{"m": "old\n", "gone": "x", "same": "s"})
	_, s := w.run(t, "printf 'from the command\\n' > m && printf new > a && chmod 0750 a && touch -d 2021-01-01 a && rm gone")
	a := filepath.Join(w.ws, "a")
	for path, content := range map[string]string{filepath.Join(w.ws, "m"): "rewritten m\n", a: "rewritten a, longer than before\n"} {
		if err := s.Rewrite(path, []byte(content), true); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"gone", "same", "nothing"} {
		if err := s.Rewrite(filepath.Join(w.ws, p), []byte("x"), true); err == nil {
			t.Errorf("%s rewritten", p)
		}
	}
	for _, c := range s.Changes {
		if c.Path == a && c.Size != int64(len("rewritten a, longer than before\n")) {
			t.Errorf("a's change says %d bytes", c.Size)
		}
	}
	res, err := s.Apply(context.Background(), nil, nil, "")
	if err != nil || len(res.Failed) > 0 {
		t.Fatal(err, res.Failed)
	}
	if got := w.read(t, "m"); got != "rewritten m\n" {
		t.Errorf("m: %q", got)
	}
	if got := w.read(t, "a"); got != "rewritten a, longer than before\n" {
		t.Errorf("a: %q", got)
	}
	fi, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o750 || fi.ModTime().Year() != 2021 {
		t.Errorf("a: mode %v, modified %v", fi.Mode(), fi.ModTime())
	}
}

// TestRewriteWhileRunning: a change rewritten before ApplyCopies (a
// checkpoint of a job that still runs over the layer) puts the rewrite
// in the real tree, with the upper file's mode and modification time,
// and leaves the job its own file; the next Diff lists the file again.
func TestRewriteWhileRunning(t *testing.T) {
	w := newWorld(t)
	w.write(t, map[string]string{"a": "zero\n"})
	l := w.layer(t)
	cmd := layertest.Command(t, l.Spec(), w.ws, w.env, `echo mine > a; chmod 0640 a; touch -d 2021-01-01 a; echo step1; read _; cat a`)
	in, out := testenv.Piped(t, cmd, "step1")
	s, err := l.Diff()
	if err != nil {
		t.Fatal(err)
	}
	a := filepath.Join(w.ws, "a")
	if err := s.Rewrite(a, []byte("rewritten\n"), false); err != nil {
		t.Fatal(err)
	}
	if b, err := s.ReadFile(a, true, 100); err != nil || string(b) != "rewritten\n" {
		t.Errorf("the set reads a as %q (%v)", b, err)
	}
	res, err := s.ApplyCopies(context.Background(), nil, nil, "")
	if err != nil || len(res.Failed) > 0 {
		t.Fatal(err, res.Failed)
	}
	s.Close()
	if got := w.read(t, "a"); got != "rewritten\n" {
		t.Errorf("a in the workspace: %q", got)
	}
	if fi, err := os.Stat(a); err != nil || fi.Mode().Perm() != 0o640 || fi.ModTime().Year() != 2021 {
		t.Errorf("a: %v", fi)
	}
	_, _ = in.Write([]byte("\n"))
	if !out.Scan() || out.Text() != "mine" {
		t.Errorf("the command reads a as %q: its file was rewritten", out.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	s, err = l.Diff()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := w.kinds(s.Changes); got != "M a" {
		t.Errorf("after the checkpoint: %q", got)
	}
}
