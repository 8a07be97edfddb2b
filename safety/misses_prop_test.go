package safety

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/testenv"
	"pgregory.net/rapid"
)

// The hidden corpora's four misses (issue 29) and variants of each: the
// core commands, and wrappers that hide them (shells, eval, functions,
// aliases, command/builtin/exec, env, nohup/timeout/nice, xargs, pipes
// and heredocs into a shell), nested. Whatever the nesting, the analyser
// must not allow one.
var (
	missCores = []struct{ cmd, rule string }{
		{`f() { eval 'f | f &'; }; f`, "fork-bomb"},
		{`bomb() { eval "bomb|bomb&"; }; bomb`, "fork-bomb"},
		{`:(){ :|:& };:`, "fork-bomb"},
		{`x() { x | x & }; x`, "fork-bomb"},
		{`git add "$(git rev-parse --show-toplevel)"`, "git-add-blind"},
		{`git add $(git rev-parse --show-toplevel)`, "git-add-blind"},
		{`top=$(git rev-parse --show-toplevel); git add "$top"`, "git-add-blind"},
		{`git add -- "$(git rev-parse --show-toplevel)/"`, "git-add-blind"},
		{`cd "$(git rev-parse --show-toplevel)" && git add .`, "git-add-blind"},
		{`find . -maxdepth 0 -exec bash -c 'rm -rf "$0"' / \;`, "rm-critical"},
		{`find / -maxdepth 0 -exec sh -c 'rm -rf "$1"' _ {} \;`, "rm-critical"},
		{`find / -maxdepth 0 -exec rm -rf {} +`, "rm-critical"},
		{`find ~ -maxdepth 0 -execdir rm -rf {} \;`, "rm-critical"},
		{`git reset --hard HEAD~5`, "git-reset-hard"},
		{`git reset --hard @~5`, "git-reset-hard"},
		{`git reset --hard HEAD^^`, "git-reset-hard"},
		{`git -c core.x=y reset --hard HEAD~5`, "git-reset-hard"},
		{`r=HEAD~5; git reset --hard $r`, "git-reset-hard"},
		{`env -S 'git reset --hard HEAD~5'`, "git-reset-hard"},
		{`env -S 'find / -maxdepth 0 -exec rm -rf {} +'`, "rm-critical"},
		{`echo HEAD~5 | xargs git reset --hard`, "git-reset-hard"},
		{`echo / | xargs -I{} bash -c 'rm -rf "$0"' {}`, "rm-critical"},
		// the simple ones behind the wrappers that take a command, not code
		{`exec git reset --hard HEAD~5`, "git-reset-hard"},
		{`command git reset --hard HEAD~5`, "git-reset-hard"},
		{`timeout 5 nice git reset --hard HEAD~5`, "git-reset-hard"},
		{`builtin command git add "$(git rev-parse --show-toplevel)"`, "git-add-blind"},
		{`nice env git add $(git rev-parse --show-toplevel)`, "git-add-blind"},
		{`nohup find / -maxdepth 0 -exec rm -rf {} +`, "rm-critical"},
		{`exec find . -maxdepth 0 -exec bash -c 'rm -rf "$0"' / \;`, "rm-critical"},
		{`command eval "f() { eval 'f | f &'; }; f"`, "fork-bomb"},
	}
	// missWrappers wrap code: Q is it single-quoted, S as it is.
	missWrappers = []string{
		"bash -c Q", "sh -c Q", "eval Q", "command eval Q", "builtin eval Q", "env bash -c Q",
		"command bash -c Q", "exec bash -c Q", "nohup bash -c Q", "timeout 5 sh -c Q", "nice -n 5 bash -c Q",
		"g() { S; }; g", "{ S; }", "( S )", "shopt -s expand_aliases; alias g=Q\ng", "echo Q | bash",
		"bash <<'EOF'\nS\nEOF", "printf '%s\\0' Q | xargs -0 bash -c", "if true; then S; fi", "S &",
		"true && S", "sudo bash -c Q", "env -i PATH=/usr/bin bash -c Q", "xargs -I XX bash -c Q <<< x",
		"shopt -s expand_aliases; BASH_ALIASES[g]=Q\ng", "shopt -s expand_aliases; BASH_ALIASES+=([g]=Q)\ng",
		"shopt -s expand_aliases; declare -A BASH_ALIASES=([g]=Q)\ng", "shopt -s expand_aliases; alias -- -g=Q\n-g",
		"shopt -s expand_aliases; printf -v 'BASH_ALIASES[g]' %s Q\ng",
	}
)

// shq single-quotes s for the shell.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// wrapMiss applies wrapper w to code.
func wrapMiss(w, code string) string {
	if strings.Contains(w, "Q") {
		return strings.Replace(w, "Q", shq(code), 1)
	}
	return strings.Replace(w, "S", code, 1)
}

// validWrappers returns the wrappers, alone and in pairs (outer, inner),
// under which bash really runs the code they wrap: each is run for real
// around `touch SENTINEL` in a temporary directory and kept if the
// sentinel appears (an alias inside an alias of the same name, say, runs
// nothing). The variants are built from these only, so an allowed one is
// a real miss.
// The result is computed once per test binary.
func validWrappers(t *testing.T) (one []string, two [][2]string) {
	bash := testenv.NeedsTool(t, "bash")[0]
	validOnce.Lock()
	defer validOnce.Unlock()
	if validOne != nil {
		return validOne, validTwo
	}
	defer func() { validOne, validTwo = one, two }()
	runs := func(wrap func(string) string) bool { return wrapperRuns(t, bash, wrap) }
	for _, w := range missWrappers {
		if runs(func(code string) string { return wrapMiss(w, code) }) {
			one = append(one, w)
		}
	}
	for _, w2 := range one {
		for _, w1 := range one {
			if runs(func(code string) string { return wrapMiss(w2, wrapMiss(w1, code)) }) {
				two = append(two, [2]string{w2, w1})
			}
		}
	}
	if len(one) < len(missWrappers)*3/4 {
		t.Fatalf("only %d of %d wrappers run what they wrap: %q", len(one), len(missWrappers), one)
	}
	return one, two
}

// wrapperRuns reports whether bash runs the code wrap wraps: wrapped
// around `touch SENTINEL` in a temporary directory, the sentinel appears.
func wrapperRuns(t testing.TB, bash string, wrap func(string) string) bool {
	dir, err := os.MkdirTemp("", "wrapper")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sentinel := filepath.Join(dir, "SENT")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, bash, "-c", wrap("touch "+sentinel)+"\nwait")
	c.Dir = dir
	c.WaitDelay = time.Second
	c.Run()
	_, err = os.Stat(sentinel)
	return err == nil
}

var (
	validOnce sync.Mutex
	validOne  []string
	validTwo  [][2]string
)

// TestMissVariants: every core under every wrapper that runs it, and
// under every such pair, is not allowed; the log gives the recall (not
// allowed / all) and how many keep the core's own rule (a block stays a
// block, rather than becoming an ask about code known only at run time).
func TestMissVariants(t *testing.T) {
	t.Setenv("HOME", "/home/tester")
	one, two := validWrappers(t)
	total, caught, sameRule := 0, 0, 0
	check := func(cmd, rule string) {
		total++
		v := Check(cmd)
		if v.Decision == Allow {
			t.Errorf("allowed: %q", cmd)
			return
		}
		caught++
		if v.Rule == rule {
			sameRule++
		}
	}
	for _, c := range missCores {
		check(c.cmd, c.rule)
		for _, w := range one {
			check(wrapMiss(w, c.cmd), c.rule)
		}
		for _, w := range two {
			check(wrapMiss(w[0], wrapMiss(w[1], c.cmd)), c.rule)
		}
	}
	t.Logf("wrappers that run nothing: %q", slices.DeleteFunc(slices.Clone(missWrappers), func(w string) bool { return slices.Contains(one, w) }))
	t.Logf("%d wrappers and %d pairs run what they wrap; %d variants: %d not allowed (recall %.1f %%), %d with the core's own rule",
		len(one), len(two), total, caught, 100*float64(caught)/float64(total), sameRule)
}

// TestMissVariantsNested: rapid nests up to five wrappers around a core;
// none is allowed, unless bash runs nothing through that nesting (checked
// for real around `touch SENTINEL`: such a draw is skipped). Ten rounds
// of rapid's checks (1,000 by default, a few seconds): it found an alias
// expanded again inside a new shell and inside eval after 93 and 11,068.
func TestMissVariantsNested(t *testing.T) {
	t.Setenv("HOME", "/home/tester")
	bash := testenv.NeedsTool(t, "bash")[0]
	one, _ := validWrappers(t)
	for range 10 {
		rapid.Check(t, missNested(t, bash, one))
	}
}

// missNested is TestMissVariantsNested's property.
func missNested(t *testing.T, bash string, one []string) func(*rapid.T) {
	return func(rt *rapid.T) {
		c := rapid.SampledFrom(missCores).Draw(rt, "core")
		var chain []string
		for range rapid.IntRange(1, 5).Draw(rt, "depth") {
			chain = append(chain, rapid.SampledFrom(one).Draw(rt, "wrapper"))
		}
		wrap := func(code string) string {
			for _, w := range chain {
				code = wrapMiss(w, code)
			}
			return code
		}
		cmd := wrap(c.cmd)
		if v := Check(cmd); v.Decision == Allow {
			if !wrapperRuns(t, bash, wrap) {
				rt.Skip("the nesting runs nothing")
			}
			rt.Fatalf("allowed: %q", cmd)
		}
	}
}
