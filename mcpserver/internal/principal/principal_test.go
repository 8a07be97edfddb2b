package principal

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The rule at its boundaries: 1 and 256 bytes pass, 0 and 257 do not;
// multi-byte characters count their bytes; a space, a control character,
// a non-graphic one or invalid UTF-8 anywhere fails.
func TestCheck(t *testing.T) {
	for name, ok := range map[string]bool{
		"a":                             true,
		strings.Repeat("a", MaxBytes):   true,
		strings.Repeat("é", MaxBytes/2): true, // 256 bytes
		"oauth:" + strings.Repeat("s", MaxBytes-6): true,
		"ci-bot@example.com":                       true,
		"oauth:auth0|5f7c8ec7":                     true,
		"al/ice":                                   true, // conversation ids path-escape it
		"名前":                                       true,
		"":                                         false,
		strings.Repeat("a", MaxBytes+1):            false,
		strings.Repeat("é", MaxBytes/2) + "a":      false,
		"al ice":                                   false,
		"alice\t":                                  false,
		"al\u00a0ice":                              false, // no-break space
		"al\x00ice":                                false,
		"al\x1bice":                                false,
		"al\u200bice":                              false, // zero-width space: not graphic
		"al\xffice":                                false,
	} {
		if err := Check(name); (err == nil) != ok {
			t.Errorf("Check(%q) = %v, want ok %v", name, err, ok)
		}
	}
}
