//go:build linux

package gitpolicy_test

import "testing"

// TestCodeThroughSymlinkedDirectory: a program, hooks directory or
// included configuration file the user's configuration names by a path through a directory that the
// change set makes a symlink (or that is one in the workspace already)
// is matched where it resolves: the change set that swaps tools/ for a
// symlink to a directory holding a planted fsm.sh is not applied on its
// own, nor is a planted file where an existing symlink leads, nor a
// symlink made in the middle of a chain the path goes through. Each
// control shows the user's git run the planted program when the change
// set is applied unchecked; a symlink off the program's way is data.
func TestCodeThroughSymlinkedDirectory(t *testing.T) {
	plant := func(f string) string {
		return `mkdir -p "$(dirname ` + f + `)" && printf '#!/bin/sh\ntouch $SENT/prog\nexit 1\n' > ` + f + ` && chmod +x ` + f
	}
	cases := []struct{ name, setup, attack, mustStay, user string }{
		{"program, directory swapped for a symlink",
			"git config --global core.fsmonitor tools/fsm.sh && mkdir tools && echo t > tools/README && git add tools && git commit -qm tools",
			plant("other/fsm.sh") + " && rm -rf tools && ln -s other tools", "tools/README", "git status"},
		{"program, new symlink directory",
			"git config --global core.fsmonitor tools/fsm.sh",
			plant("other/fsm.sh") + " && ln -s other tools", "", "git status"},
		{"program, symlink already in the workspace",
			"git config --global core.fsmonitor tools/fsm.sh && mkdir other && echo o > other/README && ln -s other tools && git add -A && git commit -qm tools",
			plant("other/fsm.sh"), "", "git status"},
		{"program, absolute path through a symlink",
			`git config --global core.fsmonitor "$PWD/tools/fsm.sh" && ln -s other tools && git add -A && git commit -qm tools`,
			plant("other/fsm.sh"), "", "git status"},
		{"hooksPath, directory swapped for a symlink",
			"git config --global core.hooksPath ci/hooks && mkdir ci && echo c > ci/README && git add ci && git commit -qm ci",
			plant("x/hooks/pre-commit") + " && rm -rf ci && ln -s x ci", "ci/README", "echo y >> README; git commit -qam y"},
		{"hooksPath, symlink already in the workspace",
			"git config --global core.hooksPath ci/hooks && ln -s x ci && git add -A && git commit -qm ci",
			plant("x/hooks/pre-commit"), "", "echo y >> README; git commit -qam y"},
		// review7: the change makes a symlink in the middle of a chain
		// (tools -> x was there; x now points at other), to a program
		// already in the tree.
		{"program, symlink made in the middle of a chain",
			"git config --global core.fsmonitor tools/fsm.sh && " + plant("other/fsm.sh") + " && ln -s x tools && git add -A && git commit -qm tools",
			"ln -s other x", "", "git status"},
		{"hooksPath, symlink made in the middle of a chain",
			"git config --global core.hooksPath ci/hooks && " + plant("y/hooks/pre-commit") + " && ln -s x ci && git add -A && git commit -qm ci",
			"ln -s y x", "", "echo y >> README; git commit -qam y"},
	}
	incl := `mkdir -p other && printf '[core]\n\tfsmonitor = "touch $SENT/prog; false"\n' > other/team.gitconfig`
	cases = append(cases,
		struct{ name, setup, attack, mustStay, user string }{"included file, symlink already in the workspace",
			`git config --global include.path "$PWD/conf/team.gitconfig" && ln -s other conf && git add -A && git commit -qm conf`,
			incl, "", "git status"},
		struct{ name, setup, attack, mustStay, user string }{"included file, new symlink directory",
			`git config --global include.path "$PWD/conf/team.gitconfig"`,
			incl + " && ln -s other conf", "", "git status"})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := controlThen(t, c.setup, []string{c.attack}, ".", c.user, "prog")
			if c.mustStay != "" && !w.exists(c.mustStay) {
				t.Errorf("the swap was applied: %s is gone", c.mustStay)
			}
			if bad := w.oracle(t); len(bad) > 0 {
				t.Errorf("the oracle: %v", bad)
			}
		})
	}
	t.Run("symlink off the way", func(t *testing.T) {
		allowCase(t, "git config --global core.fsmonitor tools/fsm.sh", "mkdir -p other && echo x > other/f && ln -s other docs")
	})
}

// TestDotDotAfterSymlink: a path a configuration names with a ..
// component is resolved as the kernel resolves it, the .. taken after
// the symlinks before it, not cleaned as text: core.hooksPath =
// tools/../hooks is a/hooks when tools is a symlink to a/b, whether the
// change set makes that symlink or it was there; and ~ is the home as
// HOME names it, a symlink to a directory in the workspace followed
// before the .. after it (core.hooksPath and include.path). Each
// control shows the user's git run the planted program when the change
// set is applied unchecked.
func TestDotDotAfterSymlink(t *testing.T) {
	plant := func(f string) string {
		return `mkdir -p "$(dirname ` + f + `)" && printf '#!/bin/sh\ntouch $SENT/prog\nexit 1\n' > ` + f + ` && chmod +x ` + f
	}
	const commit = "echo y >> README; git commit -qam y"
	// The home is a symlink to deep/home, in the workspace.
	const home = `mkdir -p deep/home && rmdir "$HOME" && ln -s "$PWD/deep/home" "$HOME" && `
	cases := []struct{ name, setup, attack, user string }{
		{"hooksPath tools/../hooks, tools made a symlink to a deeper directory",
			"git config --global core.hooksPath tools/../hooks",
			plant("a/hooks/pre-commit") + " && mkdir -p a/b && ln -s a/b tools", commit},
		{"hooksPath tools/../hooks, tools a symlink already",
			"git config --global core.hooksPath tools/../hooks && mkdir -p a/b && echo b > a/b/README && ln -s a/b tools && git add -A && git commit -qm tools",
			plant("a/hooks/pre-commit"), commit},
		{"fsmonitor tools/../fsm.sh, tools made a symlink to a deeper directory",
			"git config --global core.fsmonitor tools/../fsm.sh",
			plant("a/fsm.sh") + " && mkdir -p a/b && ln -s a/b tools", "git status"},
		{"hooksPath ~/../hooks, the home a symlink",
			home + "git config --global core.hooksPath '~/../hooks'",
			plant("deep/hooks/pre-commit"), commit},
		{"include.path ~/../inc.cfg, the home a symlink",
			home + "git config --global include.path '~/../inc.cfg'",
			plant("deep/h/pre-commit") + ` && printf '[core]\n\thooksPath = deep/h\n' > deep/inc.cfg`, commit},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := controlThen(t, c.setup, []string{c.attack}, ".", c.user, "prog")
			if bad := w.oracle(t); len(bad) > 0 {
				t.Errorf("the oracle: %v", bad)
			}
		})
	}
	t.Run("tools/../hooks with tools a plain directory", func(t *testing.T) {
		allowCase(t, "git config --global core.hooksPath tools/../hooks", "mkdir -p tools a/hooks && echo x > a/hooks/pre-commit")
	})
}
