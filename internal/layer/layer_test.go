//go:build linux

package layer_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/layer"
)

// TestDiffKinds runs a command that makes every kind of change and
// checks the change set computed from the upper layer.
func TestDiffKinds(t *testing.T) {
	w := newWorld(t)
	w.write(t, map[string]string{
		"mod.txt": "old", "del.txt": "x", "chmod.sh": "echo", "same.txt": "same",
		"touch.txt": "t", "typ": "file", "gone/a": "a", "gone/b/c": "c",
		"refill/keep": "k", "refill/drop": "d", "link": "DIR", "sub/deep/f": "f",
	})
	if err := os.Symlink("mod.txt", filepath.Join(w.ws, "link/l")); err != nil {
		t.Fatal(err)
	}
	_, s := w.run(t, `set -e
echo new >> mod.txt; rm del.txt; chmod +x chmod.sh; : >> same.txt; touch -d '2001-01-01' touch.txt
rm typ; mkdir typ; echo in > typ/f; rm -r gone; rm -r refill; mkdir refill; echo k2 > refill/keep
ln -sfn del.txt link/l; mkdir -p new/a/b; echo n > new/a/b/f; ln -s x sym; mkfifo fifo; echo d > sub/deep/g`)
	want := `T chmod.sh
D del.txt
A fifo
D gone/
M link/l
M mod.txt
A new/
A new/a/
A new/a/b/
A new/a/b/f
D refill/drop
M refill/keep
A sub/deep/g
A sym
M touch.txt
T typ/
A typ/f`
	if got := w.kinds(s.Changes); got != want {
		t.Errorf("changes:\n%s\nwant:\n%s", got, want)
	}
}

// kindsScript makes every kind of change (see TestDiffKinds).
const kindsScript = `set -e
echo new >> mod.txt; rm del.txt; chmod +x chmod.sh; : >> same.txt; touch -d '2001-01-01' touch.txt
rm typ; mkdir typ; echo in > typ/f; rm -r gone; rm -r refill; mkdir refill; echo k2 > refill/keep
ln -sfn del.txt link/l; mkdir -p new/a/b; echo n > new/a/b/f; ln -s x sym; mkfifo fifo; echo d > sub/deep/g
mkdir -m 700 private; echo p > private/p; chmod 600 private/p`

var kindsFiles = map[string]string{
	"mod.txt": "old", "del.txt": "x", "chmod.sh": "echo", "same.txt": "same",
	"touch.txt": "t", "typ": "file", "gone/a": "a", "gone/b/c": "c",
	"refill/keep": "k", "refill/drop": "d", "link": "DIR", "sub/deep/f": "f",
}

// snapshot describes every entry below dir: type, permissions, size,
// modification time of files, content or symlink target.
func snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		desc := fi.Mode().String()
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" %d %q", fi.ModTime().UnixNano(), b)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// diffSnapshots lists the entries that differ.
func diffSnapshots(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, fmt.Sprintf("%s: %q != %q", k, v, b[k]))
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			out = append(out, fmt.Sprintf("%s: missing != %q", k, v))
		}
	}
	slices.Sort(out)
	return out
}

// sameAsUnsandboxed runs script in a copy of the workspace without a
// layer, and returns that copy's snapshot (dir mtimes aside).
func sameAsUnsandboxed(t *testing.T, files map[string]string, setup, script string) map[string]string {
	t.Helper()
	ref := newWorld(t)
	ref.write(t, files)
	runPlain(t, ref, setup)
	runPlain(t, ref, script)
	return snapshot(t, ref.ws)
}

func runPlain(t testing.TB, w *world, script string) {
	t.Helper()
	if script == "" {
		return
	}
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir, cmd.Env = w.ws, w.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
}

// TestApply applies every kind of change and compares the workspace
// with one where the command ran without a layer.
func TestApply(t *testing.T) {
	for _, store := range []bool{false, true} {
		t.Run(fmt.Sprint("store=", store), func(t *testing.T) {
			w := newWorld(t)
			w.write(t, kindsFiles)
			// Timestamps must match the reference run's: use fixed ones.
			script := kindsScript + "; touch -d '2002-02-02' mod.txt chmod.sh refill/keep typ/f new/a/b/f sub/deep/g private/p"
			want := sameAsUnsandboxed(t, kindsFiles, "", script)
			_, s := w.run(t, script)
			var st *layer.Store
			if store {
				var err error
				if st, err = layer.NewStore(filepath.Join(w.state, "undo"), layer.StoreLimits{}); err != nil {
					t.Fatal(err)
				}
			}
			res, err := s.Apply(context.Background(), nil, st, "kinds")
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Failed) > 0 {
				t.Fatalf("failed: %v", res.Failed)
			}
			if len(res.Applied) != len(s.Changes) {
				t.Errorf("applied %d of %d changes", len(res.Applied), len(s.Changes))
			}
			if d := diffSnapshots(want, snapshot(t, w.ws)); len(d) > 0 {
				t.Errorf("workspace differs from an unsandboxed run:\n%s", strings.Join(d, "\n"))
			}
			if (res.Step != 0) != store {
				t.Errorf("step %d with store=%v", res.Step, store)
			}
			// No overlayfs mark reached the workspace.
			_ = filepath.WalkDir(w.ws, func(p string, d fs.DirEntry, err error) error {
				if x := ovlXattrs(p); len(x) > 0 {
					t.Errorf("%s carries %v", p, x)
				}
				return nil
			})
		})
	}
}

// ovlXattrs lists the overlayfs xattrs of p.
func ovlXattrs(p string) []string {
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(p, buf)
	if err != nil || n <= 0 {
		return nil
	}
	var out []string
	for _, x := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
		if strings.Contains(x, ".overlay.") {
			out = append(out, x)
		}
	}
	return out
}

// TestUndo applies every kind of change, undoes it, and finds the
// workspace as it was.
func TestUndo(t *testing.T) {
	w := newWorld(t)
	w.write(t, kindsFiles)
	if err := os.Symlink("mod.txt", filepath.Join(w.ws, "link/l")); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, w.ws)
	st, err := layer.NewStore(filepath.Join(w.state, "undo"), layer.StoreLimits{})
	if err != nil {
		t.Fatal(err)
	}
	_, s := w.run(t, kindsScript)
	if _, err := s.Apply(context.Background(), nil, st, "kinds"); err != nil {
		t.Fatal(err)
	}
	after := snapshot(t, w.ws)
	if len(diffSnapshots(before, after)) == 0 {
		t.Fatal("nothing was applied")
	}
	undone, err := st.Undo(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffSnapshots(before, snapshot(t, w.ws)); len(d) > 0 {
		t.Errorf("after undo the workspace differs:\n%s", strings.Join(d, "\n"))
	}
	if len(undone) == 0 {
		t.Error("Undo reported nothing")
	}
	if len(st.Steps()) != 0 {
		t.Errorf("steps left: %v", st.Steps())
	}
	if _, err := st.Undo(context.Background(), 1); !errors.Is(err, layer.ErrNothingToUndo) {
		t.Errorf("second undo: %v", err)
	}
}

// TestView checks the before and after lookups that policy uses against
// the real tree before the command and an unsandboxed run of it.
func TestView(t *testing.T) {
	w := newWorld(t)
	w.write(t, kindsFiles)
	ref := newWorld(t)
	ref.write(t, kindsFiles)
	runPlain(t, ref, kindsScript)
	_, s := w.run(t, kindsScript)
	for _, after := range []bool{false, true} {
		dir := w.ws
		if after {
			dir = ref.ws
		}
		want := snapshot(t, dir)
		for rel := range want {
			if rel == "." {
				continue
			}
			fi, err := s.Lstat(filepath.Join(w.ws, rel), after)
			if err != nil {
				t.Errorf("after=%v %s: %v", after, rel, err)
				continue
			}
			real, _ := os.Lstat(filepath.Join(dir, rel))
			if fi.Mode() != real.Mode() {
				t.Errorf("after=%v %s: mode %v, want %v", after, rel, fi.Mode(), real.Mode())
			}
			if fi.Mode().IsRegular() {
				b, err := s.ReadFile(filepath.Join(w.ws, rel), after, 1<<20)
				wb, _ := os.ReadFile(filepath.Join(dir, rel))
				if err != nil || string(b) != string(wb) {
					t.Errorf("after=%v %s: %q, %v; want %q", after, rel, b, err, wb)
				}
			}
			if fi.IsDir() {
				names, err := s.ReadDir(filepath.Join(w.ws, rel), after)
				entries, _ := os.ReadDir(filepath.Join(dir, rel))
				var wn []string
				for _, e := range entries {
					wn = append(wn, e.Name())
				}
				if err != nil || strings.Join(names, ",") != strings.Join(wn, ",") {
					t.Errorf("after=%v %s: %v, %v; want %v", after, rel, names, err, wn)
				}
			}
		}
		// And what is gone is gone.
		for _, gone := range []string{"gone/a", "gone", "refill/drop", "del.txt", "typ/none"} {
			if _, err := os.Lstat(filepath.Join(dir, gone)); err == nil {
				continue
			}
			if _, err := s.Lstat(filepath.Join(w.ws, gone), after); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("after=%v %s: %v, want not exist", after, gone, err)
			}
		}
	}
}
