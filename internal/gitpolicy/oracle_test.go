//go:build linux

package gitpolicy_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/bashvisor/bashvisor/internal/testenv"
)

// The oracle: after a change set is applied, the user's ordinary git
// commands, run in the workspace under strace, execute nothing but
// git's own programs (git, /usr/lib/git-core/*), what each runs in a
// clean repository, and for git submodule, a shell script of git's,
// the utilities its git-sh-setup uses (scriptTools).

// oracleCommands are what the user runs after the command.
var oracleCommands = []string{
	"status", "diff", "log -1", "restore .", "checkout .", "commit -qam oracle", "cherry-pick --continue",
	"rebase --continue", "merge --continue", "stash", "submodule status",
}

var execveRe = regexp.MustCompile(`execve\("([^"]*)", (.*)\) = 0`)

// oracleMark is the argument of the marker program (/usr/bin/true) run
// after each traced command.
const oracleMark = "oracle-mark-"

// traceExecs runs git with each of cmds in each of dirs, one after
// another in one shell under one strace (starting strace and the shell
// costs more than most of these commands), and returns the programs
// each command executed in each directory. After each command the
// shell runs /usr/bin/true with a marker argument: what is executed
// before it and after the previous one is the command's, but for the
// shell itself (the first program) and the markers.
func traceExecs(t testing.TB, dirs []string, env []string, cmds []string) map[string]map[string][]string {
	t.Helper()
	var script strings.Builder
	for _, d := range dirs {
		fmt.Fprintf(&script, "cd '%s' || exit 1\n", strings.ReplaceAll(d, "'", `'\''`))
		for i, c := range cmds {
			fmt.Fprintf(&script, "git %s </dev/null >/dev/null 2>&1; /usr/bin/true %s%d\n", c, oracleMark, i)
		}
	}
	out := filepath.Join(t.TempDir(), "strace")
	cmd := exec.Command("strace", "-f", "-qq", "--seccomp-bpf", "-e", "trace=execve", "-o", out, "bash", "-c", script.String())
	cmd.Env = append(slices.Clone(env), "GIT_EDITOR=:", "GIT_SEQUENCE_EDITOR=:", "GIT_PAGER=cat", "PAGER=cat")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("strace: %v\n%s", err, b)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatalf("strace: %v", err)
	}
	defer f.Close()
	progs := map[string]map[string][]string{}
	for _, d := range dirs {
		progs[d] = map[string][]string{}
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	first, i, n := true, 0, len(dirs)*len(cmds)
	for sc.Scan() {
		m := execveRe.FindStringSubmatch(sc.Text())
		switch {
		case m == nil:
		case first:
			first = false
		case m[1] == "/usr/bin/true" && strings.Contains(m[2], `"`+oracleMark):
			i++
		case i < n:
			p, c := progs[dirs[i/len(cmds)]], cmds[i%len(cmds)]
			if !slices.Contains(p[c], m[1]) {
				p[c] = append(p[c], m[1])
			}
		}
	}
	if i != n {
		t.Fatalf("strace saw %d of %d markers", i, n)
	}
	return progs
}

var (
	baselineOnce sync.Once
	baseline     map[string][]string
)

// cleanBaseline returns what each oracle command executes in a clean
// repository.
func cleanBaseline(t testing.TB) map[string][]string {
	t.Helper()
	baselineOnce.Do(func() {
		w := newWorld(t)
		w.repo(t)
		baseline = traceExecs(t, []string{w.ws}, w.env, oracleCommands)[w.ws]
	})
	return baseline
}

// scriptTools are the programs git's shell scripts (git-submodule,
// git-sh-setup) run, depending on their messages and locale.
var scriptTools = []string{"/usr/bin/basename", "/usr/bin/dirname", "/usr/bin/sed", "/usr/bin/uname",
	"/usr/bin/gettext", "/usr/bin/envsubst", "/usr/bin/tr", "/usr/bin/cat", "/usr/bin/expr"}

// isGits reports whether prog is git's own program.
func isGits(prog string) bool {
	return prog == "/usr/bin/git" || strings.HasPrefix(prog, "/usr/lib/git-core/")
}

// oracle runs the user's git commands in each of dirs (relative to the
// workspace) and returns the programs that are not git's.
func (w *world) oracle(t testing.TB, dirs ...string) []string {
	t.Helper()
	testenv.NeedsTool(t, "strace")
	base := cleanBaseline(t)
	if len(dirs) == 0 {
		dirs = []string{"."}
	}
	var abs []string
	for _, d := range dirs {
		dir := filepath.Join(w.ws, d)
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			abs = append(abs, dir)
		}
	}
	progs := traceExecs(t, abs, w.env, oracleCommands)
	var bad []string
	for _, dir := range abs {
		for _, c := range oracleCommands {
			for _, p := range progs[dir][c] {
				script := c == "submodule status" && slices.Contains(scriptTools, p)
				if !isGits(p) && !slices.Contains(base[c], p) && !script {
					rel, _ := filepath.Rel(w.ws, dir)
					bad = append(bad, "git "+c+" in "+rel+" ran "+p)
				}
			}
		}
	}
	return bad
}

// TestOracleSeesPlantedCode: the oracle is not blind: hooks, a
// configured fsmonitor and a sequencer strategy applied without policy
// are seen.
func TestOracleSeesPlantedCode(t *testing.T) {
	for _, script := range []string{
		"printf '#!/bin/sh\\ntrue\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
		`git config core.fsmonitor "true; false"`,
		attackCommondir,
	} {
		w := newWorld(t)
		w.repo(t)
		w.unchecked(t, script)
		if bad := w.oracle(t); len(bad) == 0 {
			t.Errorf("%s: the oracle saw nothing", script)
		}
	}
}
