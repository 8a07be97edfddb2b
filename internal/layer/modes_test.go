//go:build linux

package layer_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/bashvisor/bashvisor/internal/layer"
	"github.com/bashvisor/bashvisor/internal/layer/layertest"
)

// modeOf returns the mode of the workspace's rel (fatal if missing).
func (w *world) modeOf(t testing.TB, rel string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(filepath.Join(w.ws, rel))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

// openUp gives the workspace's directories rel their owner's rwx again
// at the end of the test, so that it can be removed.
func (w *world) openUp(t testing.TB, rels ...string) {
	t.Cleanup(func() {
		for _, r := range rels {
			_ = os.Chmod(filepath.Join(w.ws, r), 0o755)
		}
	})
}

// TestModesDirWithoutPermissions: a command writes below directories
// and then takes every permission from them (an existing one and a new
// tree) and from a file. Diff lists the changes with the modes the command left, the
// lookups see them, and Apply makes them all, below directories that
// end mode 0 too, and leaves each directory the mode the command gave
// it. Unprivileged (TestModesUnprivileged) Diff failed before with
// "open …/u0/a: permission denied".
func TestModesDirWithoutPermissions(t *testing.T) {
	w := newWorld(t)
	w.write(t, map[string]string{"a/b/f": "x\n", "g": "g\n"})
	w.openUp(t, "a", "n", "n/m")
	_, s := w.run(t, `echo y > a/b/f && mkdir -p n/m && echo z > n/m/g && chmod 0 n/m n a g`)
	if got, want := w.kinds(s.Changes), "T a/\nM a/b/f\nT g\nA n/\nA n/m/\nA n/m/g"; got != want {
		t.Fatalf("changes:\n%s\nwant:\n%s", got, want)
	}
	for _, c := range s.Changes {
		if c.Mode.IsDir() && c.Mode != fs.ModeDir {
			t.Errorf("%s: mode %v, want the command's d---------", c.Path, c.Mode)
		}
	}
	fi, err := s.Lstat(filepath.Join(w.ws, "n/m"), true)
	if err != nil || fi.Mode() != fs.ModeDir {
		t.Fatalf("lstat n/m after: %v %v", fi, err)
	}
	st, err := layer.NewStore(filepath.Join(w.state, "undo"), layer.StoreLimits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Remove() })
	res, err := s.Apply(context.Background(), nil, st, "modes")
	if err != nil || len(res.Failed) > 0 || len(res.Applied) != 6 {
		t.Fatalf("apply: %v failed %v applied %s", err, res.Failed, w.kinds(res.Applied))
	}
	// Each checked, then opened (its owner may not look below it).
	for _, r := range []string{"a", "n", "n/m"} {
		if m := w.modeOf(t, r); m != fs.ModeDir {
			t.Errorf("%s: %v after apply, want d---------", r, m)
		}
		if err := os.Chmod(filepath.Join(w.ws, r), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if m := w.modeOf(t, "g"); m != 0 {
		t.Errorf("g: %v after apply, want ----------", m)
	}
	if w.read(t, "a/b/f") != "y\n" || w.read(t, "n/m/g") != "z\n" {
		t.Fatal("the files below the directories were not applied")
	}
}

// TestModesApplyCopiesGivesBack: ApplyCopies (a running job's
// checkpoint) over a directory the command made mode 0 copies it with
// that mode and gives the upper directory, which the job goes on using,
// its mode back: a second Diff of the layer lists nothing.
func TestModesApplyCopiesGivesBack(t *testing.T) {
	w := newWorld(t)
	w.write(t, map[string]string{"a/f": "x\n"})
	w.openUp(t, "a", "n")
	l, s := w.run(t, `mkdir n && echo z > n/g && chmod 0 n a`)
	if got, want := w.kinds(s.Changes), "T a/\nA n/\nA n/g"; got != want {
		t.Fatalf("changes:\n%s\nwant:\n%s", got, want)
	}
	res, err := s.ApplyCopies(context.Background(), nil, nil, "checkpoint")
	if err != nil || len(res.Failed) > 0 {
		t.Fatalf("apply: %v %v", err, res.Failed)
	}
	s.Close()
	for _, r := range []string{"a", "n"} {
		if m := w.modeOf(t, r); m != fs.ModeDir {
			t.Errorf("%s: %v after apply, want d---------", r, m)
		}
	}
	s2, err := l.Diff()
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if len(s2.Changes) != 0 {
		t.Fatalf("after the copies: %s", w.kinds(s2.Changes))
	}
}

// TestModesManyGrants: a command leaves more read-only directories (a
// Go module cache's, every one 0555) than the engine may open files.
// Diff widens each and lists them all, and Close gives each its mode
// back. Before, Diff held a descriptor per directory until Close and
// failed with "too many open files". As root (no widening) it checks
// the same listing.
func TestModesManyGrants(t *testing.T) {
	const dirs, nofile = 1500, 1024
	w := newWorld(t)
	l := w.layer(t)
	script := fmt.Sprintf(`mkdir c && cd c && for i in $(seq %d); do mkdir d$i; echo > d$i/f; done && chmod 555 d*`, dirs)
	if out, err := layertest.Run(t, l.Spec(), w.ws, w.env, script); err != nil {
		t.Fatal(err, out)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = nofile
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	s, err := l.Diff()
	if rerr := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Fatalf("Diff of %d 0555 directories, nofile %d: %v", dirs, nofile, err)
	}
	if n := len(s.Changes); n != 1+2*dirs {
		t.Errorf("%d changes, want %d", n, 1+2*dirs)
	}
	for _, c := range s.Changes {
		if c.Mode.IsDir() && c.Path != filepath.Join(w.ws, "c") && c.Mode.Perm() != 0o555 {
			t.Fatalf("%s: %v, want the command's 0555", c.Path, c.Mode)
		}
	}
	s.Close()
	up := filepath.Join(l.Spec().Overlays[0].Upper, "c")
	for _, d := range []string{"d1", fmt.Sprintf("d%d", dirs)} {
		fi, err := os.Lstat(filepath.Join(up, d))
		if err != nil || fi.Mode().Perm() != 0o555 {
			t.Errorf("upper %s after Close: %v %v, want 0555", d, fi, err)
		}
	}
}

// TestModesUndoModeZero: the undo of a step that left directories mode
// 0 (an existing one and a new tree) puts back the file it changed
// below them and removes the tree; Redo takes that back. Unprivileged
// (TestModesUnprivileged) the undo refused before, naming the paths as
// changed since: its check and restores did not reach below a and n.
func TestModesUndoModeZero(t *testing.T) {
	w := newWorld(t)
	w.write(t, map[string]string{"a/b/f": "x\n"})
	w.openUp(t, "a", "n", "n/m")
	st := w.store(t, layer.StoreLimits{})
	w.step(t, st, `echo y > a/b/f && mkdir -p n/m && echo z > n/m/g && chmod 0 n/m n a`)
	for _, r := range []string{"a", "n"} {
		if m := w.modeOf(t, r); m != fs.ModeDir {
			t.Errorf("%s: %v after apply, want d---------", r, m)
		}
	}
	if !layertest.Unprivileged() {
		if m := w.modeOf(t, "n/m"); m != fs.ModeDir {
			t.Errorf("n/m: %v after apply, want d---------", m)
		}
	}
	if _, err := st.Undo(context.Background(), 1); err != nil {
		t.Fatalf("undo: %v", err)
	}
	if m := w.modeOf(t, "a"); m != fs.ModeDir|0o755 {
		t.Errorf("a after undo: %v, want drwxr-xr-x", m)
	}
	if w.read(t, "a/b/f") != "x\n" || w.exists("n") {
		t.Fatalf("undo incomplete: a/b/f %q, n there: %v", w.read(t, "a/b/f"), w.exists("n"))
	}
	if _, _, err := st.Redo(context.Background()); err != nil {
		t.Fatalf("redo: %v", err)
	}
	for _, r := range []string{"a", "n"} {
		if m := w.modeOf(t, r); m != fs.ModeDir {
			t.Errorf("%s: %v after redo, want d---------", r, m)
		}
	}
	if err := os.Chmod(filepath.Join(w.ws, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if w.read(t, "a/b/f") != "y\n" {
		t.Errorf("redo incomplete: a/b/f %q", w.read(t, "a/b/f"))
	}
}

// TestModesUndoReadOnlyTree: a step adds a tree and leaves its
// directories read-only (0500, a module cache's), which Apply sets once
// the files below them are in, recording them in the undo step as they
// then are, and an existing directory too: the undo finds them so,
// removes the tree and gives the directory its mode back (a file the
// step changed below such a directory too: TestModesUndoBelowReadOnlyDir).
func TestModesUndoReadOnlyTree(t *testing.T) {
	w := newWorld(t)
	w.write(t, map[string]string{"a/f": "x\n"})
	w.openUp(t, "a", "n", "n/m")
	st := w.store(t, layer.StoreLimits{})
	w.step(t, st, `mkdir -p n/m && echo z > n/m/g && chmod 500 n/m n a`)
	for _, r := range []string{"a", "n", "n/m"} {
		if m := w.modeOf(t, r); m != fs.ModeDir|0o500 {
			t.Errorf("%s: %v after apply, want dr-x------", r, m)
		}
	}
	if _, err := st.Undo(context.Background(), 1); err != nil {
		t.Fatalf("undo: %v", err)
	}
	if m := w.modeOf(t, "a"); m != fs.ModeDir|0o755 {
		t.Errorf("a after undo: %v, want drwxr-xr-x", m)
	}
	if w.read(t, "a/f") != "x\n" || w.exists("n") {
		t.Errorf("undo incomplete: a/f %q, n there: %v", w.read(t, "a/f"), w.exists("n"))
	}
}

// TestModesUndoBelowReadOnlyDir: the undo of a step that changed a
// file below a directory it then left read-only (0500), and added a
// read-only tree, puts the file back, removes the tree and gives the
// directory its mode back; Redo takes that back. Unprivileged
// (TestModesUnprivileged) the undo failed before with "exchange …/a/f:
// permission denied", after giving a its mode back and removing n, and
// dropped the step: a/f's old content was lost. As root it runs with
// the unprivileged engine's widenings.
func TestModesUndoBelowReadOnlyDir(t *testing.T) {
	layer.WidenAsUnprivileged(t)
	w := newWorld(t)
	w.write(t, map[string]string{"a/f": "x\n"})
	w.openUp(t, "a", "n", "n/m")
	st := w.store(t, layer.StoreLimits{})
	w.step(t, st, `echo y > a/f && mkdir -p n/m && echo z > n/m/g && chmod 500 n/m n a`)
	if _, err := st.Undo(context.Background(), 1); err != nil {
		t.Fatalf("undo: %v (steps kept: %d)", err, len(st.Steps()))
	}
	if m := w.modeOf(t, "a"); m != fs.ModeDir|0o755 {
		t.Errorf("a after undo: %v, want drwxr-xr-x", m)
	}
	if w.read(t, "a/f") != "x\n" || w.exists("n") {
		t.Fatalf("undo incomplete: a/f %q, n there: %v", w.read(t, "a/f"), w.exists("n"))
	}
	if n := len(st.Steps()); n != 0 {
		t.Errorf("%d steps kept after the undo, want 0", n)
	}
	if _, _, err := st.Redo(context.Background()); err != nil {
		t.Fatalf("redo: %v", err)
	}
	for _, r := range []string{"a", "n", "n/m"} {
		if m := w.modeOf(t, r); m != fs.ModeDir|0o500 {
			t.Errorf("%s after redo: %v, want dr-x------", r, m)
		}
	}
	if w.read(t, "a/f") != "y\n" || w.read(t, "n/m/g") != "z\n" {
		t.Errorf("redo incomplete: a/f %q", w.read(t, "a/f"))
	}
}

// TestModesUnprivileged runs the modes tests as a user other than root
// (as root; CI's unprivileged pass runs them directly).
func TestModesUnprivileged(t *testing.T) {
	layertest.Need(t)
	layertest.RerunUnprivileged(t, "^TestModes(DirWithoutPermissions|ApplyCopiesGivesBack|ManyGrants|UndoModeZero|UndoReadOnlyTree|UndoBelowReadOnlyDir|Reach.*|Settle.*)$")
}
