//go:build linux

package gitpolicy_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// plant is one item of the grammar of change sets: a shell snippet run
// in the sandbox. Most plant code for the user's later git; some are
// what real work writes.
type plant struct {
	name, script string
}

const payload = `#!/bin/sh\ntouch $SENT/planted\n`

func hook(path string) string {
	return "mkdir -p " + path[:strings.LastIndexByte(path, '/')] + " && printf '" + payload + "' > " + path + " && chmod +x " + path
}

func bareRepo(dir, key string) string {
	return "mkdir -p " + dir + "/objects " + dir + "/refs/heads && echo 'ref: refs/heads/main' > " + dir + "/HEAD && " +
		`printf '[core]\n\tbare = false\n\tworktree = ..\n\t` + key + ` = "touch $SENT/planted; false"\n' > ` + dir + "/config"
}

var plants = []plant{
	// Hooks, in every place git looks for them.
	{"hook pre-commit", hook(".git/hooks/pre-commit")},
	{"hook reference-transaction", hook(".git/hooks/reference-transaction")},
	{"hook post-index-change", hook(".git/hooks/post-index-change")},
	{"hook post-checkout", hook(".git/hooks/post-checkout")},
	{"hook commit-msg", hook(".git/hooks/commit-msg")},
	{"hook symlink", "mkdir -p hk && printf '" + payload + "' > hk/h && chmod +x hk/h && ln -sf ../../hk/h .git/hooks/pre-commit"},
	{"hooksPath dir", hook(".husky/pre-commit")},
	{"global hooksPath dir", hook(".githooks/pre-commit")},
	{"global hooksPath dir in sub", "mkdir -p sub && cd sub && (" + hook(".githooks/post-checkout") + ")"},
	// Configuration.
	{"config fsmonitor", `git config core.fsmonitor "touch $SENT/planted; false"`},
	{"config hooksPath", "git config core.hooksPath .husky"},
	{"config include", "git config include.path ../inc.cfg"},
	{"included file", `printf '[core]\n\tfsmonitor = "touch $SENT/planted; false"\n' > inc.cfg`},
	{"worktree gitconfig", `printf '[core]\n\tfsmonitor = "touch $SENT/planted; false"\n' > .gitconfig`},
	{"globally included file", `printf '[core]\n\tfsmonitor = "touch $SENT/planted; false"\n' > team.gitconfig`},
	{"config diff.external", `git config diff.external "sh -c 'touch $SENT/planted'"`},
	{"config filter", `git config filter.f.clean "sh -c 'touch $SENT/planted; cat'" && echo '* filter=f' > .gitattributes`},
	{"attributes only", "echo '* filter=f diff=f' > .gitattributes"},
	{"config.worktree", `printf '[core]\n\tfsmonitor = "touch $SENT/planted; false"\n' > .git/config.worktree && git config extensions.worktreeConfig true`},
	{"config safe keys", "git config user.name u && git remote add o https://example.com/r.git && git config branch.main.remote o"},
	{"config remote ext", "git remote add e 'ext::sh -c touch% $SENT/planted'"},
	// Sequencer and rebase state.
	{"sequencer strategy path", `mkdir -p .git/sequencer git-merge-x && printf '` + payload + `' > evil.sh && chmod +x evil.sh &&
printf "pick $(git rev-parse other~1)\npick $(git rev-parse other)\n" > .git/sequencer/todo &&
git rev-parse HEAD | tee .git/sequencer/head > .git/sequencer/abort-safety &&
printf "[options]\n\tstrategy = x/../evil.sh\n" > .git/sequencer/opts`},
	{"sequencer exec", `mkdir -p .git/sequencer && printf "exec touch $SENT/planted\npick $(git rev-parse other)\n" > .git/sequencer/todo &&
git rev-parse HEAD | tee .git/sequencer/head > .git/sequencer/abort-safety && touch .git/CHERRY_PICK_HEAD`},
	{"rebase exec", `mkdir -p .git/rebase-merge && printf "exec touch $SENT/planted\n" > .git/rebase-merge/git-rebase-todo &&
echo refs/heads/main > .git/rebase-merge/head-name && git rev-parse HEAD > .git/rebase-merge/onto &&
git rev-parse HEAD > .git/rebase-merge/orig-head && touch .git/rebase-merge/interactive`},
	{"rebase strategy", `mkdir -p .git/rebase-merge && echo 'x/../evil.sh' > .git/rebase-merge/strategy`},
	// Repositories that appear, and the ways to reach them.
	{"bare repo in sub", bareRepo("sub", "fsmonitor")},
	{"objects and refs in sub", "mkdir -p sub/objects/k/.git sub/refs/k/.git"},
	{"delete sub objects", "rm -rf sub/objects sub/refs"},
	{"gitdir file", bareRepo("evil", "fsmonitor") + " && mkdir -p x && echo 'gitdir: ../evil' > x/.git"},
	{"commondir", attackCommondir},
	{"nested repo", "mkdir -p sub && cd sub && git init -q && git config core.fsmonitor 'touch $SENT/planted; false'"},
	{"alternates", "mkdir -p .git/objects/info && echo /tmp > .git/objects/info/alternates"},
	{"info attributes", "mkdir -p .git/info && echo '* filter=f' > .git/info/attributes"},
	// Index entries git restore . writes (made by writeIndex).
	{"index hook", "printf '" + payload + "' | git hash-object -w --stdin >/dev/null && cp $IDX/hook .git/index"},
	{"index absolute", "printf '" + payload + "' | git hash-object -w --stdin >/dev/null && cp $IDX/abs .git/index"},
	{"index dotdot", "printf '" + payload + "' | git hash-object -w --stdin >/dev/null && cp $IDX/dotdot .git/index"},
	// Refs and state files with odd content.
	{"ref to a path", "echo 'ref: ../../x' > .git/refs/heads/odd"},
	{"HEAD detached odd", "echo 'ref: refs/heads/../../x' > .git/HEAD"},
	{"delete HEAD", "rm -f .git/HEAD"},
	{"delete hooks", "rm -rf .git/hooks"},
	// What real work writes.
	{"commit", "echo w >> README && git commit -qam work"},
	{"branch and stash", "git branch b1 && echo s >> README && git stash -q"},
	{"worktree add", "git worktree add -q -b wtb wt"},
	{"gc", "git gc -q"},
	{"cherry-pick conflict", "git cherry-pick other >/dev/null 2>&1 || true"},
}

// TestPropertyOracle draws random change sets (one or two sandboxed
// commands of one to three plants each, the repository with and
// without a config that includes ../.gitconfig and a core.hooksPath,
// the user's global configuration with and without a relative
// core.hooksPath, an include of a workspace file and a filter driver),
// applies what the policy lets through and runs the oracle: the user's
// git runs nothing but git. The number of cases is rapid's
// -rapid.checks (100 by default, 2000 when CI=true: propertyChecks),
// drawn by propertyShards checks running side by side.
func TestPropertyOracle(t *testing.T) {
	start, cpu0, cases := time.Now(), cpuTime(), atomic.Int64{}
	// Indexes with an entry for the payload at a hook, an absolute path
	// and ../ (the same blobs in every case's repository), and the
	// repository every case starts from (copied: making it takes a dozen
	// git commands).
	idx, outside := t.TempDir(), t.TempDir()+"/abs"
	tmpl := newWorld(t)
	tmpl.repo(t)
	tmpl.sh(t, "git checkout -qb other && echo o > o && git add o && git commit -qm o1 && echo p > o && git commit -qam o2 && git checkout -q main")
	for name, path := range map[string]string{"hook": ".git/hooks/pre-commit", "abs": outside, "dotdot": "../escape"} {
		writeIndexOf(t, tmpl, idx+"/"+name, path, payload)
	}
	prop := func(t *testing.T, rt *rapid.T) {
		cases.Add(1)
		w := newWorld(t)
		defer os.RemoveAll(filepath.Dir(w.ws)) // now, not all at the end
		w.env = append(w.env, "IDX="+idx)
		if err := copyTree(tmpl.ws, w.ws); err != nil {
			t.Fatal(err)
		}
		if rapid.Bool().Draw(rt, "include ../.gitconfig") {
			w.appendConfig(t, "[include]\n\tpath = ../.gitconfig\n")
		}
		if rapid.Bool().Draw(rt, "hooksPath .husky") {
			w.appendConfig(t, "[core]\n\thooksPath = .husky\n")
		}
		// The user's global configuration, in the case's HOME.
		var global strings.Builder
		if rapid.Bool().Draw(rt, "global hooksPath .githooks") {
			global.WriteString("[core]\n\thooksPath = .githooks\n")
		}
		if rapid.Bool().Draw(rt, "global include team.gitconfig") {
			fmt.Fprintf(&global, "[include]\n\tpath = %s/team.gitconfig\n", w.ws)
		}
		if rapid.Bool().Draw(rt, "global filter f") {
			global.WriteString("[filter \"f\"]\n\tclean = \"sh -c 'touch $SENT/planted; cat'\"\n")
		}
		if err := os.WriteFile(w.home()+"/.gitconfig", []byte(global.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		steps := rapid.SliceOfN(rapid.SliceOfN(rapid.SampledFrom(plants), 1, 3), 1, 2).Draw(rt, "steps")
		for _, step := range steps {
			var parts []string
			for _, p := range step {
				parts = append(parts, "("+p.script+") >/dev/null 2>&1")
			}
			o := w.run(t, strings.Join(parts, "; ")+"; true")
			for _, l := range w.refused(o) {
				rt.Log(l)
			}
			// What the command's own git ran in the sandbox touched
			// the sentinel directory, which is not in the layer.
			w.clearSentinels(t)
		}
		if bad := w.oracle(t, ".", "sub", "x", "wt"); len(bad) > 0 {
			rt.Fatalf("the user's git ran what is not git's:\n%s", strings.Join(bad, "\n"))
		}
		if s := w.sentinels(t); len(s) > 0 {
			rt.Fatalf("planted code ran: %v", s)
		}
		if w.exists("../escape") || fileExists(outside) {
			rt.Fatalf("the user's git wrote outside the workspace")
		}
	}
	n, shards := propertyChecks(), propertyShards()
	if err := flag.Set("rapid.checks", strconv.Itoa((n+shards-1)/shards)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = flag.Set("rapid.checks", strconv.Itoa(n))
		t.Logf("%d cases in %v, %v CPU (the test and its processes; %d checks side by side)",
			cases.Load(), time.Since(start).Round(time.Millisecond), cpuTime()-cpu0, shards)
	})
	// Not t.Parallel: -test.parallel (GOMAXPROCS) would run only as
	// many at once as there are cores.
	var wg sync.WaitGroup
	for i := range shards {
		wg.Go(func() {
			t.Run(fmt.Sprint(i), func(t *testing.T) { rapid.Check(t, func(rt *rapid.T) { prop(t, rt) }) })
		})
	}
	wg.Wait()
}

// propertyChecks is the number of cases of TestPropertyOracle:
// -rapid.checks, or RAPID_CHECKS; without either, 2000 when CI=true.
// 2000 cases took 4m26s with -race, eight side by side, on 2 cores at
// load 23-25 (other tests beside it; the test got 0.92 of a core), and
// 247 s of CPU (the test, git, strace and the sandbox): on 2 idle
// cores about 125 s. Per case (sequential, load 11-14): the oracle 85
// ms of CPU, mostly the user's 11 git commands themselves (git
// submodule status, a shell script, costs as much as the ten others);
// the sandboxed commands 15 ms; copying the template repository 15-20
// ms; the policy, diff and apply 2 ms. Starting each sandboxed command
// from a re-executed -race test binary cost 15 ms of CPU more (318 s
// of CPU, 5m57s, for the 2000 cases before runLayered). strace adds
// little (a seccomp user-notification tracer cost the same). A case
// took 1.8 s at load 32 when the oracle started strace for each command
// and each case made its own repository.
func propertyChecks() int {
	f := flag.Lookup("rapid.checks")
	n, _ := strconv.Atoi(f.Value.String())
	set := os.Getenv("RAPID_CHECKS") != ""
	flag.Visit(func(v *flag.Flag) { set = set || v == f })
	if !set && os.Getenv("CI") == "true" {
		return 2000
	}
	return n
}

// propertyShards is how many checks of TestPropertyOracle run side by
// side: the cases spend much of their time waiting (for mounts,
// namespaces and files to be torn down, and for git, strace and the
// sandbox to start), so it takes four per core to keep the cores busy
// (two per core used 115-135 % of 2 idle cores).
func propertyShards() int { return 4 * runtime.GOMAXPROCS(0) }

// appendConfig appends text to the repository's config.
func (w *world) appendConfig(t testing.TB, text string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(w.ws, ".git/config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func (w *world) clearSentinels(t testing.TB) {
	t.Helper()
	for _, s := range w.sentinels(t) {
		if err := os.Remove(filepath.Join(w.sent, s)); err != nil {
			t.Fatal(err)
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// cpuTime is the CPU time the test binary and its waited-for processes
// have used so far.
func cpuTime() time.Duration {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	return time.Duration(self.Utime.Nano() + self.Stime.Nano() + children.Utime.Nano() + children.Stime.Nano())
}
