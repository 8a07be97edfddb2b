package safety

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/testenv"
	"pgregory.net/rapid"
)

// Pieces of the commands TestLockedAllowsOnlyReads builds: the programs of
// the read-only grammars with harmless options and with the options,
// wrappers and expansions that write a file or run code. Every write names
// a path inside the test's temporary directory (w.sh, out, S,
// ../outside/victim); nothing here may touch anything else, whatever the
// analyser says: the clock and host name setting forms of date and
// hostname are not generated.
var (
	propPrograms = []string{
		"cat", "head -n 2", "tail -1", "wc -l", "grep -n x", "grep -r x .", "sort", "sort -r", "uniq -c", "cut -c1-3",
		"tr a b", "nl -ba", "sed -n 1p", "sed -n '1,2p'", "ls -la", "stat", "du -s", "basename", "dirname", "realpath",
		"readlink -f", "file", "diff f f", "cmp f", "comm f", "tac", "rev", "od -c", "echo", "printf '%s\\n'",
		"test -f", "[ -f f ] && echo", "find . -name f", "find . -type f -print", "pwd", "id", "uname -a", "date",
		"date +%s", "date -u", "hostname", "true", "printenv HOME", "seq 3", "column -t", "paste f", "xargs echo",
		"git status", "git log --oneline -1", "git diff --stat", "git --no-pager show",
	}
	// propWriters write a file or run one when given to a program (or
	// as the program).
	propWriters = []string{
		"-o out", "--output=out", "-o ../outside/victim", "--compress-program=./w.sh", "-i", "-i.bak",
		"'w out'", "'1e ./w.sh'", "'s/x/y/w out'", "-fprint out", "-exec ./w.sh {} +", "-execdir touch S ';'",
		"-delete", "-fls out", "out", "-v 'x[$(./w.sh)]'", "-v x[\\$\\(touch\\ S\\)]", "-s 2020-01-01",
		"$(touch S)", "\"$(./w.sh)\"", "<(touch S)", ">out", ">>../outside/victim", "| tee out", "| sh",
		"&& touch S", "; ./w.sh", "-c core.pager=./w.sh", "--pre ./w.sh", "--pre=./w.sh", "-C out",
		"-R", "--files0-from=f", "-r f", "+w", "-O out", "--log-file=out",
		"$(( 'a[$(touch S)]' ))", "\"${x:'a[$(./w.sh)]'}\"", "${a['b[$(touch S)]']}", "$(( $(cat f) ))",
		"$((x))", "$((_))", "$(( $1 ))", "${a[x]}", "${a:x}", "$(( USER ))",
	}
	// propFrames surround the commands: compound commands with
	// redirections, and texts that bind a variable (or $_, $1) to a
	// value bash runs code from when it is evaluated as arithmetic.
	propFrames = []string{
		"%s", "%s", "%s", "{ %s; } > out", "(%s) >> ../outside/victim", "for i in 1; do %s; done > out",
		"for x in 'a[$(touch S)]'; do %s; done", "for root in 'a[$(touch S)]'; do %s; done",
		"echo 'a[$(touch S)]'; %s", "printf -v x %%s 'a[$(touch S)]'; %s", "echo ${x:='a[$(touch S)]'}; %s",
		"f() { %s; }; f 'a[$(touch S)]'", "for (( i = 'a[$(touch S)]'; 0; )); do echo; done; %s",
		"for i in $(( 'a[$(touch S)]' )); do %s; done",
	}
	propWrappers = []string{"", "", "", "env ", "command ", "nice ", "timeout 5 ", "builtin ", "eval ", "X=1 ", "GIT_PAGER=./w.sh ", "LC_ALL=C "}
	propTails    = []string{"", " f", " -- f", " f f", " \"$F\"", " $F", " ."}
)

// propCommand builds a command from a wrapper, a program, options that may
// write and operands, sometimes two of them joined, in a frame.
func propCommand() *rapid.Generator[string] {
	one := rapid.Custom(func(t *rapid.T) string {
		var b strings.Builder
		if rapid.IntRange(0, 3).Draw(t, "wrapped") == 0 {
			b.WriteString(rapid.SampledFrom(propWrappers).Draw(t, "wrapper"))
		}
		prog := rapid.SampledFrom(propPrograms).Draw(t, "program")
		name, rest, _ := strings.Cut(prog, " ")
		b.WriteString(name)
		harmful := rapid.IntRange(0, 2).Draw(t, "harmful") == 0
		if harmful && rapid.Bool().Draw(t, "writer first") {
			b.WriteString(" " + rapid.SampledFrom(propWriters).Draw(t, "writer"))
		}
		if rest != "" {
			b.WriteString(" " + rest)
		}
		for range rapid.IntRange(0, 2).Filter(func(n int) bool { return harmful || n == 0 }).Draw(t, "writers") {
			b.WriteString(" " + rapid.SampledFrom(propWriters).Draw(t, "writer"))
		}
		b.WriteString(rapid.SampledFrom(propTails).Draw(t, "tail"))
		return b.String()
	})
	return rapid.Custom(func(t *rapid.T) string {
		cmd := one.Draw(t, "command")
		if rapid.IntRange(0, 3).Draw(t, "assign F") == 0 {
			cmd = "F=" + rapid.SampledFrom([]string{"f", "--output=out", "-fprint\\ out", "x[\\$\\(touch\\ S\\)]"}).Draw(t, "F") + "; " + cmd
		}
		if rapid.IntRange(0, 3).Draw(t, "join") == 0 {
			cmd += rapid.SampledFrom([]string{" | ", " && ", "; "}).Draw(t, "op") + one.Draw(t, "second")
		}
		return fmt.Sprintf(rapid.SampledFrom(propFrames).Draw(t, "frame"), cmd)
	})
}

// TestLockedAllowsOnlyReads: whatever the locked profile allows leaves
// nothing behind when bash runs it for real, in a temporary directory
// (its working and home directory) holding an input file, a script that
// would create a sentinel, and a victim file beside it: no file appears,
// disappears or changes anywhere under that directory. It runs without a
// sandbox, so that it checks the analyser's proof alone (the read-only
// sandbox the engine adds would hide its mistakes). A generated command
// locked does not allow is not a check (rapid draws another): each run
// checks -rapid.checks allowed commands (100), and in CI (CI=true) rounds
// of them until propCIChecks ran or propCIBudget passed.
func TestLockedAllowsOnlyReads(t *testing.T) {
	bash := testenv.NeedsTool(t, "bash")[0]
	locked, _ := Preset("locked")
	allowed := 0
	start := time.Now()
	for round := 0; round == 0 || ciRounds() && allowed < propCIChecks && time.Since(start) < propCIBudget; round++ {
		rapid.Check(t, lockedRunsNothing(bash, locked, &allowed))
	}
	t.Logf("%d allowed commands run in %v", allowed, time.Since(start).Round(time.Millisecond))
	if allowed == 0 {
		t.Error("locked allowed none of the generated commands: the property was never checked")
	}
}

// In CI, TestLockedAllowsOnlyReads runs rounds of checks until this many
// allowed commands ran, or for this long (about 15 s at load 17 on 2 cores).
const (
	propCIChecks = 2000
	propCIBudget = 45 * time.Second
)

// ciRounds reports whether to run more than one round of a property: in
// CI (CI=true), unless -rapid.seed fixes the cases (every round would
// repeat the first).
func ciRounds() bool {
	f := flag.Lookup("rapid.seed")
	return os.Getenv("CI") == "true" && (f == nil || f.Value.String() == "0")
}

// lockedRunsNothing is TestLockedAllowsOnlyReads's property; it counts
// the allowed commands it ran in allowed.
func lockedRunsNothing(bash string, locked *Profile, allowed *int) func(*rapid.T) {
	return func(rt *rapid.T) {
		cmd := propCommand().Draw(rt, "cmd")
		root, err := os.MkdirTemp("", "locked-prop")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(root)
		work := filepath.Join(root, "work")
		if o := Analyze(cmd, Options{WorkDir: work, Profile: locked}).Outcome; o.Decision != Allow {
			rt.Skip("not allowed")
		}
		*allowed++
		files := map[string]string{
			"work/f":           "x a\nb x\n",
			"work/w.sh":        "#!/bin/sh\ntouch \"$(dirname \"$0\")/S\"\ncat \"$@\"\n",
			"outside/victim":   "victim\n",
			"work/.git/HEAD":   "ref: refs/heads/main\n",
			"work/.git/config": "[core]\n\trepositoryformatversion = 0\n",
		}
		for _, d := range []string{"work/.git/objects", "work/.git/refs/heads", "outside"} {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				rt.Fatal(err)
			}
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o755); err != nil {
				rt.Fatal(err)
			}
		}
		before := snapshot(rt, root)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c := exec.CommandContext(ctx, bash, "-c", cmd)
		c.Dir = work
		c.Env = []string{"USER=root", "HOME=" + work, "PATH=" + os.Getenv("PATH"), "LC_ALL=C", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "TMPDIR=" + root}
		c.WaitDelay = time.Second
		out, _ := c.CombinedOutput()
		if after := snapshot(rt, root); after != before {
			rt.Fatalf("locked allowed %q, which changed the directory:\nbefore:\n%s\nafter:\n%s\noutput: %s", cmd, before, after, out)
		}
	}
}

// snapshot lists every entry under root with its type, size and content.
func snapshot(t *rapid.T, root string) string {
	var b strings.Builder
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		b.WriteString(rel + " " + d.Type().String())
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b.WriteString(" " + string(data))
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
