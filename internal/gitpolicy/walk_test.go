//go:build linux

package gitpolicy_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/gitpolicy"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestRepositoryAddedBetweenCommands: repositories that a process
// outside the sandbox makes, moves in or re-points between two commands
// name hooks directories at the workspace's top or deep in it; the
// second command plants hooks there, and its check must read them
// (review8's walk reused the list of repositories for 10 s; a walk that
// trusted the tree it recorded blindly would miss them all). The tree
// is left to age first, so that the first walk trusts every directory.
func TestRepositoryAddedBetweenCommands(t *testing.T) {
	for _, prefetch := range []bool{true, false} {
		t.Run(map[bool]string{true: "prefetched", false: "walked at the check"}[prefetch], func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.repo(t)
			outside := t.TempDir()
			w.sh(t, `mkdir -p a/b/c sep && git init -q --separate-git-dir "`+outside+`/g1" sep &&
git init -q "`+outside+`/g2" && git -C "`+outside+`/g2" config core.hooksPath ../hooks4 &&
git init -q "`+outside+`/mv" && git -C "`+outside+`/mv" config core.hooksPath ../hooks3`)
			time.Sleep(gitpolicy.RacyMargin + 500*time.Millisecond)
			run := func(script string) *outcome {
				if prefetch {
					defer gitpolicy.Prefetch([]string{w.ws})()
				}
				return w.run(t, script)
			}
			w.expectAllowed(t, run("echo y > README"))
			// Outside any sandbox: a new repository at the top, one in
			// an old directory deep down, one moved in, and a gitdir:
			// file rewritten in place (no directory changes).
			w.sh(t, `git init -q top && git -C top config core.hooksPath ../hooks1 &&
git init -q a/b/c/deep && git -C a/b/c/deep config core.hooksPath ../hooks2 &&
mv "`+outside+`/mv" a/b/mv &&
echo "gitdir: `+outside+`/g2/.git" > sep/.git`)
			plant := ""
			for _, h := range []string{"hooks1", "a/b/c/hooks2", "a/b/hooks3", "hooks4"} {
				plant += "mkdir -p " + h + " && echo 'exit 1' > " + h + "/pre-commit && "
			}
			w.expectRefused(t, run(plant+"true"), gitpolicy.Hooks,
				"hooks1/pre-commit", "a/b/c/hooks2/pre-commit", "a/b/hooks3/pre-commit", "hooks4/pre-commit")
		})
	}
}

// TestPrefetchRelease: one goroutine walks a root however many commands
// prefetch it, and none walks once the last releases it (a walk under
// way is stopped, not waited out).
func TestPrefetchRelease(t *testing.T) {
	w := newWorld(t)
	w.sh(t, `for i in $(seq 50); do for j in $(seq 100); do echo d$i/e$j; done; done | xargs mkdir -p`)
	gitpolicy.ForgetWalks()
	roots := []string{w.ws}
	r1 := gitpolicy.Prefetch(roots)
	r2 := gitpolicy.Prefetch(roots)
	if n, s := walkers(); n != 1 {
		t.Errorf("%d goroutines walk one root prefetched twice, want 1\n%s", n, s)
	}
	r1()
	if n, s := walkers(); n != 1 {
		t.Errorf("%d goroutines walk a root one command still prefetches, want 1\n%s", n, s)
	}
	start := time.Now()
	r2()
	t.Logf("release took %v", time.Since(start))
	if s := stacks(); strings.Contains(s, "gitpolicy.walkTree") || strings.Contains(s, "gitpolicy.(*rootWalk).walk(") {
		t.Fatalf("a walk runs after the last release:\n%s", s)
	}
	r2() // a second call does nothing
}

// walkers counts the goroutines that walk roots in the background.
func walkers() (int, string) {
	s := stacks()
	return strings.Count(s, "created by github.com/bashvisor/bashvisor/internal/gitpolicy.Prefetch"), s
}

func stacks() string {
	b := make([]byte, 1<<20)
	return string(b[:runtime.Stack(b, true)])
}

// TestWalkSeesNewDirectories: a walk that revalidates the tree an
// earlier one recorded reads what changed below it however deep: a
// repository in a directory made, and one in a directory moved in.
func TestWalkSeesNewDirectories(t *testing.T) {
	w := newWorld(t)
	w.sh(t, "mkdir -p x/y/z keep/me")
	time.Sleep(gitpolicy.RacyMargin + 500*time.Millisecond) // the first walk trusts them all
	if got := gitpolicy.WalkFound(w.ws); len(got) != 0 {
		t.Fatalf("found %v in a tree with no repository", got)
	}
	other := t.TempDir()
	w.sh(t, `mkdir -p x/y/z/n1/n2 && git init -q x/y/z/n1/n2/r1 && git init -q --bare keep/me/b.git &&
mkdir -p "`+other+`/m/m2" && git init -q "`+other+`/m/m2/r2" && mv "`+other+`/m" x/m`)
	want := []string{"keep/me/b.git bare", "x/m/m2/r2 .git", "x/y/z/n1/n2/r1 .git"}
	if got := rel(w.ws, gitpolicy.WalkFound(w.ws)); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("found %v, want %v", got, want)
	}
	if err := os.RemoveAll(filepath.Join(w.ws, "x/m")); err != nil {
		t.Fatal(err)
	}
	want = []string{want[0], want[2]}
	if got := rel(w.ws, gitpolicy.WalkFound(w.ws)); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("found %v after removing x/m, want %v", got, want)
	}
}

func rel(base string, paths []string) []string {
	var out []string
	for _, p := range paths {
		out = append(out, strings.TrimPrefix(p, base+"/"))
	}
	return out
}

// TestGitdirThroughSymlink: a .git file names its git directory through
// a symlink and a .. after it (gitdir: ../ln/../g.git, ln -> deep/in),
// which git takes as deep/g.git (the real path), not g.git (the path
// cleaned as text); that repository's core.hooksPath = ../hooks names
// the workspace's top, where the command plants a hook. The same for a
// linked worktree whose admin directory's commondir is such a path.
func TestGitdirThroughSymlink(t *testing.T) {
	plant := `mkdir -p hooks && printf '#!/bin/sh\ntouch $SENT/prog\nexit 1\n' > hooks/pre-commit && chmod +x hooks/pre-commit`
	t.Run("gitdir", func(t *testing.T) {
		controlThen(t, `mkdir -p deep/in && ln -s deep/in ln && git init -q --separate-git-dir "$PWD/deep/g.git" sub &&
echo "gitdir: ../ln/../g.git" > sub/.git && git -C sub commit -q --allow-empty -m x && git -C sub config core.hooksPath ../hooks`,
			[]string{plant}, "sub", "echo y > f; git add f; git commit -qm y", "prog")
	})
	t.Run("commondir", func(t *testing.T) {
		// wt is a linked worktree of a repository outside the
		// workspace, deep; its admin directory's commondir names deep's
		// git directory as ln/../.git, ln -> deep/in.
		controlThen(t, `mkdir -p "$HOME/deep/in" && ln -s "$HOME/deep/in" "$HOME/ln" && git init -q -b main "$HOME/deep" &&
git -C "$HOME/deep" commit -q --allow-empty -m x && git -C "$HOME/deep" worktree add -q "$PWD/wt" &&
echo "$HOME/ln/../.git" > "$HOME/deep/.git/worktrees/wt/commondir" && git -C "$HOME/deep" config core.hooksPath ../hooks &&
git -C wt config --get core.hooksPath`,
			[]string{plant}, "wt", "echo y > f; git add f; git commit -qm y", "prog")
	})
}

// TestWalkCaseFoldedNames: names that a case-insensitive directory
// (casefold) folds to .git, or to HEAD, objects and refs, make a
// candidate that the check looks up through the kernel, as git does
// (here, case-sensitive, the lookup finds nothing), and the walk still
// goes below them; only git's own spelling of a bare repository stops
// it.
func TestWalkCaseFoldedNames(t *testing.T) {
	w := newWorld(t)
	w.sh(t, `mkdir -p a/.GIT/sub b/Head b/objectſ b/REFS c.git/objects/y c.git/refs && touch c.git/HEAD &&
git init -q a/.GIT/sub/r && git init -q b/REFS/x && git init -q c.git/objects/y`)
	want := []string{"a .git", "a/.GIT/sub/r .git", "b bare", "b/REFS/x .git", "c.git bare"}
	if got := rel(w.ws, gitpolicy.WalkFound(w.ws)); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("found %v, want %v", got, want)
	}
}

// TestWalkRefreshedWhileCommandRuns: while a command that prefetched
// its root runs, the root is walked again every walkRefresh, so that a
// long command's check reads a repository made outside the sandbox
// after the first walk (here walkRefresh is 100 ms).
func TestWalkRefreshedWhileCommandRuns(t *testing.T) {
	w := newWorld(t)
	defer gitpolicy.SetWalkRefresh(100 * time.Millisecond)()
	release := gitpolicy.Prefetch([]string{w.ws})
	defer release()
	if got := gitpolicy.WalkFound(w.ws); len(got) != 0 {
		t.Fatalf("found %v in an empty workspace", got)
	}
	w.sh(t, "git init -q late")
	testenv.Eventually(t, 10*time.Second, func() bool { return len(gitpolicy.WalkFound(w.ws)) == 1 },
		"the repository made after the first walk is not found while the command runs")
}
