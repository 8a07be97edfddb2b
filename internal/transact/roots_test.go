//go:build linux

package transact_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/testenv"
	"github.com/bashvisor/bashvisor/internal/transact"
)

// TestRootsDotGitSymlink: a workspace whose .git is a symlink to its git
// directory (elsewhere), inside a home that is a repository itself (a
// dotfiles repository, ~/.git): git uses the symlink's target, so that
// is the workspace's git directory, and ~/.git is not writable. Also
// for a symlink to a gitdir: file, relative to the symlink's directory.
// Control: the workspace with no .git gets ~/.git, as git finds it.
func TestRootsDotGitSymlink(t *testing.T) {
	testenv.NeedsTool(t, "git")
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home, store := filepath.Join(base, "home"), filepath.Join(base, "store")
	ws := filepath.Join(home, "proj")
	gitIn := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for _, d := range []string{ws, store} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	gitIn(home, "init", "-q")
	roots, err := transact.Roots(ws)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{ws, filepath.Join(home, ".git")}; !slices.Equal(roots, want) {
		t.Fatalf("without a .git: roots %v, want %v", roots, want)
	}

	gitIn(store, "init", "-q", "--bare", "ws.git")
	if err := os.Symlink(filepath.Join(store, "ws.git"), filepath.Join(ws, ".git")); err != nil {
		t.Fatal(err)
	}
	check := func(want string) {
		t.Helper()
		if got := gitIn(ws, "rev-parse", "--absolute-git-dir"); got != want {
			t.Fatalf("git's git directory is %s, want %s", got, want)
		}
		roots, err := transact.Roots(ws)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(roots, []string{ws, want}) {
			t.Fatalf("roots %v, want %v", roots, []string{ws, want})
		}
	}
	check(filepath.Join(store, "ws.git"))

	// A symlink to a gitdir: file whose relative path starts where the
	// symlink is (git reads it so).
	if err := os.Remove(filepath.Join(ws, ".git")); err != nil {
		t.Fatal(err)
	}
	gitIn(ws, "init", "-q", "--separate-git-dir", filepath.Join(ws, "inner.git"))
	if err := os.Rename(filepath.Join(ws, ".git"), filepath.Join(store, "gitfile")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store, "gitfile"), []byte("gitdir: inner.git\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(store, "gitfile"), filepath.Join(ws, ".git")); err != nil {
		t.Fatal(err)
	}
	check(filepath.Join(ws, "inner.git"))
}
