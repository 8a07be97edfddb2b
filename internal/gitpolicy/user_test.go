//go:build linux

package gitpolicy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/gitpolicy"
)

// The user's own configuration, outside the workspace, in the test's
// HOME: what it names in the workspace is code, as the user's later git
// really reads it (each attack's control shows the planted code run
// when policy ignores that configuration).

// home returns the world's HOME.
func (w *world) home() string {
	for _, kv := range w.env {
		if h, ok := strings.CutPrefix(kv, "HOME="); ok {
			return h
		}
	}
	return ""
}

// passableHome returns the name of a user in the password database whose
// home is a directory that is two levels deep at most and that this
// process can search, so that ~NAME/../.. is /.
func passableHome(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Split(strings.TrimSpace(line), ":")
		if len(f) < 6 || !filepath.IsAbs(f[5]) || strings.Count(filepath.Clean(f[5]), "/") > 2 {
			continue
		}
		if _, err := os.Stat(f[5] + "/../.."); err == nil { // not cleaned: the kernel walks it
			return f[0]
		}
	}
	t.Fatal("no user in /etc/passwd with a home this process can pass through")
	return ""
}

// TestGlobalHooksPath: a global core.hooksPath = .githooks (relative:
// below every repository's working tree, where git runs hooks) makes a
// workspace's .githooks/ hooks; so does an absolute one naming a
// workspace directory.
func TestGlobalHooksPath(t *testing.T) {
	hook := `mkdir -p .githooks && printf '#!/bin/sh\ntouch $SENT/hook\n' > .githooks/pre-commit && chmod +x .githooks/pre-commit`
	for _, setup := range []string{
		"git config --global core.hooksPath .githooks",
		`git config --global core.hooksPath "$PWD/.githooks"`,
		`git config --global core.hooksPath "~/../ws/.githooks"`,
		// ~name is name's home, as git's expand_user_path reads it
		// from the password database (a user whose home this user
		// can pass through: root's is not searchable as another user,
		// and a home such as /nonexistent cannot be passed through).
		`git config --global core.hooksPath "~` + passableHome(t) + `/../..$PWD/.githooks"`,
	} {
		t.Run(setup, func(t *testing.T) {
			w := controlThen(t, setup, []string{hook}, ".", "echo y >> README; git commit -qam y", "hook")
			if w.exists(".githooks/pre-commit") {
				t.Error("the hook was applied")
			}
			if bad := w.oracle(t); len(bad) > 0 {
				t.Errorf("the oracle: %v", bad)
			}
		})
	}
	// A linked worktree runs its hooks in its own top directory.
	t.Run("linked worktree", func(t *testing.T) {
		w := controlThen(t, "git worktree add -q -b wtb wt && git config --global core.hooksPath .githooks",
			[]string{"cd wt && " + hook}, "wt", "echo y >> README; git commit -qam y", "hook")
		if w.exists("wt/.githooks/pre-commit") {
			t.Error("the hook was applied")
		}
	})
}

// TestGlobalIncludeNamesWorkspaceFile: the global configuration includes
// a workspace file (directly or through includeIf): it is configuration,
// and setting core.fsmonitor there is refused.
func TestGlobalIncludeNamesWorkspaceFile(t *testing.T) {
	plant := `printf '[core]\n\tfsmonitor = "touch $SENT/inc; false"\n' > team.gitconfig`
	for _, setup := range []string{
		`git config --global include.path "$PWD/team.gitconfig"`,
		`git config --global "includeIf.gitdir:$PWD/.path" "$PWD/team.gitconfig"`,
		`mkdir -p ~/.config/git && printf '[include]\n\tpath = ../../../ws/team.gitconfig\n' > ~/.config/git/config`,
	} {
		t.Run(setup, func(t *testing.T) {
			w := controlThen(t, setup, []string{plant}, ".", "git status", "inc")
			if w.exists("team.gitconfig") {
				t.Error("the included file was applied")
			}
			if bad := w.oracle(t); len(bad) > 0 {
				t.Errorf("the oracle: %v", bad)
			}
		})
	}
}

// TestGlobalDriversMakeAttributesCode: a filter driver defined in the
// global configuration is selected by any working tree's
// .gitattributes: a change of one is refused.
func TestGlobalDriversMakeAttributesCode(t *testing.T) {
	w := controlThen(t, `git config --global filter.x.clean "touch $SENT/filter; cat"`,
		[]string{`printf '* filter=x\n' > .gitattributes`}, ".", "echo z >> README; git add README", "filter")
	if w.exists(".gitattributes") {
		t.Error(".gitattributes was applied")
	}
	// Without the driver, .gitattributes is data.
	allowCase(t, "", `printf '* text\n' > .gitattributes`)
}

// TestGlobalConfigInRootsJudged: when a root holds the user's global
// configuration (HOME is the workspace), a change of it is judged like
// a repository's configuration: core.fsmonitor is refused, user.name
// applies.
func TestGlobalConfigInRootsJudged(t *testing.T) {
	w := newWorld(t)
	w.repo(t)
	for i, kv := range w.env {
		if strings.HasPrefix(kv, "HOME=") {
			w.env[i] = "HOME=" + w.ws
		}
	}
	o := w.run(t, `printf '[core]\n\tfsmonitor = "touch $SENT/global; false"\n' > ~/.gitconfig`)
	w.expectRefused(t, o, gitpolicy.Config, ".gitconfig")
	w.userGit(t)
	o = w.run(t, `git config --global user.name someone`)
	w.expectAllowed(t, o)
	if !w.exists(".gitconfig") {
		t.Error("user.name in the global configuration was not applied")
	}
}

// TestEnclosingRepositoryConfig: the layer's root is a directory inside
// a repository; that repository's configuration (outside the layer)
// names the root's files as hooks and includes, and its drivers make
// the root's .gitattributes code.
func TestEnclosingRepositoryConfig(t *testing.T) {
	cases := []struct {
		name, setup, plant, user, sentinel string
		absent                             string
	}{
		{"hooksPath", "git config core.hooksPath sub/hooks",
			`mkdir -p hooks && printf '#!/bin/sh\ntouch $SENT/outer\n' > hooks/pre-commit && chmod +x hooks/pre-commit`,
			"echo y >> README; git commit -qam y", "outer", "sub/hooks/pre-commit"},
		{"include", "git config include.path ../sub/x.gitconfig",
			`printf '[core]\n\tfsmonitor = "touch $SENT/outer; false"\n' > x.gitconfig`,
			"git status", "outer", "sub/x.gitconfig"},
		{"fsmonitor", "git config core.fsmonitor ./sub/fsm.sh",
			`printf '#!/bin/sh\ntouch $SENT/outer\nexit 1\n' > fsm.sh && chmod +x fsm.sh`,
			"git status", "outer", "sub/fsm.sh"},
		{"driver", `git config filter.y.clean "touch $SENT/outer; cat"`,
			`printf '* filter=y\n' > .gitattributes; echo data > f`,
			"git add sub", "outer", "sub/.gitattributes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, checked := range []bool{false, true} {
				w := newWorld(t)
				w.repo(t)
				w.sh(t, "mkdir sub && "+c.setup)
				sub := filepath.Join(w.ws, "sub")
				if checked {
					o := w.runIn(t, sub, []string{sub}, c.plant)
					t.Logf("refused: %v", w.refused(o))
					if w.exists(c.absent) {
						t.Errorf("%s was applied", c.absent)
					}
					w.userDo(t, ".", c.user)
					continue
				}
				w.uncheckedIn(t, sub, c.plant)
				w.userDo2(t, c.user)
				if !slices.Contains(w.sentinels(t), c.sentinel) {
					t.Fatalf("control: the attack did not work without policy (sentinels %v)", w.sentinels(t))
				}
			}
		})
	}
}

// userDo2 runs script as the user in the workspace, ignoring failure.
func (w *world) userDo2(t *testing.T, script string) {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir, cmd.Env = w.ws, w.env
	_, _ = cmd.CombinedOutput()
}

// TestUserConfigFromEnv: GIT_CONFIG_GLOBAL replaces ~/.gitconfig and
// GIT_CONFIG_COUNT's variables count like the global file's.
func TestUserConfigFromEnv(t *testing.T) {
	hook := `mkdir -p .githooks && printf '#!/bin/sh\ntouch $SENT/hook\n' > .githooks/pre-commit && chmod +x .githooks/pre-commit`
	t.Run("GIT_CONFIG_COUNT", func(t *testing.T) {
		w := newWorld(t)
		w.repo(t)
		w.env = append(w.env, "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=core.hooksPath", "GIT_CONFIG_VALUE_0=.githooks")
		o := w.run(t, hook)
		w.expectRefused(t, o, gitpolicy.Hooks, ".githooks/pre-commit")
		w.userDo(t, ".", "echo y >> README; git commit -qam y")
	})
	t.Run("GIT_CONFIG_GLOBAL", func(t *testing.T) {
		w := newWorld(t)
		w.repo(t)
		g := filepath.Join(w.home(), "other.gitconfig")
		if err := os.WriteFile(g, []byte("[core]\n\thooksPath = .githooks\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		w.env = append(w.env, "GIT_CONFIG_GLOBAL="+g)
		o := w.run(t, hook)
		w.expectRefused(t, o, gitpolicy.Hooks, ".githooks/pre-commit")
		w.userDo(t, ".", "echo y >> README; git commit -qam y")
	})
}

// TestProgramKeysNameWorkspaceFiles: a program-valued key of the
// user's configuration (or of the repository's, or of a repository
// enclosing the root) that names a file by a relative path names it
// below the working tree, where git runs the command: a change of that
// file is refused (the control shows git run the planted file).
func TestProgramKeysNameWorkspaceFiles(t *testing.T) {
	plant := func(f string) string {
		return `mkdir -p "$(dirname ` + f + `)" && printf '#!/bin/sh\ntouch $SENT/prog\nexit 1\n' > ` + f + ` && chmod +x ` + f
	}
	cases := []struct{ name, setup, file, user string }{
		{"fsmonitor", "git config --global core.fsmonitor ./fsm.sh", "fsm.sh", "git status"},
		{"fsmonitor by sh", `git config --global core.fsmonitor "sh tools/fsm"`, "tools/fsm", "git status"},
		{"fsmonitor by sh, no slash", `git config --global core.fsmonitor "sh fsm"`, "fsm", "git status"},
		{"editor", "git config --global core.editor ./ed.sh", "ed.sh", "git commit --allow-empty"},
		{"sshCommand", "git config --global core.sshCommand bin/ssh", "bin/ssh", "git fetch -q git@example.invalid:x/y"},
		{"diff.external", "git config --global diff.external ./d.sh", "d.sh", "echo z >> README; git diff"},
		{"alias", "git config --global alias.x '!./x.sh'", "x.sh", "git x"},
		{"repository's own", "git config core.fsmonitor ./fsm.sh", "fsm.sh", "git status"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := controlThen(t, c.setup, []string{plant(c.file)}, ".", c.user, "prog")
			if w.exists(c.file) {
				t.Errorf("%s was applied", c.file)
			}
		})
	}
	// An argument without a slash is no program: a file of that name
	// (log/ here, with the alias "!git log --oneline") is data.
	allowCase(t, `git config --global alias.lg '!git log --oneline'`, "mkdir -p log && echo x > log/f && echo y > git")
}
