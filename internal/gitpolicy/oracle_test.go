//go:build linux

package gitpolicy_test

import (
	"bufio"
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

var execveRe = regexp.MustCompile(`execve\("([^"]*)", .*\) = 0`)

// traceExecs runs git args in dir under strace and returns the
// programs executed.
func traceExecs(t testing.TB, dir string, env []string, args string) []string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "strace")
	cmd := exec.Command("strace", append([]string{"-f", "-qq", "-e", "trace=execve", "-o", out, "git"}, strings.Fields(args)...)...)
	cmd.Dir, cmd.Env = dir, append(slices.Clone(env), "GIT_EDITOR=:", "GIT_SEQUENCE_EDITOR=:", "GIT_PAGER=cat", "PAGER=cat")
	_ = cmd.Run() // the command may fail: no operation in progress
	f, err := os.Open(out)
	if err != nil {
		t.Fatalf("strace: %v", err)
	}
	defer f.Close()
	var progs []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if m := execveRe.FindStringSubmatch(sc.Text()); m != nil && !slices.Contains(progs, m[1]) {
			progs = append(progs, m[1])
		}
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
		baseline = map[string][]string{}
		for _, c := range oracleCommands {
			baseline[c] = traceExecs(t, w.ws, w.env, c)
		}
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
	var bad []string
	for _, d := range dirs {
		dir := filepath.Join(w.ws, d)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		for _, c := range oracleCommands {
			for _, p := range traceExecs(t, dir, w.env, c) {
				script := c == "submodule status" && slices.Contains(scriptTools, p)
				if !isGits(p) && !slices.Contains(base[c], p) && !script {
					bad = append(bad, "git "+c+" in "+d+" ran "+p)
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
