package safety

import (
	"regexp"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

var plainWord = regexp.MustCompile(`^[A-Za-z0-9/._=:+-]+$`)

// TestQuotingVariants: quoting or escaping plain words never changes the
// decision (the analyser resolves words like bash does).
func TestQuotingVariants(t *testing.T) {
	t.Setenv("HOME", "/home/tester")
	n := 0
	for _, tc := range checkCases {
		words := strings.Fields(tc.cmd)
		if len(words) == 0 || strings.Join(words, " ") != tc.cmd {
			continue
		}
		ok := true
		for _, w := range words {
			if !plainWord.MatchString(w) {
				ok = false
			}
		}
		if !ok || syntax.IsKeyword(words[0]) {
			continue // a quoted keyword is an ordinary command name
		}
		variants := []func(string) string{
			func(w string) string { return "'" + w + "'" },
			func(w string) string { return `"` + w + `"` },
			func(w string) string { return `\` + w },
			func(w string) string { return w[:1] + "''" + w[1:] },
			func(w string) string { return `$'` + w + `'` },
		}
		for vi, f := range variants {
			q := make([]string, len(words))
			for i, w := range words {
				q[i] = f(w)
			}
			cmd := strings.Join(q, " ")
			if got := Check(cmd); got.Decision != tc.want {
				t.Errorf("variant %d %q = %s (%s), want %s like %q", vi, cmd, got.Decision, got.Reason, tc.want, tc.cmd)
			}
			n++
		}
	}
	t.Logf("%d quoting variants", n)
}
