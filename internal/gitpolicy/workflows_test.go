//go:build linux

package gitpolicy_test

import (
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/layer"
	"github.com/bashvisor/bashvisor/internal/layer/layertest"
)

// TestWorkflows runs the git workflows agents use inside the layer,
// one sandboxed command per step: nothing is refused, and the user's
// git outside sees the result (and runs no planted code: there is
// none, and the sentinel directory stays empty).
func TestWorkflows(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup string   // run by the user before (empty: no repository)
		steps []string // sandboxed commands
		check string   // run by the user after; must succeed
		want  string   // in check's output
	}{
		{name: "init add commit",
			steps: []string{"git init -q -b main . && echo a > a.txt && git add a.txt && git commit -qm first",
				"echo b >> a.txt && git commit -qam second"},
			check: "git log --format=%s && git status --short && git fsck --no-progress", want: "second\nfirst\n"},
		{name: "init in a subdirectory",
			setup: "git init -q -b main . && git commit -q --allow-empty -m root",
			steps: []string{"mkdir lib && cd lib && git init -q -b main && echo x > x && git add x && git commit -qm lib"},
			check: "git -C lib log --format=%s && git -C lib status --short", want: "lib\n"},
		{name: "branch and merge",
			setup: "git init -q -b main . && echo a > a && git add a && git commit -qm a",
			steps: []string{"git checkout -qb feature && echo f > f && git add f && git commit -qm f",
				"git checkout -q main && git merge -q --no-ff -m merged feature && git branch -d feature"},
			check: "git log --format=%s -1 && git branch --format='%(refname:short)' && git status --short", want: "merged\nmain\n"},
		{name: "clone a local repository",
			setup: "git init -q -b main src && cd src && echo s > s && git add s && git commit -qm src",
			steps: []string{"git clone -q $CLONE_OPTS src copy && cd copy && echo c >> s && git commit -qam change"},
			check: "git -C copy log --format=%s && git -C copy remote -v && git -C copy status --short --branch", want: "change\nsrc\n"},
		{name: "clone bare and shallow",
			setup: "git init -q -b main src && cd src && echo s > s && git add s && git commit -qm one && echo t >> s && git commit -qam two",
			steps: []string{"git clone -q $CLONE_OPTS --bare src b.git && git clone -q --depth 1 file://$PWD/src shallow"},
			check: "git -C b.git log --format=%s && git -C shallow log --format=%s", want: "two\none\ntwo\n"},
		{name: "stash",
			setup: "git init -q -b main . && echo a > a && git add a && git commit -qm a",
			steps: []string{"echo wip >> a && git stash -q", "git stash list | wc -l && git stash pop -q"},
			check: "cat a && git stash list | wc -l", want: "a\nwip\n0\n"},
		{name: "rebase with a conflict continued in the next command",
			setup: "git init -q -b main . && echo 1 > f && git add f && git commit -qm base && git checkout -qb topic && echo topic > f && git commit -qam topic && git checkout -q main && echo main > f && git commit -qam main && git checkout -q topic",
			steps: []string{"git rebase main >/dev/null 2>&1; test -d .git/rebase-merge",
				"echo resolved > f && git add f && GIT_EDITOR=true git rebase --continue >/dev/null"},
			check: "git log --format=%s && cat f", want: "topic\nmain\nbase\nresolved\n"},
		{name: "commit in an existing submodule",
			setup: "git init -q -b main sublib && git -C sublib commit -q --allow-empty -m s && git init -q -b main . && git -c protocol.file.allow=always submodule add -q ./sublib mod && git commit -qm sub",
			steps: []string{"cd mod && echo m > m && git add m && git commit -qm inmod"},
			check: "git -C mod log --format=%s -1 && git status --short", want: "inmod\n M mod\n"},
		{name: "commit in an existing linked worktree",
			setup: "git init -q -b main . && git commit -q --allow-empty -m root && git worktree add -q -b wtb wt",
			steps: []string{"cd wt && echo w > w && git add w && git commit -qm inwt"},
			check: "git log --format=%s -1 wtb && git -C wt status --short", want: "inwt\n"},
		{name: "linked worktree added",
			setup: "git init -q -b main . && git commit -q --allow-empty -m root",
			steps: []string{"git worktree add -q -b wtb wt", "cd wt && echo w > w && git add w && git commit -qm inwt"},
			check: "git log --format=%s -1 wtb && git -C wt status --short && git worktree list | wc -l", want: "inwt\n2\n"},
		{name: "cherry-pick with a conflict continued in the next command",
			setup: "git init -q -b main . && echo 1 > f && git add f && git commit -qm base && git checkout -qb o && echo o > f && git commit -qam o && git checkout -q main && echo m > f && git commit -qam m",
			steps: []string{"git cherry-pick o >/dev/null 2>&1; test -d .git/sequencer || test -f .git/CHERRY_PICK_HEAD",
				"echo r > f && git add f && GIT_EDITOR=true git cherry-pick --continue >/dev/null"},
			check: "git log --format=%s -1 && cat f", want: "o\nr\n"},
		{name: "cherry-pick -x of two commits stopped on a conflict",
			setup: "git init -q -b main . && echo 1 > f && git add f && git commit -qm base && git checkout -qb o && echo o > f && git commit -qam o1 && echo p > g && git add g && git commit -qm o2 && git checkout -q main && echo m > f && git commit -qam m",
			steps: []string{"git cherry-pick -x -s --strategy=ort -X ignore-space-change o~1 o >/dev/null 2>&1; grep -q strategy .git/sequencer/opts",
				"git cherry-pick --continue >/dev/null 2>&1 || (echo r > f && git add f && GIT_EDITOR=true git cherry-pick --continue >/dev/null)"},
			check: "git log --format=%s -2", want: "o2\no1\n"},
		{name: "merge with a conflict and rerere",
			setup: "git init -q -b main . && git config rerere.enabled true && echo 1 > f && git add f && git commit -qm base && git checkout -qb o && echo o > f && git commit -qam o && git checkout -q main && echo m > f && git commit -qam m",
			steps: []string{"git merge o >/dev/null 2>&1; test -f .git/MERGE_HEAD",
				"echo r > f && git add f && GIT_EDITOR=true git merge --continue >/dev/null && ls .git/rr-cache/*/postimage"},
			check: "git log --format=%s -1 && cat f && ls .git/rr-cache | wc -l", want: "Merge branch 'o'\nr\n1\n"},
		{name: "interactive rebase with a multi-pick sequence",
			setup: "git init -q -b main . && for i in 1 2 3; do echo $i > f$i && git add f$i && git commit -qm c$i; done",
			steps: []string{"GIT_SEQUENCE_EDITOR='sed -i 1s/^pick/edit/' git rebase -qi HEAD~2 >/dev/null 2>&1; test -d .git/rebase-merge",
				"git commit -q --amend -m c2x && git rebase --continue >/dev/null 2>&1"},
			check: "git log --format=%s", want: "c3\nc2x\nc1\n"},
		{name: "stash with untracked files and a branch",
			setup: "git init -q -b main . && echo a > a && git add a && git commit -qm a",
			steps: []string{"echo u > u && echo b >> a && git stash -qu && git branch b2 && git stash list | wc -l"},
			check: "git stash list | wc -l && git branch --format='%(refname:short)'", want: "1\nb2\nmain\n"},
		{name: "repack, gc aggressive, commit-graph and pack-refs",
			setup: "git init -q -b main . && for i in 1 2 3; do echo $i > f$i && git add f$i && git commit -qm c$i; done && git tag v1",
			steps: []string{"git repack -qad && git gc -q --aggressive --prune=now && git commit-graph write --reachable && git pack-refs --all"},
			check: "git log --format=%s | wc -l && git fsck --no-progress && git tag", want: "3\nv1\n"},
		{name: "notes, bisect, replace, maintenance, multi-pack-index, untracked cache",
			setup: "git init -q -b main . && for i in 1 2 3 4; do echo $i > f$i && git add f$i && git commit -qm c$i; done",
			steps: []string{"git notes add -m n HEAD && git bisect start HEAD HEAD~3 >/dev/null && git bisect good >/dev/null",
				"git bisect reset >/dev/null 2>&1 && git replace --graft HEAD~1 HEAD~3 && git repack -qd && git maintenance run --task=commit-graph --task=loose-objects --task=incremental-repack --quiet",
				"git multi-pack-index write --bitmap 2>/dev/null || git multi-pack-index write; git update-index --untracked-cache && git status --short >/dev/null"},
			check: "git notes show HEAD && git fsck --no-progress", want: "n\n"},
		{name: "worktree removed and pruned",
			setup: "git init -q -b main . && git commit -q --allow-empty -m root && git worktree add -q wt",
			steps: []string{"rm -rf wt && git worktree prune"},
			check: "git worktree list | wc -l", want: "1\n"},
		{name: "am and rebase --apply stopped on a conflict, revert",
			setup: "git init -q -b main . && echo 1 > f && git add f && git commit -qm base && git checkout -qb o && echo o > f && git commit -qam o && git format-patch -q -1 -o /tmp/gp-am-$$ && mv /tmp/gp-am-$$/*.patch p.patch && rmdir /tmp/gp-am-$$ && git checkout -q main && echo m > f && git commit -qam m",
			steps: []string{"git am -3 p.patch >/dev/null 2>&1; test -d .git/rebase-apply", "git am --abort && git rebase --apply o >/dev/null 2>&1; test -d .git/rebase-apply",
				"git rebase --abort && git revert --no-edit HEAD >/dev/null"},
			check: "git log --format=%s -1", want: "Revert \"m\"\n"},
		{name: "tags, gc and reflog",
			setup: "git init -q -b main . && echo a > a && git add a && git commit -qm a",
			steps: []string{"git tag -a v1 -m v1 && git gc -q && git reflog expire --expire=now --all"},
			check: "git tag && git fsck --no-progress", want: "v1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			if layertest.Unprivileged() {
				// See TestUnprivilegedLocalClone.
				w.env = append(w.env, "CLONE_OPTS=--no-hardlinks")
			}
			if tc.setup != "" {
				w.sh(t, tc.setup)
			}
			for _, step := range tc.steps {
				o := w.run(t, step)
				w.expectAllowed(t, o)
			}
			out := w.sh(t, tc.check)
			if !strings.Contains(out, tc.want) {
				t.Errorf("%s:\n%s\nwant %q", tc.check, out, tc.want)
			}
			w.userGit(t)
		})
	}
}

// TestWorkflowOutsideGitDir works in a linked worktree whose git
// directory lies outside it: the layer has two roots, the worktree and
// the repository's git directory (what sandbox.WorkspaceRoots gives),
// and commits land in both; planting a hook there is still refused.
func TestWorkflowOutsideGitDir(t *testing.T) {
	w := newWorld(t)
	w.sh(t, "mkdir repo && cd repo && git init -q -b main && git commit -q --allow-empty -m root && git worktree add -q -b wtb ../wt")
	wt, gitDir := w.ws+"/wt", w.ws+"/repo/.git"
	o := w.runIn(t, wt, []string{wt, gitDir}, "echo w > w && git add w && git commit -qm inwt")
	w.expectAllowed(t, o)
	if out := w.sh(t, "git -C repo log --format=%s -1 wtb && git -C wt status --short"); out != "inwt\n" {
		t.Errorf("after the commit: %q", out)
	}
	o = w.runIn(t, wt, []string{wt, gitDir}, "printf '#!/bin/sh\\ntouch $SENT/h\\n' > $(git rev-parse --git-common-dir)/hooks/post-commit")
	if got := w.refused(o); len(got) != 1 || got[0] != "git-hooks repo/.git/hooks/post-commit" {
		t.Errorf("refused %v", got)
	}
	w.userGit(t, "wt", "repo")
}

// TestUnprivilegedLocalClone documents a limit of unprivileged
// overlays: a copied-up file gets a new inode number (overlayfs keeps
// the lower one only where it may decode file handles, which needs
// CAP_DAC_READ_SEARCH outside the user namespace), so git clone of a
// local path, which hard-links the objects and checks the link's inode,
// fails with "hardlink different from source"; --no-hardlinks or a
// file:// URL work.
func TestUnprivilegedLocalClone(t *testing.T) {
	if !layertest.Unprivileged() {
		t.Skip("as root a copied-up file keeps its inode number and git clone of a local path works (TestWorkflows); this runs in TestUnprivileged")
	}
	w := newWorld(t)
	w.sh(t, "git init -q -b main src && git -C src commit -q --allow-empty -m s")
	l, err := layer.New(layer.Options{Roots: []string{w.ws}, Dir: w.state, UserXattr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Remove()
	out, err := layertest.Run(t, l.Spec(), w.ws, w.env, "git clone -q src c1")
	if err == nil || !strings.Contains(out, "hardlink different from source") {
		t.Errorf("git clone of a local path: %v\n%s", err, out)
	}
	l2, err := layer.New(layer.Options{Roots: []string{w.ws}, Dir: w.state, UserXattr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Remove()
	if out, err := layertest.Run(t, l2.Spec(), w.ws, w.env, "git clone -q --no-hardlinks src c2 && git clone -q file://$PWD/src c3"); err != nil {
		t.Errorf("%v\n%s", err, out)
	}
}

// TestUnprivileged runs the attacks and workflows again as a user
// other than root (user namespaces, userxattr).
func TestUnprivileged(t *testing.T) {
	layertest.RerunUnprivileged(t, "^Test(Attack|TwoStep|Workflow|Rule|UnprivilegedLocalClone|H1|H2|H5|M3|M4|L2|OracleSeesPlantedCode|EnvConfig|CodeThroughSymlinkedDirectory|WalkUnreadableDirectory|DotGitSymlink)")
}
