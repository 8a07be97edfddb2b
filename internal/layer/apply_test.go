//go:build linux

package layer_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/layer"
	"github.com/bashvisor/bashvisor/internal/layer/layertest"
)

// entries lists every path below dir (relative), with its type.
func entries(t testing.TB, dir string) map[string]fs.FileMode {
	t.Helper()
	out := map[string]fs.FileMode{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out[rel] = d.Type()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// onlyListed is the oracle of an apply: every entry that is in the
// workspace now and was not before is one of the applied changes (none
// arrived unlisted, carried along by a directory moved whole), and no
// change the layer refused is in the workspace.
func (w *world) onlyListed(t *testing.T, before map[string]fs.FileMode, res *layer.Result) {
	t.Helper()
	applied := map[string]bool{}
	for _, c := range res.Applied {
		applied[c.Path] = true
	}
	for rel := range entries(t, w.ws) {
		if _, ok := before[rel]; !ok && !applied[filepath.Join(w.ws, rel)] {
			t.Errorf("%s reached the workspace but is not among the applied changes %s", rel, w.kinds(res.Applied))
		}
	}
	for _, f := range res.Refused {
		if _, ok := before[strings.TrimPrefix(f.Change.Path, w.ws+"/")]; !ok && w.exists(strings.TrimPrefix(f.Change.Path, w.ws+"/")) {
			t.Errorf("refused %s is in the workspace", f.Change.Path)
		}
	}
}

// setx is the shell command that sets an xattr, as setfattr -n name -v
// value path does.
func setx(t testing.TB, path, name, value string) string {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%q %s %q %q %q", self, "__setxattr", path, name, value)
}

// TestForgedOverlayXattrs (security review round 4, H3): the command
// marks a new directory opaque and a file in it as a whiteout with
// overlayfs's xattrs in the namespace its overlay does not use
// (user.overlay.* on a root overlay, whose own marks are
// trusted.overlay.*), to hide the file from the change set while the
// directory is moved into place whole. The forged marks are not read:
// the file is listed, and the entries carrying them are refused and not
// applied. Unprivileged, overlayfs refuses the command's setxattr (the
// names are its own there); the oracle holds all the same.
func TestForgedOverlayXattrs(t *testing.T) {
	for _, tc := range []struct {
		ns     string
		copies bool // ApplyCopies, a background job's checkpoint
	}{{"user", false}, {"trusted", false}, {"user", true}, {"trusted", true}} {
		ns := tc.ns
		t.Run(fmt.Sprintf("%s,copies=%v", tc.ns, tc.copies), func(t *testing.T) {
			w := newWorld(t)
			w.write(t, map[string]string{"old/keep": "k"})
			before := entries(t, w.ws)
			_, s := w.run(t, `set -e
mkdir -p rb && echo 'exec touch SENT' > rb/git-rebase-todo && echo data > rb/done
`+setx(t, "rb", ns+".overlay.opaque", "x")+` || true
`+setx(t, "rb/git-rebase-todo", ns+".overlay.whiteout", "y")+` || true
`+setx(t, "old", ns+".overlay.opaque", "y")+` || true`)
			t.Logf("changes:\n%s", w.kinds(s.Changes))
			if got := w.kinds(s.Changes); !strings.Contains(got, "A rb/git-rebase-todo") {
				t.Errorf("the file is hidden from the change set:\n%s", got)
			}
			apply := s.Apply
			if tc.copies {
				apply = s.ApplyCopies
			}
			res, err := apply(context.Background(), nil, nil, "")
			if err != nil {
				t.Fatal(err)
			}
			w.onlyListed(t, before, res)
			if !w.exists("old/keep") {
				t.Error("a forged opaque mark on an existing directory deleted what is in it")
			}
			for _, f := range res.Refused {
				if !errors.Is(f.Err, layer.ErrOverlayXattr) {
					t.Errorf("refused %s: %v", f.Change.Path, f.Err)
				}
			}
			if w.exists("rb/git-rebase-todo") && len(res.Refused) > 0 {
				t.Error("a refused directory's file was applied")
			}
			t.Logf("applied %s; refused %v", w.kinds(res.Applied), res.Refused)
		})
	}
}

// TestNewTreeWholeOnlyWhenListed: an added directory is moved into place
// whole only when everything in its upper directory is one of the
// listed changes. Here the overlay's own marks (set in the upper layer
// by the test, where only overlayfs could) make a file in it a
// whiteout, which Diff does not list: the directory is then made entry
// by entry, without the file.
func TestNewTreeWholeOnlyWhenListed(t *testing.T) {
	w := newWorld(t)
	before := entries(t, w.ws)
	l, s := w.run(t, "mkdir -p n/d && echo a > n/d/a && echo h > n/d/hidden")
	s.Close()
	ns := "trusted.overlay."
	if layertest.Unprivileged() {
		ns = "user.overlay."
	}
	upper := l.Spec().Overlays[0].Upper
	for _, x := range [][3]string{{"n/d", "opaque", "x"}, {"n/d/hidden", "whiteout", "y"}} {
		if err := unix.Lsetxattr(filepath.Join(upper, x[0]), ns+x[1], []byte(x[2]), 0); err != nil {
			t.Fatal(err)
		}
	}
	s, err := l.Diff()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := w.kinds(s.Changes); got != "A n/\nA n/d/\nA n/d/a" {
		t.Fatalf("changes:\n%s", got)
	}
	res, err := s.Apply(context.Background(), nil, nil, "")
	if err != nil || len(res.Failed) > 0 {
		t.Fatal(err, res.Failed)
	}
	w.onlyListed(t, before, res)
	if !w.exists("n/d/a") || w.exists("n/d/hidden") {
		t.Errorf("applied: %v", entries(t, w.ws))
	}
}

// TestPermissionChangeThroughSwappedSymlink (security review round 4,
// H6): between Diff and Apply another apply replaces a directory whose
// permissions the command changed by a symlink to a directory outside
// the workspace. The permission change fails; the symlink's target
// keeps its mode.
func TestPermissionChangeThroughSwappedSymlink(t *testing.T) {
	w := newWorld(t)
	w.write(t, map[string]string{"racedir": "DIR", "other": "DIR"})
	outside := filepath.Join(t.TempDir(), "sentinel")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	_, s := w.run(t, "chmod 0707 racedir other")
	if err := os.Rename(filepath.Join(w.ws, "racedir"), filepath.Join(w.ws, "racedir.was")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(w.ws, "racedir")); err != nil {
		t.Fatal(err)
	}
	// other: replaced by another directory of the same name.
	if err := os.Rename(filepath.Join(w.ws, "other"), filepath.Join(w.ws, "other.was")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(w.ws, "other"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := s.Apply(context.Background(), nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(outside); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("the symlink's target outside the workspace: %v, %v", fi.Mode(), err)
	}
	if fi, err := os.Lstat(filepath.Join(w.ws, "other")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the replacing directory changed: %v, %v", fi.Mode(), err)
	}
	if len(res.Applied) != 0 || len(res.Failed) != 2 {
		t.Errorf("applied %v, failed %v", res.Applied, res.Failed)
	}
}

// deepScript makes a new tree n levels deep below d (d/d/.../d/f: n
// entries deep, the file included).
func deepScript(n int) string {
	return fmt.Sprintf(`p=$(printf 'd/%%.0s' $(seq %d)); mkdir -p "$p" && echo f > "${p}f"`, n-1)
}

// TestDepthBound: a new tree as deep as MaxDepth is applied; one level
// deeper, it is not walked below the limit, not applied, and the result
// says so (the outermost new directory, refused with ErrTooDeep).
func TestDepthBound(t *testing.T) {
	for _, depth := range []int{layer.MaxDepth, layer.MaxDepth + 1, 900} {
		t.Run(fmt.Sprint(depth), func(t *testing.T) {
			w := newWorld(t)
			_, s := w.run(t, deepScript(depth))
			res, err := s.Apply(context.Background(), nil, nil, "")
			if err != nil || len(res.Failed) > 0 {
				t.Fatal(err, res.Failed)
			}
			if depth <= layer.MaxDepth {
				if len(res.Applied) != depth || len(res.Refused) != 0 || !w.exists(strings.Repeat("d/", depth-1)+"f") {
					t.Errorf("%d applied, %d refused", len(res.Applied), len(res.Refused))
				}
				return
			}
			if len(s.Changes) != 1 || len(res.Applied) != 0 || len(res.Refused) != 1 || !errors.Is(res.Refused[0].Err, layer.ErrTooDeep) {
				t.Errorf("%d changes, %d applied, refused %v", len(s.Changes), len(res.Applied), res.Refused)
			}
			if w.exists("d") {
				t.Error("a tree deeper than MaxDepth was applied")
			}
		})
	}
}

// TestRootPermissionChange: a change of the root's own permissions is
// applied through the root's descriptor.
func TestRootPermissionChange(t *testing.T) {
	w := newWorld(t)
	_, s := w.run(t, "chmod 0750 .")
	res, err := s.Apply(context.Background(), nil, nil, "")
	if err != nil || len(res.Failed) > 0 || len(res.Applied) != 1 {
		t.Fatal(err, res.Applied, res.Failed)
	}
	if fi, err := os.Stat(w.ws); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("root mode %v, %v", fi.Mode(), err)
	}
}
