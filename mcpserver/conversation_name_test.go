package mcpserver

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// TestConversationNameAsThePattern checks the hand-written check of a
// client-chosen conversation name against the pattern it replaced, on
// edge cases and on random strings over the characters that matter.
func TestConversationNameAsThePattern(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	cases := []string{"", "a", "Z9", "a.b_c-d", ".a", "_a", "-a", "a b", "a/b", "a\n", "\na", "é", "a\x00",
		strings.Repeat("a", 127), strings.Repeat("a", 128), strings.Repeat("a", 129), "~1f0c", "conv-1"}
	const alphabet = "aZ09._-~ /\n\x00é"
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		n := r.IntN(12)
		if r.IntN(50) == 0 {
			n = 120 + r.IntN(16)
		}
		var b strings.Builder
		for range n {
			b.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		cases = append(cases, b.String())
	}
	for _, c := range cases {
		if got, want := validConversationName(c), re.MatchString(c); got != want {
			t.Fatalf("validConversationName(%q) = %v, the pattern says %v", c, got, want)
		}
	}
}
