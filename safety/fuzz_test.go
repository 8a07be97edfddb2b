package safety

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzCheck: the analyser (and the other parsers' users) never panic and
// always return promptly, whatever the input.
func FuzzCheck(f *testing.F) {
	for _, tc := range checkCases {
		f.Add(tc.cmd)
	}
	f.Add(strings.Repeat("$(", 200) + strings.Repeat(")", 200))
	f.Add(strings.Repeat("bash -c '", 20))
	f.Add("rm -rf /{" + strings.Repeat("a,", 100) + "}{1..100000}")
	f.Add("for a in 1 2 3; do for b in 1 2 3; do eval \"rm -rf /tmp/$a$b\"; done; done")
	prof, err := Preset("standard")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		start := time.Now()
		v := Check(cmd)
		if el := time.Since(start); el > 2*time.Second {
			t.Fatalf("Check took %v on %q", el, cmd)
		}
		if strings.ContainsAny(v.Message(), "\n\r\x00") || !utf8.ValidString(v.Message()) || len(v.Reason) > 2*maxReason {
			t.Fatalf("message not one clean line: %q", v.Message())
		}
		switch v.Decision {
		case Allow:
		case Block:
			if v.Reason == "" || v.Alternative == "" {
				t.Fatalf("block without reason/alternative: %+v", v)
			}
		case Ask:
			if v.Reason == "" {
				t.Fatalf("ask without reason: %+v", v)
			}
		default:
			t.Fatalf("bad decision %q", v.Decision)
		}
		if d := Display(cmd, "/tmp"); !strings.HasSuffix(cmd, d) {
			t.Fatalf("Display(%q) = %q is not a suffix of the command", cmd, d)
		}
		out := AddCoAuthor(cmd, "A <a@b>")
		if out != cmd && !strings.Contains(out, `--trailer "Co-authored-by: A <a@b>"`) {
			t.Fatalf("AddCoAuthor changed %q into %q", cmd, out)
		}
		prof.Evaluate(cmd)
		RedactSecrets(cmd)
	})
}
