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
)

// aliasArrayCases define an alias through BASH_ALIASES (in the forms bash
// accepts) or alias -- -NAME, then use it; X stands for the command the
// alias runs, and the files key, name and cmd.txt hold "ls", "ls" and X.
var aliasArrayCases = []string{
	"BASH_ALIASES[ls]='X'\nls",
	"BASH_ALIASES[r]='X'\nr",
	"BASH_ALIASES[r]=''\nBASH_ALIASES[r]+='X'\nr",
	"BASH_ALIASES+=([r]='X')\nr",
	"BASH_ALIASES=([r]='X')\nr",
	"declare -A BASH_ALIASES=([r]='X')\nr",
	"typeset -A BASH_ALIASES=([r]='X')\nr",
	"declare BASH_ALIASES[r]='X'\nr",
	"declare 'BASH_ALIASES[r]=X'\nr",
	"BASH_ALIASES='X'\n0",
	"printf -v 'BASH_ALIASES[r]' '%s' 'X'\nr",
	"read -r 'BASH_ALIASES[r]' < cmd.txt\nr",
	"k=$(cat key)\nBASH_ALIASES[$k]='X'\nls",
	"BASH_ALIASES[r]=$(cat cmd.txt)\nr",
	": ${BASH_ALIASES[r]:='X'}\nr",
	"for BASH_ALIASES in 'X'; do :; done\n0",
	"for BASH_ALIASES in \"$(cat cmd.txt)\"; do :; done\n0",
	"declare -n ref=BASH_ALIASES\nref[r]='X'\nr",
	"declare -n ref\nref=BASH_ALIASES\nref[r]='X'\nr",
	"alias -- -r='X'\n-r",
	"alias a=b -r='X'\n-r",
	"alias \"$(cat name)=X\"\nls",
}

// TestAliasArrayAndDashNames: every case, with X = touch SENTINEL, makes
// bash create the sentinel (run for real), and with X = git reset --hard
// HEAD~5 or find / -exec rm -rf is not allowed.
func TestAliasArrayAndDashNames(t *testing.T) {
	bash := testenv.NeedsTool(t, "bash")[0]
	const pre = "shopt -s expand_aliases\n"
	for _, tc := range aliasArrayCases {
		dir := t.TempDir()
		sentinel := filepath.Join(dir, "SENT")
		touch := "touch " + sentinel
		for name, text := range map[string]string{"key": "ls\n", "name": "ls\n", "cmd.txt": touch + "\n"} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c := exec.CommandContext(ctx, bash, "-c", pre+strings.ReplaceAll(tc, "X", touch))
		c.Dir = dir
		out, _ := c.CombinedOutput()
		cancel()
		if _, err := os.Stat(sentinel); err != nil {
			t.Errorf("bash does not run the alias of %q: %s", tc, out)
		}
		for _, core := range []string{"git reset --hard HEAD~5", "find / -maxdepth 0 -exec rm -rf {} +"} {
			s := pre + strings.ReplaceAll(tc, "X", core)
			if a := Analyze(s, Options{}); a.Outcome.Decision == Allow {
				t.Errorf("allowed: %q", s)
			}
		}
	}
	for _, s := range []string{
		pre + "BASH_ALIASES[ll]='ls -l'\nll",
		pre + "alias -- -l='ls -l'\n-l",
		pre + "declare -A BASH_ALIASES\necho ok",
		"alias -p",
	} {
		if a := Analyze(s, Options{}); a.Outcome.Decision != Allow {
			t.Errorf("%s %s: %q", a.Outcome.Decision, a.Outcome.Rule, s)
		}
	}
}
