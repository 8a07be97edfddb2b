package safety

import (
	"fmt"
	"strings"
	"testing"
)

// workBound is the most work check may do for an input of n bytes:
// linear in n. A byte is parsed again at most once per nesting level and a
// loop body is walked at most maxLoopIter times; the constant covers the
// budgets for pattern matching, expansion and function calls.
func workBound(n int) int { return maxLoopIter*n + maxPatternWork + maxExpansion + maxCallWork }

// TestLargeInputsBounded: pathological shapes near the size cap never
// panic and are analysed with work linear in their size. The work is
// counted by the analyser (statements visited, fields expanded, bytes
// parsed and matched), not timed, so the bound holds on a loaded machine.
func TestLargeInputsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	n := 900
	var fanOut strings.Builder
	fanOut.WriteString("f0() { rm -rf \"$1\"; }; ")
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&fanOut, "f%d() { f%d \"$1\"a; f%d \"$1\"b; }; ", i, i-1, i-1)
	}
	fanOut.WriteString("f40 x")
	var aliases strings.Builder
	aliases.WriteString("git")
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&aliases, " -c alias.a%d=a%d", i, i+1)
	}
	aliases.WriteString(" a0")
	inputs := map[string]string{
		"many statements":  strings.Repeat("echo hi; ", maxCommandBytes/10),
		"nested blocks":    "f(){ " + strings.Repeat("{ ", n) + "f|f& " + strings.Repeat("} ", n) + "}",
		"nested subshells": strings.Repeat("(", n) + "ls" + strings.Repeat(")", n),
		"deep subshells":   strings.Repeat("(", maxCommandBytes/2-1) + strings.Repeat(")", maxCommandBytes/2-1),
		"deep braces":      strings.Repeat("{ ", maxBracketDepth) + "ls" + strings.Repeat("; }", maxBracketDepth),
		"nested cmdsubst":  strings.Repeat("$(", n) + "ls" + strings.Repeat(")", n),
		"nested ifs":       strings.Repeat("if true; then ", n) + "ls" + strings.Repeat("; fi", n),
		"brace bomb":       "rm -rf " + strings.Repeat("{a,b,c}", 2000),
		"seq bomb":         "echo {1..99999999999}{a..z}{1..1000000}",
		"loops":            strings.Repeat("for a in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do ", 200) + "eval 'rm -rf /tmp/x'" + strings.Repeat("; done", 200),
		"long word":        "echo " + strings.Repeat("a", maxCommandBytes-10),
		"many pipes":       strings.Repeat("cat | ", maxCommandBytes/7) + "cat",
		"heredoc to bash":  "bash <<'EOF'\n" + strings.Repeat("echo hi\n", maxCommandBytes/9) + "EOF\n",
		"eval chain":       strings.Repeat("eval ", 1000) + "ls",
		"fork bomb chain":  strings.Repeat("f(){ g|h& }; ", maxCommandBytes/14),
		"function fan-out": fanOut.String(),
		"recursive call":   `f() { f "$1"x "$@"; }; f a`,
		"many calls":       "f() { rm -rf \"$1\"; }; " + strings.Repeat("f x; f y; ", maxCommandBytes/12),
		"alias chain":      aliases.String(),
		"glob words":       strings.Repeat("rm -rf /tmp/[x]y?/*/.[!.]* ", maxCommandBytes/30),
		"long glob":        "rm -rf /" + strings.Repeat("*a", maxGlobLen/2-2),
		"pattern ops":      "x=" + strings.Repeat("ab", maxPatternValue/2) + "; " + strings.Repeat("echo ${x%a*b} ${x//a*b/c} ${x#*a}; ", 20000),
		"array appends":    strings.Repeat("a+=(x y); ", maxCommandBytes/11) + `rm -rf "${a[@]}"`,
		"long value":       "x=" + strings.Repeat("a", maxCommandBytes/2) + "; " + strings.Repeat("echo $x; ", maxCommandBytes/20),
		"ifs split":        "IFS=,; x=" + strings.Repeat("a,", maxCommandBytes/3) + "; echo $x",
		"static pipe":      strings.Repeat("echo ls | ", maxCommandBytes/11) + "sh",
		"printf to shell":  "printf '" + strings.Repeat("%s ", 10000) + "\\n' " + strings.Repeat("x ", 10000) + "| sh",
	}
	for name, in := range inputs {
		v, work := check(in)
		// Display and AddCoAuthor parse once and walk the top-level
		// statements: they must not panic.
		Display(in, "/tmp")
		AddCoAuthor(in, "A <a@b>")
		t.Logf("%-18s %7d bytes: %s/%s, work %d (%.1f/byte)", name, len(in), v.Decision, v.Rule, work, float64(work)/float64(len(in)))
		if work > workBound(len(in)) {
			t.Errorf("%s: work %d over the bound %d", name, work, workBound(len(in)))
		}
	}
}
