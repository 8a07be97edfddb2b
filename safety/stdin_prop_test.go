package safety

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/testenv"
	"pgregory.net/rapid"
)

// Pieces of the jobs TestStdinFedRunsNoCodeSentLater builds: programs and
// shell code that read the job's stdin, and payloads sent to it later
// that run code if anything treats them as code. Every payload only
// creates the file S in the working directory (the test's temporary
// directory); no program here deletes or overwrites anything.
var (
	stdinReaders = []string{
		"cat", "head -1", "wc -l", "grep t", "sort", "tr a b", "sed 's/x/y/'", "jq -R .", "cut -c1-5",
		"read -r l; echo \"$l\"", "read -r l; let \"$l\"", "read -r l; (( l ))", "read -r l; echo $(( l ))",
		"read -r l; [[ $l -eq 1 ]]", "read -r l; test -v \"$l\"", "read -r l; [ -v \"$l\" ]",
		"read -r l; printf -v \"$l\" x", "read -r l; declare \"$l\"", "read -r l; declare \"$l=1\"",
		"read -r l; echo \"${a[l]}\"", "read -r l; echo \"${!l}\"", "read -r l; unset \"$l\"",
		"read -r l; mapfile -C \"$l\" -c 1 a < f", "mapfile -t a; echo \"${a[0]}\"", "read -r l; . \"$l\"",
		"read -r l; bash \"$l\"", "read -r l; trap \"$l\" EXIT", "read -r l; $l", "read -r l; eval \"$l\"",
		"while read -r l; do echo \"$l\"; done", "xargs echo", "xargs printf '%s\\n'", "xargs env",
		"xargs awk", "xargs git", "xargs find .", "xargs -I{} sh -c {}", "xargs sh -c", "xargs python3 -c",
		"xargs perl -e", "xargs grep -l x", "xargs sed", "parallel echo", "bash", "sh -s", "bash -h",
		"awk '{print}'", "awk -f -", "sed -f -", "python3 -c 'import sys; print(sys.stdin.read())'",
		"python3 -c 'import sys; exec(sys.stdin.read())'", "perl -ne 'print'", "perl -e 'eval <STDIN>'",
		"git -c include.path=/dev/stdin status", "GIT_CONFIG_GLOBAL=/dev/stdin git status", "env",
		"cat > s.sh; bash s.sh", "tee s.sh > /dev/null; . ./s.sh", "cat > w; chmod +x w; ./w",
		"cat > s.py; python3 s.py", "cat > notes; wc -l notes",
		"read -r l; git $l", "read -r l; git -c \"$l\" status", "read -r l; curl $l",
		"python3 -", "node -", "cat | sh", "tee log | sh", "cat > notes", "sort -o out", "uniq",
		// a file written from the input, read as code without its name
		"cat > Makefile; make", "tee Makefile > /dev/null; make -s", "cat > m.mk; make -f m.mk",
		"mkdir -p d; cat > d/Makefile; make -C d", "while read -r l; do echo \"$l\" >> Makefile; done; make",
		"cat > x.py; python3 -c 'import x'", "cat > .git/config; git status", "f=Makefile; cat > $f; make",
		"make -v > /dev/null; cat > Makefile", "cat > notes; make -f /dev/null -s --eval 'all: ; @true'",
	}
	stdinPayloads = []string{
		"touch S", "x[$(touch S)]", "a[$(touch S)]=1", "touch S;:", "-exec touch S ;", "/dev/stdin",
		"BEGIN{system(\"touch S\")}", "import os; os.system(\"touch S\")", "system(\"touch S\")",
		"-c alias.x=!touch\\ S x", "[alias]\n\tx = !touch S", "e touch S", "1e touch S",
		"--pre=./w.sh", "y[`touch S`]", "require(\"child_process\").execSync(\"touch S\")",
		"touch S\ntouch S", "$(touch S)", "[core]\n\tfsmonitor = touch S",
		"-c alias.x=!touch>S x", "core.fsmonitor=touch>S", "all:\n\ttouch S", ".DEFAULT_GOAL := x\nx:\n\t@touch S",
	}
)

// TestStdinFedRunsNoCodeSentLater: whatever the analyser lets a job fed
// later run without approval, given any payload on its stdin, creates no
// sentinel: run for real by bash in a temporary directory (its working
// and home directory), with the payload written to its stdin after it
// starts. A job the gate does not allow is not a check (rapid draws
// another); in CI (CI=true) it runs rounds like TestLockedAllowsOnlyReads,
// up to half as many checks and half the time.
func TestStdinFedRunsNoCodeSentLater(t *testing.T) {
	bash := testenv.NeedsTool(t, "bash")[0]
	allowed := 0
	start := time.Now()
	for round := 0; round == 0 || ciRounds() && allowed < propCIChecks/2 && time.Since(start) < propCIBudget/2; round++ {
		rapid.Check(t, stdinFedRunsNothing(t, bash, &allowed))
	}
	t.Logf("%d allowed jobs run in %v", allowed, time.Since(start).Round(time.Millisecond))
	if allowed == 0 {
		t.Error("no generated job was allowed: the property was never checked")
	}
}

// stdinFedRunsNothing is TestStdinFedRunsNoCodeSentLater's property; it
// counts the allowed jobs it ran in allowed.
func stdinFedRunsNothing(t *testing.T, bash string, allowed *int) func(*rapid.T) {
	return func(rt *rapid.T) {
		cmd := rapid.SampledFrom(stdinReaders).Draw(rt, "reader")
		if rapid.IntRange(0, 3).Draw(rt, "pipe") == 0 {
			cmd = rapid.SampledFrom([]string{"cat", "head -5", "tee copy"}).Draw(rt, "first") + " | " + cmd
		}
		payload := rapid.SampledFrom(stdinPayloads).Draw(rt, "payload")
		if Analyze(cmd, Options{StdinFed: true}).Outcome.Decision != Allow {
			rt.Skip("not allowed")
		}
		*allowed++
		work := t.TempDir()
		for name, content := range map[string]string{
			"f":           "1\n",
			"w.sh":        "#!/bin/sh\ntouch \"$(dirname \"$0\")/S\"\ncat \"$@\"\n",
			".git/HEAD":   "ref: refs/heads/main\n",
			".git/config": "[core]\n\trepositoryformatversion = 0\n",
		} {
			p := filepath.Join(work, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				rt.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
				rt.Fatal(err)
			}
		}
		for _, d := range []string{".git/objects", ".git/refs/heads"} {
			if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
				rt.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c := exec.CommandContext(ctx, bash, "-c", cmd)
		c.Dir = work
		c.Env = []string{"HOME=" + work, "PATH=" + os.Getenv("PATH"), "LC_ALL=C", "GIT_CONFIG_NOSYSTEM=1", "TMPDIR=" + work}
		c.WaitDelay = time.Second
		c.Stdin = strings.NewReader(payload + "\n")
		out, _ := c.CombinedOutput()
		if _, err := os.Lstat(filepath.Join(work, "S")); err == nil {
			rt.Fatalf("%q, allowed with stdin fed later, ran the payload %q: %s", cmd, payload, out)
		}
	}
}
