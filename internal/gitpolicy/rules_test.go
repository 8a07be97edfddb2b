//go:build linux

package gitpolicy_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/gitpolicy"
)

// ruleCase runs script (after setup, in a repository with one commit)
// and expects each "rule path" of want refused, no rule but those of
// want, and the user's git to run nothing planted afterwards.
func ruleCase(t *testing.T, setup, script string, want ...string) *world {
	t.Helper()
	w := newWorld(t)
	w.repo(t)
	if setup != "" {
		w.sh(t, setup)
	}
	o := w.run(t, script)
	got := w.refused(o)
	rules := map[string]bool{}
	for _, x := range want {
		rules[x[:indexSpace(x)]] = true
		if !slices.Contains(got, x) {
			t.Errorf("%q not refused; refused: %v", x, got)
		}
	}
	for _, r := range o.refusals {
		if !rules[string(r.Rule)] {
			t.Errorf("unexpected refusal %v", r)
		}
	}
	for _, l := range gitpolicy.Lines(o.refusals, w.ws) {
		t.Log(l)
	}
	w.userGit(t)
	return w
}

func indexSpace(s string) int {
	for i := range s {
		if s[i] == ' ' {
			return i
		}
	}
	return len(s)
}

// allowCase runs script and expects nothing refused.
func allowCase(t *testing.T, setup, script string) *world {
	t.Helper()
	w := newWorld(t)
	w.repo(t)
	if setup != "" {
		w.sh(t, setup)
	}
	w.expectAllowed(t, w.run(t, script))
	w.userGit(t)
	return w
}

func TestRuleDotGit(t *testing.T) {
	ruleCase(t, "", "mkdir .GIT && touch git~1 && mkdir -p a && touch 'a/.git ' && mkdir \"$(printf '.g\\342\\200\\214it')\"",
		"git-dotgit .GIT", "git-dotgit git~1", "git-dotgit a/.git ", "git-dotgit .g\u200cit")
}

func TestRuleGitFile(t *testing.T) {
	t.Run("created", func(t *testing.T) {
		ruleCase(t, "", "mkdir x && echo 'gitdir: ../.git' > x/.git", "git-gitfile x/.git")
	})
	t.Run("removed", func(t *testing.T) {
		w := ruleCase(t, "git worktree add -q wt", "rm wt/.git", "git-gitfile wt/.git")
		if !w.exists("wt/.git") {
			t.Error("the worktree's .git file was removed")
		}
	})
}

func TestRuleGitmodules(t *testing.T) {
	for name, script := range map[string]string{
		"symlink":  "echo '[submodule \"s\"]' > m && ln -s m .gitmodules",
		"ext url":  `printf '[submodule "s"]\n\tpath = s\n\turl = ext::sh -c touch%% $SENT/ext\n' > .gitmodules`,
		"option":   `printf '[submodule "s"]\n\tpath = s\n\turl = --upload-pack=touch\n' > .gitmodules`,
		"path ..":  `printf '[submodule "s"]\n\tpath = ../s\n\turl = ./s\n' > .gitmodules`,
		"name ..":  `printf '[submodule "../../x"]\n\tpath = s\n\turl = ./s\n' > .gitmodules`,
		"update":   `printf '[submodule "s"]\n\tpath = s\n\turl = ./s\n\tupdate = !touch $SENT/u\n' > .gitmodules`,
		"unparsed": `printf '[submodule "s"\n' > .gitmodules`,
		"via .git": `printf '[submodule "s"]\n\tpath = x/.git/s\n\turl = ./s\n' > .gitmodules`,
	} {
		t.Run(name, func(t *testing.T) { ruleCase(t, "", script, "git-gitmodules .gitmodules") })
	}
	t.Run("allowed", func(t *testing.T) {
		allowCase(t, "", `printf '[submodule "lib"]\n\tpath = lib\n\turl = https://example.com/lib.git\n\tbranch = main\n' > .gitmodules`)
	})
}

func TestRuleConfig(t *testing.T) {
	t.Run("set", func(t *testing.T) { ruleCase(t, "", "git config core.pager less", "git-config .git/config") })
	t.Run("include", func(t *testing.T) {
		ruleCase(t, "", "git config include.path ../x.cfg", "git-config .git/config")
	})
	t.Run("keys that run nothing", func(t *testing.T) {
		allowCase(t, "", "git config user.name x && git remote add o https://example.com/x.git && git config branch.main.remote o && git config rerere.enabled true")
	})
	t.Run("remote with a transport helper", func(t *testing.T) {
		ruleCase(t, "", "git remote add o 'ext::sh -c touch% $SENT/ext'", "git-config .git/config")
	})
	t.Run("removed", func(t *testing.T) { ruleCase(t, "", "rm .git/config", "git-config .git/config") })
	t.Run("config.worktree", func(t *testing.T) {
		ruleCase(t, "", "printf '[core]\\n\\tfsmonitor = x\\n' > .git/config.worktree", "git-config .git/config.worktree")
	})
	t.Run("lock left behind", func(t *testing.T) {
		ruleCase(t, "", "cp .git/config .git/config.lock && echo '\\thookspath = x' >> .git/config.lock", "git-config .git/config.lock")
	})
	t.Run("rewritten the same", func(t *testing.T) {
		allowCase(t, "", "cp .git/config c && rm .git/config && cp c .git/config && rm c")
	})
}

func TestRuleNewConfig(t *testing.T) {
	for key, value := range map[string]string{
		"core.fsmonitor":           "touch $SENT/x",
		"core.hooksPath":           "hooks2",
		"core.sshCommand":          "touch $SENT/x",
		"core.pager":               "touch $SENT/x",
		"core.editor":              "touch $SENT/x",
		"core.worktree":            "..",
		"filter.f.clean":           "touch $SENT/x",
		"diff.d.command":           "touch $SENT/x",
		"merge.m.driver":           "touch $SENT/x",
		"alias.x":                  "!touch $SENT/x",
		"include.path":             "../x",
		"includeIf.gitdir:/.path":  "../x",
		"remote.origin.url":        "ext::sh -c touch% $SENT/x",
		"remote.origin.uploadpack": "touch $SENT/x",
		"core.bare":                "maybe",
		"credential.helper":        "!touch $SENT/x",
	} {
		t.Run(key, func(t *testing.T) {
			ruleCase(t, "", "git init -q n && git -C n config '"+key+"' '"+value+"'", "git-new-config n/.git/config")
		})
	}
	t.Run("unparsable", func(t *testing.T) {
		ruleCase(t, "", "git init -q n && echo '[core' >> n/.git/config", "git-new-config n/.git/config")
	})
	t.Run("allowed", func(t *testing.T) {
		allowCase(t, "", "git init -q n && git -C n config user.name me && git -C n config user.email me@x && git -C n remote add origin https://example.com/r.git && git -C n config core.autocrlf input")
	})
}

func TestRuleHooks(t *testing.T) {
	t.Run("existing repository", func(t *testing.T) {
		ruleCase(t, "", "printf '#!/bin/sh\\ntouch $SENT/h\\n' > .git/hooks/post-commit && chmod +x .git/hooks/post-commit",
			"git-hooks .git/hooks/post-commit")
	})
	t.Run("new repository", func(t *testing.T) {
		ruleCase(t, "", "git init -q n && printf '#!/bin/sh\\ntouch $SENT/h\\n' > n/.git/hooks/pre-commit",
			"git-hooks n/.git/hooks/pre-commit")
	})
	t.Run("sample", func(t *testing.T) {
		allowCase(t, "", "echo '# changed' >> .git/hooks/pre-commit.sample; rm -f .git/hooks/update.sample")
	})
}

func TestRuleCommondir(t *testing.T) {
	ruleCase(t, "", "echo .. > .git/commondir", "git-commondir .git/commondir")
}

func TestRuleGitdir(t *testing.T) {
	ruleCase(t, "git worktree add -q wt", "echo /elsewhere/.git > .git/worktrees/wt/gitdir", "git-gitdir .git/worktrees/wt/gitdir")
}

func TestRuleModules(t *testing.T) {
	ruleCase(t, "git init -q -b main lib && git -C lib commit -q --allow-empty -m l",
		"git -c protocol.file.allow=always submodule add -q file://$PWD/lib sub",
		"git-modules .git/modules/sub/config", "git-modules .git/modules/sub/HEAD", "git-gitfile sub/.git", "git-index .git/index")
}

func TestRuleWorktrees(t *testing.T) {
	t.Run("new worktree", func(t *testing.T) { allowCase(t, "", "git worktree add -q wt2") })
	t.Run("new worktree with another commondir", func(t *testing.T) {
		ruleCase(t, "", "git worktree add -q wt2 && echo ../../.. > .git/worktrees/wt2/commondir",
			"git-commondir .git/worktrees/wt2/commondir", "git-commondir wt2/.git")
	})
	t.Run("new worktree whose gitdir names another .git", func(t *testing.T) {
		ruleCase(t, "", "git worktree add -q wt2 && mkdir o && echo \"$PWD/o/.git\" > .git/worktrees/wt2/gitdir",
			"git-gitdir .git/worktrees/wt2/gitdir", "git-gitfile wt2/.git")
	})
	t.Run("admin directory without its worktree", func(t *testing.T) {
		ruleCase(t, "", "git worktree add -q wt2 && rm wt2/.git", "git-gitdir .git/worktrees/wt2/gitdir", "git-gitdir .git/worktrees/wt2/HEAD")
	})
	t.Run("lock", func(t *testing.T) {
		ruleCase(t, "git worktree add -q wt", "git worktree lock wt", "git-worktrees .git/worktrees/wt/locked")
	})
}

func TestRuleInfo(t *testing.T) {
	t.Run("exclude", func(t *testing.T) {
		ruleCase(t, "", "echo 'secret*' >> .git/info/exclude", "git-info .git/info/exclude")
	})
	t.Run("attributes", func(t *testing.T) {
		ruleCase(t, "", "echo '* filter=x' > .git/info/attributes", "git-info .git/info/attributes")
	})
	t.Run("new repository with patterns", func(t *testing.T) {
		ruleCase(t, "", "git init -q n && echo 'hide*' >> n/.git/info/exclude", "git-info n/.git/info/exclude")
	})
}

func TestRuleAlternates(t *testing.T) {
	t.Run("existing", func(t *testing.T) {
		ruleCase(t, "", "echo /tmp > .git/objects/info/alternates", "git-alternates .git/objects/info/alternates")
	})
	t.Run("clone --shared", func(t *testing.T) {
		ruleCase(t, "", "git clone -q --shared --no-hardlinks . c", "git-alternates c/.git/objects/info/alternates")
	})
}

func TestRuleSymlink(t *testing.T) {
	ruleCase(t, "", "ln -s refs/heads/main .git/X_HEAD", "git-symlink .git/X_HEAD")
}

func TestRuleRebaseExec(t *testing.T) {
	t.Run("exec line", func(t *testing.T) {
		ruleCase(t, "", "mkdir .git/rebase-merge && echo 'exec touch $SENT/x' > .git/rebase-merge/git-rebase-todo",
			"git-rebase-exec .git/rebase-merge/git-rebase-todo")
	})
	t.Run("strategy", func(t *testing.T) {
		ruleCase(t, "", "mkdir .git/rebase-merge && echo ../../evil > .git/rebase-merge/strategy",
			"git-rebase-exec .git/rebase-merge/strategy")
	})
}

func TestRuleStructure(t *testing.T) {
	t.Run("git directory", func(t *testing.T) { ruleCase(t, "", "rm -rf .git", "git-structure .git") })
	t.Run("HEAD", func(t *testing.T) { ruleCase(t, "", "rm .git/HEAD", "git-structure .git/HEAD") })
	t.Run("objects", func(t *testing.T) { ruleCase(t, "", "rm -rf .git/objects", "git-structure .git/objects") })
	t.Run("directory with a repository", func(t *testing.T) {
		w := ruleCase(t, "mkdir -p p/q && git -C p/q init -q", "rm -rf p", "git-structure p")
		if !w.exists("p/q/.git/config") {
			t.Error("the repository was removed")
		}
	})
	t.Run("directory without one", func(t *testing.T) { allowCase(t, "mkdir -p p/q && touch p/q/f", "rm -rf p") })
}

func TestRuleUnknown(t *testing.T) {
	ruleCase(t, "", "echo x > .git/foo && mkdir -p .git/remotes && echo 'URL: ext::x' > .git/remotes/origin",
		"git-unknown .git/foo", "git-unknown .git/remotes/origin", "git-unknown .git/remotes")
}

func TestRuleIndex(t *testing.T) {
	t.Run("garbage", func(t *testing.T) { ruleCase(t, "", "echo x > .git/index", "git-index .git/index") })
	t.Run("bad checksum", func(t *testing.T) {
		ruleCase(t, "", "printf 'xxxx' | dd of=.git/index bs=1 seek=$(($(stat -c %s .git/index)-4)) conv=notrunc 2>/dev/null",
			"git-index .git/index")
	})
	t.Run("split index", func(t *testing.T) {
		allowCase(t, "", "git update-index --split-index && echo y >> README && git add README && git commit -qm s")
	})
	t.Run("index version 4", func(t *testing.T) {
		allowCase(t, "", "git update-index --index-version 4 && mkdir -p a/b && echo z > a/b/c && git add a && git commit -qm v4")
	})
	t.Run("resolve-undo after a conflict", func(t *testing.T) {
		allowCase(t, "git checkout -qb o && echo o > README && git commit -qam o && git checkout -q main && echo m > README && git commit -qam m",
			"git merge o >/dev/null 2>&1; echo r > README && git add README")
	})
}

func TestRuleRef(t *testing.T) {
	t.Run("ref holding a path", func(t *testing.T) {
		ruleCase(t, "", "echo 'ref: ../../x' > .git/refs/heads/odd", "git-ref .git/refs/heads/odd")
	})
	t.Run("ref name", func(t *testing.T) {
		ruleCase(t, "", "git rev-parse HEAD > '.git/refs/heads/a..b'", "git-ref .git/refs/heads/a..b")
	})
	t.Run("HEAD", func(t *testing.T) {
		ruleCase(t, "", "echo 'ref: refs/heads/x y' > .git/HEAD", "git-ref .git/HEAD")
	})
	t.Run("packed-refs", func(t *testing.T) {
		ruleCase(t, "", "git pack-refs --all && echo 'junk' >> .git/packed-refs", "git-ref .git/packed-refs")
	})
	t.Run("MERGE_RR path", func(t *testing.T) {
		ruleCase(t, "", "printf '0123abcd\\t../x\\0' > .git/MERGE_RR", "git-ref .git/MERGE_RR")
	})
}

func TestRuleObject(t *testing.T) {
	t.Run("loose object under another name", func(t *testing.T) {
		ruleCase(t, "", "o=$(echo x | git hash-object -w --stdin) && mkdir -p .git/objects/00 && cp .git/objects/${o:0:2}/${o:2} .git/objects/00/$(printf '0%.0s' $(seq 38))",
			"git-object .git/objects/00/"+strings.Repeat("0", 38))
	})
	t.Run("corrupt pack", func(t *testing.T) {
		w := newWorld(t)
		w.repo(t)
		o := w.run(t, "git repack -qad && p=$(ls .git/objects/pack/*.pack) && chmod u+w $p && printf 'PACK\\0\\0\\0\\2\\0\\0\\0\\7' | dd of=$p bs=1 seek=0 conv=notrunc 2>/dev/null")
		if !slices.ContainsFunc(o.refusals, func(r gitpolicy.Refusal) bool {
			return r.Rule == gitpolicy.Object && strings.HasSuffix(r.Path, ".pack")
		}) {
			t.Errorf("the corrupt pack was not refused: %v", w.refused(o))
		}
	})
	t.Run("unknown file", func(t *testing.T) {
		ruleCase(t, "", "echo x > .git/objects/notes.txt", "git-object .git/objects/notes.txt")
	})
}
