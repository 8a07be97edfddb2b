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

// runtimeNameForms assign through a builtin whose variable name is E, a
// name computed at run time; X stands for the command the alias runs.
var runtimeNameForms = []string{
	`printf -v "E[ls]" '%s' 'X'`,
	`declare "E[ls]=X"`,
	`typeset "E[ls]=X"`,
	`declare -g "E[ls]=X"`,
	`declare -- "E[ls]=X"`,
	`declare E[ls]='X'`,
	`builtin declare "E[ls]=X"`,
	`command declare "E[ls]=X"`,
	`read -r "E[ls]" < cmd.txt`,
	`IFS= read -r -- "E[ls]" < cmd.txt`,
	`declare -A "E=([ls]='X')"`,
	`declare "E+=([ls]='X')"`,
	`export -A "E=([ls]='X')"`,
	`readonly -A "E=([ls]='X')"`,
	`declare -n r="E"; r[ls]='X'`,
	`declare -n r; r="E"; r[ls]='X'`,
	`declare -n r; for r in "E"; do r[ls]='X'; done`,
	`eval "E[ls]='X'"`,
	`f() { printf -v "$1[ls]" '%s' 'X'; }; f "E"`,
	`f() { declare -g "$1[ls]=X"; }; f "E"`,
}

// runtimeNames are the names E stands for: each is BASH_ALIASES at run
// time (the files arr, p1 and p2 hold BASH_ALIASES, BASH_ and ALIASES).
var runtimeNames = []string{`$n`, `${n}`, `$(cat arr)`, "`cat arr`", `${n:-x}`, `$m$k`, `${n%%Q}`}

// runtimeNameCase is one generated case: the form with E and X replaced,
// after assignments that read the names from the files, then ls.
func runtimeNameCase(form, name, x string) string {
	return "n=$(cat arr)\nm=$(cat p1)\nk=$(cat p2)\n" +
		strings.ReplaceAll(strings.ReplaceAll(form, "E", name), "X", x) + "\nls"
}

// writeNameFiles writes the files the generated cases read into dir.
func writeNameFiles(t *testing.T, dir, cmd string) {
	t.Helper()
	for name, text := range map[string]string{"arr": "BASH_ALIASES\n", "p1": "BASH_\n", "p2": "ALIASES\n", "cmd.txt": cmd + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// runBash runs script in dir with aliases expanded and returns its
// output.
func runBash(t *testing.T, bash, dir, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, bash, "-c", "shopt -s expand_aliases\n"+script)
	c.Dir = dir
	out, _ := c.CombinedOutput()
	return string(out)
}

// TestRuntimeAliasNames: each generated case (a builtin assigning to a
// variable whose name is only known at run time) makes real bash define
// the alias and run it (X = touch SENTINEL creates the sentinel), and no
// profile allows it (nor the analysis without one), whatever the alias
// runs.
func TestRuntimeAliasNames(t *testing.T) {
	bash := testenv.NeedsTool(t, "bash")[0]
	profiles := []*Profile{nil}
	for _, name := range Presets() {
		p, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		profiles = append(profiles, p)
	}
	n := 0
	for _, form := range runtimeNameForms {
		for _, name := range runtimeNames {
			dir := t.TempDir()
			sentinel := filepath.Join(dir, "SENT")
			touch := "touch " + sentinel
			writeNameFiles(t, dir, touch)
			out := runBash(t, bash, dir, runtimeNameCase(form, name, touch))
			if _, err := os.Stat(sentinel); err != nil {
				t.Errorf("bash does not run the alias of %q: %s", runtimeNameCase(form, name, "X"), out)
			}
			for _, x := range []string{touch, "echo hi", "git checkout -f HEAD~5 -- ."} {
				s := "shopt -s expand_aliases\n" + runtimeNameCase(form, name, x)
				for _, p := range profiles {
					if o := Gate(s, p); o.Decision == Allow {
						t.Errorf("allowed under %v: %q", p, s)
					}
				}
			}
			n++
		}
	}
	t.Logf("%d generated cases, each proven in bash", n)
}

// TestRuntimeAliasNamesNoValue: the builtins that assign a value the
// text does not choose (a number, an option letter) or only element 0
// still define an alias through a name only known at run time (shown by
// bash's alias -p) and ask, except export and readonly without -a/-A and
// ${!n:=v}, whose alias 0 asks where a command named 0 follows.
func TestRuntimeAliasNamesNoValue(t *testing.T) {
	bash := testenv.NeedsTool(t, "bash")[0]
	for _, tc := range []struct{ script, alias string }{
		{`let "$n[ls]=5"`, "alias ls='5'"},
		{`getopts ab "$n" -a`, "alias 0='a'"},
		{`read "$n" < cmd.txt`, "alias 0='echo hi'"},
		{`printf -v "$n" 'echo hi'`, "alias 0='echo hi'"},
		{`export "$n=echo hi"; 0`, "alias 0='echo hi'"},
		{`readonly "$n=echo hi"; 0`, "alias 0='echo hi'"},
		{`export "$m$k"="echo hi"; 0`, "alias 0='echo hi'"},
		{`: "${!n:=echo hi}"; 0`, "alias 0='echo hi'"},
		{`: ${!n=echo}; 0`, "alias 0='echo'"},
	} {
		dir := t.TempDir()
		writeNameFiles(t, dir, "echo hi")
		script := "n=$(cat arr)\nm=$(cat p1)\nk=$(cat p2)\n" + tc.script
		if out := runBash(t, bash, dir, script+"\nalias -p"); !strings.Contains(out, tc.alias) {
			t.Errorf("bash: %q does not define %s: %s", tc.script, tc.alias, out)
		}
		if o := Gate(script, nil); o.Decision != Ask || o.Rule != "dynamic-command" {
			t.Errorf("%s %s: %q", o.Decision, o.Rule, script)
		}
	}
	for _, s := range []string{
		`export $(cat .env | xargs)`,
		`for kv in $(cat .env); do export "$kv"; done`,
		`readonly "$(cat name)=1"`,
		`read -p "$PROMPT" -r x`,
		`read -r -a parts -d "$D" -t "$T"`,
		`declare -A m=([a]=1); printf -v x '%s' "$y"; printf -v "x[$i]" '%s' y`,
		`let "x=$y"; let i++; x=$((i+1)); (( count += 1 )); echo $(( $n + 1 )) $(( $a == $b )) $(( $a <= 2 ))`,
		`mapfile -t lines < f; readarray -t -d '' arr < f; getopts ab opt`,
		`f() { local -a xs=("$@"); declare -g total="$1"; }; f a b`,
	} {
		if o := Gate(s, nil); o.Decision != Allow {
			t.Errorf("%s %s (%s): %q", o.Decision, o.Rule, o.Message, s)
		}
	}
}
