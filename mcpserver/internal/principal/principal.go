// Package principal holds the one rule for a principal's name, which
// mcpserver applies to every authenticated request and package bearer to
// the names of a token file and the principals of OAuth subjects.
package principal

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxBytes bounds a principal's name.
const MaxBytes = 256

// Check checks a principal's name: 1 to [MaxBytes] bytes of valid UTF-8,
// every character graphic and none a space (so a name reads as one word
// in a token file's line, a log line or an error text). Any other byte is
// allowed: "alice", "ci-bot@example.com", "oauth:auth0|5f7c8ec7", "名前".
func Check(name string) error {
	switch {
	case name == "":
		return errors.New("an empty principal")
	case len(name) > MaxBytes:
		return fmt.Errorf("a principal longer than %d bytes", MaxBytes)
	case !utf8.ValidString(name):
		return errors.New("a principal that is not valid UTF-8")
	case strings.ContainsFunc(name, func(r rune) bool { return !unicode.IsGraphic(r) || unicode.IsSpace(r) }):
		return errors.New("a principal with a space or a control or non-graphic character")
	}
	return nil
}
