//go:build linux

package layer_test

import (
	"os"
	"path/filepath"
	"testing"
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
		if err := s.Rewrite(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"gone", "same", "nothing"} {
		if err := s.Rewrite(filepath.Join(w.ws, p), []byte("x")); err == nil {
			t.Errorf("%s rewritten", p)
		}
	}
	for _, c := range s.Changes {
		if c.Path == a && c.Size != int64(len("rewritten a, longer than before\n")) {
			t.Errorf("a's change says %d bytes", c.Size)
		}
	}
	res, err := s.Apply(nil, nil, "")
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
