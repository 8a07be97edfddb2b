//go:build linux

package sandbox_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// gitEnv makes commits possible without a user config.
var gitEnv = []string{
	"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
	"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
	"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
	// Submodules from a local path (git 2.38.1+ refuses them by default).
	"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=protocol.file.allow", "GIT_CONFIG_VALUE_0=always",
}

// git runs git unconfined (to build the fixtures).
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), gitEnv...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func requireGit(t *testing.T) {
	t.Helper()
	testenv.NeedsTool(t, "git")
}

// newRepo makes a repository with one commit in a new directory.
func newRepo(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	git(t, dir, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "add", "README")
	git(t, dir, "commit", "-qm", "first")
	return dir
}

// workspace runs command in the workspace-write profile for dir.
func workspace(t *testing.T, dir, command string) result {
	t.Helper()
	roots, err := sandbox.WorkspaceRoots(dir)
	if err != nil {
		t.Fatal(err)
	}
	return runOpts(t, sandbox.Options{Roots: roots}, nil, dir, command, gitEnv...)
}

// mustFail runs each probe in the profile and wants it to fail with a
// kernel error and leave the watched trees as they were.
func mustFail(t *testing.T, dir string, probes map[string]string, watch ...string) {
	t.Helper()
	before := make([]string, len(watch))
	for i, w := range watch {
		before[i] = snapshot(t, w)
	}
	for name, cmd := range probes {
		t.Run(name, func(t *testing.T) {
			r := workspace(t, dir, cmd)
			if r.code == 0 {
				t.Fatalf("%s: exit 0, want failure\n%s", cmd, r.out)
			}
			if !denied(r.out) && !strings.Contains(r.out, "Read-only file system") && !strings.Contains(r.out, "Device or resource busy") {
				t.Errorf("%s: want a kernel error (EACCES, EPERM, EROFS, EBUSY), got exit %d\n%s", cmd, r.code, r.out)
			}
			t.Logf("exit %d: %s", r.code, lastLine(r.out))
		})
	}
	for i, w := range watch {
		if after := snapshot(t, w); after != before[i] {
			t.Errorf("%s changed:\nbefore:\n%s\nafter:\n%s", w, before[i], after)
		}
	}
}

func TestWorkspaceWritePlainRepo(t *testing.T) {
	requireNamespaces(t)
	requireGit(t)
	ws := newRepo(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "sentinel"), []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := workspace(t, ws, `set -e
echo more >> README
mkdir -p src && echo 'echo hi' > src/run.sh && chmod +x src/run.sh && touch -d 2001-01-01 src/run.sh
git add README src
git commit -qm second
git branch topic
echo wip >> README && git stash -q && git stash list | wc -l
git log --oneline | wc -l
test -x src/run.sh && echo executable`)
	if r.code != 0 || r.out != "1\n2\nexecutable\n" {
		t.Fatalf("git in the workspace: exit %d\n%s", r.code, r.out)
	}
	if got := git(t, ws, "log", "-1", "--format=%s"); got != "second" {
		t.Fatalf("last commit %q, want the sandbox's", got)
	}
	mustFail(t, ws, map[string]string{
		"write-outside":      "echo x > " + outside + "/sentinel",
		"create-outside":     "echo x > " + outside + "/new",
		"chmod-outside":      "chmod 777 " + outside + "/sentinel",
		"touch-outside":      "touch -d 2001-01-01 " + outside + "/sentinel",
		"hook":               "echo 'touch /tmp/pwned' > .git/hooks/pre-commit",
		"hooks-rm":           "rm -rf .git/hooks",
		"hooks-mv":           "mv .git/hooks .git/hooks.old",
		"config-append":      "echo '[core] fsmonitor = evil' >> .git/config",
		"config-replace":     "cp .git/config /tmp/c 2>/dev/null; echo x > \"$TMPDIR/c\" && mv \"$TMPDIR/c\" .git/config",
		"config-rename":      "mv .git/config .git/config.old",
		"git-config":         "git config core.fsmonitor evil",
		"dotgit-mv":          "mv .git .git.old",
		"setuid":             "chmod u+s README",
		"setgid":             "chmod g+s README",
		"parent-of-worktree": "echo x > ../escape",
	}, outside, filepath.Join(ws, ".git", "hooks"), filepath.Join(ws, ".git", "config"))
	// Removing .git deletes what is not protected (the history, as in any
	// writable directory) but not the hooks, the config or .git itself.
	fresh := newRepo(t)
	mustFail(t, fresh, map[string]string{"dotgit-rm": "rm -rf .git"},
		filepath.Join(fresh, ".git", "hooks"), filepath.Join(fresh, ".git", "config"))
	if testenv.HasTool(t, "python3") {
		mustFail(t, ws, map[string]string{
			"create-setuid": `python3 -c 'import os; os.open("suid", os.O_CREAT|os.O_WRONLY, 0o4755)'`,
		})
		if _, err := os.Stat(filepath.Join(ws, "suid")); err == nil {
			t.Error("a setuid file was created")
		}
	}
}

func TestWorkspaceWriteWorktree(t *testing.T) {
	requireNamespaces(t)
	requireGit(t)
	main := newRepo(t)
	wt := filepath.Join(t.TempDir(), "wt")
	git(t, main, "worktree", "add", "-q", "-b", "feature", wt)
	r := workspace(t, wt, `set -e
echo feature >> README
git add README
git commit -qm feature
git log --oneline | wc -l`)
	if r.code != 0 || r.out != "2\n" {
		t.Fatalf("commit in a worktree: exit %d\n%s", r.code, r.out)
	}
	if got := git(t, main, "log", "-1", "--format=%s", "feature"); got != "feature" {
		t.Fatalf("feature branch at %q", got)
	}
	gitDir := filepath.Join(main, ".git")
	mustFail(t, wt, map[string]string{
		"main-checkout":   "echo x >> " + main + "/README",
		"common-hook":     "echo x > " + gitDir + "/hooks/post-checkout",
		"common-config":   "echo x >> " + gitDir + "/config",
		"worktree-config": "echo '[core] fsmonitor = evil' >> " + gitDir + "/worktrees/wt/config.worktree",
		"dotgit-file":     "echo 'gitdir: /tmp' > .git",
		"worktree-gitdir": "mv " + gitDir + "/worktrees/wt " + gitDir + "/worktrees/wt.old",
	}, filepath.Join(main, "README"), filepath.Join(gitDir, "hooks"), filepath.Join(gitDir, "config"), filepath.Join(wt, ".git"))
}

func TestWorkspaceWriteSubmodule(t *testing.T) {
	requireNamespaces(t)
	requireGit(t)
	lib := newRepo(t)
	super := newRepo(t)
	git(t, super, "submodule", "add", "-q", lib, "lib")
	git(t, super, "commit", "-qm", "add lib")
	sub := filepath.Join(super, "lib")
	modules := filepath.Join(super, ".git", "modules", "lib")

	// The submodule's checkout as the workspace: its git dir is in the
	// superproject's .git.
	r := workspace(t, sub, `set -e
echo change >> README
git add README && git commit -qm in-sub
git log --oneline | wc -l`)
	if r.code != 0 || r.out != "2\n" {
		t.Fatalf("commit in a submodule: exit %d\n%s", r.code, r.out)
	}
	mustFail(t, sub, map[string]string{
		"superproject":  "echo x >> " + super + "/README",
		"module-hook":   "echo x > " + modules + "/hooks/pre-commit",
		"module-config": "echo x >> " + modules + "/config",
	}, filepath.Join(super, "README"), filepath.Join(modules, "hooks"), filepath.Join(modules, "config"))

	// The superproject as the workspace: commits in both work, the
	// submodule's hooks and config stay read-only.
	r = workspace(t, super, `set -e
(cd lib && echo again >> README && git commit -qam again)
git add lib && git commit -qm bump
git log --oneline | wc -l`)
	if r.code != 0 || r.out != "3\n" {
		t.Fatalf("commit in the superproject: exit %d\n%s", r.code, r.out)
	}
	mustFail(t, super, map[string]string{
		"module-hook":   "echo x > .git/modules/lib/hooks/pre-commit",
		"module-config": "git -C lib config core.fsmonitor evil",
		"sub-dotgit":    "echo 'gitdir: /tmp' > lib/.git",
	}, filepath.Join(modules, "hooks"), filepath.Join(modules, "config"))
}

func TestWorkspaceRoots(t *testing.T) {
	requireGit(t)
	main := newRepo(t)
	sub := filepath.Join(main, "deep", "er")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	// Walking up from a directory inside the repository finds its .git.
	r, err := sandbox.WorkspaceRoots(sub)
	if err != nil {
		t.Fatal(err)
	}
	gitDir := filepath.Join(main, ".git")
	if !slices.Contains(r.Writable, sub) || !slices.Contains(r.Writable, gitDir) || slices.Contains(r.Writable, main) {
		t.Errorf("writable %v, want %s and %s (not the whole repository)", r.Writable, sub, gitDir)
	}
	for _, p := range []string{gitDir + "/hooks", gitDir + "/config", gitDir + "/config.worktree"} {
		if !slices.Contains(r.Protected, p) {
			t.Errorf("protected %v lacks %s", r.Protected, p)
		}
	}
	if !slices.Contains(r.Pinned, gitDir) {
		t.Errorf("pinned %v lacks %s", r.Pinned, gitDir)
	}
	// core.hooksPath is protected too.
	hooks := filepath.Join(main, ".githooks")
	if err := os.Mkdir(hooks, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, main, "config", "core.hooksPath", ".githooks")
	if r, err = sandbox.WorkspaceRoots(main); err != nil || !slices.Contains(r.Protected, hooks) {
		t.Errorf("core.hooksPath not protected: %v %v", r.Protected, err)
	}
	// No repository: just the directory.
	plain, _ := filepath.EvalSymlinks(t.TempDir())
	if r, err = sandbox.WorkspaceRoots(plain); err != nil || !slices.Equal(r.Writable, []string{plain}) || len(r.Protected)+len(r.Pinned) != 0 {
		// A temp dir below a repository would find that one.
		if _, e := os.Stat(filepath.Join(filepath.Dir(plain), ".git")); e != nil {
			t.Errorf("plain dir: %+v %v", r, err)
		}
	}
}

// A read-only mount below a writable root stays read-only: the profile
// never widens what the host allows.
func TestWorkspaceKeepsReadOnlyMounts(t *testing.T) {
	requireNamespaces(t)
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	ro := filepath.Join(ws, "ro")
	if err := os.Mkdir(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", ro, "tmpfs", unix.MS_RDONLY, "size=64k"); err != nil {
		t.Skipf("cannot mount a read-only tmpfs for the test: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(ro, unix.MNT_DETACH) })
	r := runOpts(t, sandbox.Options{Roots: sandbox.Roots{Writable: []string{ws}}}, nil, ws,
		`echo ok > file && cat file; echo x > ro/file`)
	if r.code == 0 || !strings.HasPrefix(r.out, "ok\n") || !strings.Contains(r.out, "Read-only file system") {
		t.Fatalf("exit %d\n%s", r.code, r.out)
	}
}

// The caches in CacheDir outlive the command; without network the module
// caches of the engine's user are left alone.
func TestCacheDir(t *testing.T) {
	requireSandbox(t)
	cache := t.TempDir()
	opts := sandbox.Options{CacheDir: cache}
	r := runOpts(t, opts, nil, t.TempDir(), `mkdir -p "$GOCACHE" && echo warm > "$GOCACHE/entry"; echo "$XDG_CACHE_HOME|$npm_config_cache|$PIP_CACHE_DIR|${GOMODCACHE-unset}"`)
	want := fmt.Sprintf("%s|%s/npm|%s/pip|unset\n", cache, cache, cache)
	if r.code != 0 || r.out != want {
		t.Fatalf("exit %d\n%q\nwant %q", r.code, r.out, want)
	}
	if b, err := os.ReadFile(filepath.Join(cache, "go-build", "entry")); err != nil || string(b) != "warm\n" {
		t.Fatalf("cache entry after the command: %q %v", b, err)
	}
}
