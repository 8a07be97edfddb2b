package safety

import (
	"strings"
	"testing"
	"time"
)

// TestLargeInputsBounded: pathological shapes near the size cap finish
// quickly and never panic.
func TestLargeInputsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	n := 900
	inputs := map[string]string{
		"many statements":  strings.Repeat("echo hi; ", MaxCommandBytes/10),
		"nested blocks":    "f(){ " + strings.Repeat("{ ", n) + "f|f& " + strings.Repeat("} ", n) + "}",
		"nested subshells": strings.Repeat("(", n) + "ls" + strings.Repeat(")", n),
		"deep subshells":   strings.Repeat("(", MaxCommandBytes/2-1) + strings.Repeat(")", MaxCommandBytes/2-1),
		"deep braces":      strings.Repeat("{ ", maxBracketDepth) + "ls" + strings.Repeat("; }", maxBracketDepth),
		"nested cmdsubst":  strings.Repeat("$(", n) + "ls" + strings.Repeat(")", n),
		"nested ifs":       strings.Repeat("if true; then ", n) + "ls" + strings.Repeat("; fi", n),
		"brace bomb":       "rm -rf " + strings.Repeat("{a,b,c}", 2000),
		"seq bomb":         "echo {1..99999999999}{a..z}{1..1000000}",
		"loops":            strings.Repeat("for a in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do ", 200) + "eval 'rm -rf /tmp/x'" + strings.Repeat("; done", 200),
		"long word":        "echo " + strings.Repeat("a", MaxCommandBytes-10),
		"many pipes":       strings.Repeat("cat | ", MaxCommandBytes/7) + "cat",
		"heredoc to bash":  "bash <<'EOF'\n" + strings.Repeat("echo hi\n", MaxCommandBytes/9) + "EOF\n",
		"eval chain":       strings.Repeat("eval ", 1000) + "ls",
		"fork bomb chain":  strings.Repeat("f(){ g|h& }; ", MaxCommandBytes/14),
	}
	for name, in := range inputs {
		start := time.Now()
		v := Check(in)
		Display(in, "/tmp")
		AddCoAuthor(in, "A <a@b>")
		el := time.Since(start)
		t.Logf("%-18s %7d bytes: %s/%s in %v", name, len(in), v.Decision, v.Rule, el)
		if el > 3*time.Second {
			t.Errorf("%s took %v", name, el)
		}
	}
}
