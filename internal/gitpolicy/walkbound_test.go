//go:build linux

package gitpolicy_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/gitpolicy"
	"github.com/bashvisor/bashvisor/internal/layer/layertest"
)

// plantHook is a command that plants an executable hook at path (relative
// to the workspace) that leaves "ran" in the sentinel directory.
func plantHook(path string) string {
	return fmt.Sprintf(`mkdir -p %q && printf '#!/bin/sh\ntouch "$SENT/ran"\n' > %q && chmod +x %q`,
		filepath.Dir(path), path, path)
}

// userRuns runs script as the user, outside the sandbox, in dir
// (relative), and reports whether planted code left its mark.
func (w *world) userRuns(t *testing.T, dir, script string) bool {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir, cmd.Env = filepath.Join(w.ws, dir), w.env
	out, _ := cmd.CombinedOutput()
	t.Logf("%s in %s: %s", script, dir, out)
	return slices.Contains(w.sentinels(t), "ran")
}

// userCommits is the user's git commit in dir: it runs the repository's
// pre-commit hook.
func (w *world) userCommits(t *testing.T, dir string) bool {
	t.Helper()
	return w.userRuns(t, dir, "git commit -q --allow-empty -m user")
}

// refusedOnly checks that the refusals are want ("rule path" lines), in
// any order.
func (w *world) refusedOnly(t *testing.T, o *outcome, want ...string) {
	t.Helper()
	got := w.refused(o)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("refused %v, want %v", got, want)
	}
}

// hooksRepo makes proj/sub, a repository whose core.hooksPath is
// ../hooks (proj/hooks, outside it), after dirs directories in 0big/
// (walked before proj/).
func (w *world) hooksRepo(t *testing.T, dirs int) {
	t.Helper()
	w.repo(t)
	for i := range dirs {
		if err := os.MkdirAll(filepath.Join(w.ws, "0big", fmt.Sprint(i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w.sh(t, `git init -q -b main proj/sub && git -C proj/sub commit -q --allow-empty -m x && git -C proj/sub config core.hooksPath ../hooks`)
}

// TestRuleWalk: in a workspace with more directories than a walk looks
// at (the bound lowered to 40; 0big/ holds 60, walked before proj/), the
// repository proj/sub is not found, so the hook a command plants in its
// core.hooksPath (proj/hooks, outside it) is held by the walk rule, as is
// any change outside a git directory, and the user's git commit does not
// run it; a commit's objects and refs inside proj/sub/.git still apply.
// Controls: below the bound the hook is refused by the hooks rule and the
// other file applies; the hook, installed by the user, runs.
func TestRuleWalk(t *testing.T) {
	for _, past := range []bool{false, true} {
		t.Run(fmt.Sprint("past=", past), func(t *testing.T) {
			w := newWorld(t)
			w.hooksRepo(t, 60)
			gitpolicy.ForgetWalks()
			t.Cleanup(gitpolicy.ForgetWalks)
			if past {
				t.Cleanup(gitpolicy.SetMaxWalkDirs(40))
			}
			missed := gitpolicy.WalkMissed(w.ws)
			if past != strings.Contains(missed, "more than 40 directories") {
				t.Fatalf("walk missed %q", missed)
			}
			if again := gitpolicy.WalkMissed(w.ws); again != missed {
				t.Fatalf("the revalidating walk missed %q, the first %q", again, missed)
			}
			o := w.run(t, plantHook("proj/hooks/pre-commit")+" && echo y > proj/notes")
			if past {
				w.expectRefused(t, o, gitpolicy.Walk, "proj/hooks/pre-commit", "proj/notes")
				if line := strings.Join(gitpolicy.Lines(o.refusals, w.ws), "\n"); !strings.Contains(line, "could not all be found") {
					t.Errorf("the reason does not say why: %s", line)
				}
			} else {
				w.refusedOnly(t, o, "git-hooks proj/hooks", "git-hooks proj/hooks/pre-commit")
			}
			if w.exists("proj/hooks/pre-commit") {
				t.Fatal("the hook was applied")
			}
			if w.exists("proj/notes") == past {
				t.Errorf("proj/notes applied: %v, past the bound: %v", w.exists("proj/notes"), past)
			}
			if w.userCommits(t, "proj/sub") {
				t.Fatal("the planted hook ran on the user's git commit")
			}
			// Data inside a git directory that existed before applies.
			o = w.run(t, "git -C proj/sub commit -q --allow-empty -m sandboxed")
			w.expectAllowed(t, o)
			if out := w.sh(t, "git -C proj/sub log -1 --format=%s"); out != "sandboxed\n" {
				t.Errorf("the sandboxed commit is not in the repository: %q", out)
			}
			// The repository runs what the user installs there.
			w.sh(t, plantHook("proj/hooks/pre-commit"))
			if !w.userCommits(t, "proj/sub") {
				t.Fatal("the user's hook did not run: the test proves nothing")
			}
		})
	}
}

// TestWalkUnreadableDirectory: a directory the walk cannot open (a/,
// mode 000, for an unprivileged engine) hides the repository a/sub
// below it, whose core.hooksPath is ../../hooks: the walk misses it and
// the check holds the hook a command plants there, so the user's git
// commit (once a/ is readable again) does not run it. As root the walk
// reads a/ and the hooks rule refuses the hook (TestUnprivileged runs
// it unprivileged).
func TestWalkUnreadableDirectory(t *testing.T) {
	w := newWorld(t)
	w.repo(t)
	w.sh(t, `git init -q -b main a/sub && git -C a/sub commit -q --allow-empty -m x && git -C a/sub config core.hooksPath ../../hooks && chmod 0 a`)
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(w.ws, "a"), 0o755) })
	gitpolicy.ForgetWalks()
	t.Cleanup(gitpolicy.ForgetWalks)
	missed := gitpolicy.WalkMissed(w.ws)
	if layertest.Unprivileged() != strings.Contains(missed, w.ws+"/a could not be read") {
		t.Fatalf("walk missed %q (unprivileged: %v)", missed, layertest.Unprivileged())
	}
	o := w.run(t, plantHook("hooks/pre-commit"))
	rule := gitpolicy.Hooks
	if layertest.Unprivileged() {
		rule = gitpolicy.Walk
	}
	w.refusedOnly(t, o, fmt.Sprint(rule, " hooks"), fmt.Sprint(rule, " hooks/pre-commit"))
	w.sh(t, "chmod 755 a")
	if w.userCommits(t, "a/sub") {
		t.Fatal("the planted hook ran on the user's git commit")
	}
	w.sh(t, plantHook("hooks/pre-commit"))
	if !w.userCommits(t, "a/sub") {
		t.Fatal("the user's own hook did not run: the test proves nothing")
	}
}

// TestDotGitSymlink: git follows a .git that is a symlink to the git
// directory (here outside the workspace), so the configuration there
// names code: core.hooksPath = ../hooks makes proj/hooks/pre-commit a
// hook, core.fsmonitor = tools/fsm.sh makes proj/sub/tools/fsm.sh a
// program git status runs. A command's plants are refused, and the
// user's git does not run them. Controls: the same without the symlink;
// the user's own hook and fsmonitor run.
func TestDotGitSymlink(t *testing.T) {
	cases := []struct {
		key, value, plant, user string
		refused                 []string
	}{
		{"core.hooksPath", "../hooks", "proj/hooks/pre-commit", "git commit -q --allow-empty -m user",
			[]string{"git-hooks proj/hooks", "git-hooks proj/hooks/pre-commit"}},
		{"core.fsmonitor", "tools/fsm.sh", "proj/sub/tools/fsm.sh", "git status --short",
			[]string{"git-config proj/sub/tools/fsm.sh"}},
	}
	for _, c := range cases {
		for _, link := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/symlink=%v", c.key, link), func(t *testing.T) {
				w := newWorld(t)
				w.repo(t)
				store := t.TempDir()
				w.sh(t, fmt.Sprintf(`git init -q -b main proj/sub && git -C proj/sub commit -q --allow-empty -m x && git -C proj/sub config %s %s`, c.key, c.value))
				if link {
					w.sh(t, fmt.Sprintf(`mv proj/sub/.git %q && ln -s %q proj/sub/.git && test "$(git -C proj/sub rev-parse --git-dir)" = .git`,
						store+"/sub.git", store+"/sub.git"))
				}
				o := w.run(t, plantHook(c.plant)+" && echo y > proj/sub/notes")
				w.refusedOnly(t, o, c.refused...)
				if !w.exists("proj/sub/notes") {
					t.Error("proj/sub/notes was not applied")
				}
				if w.userRuns(t, "proj/sub", c.user) {
					t.Fatal("the planted program ran on the user's git")
				}
				w.sh(t, plantHook(c.plant))
				if !w.userRuns(t, "proj/sub", c.user) {
					t.Fatal("the user's own program did not run: the test proves nothing")
				}
			})
		}
	}
}
