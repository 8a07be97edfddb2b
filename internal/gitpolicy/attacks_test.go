//go:build linux

package gitpolicy_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/gitpolicy"
	"github.com/bashvisor/bashvisor/internal/layer"
	"github.com/bashvisor/bashvisor/internal/layer/layertest"
)

// The two attacks of the 2026-11-24 review (H1, H2), verbatim but for
// the sentinel path.
const (
	attackCommondir = `mkdir -p .git/c2; cp -r .git/objects .git/refs .git/HEAD .git/c2/;
printf "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = \"touch $SENT/commondir; false\"\n" > .git/c2/config;
echo c2 > .git/commondir`
	attackSubmodule = `mkdir sub && cd sub && git init -q . && git commit -q --allow-empty -m i &&
printf "\tfsmonitor = \"touch $SENT/submodule; false\"\n" >> .git/config && cd .. &&
printf "[submodule \"sub\"]\n\tpath = sub\n\turl = ./sub\n" > .gitmodules && git add .gitmodules sub`
)

// unchecked runs script over a layer and applies everything, policy
// left out: the control that shows an attack works without it.
func (w *world) unchecked(t *testing.T, script string) {
	t.Helper()
	w.uncheckedIn(t, w.ws, script)
}

// uncheckedIn is unchecked with the layer's root, and the command, in
// dir.
func (w *world) uncheckedIn(t *testing.T, dir, script string) {
	t.Helper()
	l, err := layer.New(layer.Options{Roots: []string{dir}, Dir: w.state, UserXattr: layertest.Unprivileged()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Remove()
	if out, err := runLayered(t, l.Spec(), dir, w.env, script); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s, err := l.Diff()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Apply(context.Background(), nil, nil, ""); err != nil {
		t.Fatal(err)
	}
}

// expectControl shows that script, applied unchecked, makes the user's
// git run the planted code (so the checked run proves something).
func expectControl(t *testing.T, setup func(*world), script, sentinel string) {
	t.Helper()
	w := newWorld(t)
	setup(w)
	w.unchecked(t, script)
	w.sh(t, "echo x >> userfile; git status --short >/dev/null 2>&1; true")
	if !slices.Contains(w.sentinels(t), sentinel) {
		t.Fatalf("control: the attack did not work without policy (sentinels %v)", w.sentinels(t))
	}
}

// TestAttackCommondir is H1: .git/commondir pointing at a directory the
// command filled with a config that sets core.fsmonitor.
func TestAttackCommondir(t *testing.T) {
	setup := func(w *world) { w.repo(t) }
	expectControl(t, setup, attackCommondir, "commondir")
	w := newWorld(t)
	setup(w)
	o := w.run(t, attackCommondir)
	got := w.refused(o)
	for _, want := range []string{"git-commondir .git/commondir", "git-unknown .git/c2/config"} {
		if !slices.Contains(got, want) {
			t.Errorf("%q not refused: %v", want, got)
		}
	}
	if w.exists(".git/commondir") || w.exists(".git/c2") {
		t.Error("the planted files reached the repository")
	}
	w.userGit(t)
	w.sh(t, "git fsck --no-progress")
}

// TestAttackSubmoduleFsmonitor is H2: a nested repository whose config
// sets core.fsmonitor, registered as a submodule.
func TestAttackSubmoduleFsmonitor(t *testing.T) {
	setup := func(w *world) { w.repo(t) }
	expectControl(t, setup, attackSubmodule, "submodule")
	w := newWorld(t)
	setup(w)
	o := w.run(t, attackSubmodule)
	got := w.refused(o)
	if !slices.Contains(got, "git-new-config sub/.git/config") {
		t.Errorf("the nested repository's config was not refused: %v", got)
	}
	for _, r := range o.refusals {
		if !strings.HasPrefix(r.Path, w.ws+"/sub/.git") && r.Path != w.ws+"/.git/index" {
			t.Errorf("refused outside sub/.git: %v", r)
		}
	}
	if w.exists("sub/.git") {
		t.Error("the nested repository reached the workspace")
	}
	w.userGit(t)
}

// TestAttackVariants runs variants of both attacks, each refused, and
// the user's git afterwards runs none of the planted code.
func TestAttackVariants(t *testing.T) {
	evilConfig := `printf '[core]\n\tbare = true\n\tfsmonitor = "touch $SENT/fsmonitor; false"\n\tpager = "touch $SENT/pager; cat"\n'`
	bare := func(dir string) string {
		return "mkdir -p " + dir + "/objects " + dir + "/refs/heads && echo 'ref: refs/heads/main' > " + dir + "/HEAD && " + evilConfig + " > " + dir + "/config"
	}
	for _, tc := range []struct {
		name, setup, script string
		refused             []string // "rule path"
		gitDirs             []string // where the user runs git afterwards
	}{
		{name: "gitdir file in a subdirectory",
			script:  bare("evil") + " && mkdir x && echo 'gitdir: ../evil' > x/.git",
			refused: []string{"git-gitfile x/.git", "git-new-config evil/config"}, gitDirs: []string{".", "x"}},
		{name: ".git file of an existing nested repository pointed elsewhere",
			setup:   "git init -q nested && git -C nested commit -q --allow-empty -m n",
			script:  bare("evil") + " && rm -rf nested/.git && echo 'gitdir: ../evil' > nested/.git",
			refused: []string{"git-structure nested/.git"}, gitDirs: []string{".", "nested"}},
		{name: ".git created as a symlink",
			script:  bare("evil") + " && mkdir y && ln -s ../evil y/.git",
			refused: []string{"git-gitfile y/.git"}, gitDirs: []string{"y"}},
		{name: ".git created as a symlink to the real one",
			script:  "mkdir z && ln -s ../.git z/.git",
			refused: []string{"git-gitfile z/.git"}, gitDirs: []string{"z"}},
		{name: "worktree admin files of an existing worktree",
			setup:   "git worktree add -q wt",
			script:  "mkdir -p .git/c3 && cp -r .git/objects .git/refs .git/HEAD .git/c3/ && " + evilConfig + " > .git/c3/config && echo ../../c3 > .git/worktrees/wt/commondir",
			refused: []string{"git-commondir .git/worktrees/wt/commondir"}, gitDirs: []string{".", "wt"}},
		{name: "config.worktree of an existing worktree",
			setup:   "git worktree add -q wt",
			script:  evilConfig + " > .git/worktrees/wt/config.worktree",
			refused: []string{"git-config .git/worktrees/wt/config.worktree"}, gitDirs: []string{"wt"}},
		{name: "core.worktree in a new repository",
			script:  "git init -q nr && git -C nr config core.worktree ..",
			refused: []string{"git-new-config nr/.git/config"}, gitDirs: []string{"nr"}},
		{name: "hooks from a template",
			script:  "mkdir -p tpl/hooks && printf '#!/bin/sh\\ntouch $SENT/hook\\n' > tpl/hooks/post-commit && chmod +x tpl/hooks/post-commit && git init -q --template=tpl t2",
			refused: []string{"git-hooks t2/.git/hooks/post-commit"}, gitDirs: []string{"t2"}},
		{name: "hard link onto the config",
			script:  evilConfig + " > p && ln -f p .git/config",
			refused: []string{"git-config .git/config"}},
		{name: "hard link of the config, then written",
			script:  "ln .git/config cfg && echo '\tfsmonitor = \"touch $SENT/hl; false\"' >> cfg",
			refused: []string{"git-config .git/config"}},
		{name: "a directory renamed into .git",
			script:  bare("x/y") + " && mkdir s3 && mv x/y s3/.git",
			refused: []string{"git-new-config s3/.git/config"}, gitDirs: []string{"s3"}},
		{name: "case variation .GIT",
			script:  bare(".GIT"),
			refused: []string{"git-dotgit .GIT"}},
		{name: "case variation .Git file",
			script:  "mkdir q && echo 'gitdir: ../evil' > q/.Git",
			refused: []string{"git-dotgit q/.Git"}},
		{name: "NTFS trailing dot",
			script:  "mkdir q && mkdir 'q/.git.'",
			refused: []string{"git-dotgit q/.git."}},
		{name: "include in a new repository",
			script:  "git init -q inc && printf '[include]\\n\\tpath = ../../evil.cfg\\n' >> inc/.git/config && " + evilConfig + " > evil.cfg",
			refused: []string{"git-new-config inc/.git/config"}, gitDirs: []string{"inc"}},
		{name: "alias in a new repository",
			script:  "git init -q al && git -C al config alias.st '!touch $SENT/alias'",
			refused: []string{"git-new-config al/.git/config"}, gitDirs: []string{"al"}},
		{name: "embedded bare repository with a pager",
			script:  "git clone -q --no-hardlinks --bare . bare.git && git -C bare.git config core.pager 'touch $SENT/bare; cat'",
			refused: []string{"git-new-config bare.git/config"}, gitDirs: []string{"bare.git"}},
		{name: "new submodule git directory under modules",
			script:  "git clone -q --no-hardlinks --bare . .git/modules/m && git -C .git/modules/m config core.bare false",
			refused: []string{"git-modules .git/modules/m/config"}},
		{name: "core.hooksPath in the existing config",
			script:  "mkdir hk && printf '#!/bin/sh\\ntouch $SENT/hooksPath\\n' > hk/post-commit && chmod +x hk/post-commit && git config core.hooksPath hk",
			refused: []string{"git-config .git/config"}},
		{name: "update = !command in .gitmodules",
			script:  "printf '[submodule \"s\"]\\n\\tpath = s\\n\\turl = ./s\\n\\tupdate = !touch $SENT/update\\n' > .gitmodules",
			refused: []string{"git-gitmodules .gitmodules"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.repo(t)
			if tc.setup != "" {
				w.sh(t, tc.setup)
			}
			o := w.run(t, tc.script)
			got := w.refused(o)
			for _, want := range tc.refused {
				if !slices.Contains(got, want) {
					t.Errorf("%q not refused: %v", want, got)
				}
			}
			w.userGit(t, tc.gitDirs...)
			w.userGit(t)
		})
	}
}

// TestTwoStepPlanting: files planted in one command while their
// directory is not yet a git directory are checked when a later command
// makes it one.
func TestTwoStepPlanting(t *testing.T) {
	for _, tc := range []struct{ name, first, second, refusedIn string }{
		{"bare repository", `mkdir b && printf '[core]\n\tbare = true\n\tpager = "touch $SENT/pager; cat"\n' > b/config`,
			"mkdir -p b/objects b/refs && echo 'ref: refs/heads/main' > b/HEAD", "b/"},
		{".git directory", `mkdir -p s/.git && printf '[core]\n\tfsmonitor = "touch $SENT/fsm; false"\n' > s/.git/config`,
			"git -C s init -q", "s/.git/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.repo(t)
			o1 := w.run(t, tc.first)
			o2 := w.run(t, tc.second)
			var refused []gitpolicy.Refusal
			refused = append(refused, o1.refusals...)
			refused = append(refused, o2.refusals...)
			if len(refused) == 0 {
				t.Fatal("nothing refused")
			}
			for _, r := range refused {
				if !strings.HasPrefix(r.Path+"/", w.ws+"/"+tc.refusedIn) {
					t.Errorf("refused %v", r)
				}
			}
			w.userGit(t, strings.TrimSuffix(strings.Split(tc.refusedIn, "/")[0], "/"))
		})
	}
}
