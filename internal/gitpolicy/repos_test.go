//go:build linux

package gitpolicy_test

import "testing"

// TestOtherRepositoryNamesCode: a repository inside the workspace that
// no change is inside names code outside itself (a program, a hooks
// directory, an included file); the command plants that code at the
// workspace's top, and the user's git in the repository runs it
// (review8: only the repositories above each change were read).
func TestOtherRepositoryNamesCode(t *testing.T) {
	plant := func(f string) string {
		return `mkdir -p "$(dirname ` + f + `)" && printf '#!/bin/sh\ntouch $SENT/prog\nexit 1\n' > ` + f + ` && chmod +x ` + f
	}
	const sub = `git init -q sub && git -C sub commit -q --allow-empty -m x && git -C sub config `
	const commit = "echo y > f; git add f; git commit -qm y"
	cases := []struct{ name, setup, attack, user string }{
		{"fsmonitor absolute", sub + `core.fsmonitor "$PWD/tools/fsm.sh"`, plant("tools/fsm.sh"), "git status"},
		{"fsmonitor relative", sub + `core.fsmonitor ../tools/fsm.sh`, plant("tools/fsm.sh"), "git status"},
		{"hooksPath relative", sub + `core.hooksPath ../hooks`, plant("hooks/pre-commit"), commit},
		{"hooksPath absolute", sub + `core.hooksPath "$PWD/hooks"`, plant("hooks/pre-commit"), commit},
		{"include outside", sub + `include.path ../../shared.gitconfig`,
			`printf '[core]\n\tfsmonitor = "touch $SENT/prog; false"\n' > shared.gitconfig`, "git status"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			controlThen(t, c.setup, []string{c.attack}, "sub", c.user, "prog")
		})
	}
	// A bare repository runs its hooks in its git directory: a user's
	// push into it runs pre-receive from ../hooks, the workspace's top.
	t.Run("bare hooksPath relative", func(t *testing.T) {
		controlThen(t, `git init -q --bare bare.git && git -C bare.git config core.hooksPath ../hooks`,
			[]string{plant("hooks/pre-receive")}, ".", "git push -q bare.git HEAD:refs/heads/x", "prog")
	})
}
