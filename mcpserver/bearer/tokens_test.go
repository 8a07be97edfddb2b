package bearer

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"go.uber.org/goleak"

	"github.com/bashvisor/bashvisor/mcpserver/internal/authtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A token file's lines: principals follow the one rule for principals
// (up to 256 bytes, no spaces or control characters) and do not start with
// "oauth:"; tokens are at least 16 bytes and appear once; errors never
// quote a token.
func TestTokenFileParse(t *testing.T) {
	long := strings.Repeat("p", 256)
	for content, want := range map[string]string{
		"":                                       "no tokens",
		"# only a comment\n":                     "no tokens",
		"alice\n":                                "line 1: want \"PRINCIPAL TOKEN\", got 1 fields",
		"alice a b\n":                            "got 3 fields",
		long + "p 0123456789abcdef\n":            "line 1: a principal longer than 256 bytes",
		"al\x01ice 0123456789abcdef\n":           "line 1: a principal with a space or a control",
		"al\xffice 0123456789abcdef\n":           "line 1: a principal that is not valid UTF-8",
		"oauth:x 0123456789abcdef\n":             `principal "oauth:x": "oauth:" starts the principals of OAuth subjects`,
		"alice short\n":                          "the token of alice is shorter than 16 bytes",
		"a 0123456789abcdef\nb 0123456789abcdef": "line 2: the token of b appears twice",
	} {
		_, err := parseTokens([]byte(content))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "0123456789abcdef") {
			t.Errorf("%.40q: %v, want %q (and no token quoted)", content, err, want)
		}
	}
	set, err := parseTokens([]byte("# team\n\nalice 0123456789abcdef\n  alice   fedcba9876543210  \nbob bbbbbbbbbbbbbbbbbbbb\n" +
		long + " llllllllllllllllllll\nteam:ci/bot@example.com cccccccccccccccccccc\n"))
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]string{"0123456789abcdef": "alice", "fedcba9876543210": "alice", "bbbbbbbbbbbbbbbbbbbb": "bob",
		"llllllllllllllllllll": long, "cccccccccccccccccccc": "team:ci/bot@example.com", "0123456789abcde": "", "": ""} {
		if p, _ := set.lookup(tok); p != want {
			t.Errorf("lookup %q = %q, want %q", tok, p, want)
		}
	}
}

// The token file is read again when it changes: added tokens work,
// removed ones are refused, and a broken or removed file keeps the
// previous tokens.
func TestTokenFileReload(t *testing.T) {
	const alice, bob, carol = "alice-0123456789abcdef", "bob-0123456789abcdef", "carol-0123456789abcdef"
	path := authtest.WriteTokens(t, "alice "+alice+"\nbob "+bob+"\n")
	tf, err := OpenTokenFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	who := func(token string) string {
		t.Helper()
		tf.checked.Store(0) // look at the file now, not within a second
		ti, err := tf.Verify(context.Background(), token, nil)
		if err != nil {
			if !errors.Is(err, auth.ErrInvalidToken) {
				t.Errorf("%s: %v does not wrap auth.ErrInvalidToken", token, err)
			}
			return ""
		}
		return ti.UserID
	}
	if who(alice) != "alice" || who(bob) != "bob" || who(carol) != "" {
		t.Fatal("initial tokens")
	}
	if err := os.WriteFile(path, []byte("alice "+alice+"\ncarol "+carol+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if who(bob) != "" || who(carol) != "carol" || who(alice) != "alice" {
		t.Error("after the edit: bob should be refused, carol served")
	}
	if got := tf.Principals(); strings.Join(got, ",") != "alice,carol" {
		t.Errorf("principals %v", got)
	}
	if err := os.WriteFile(path, []byte("alice short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if who(carol) != "carol" {
		t.Error("a broken file dropped the previous tokens")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if who(alice) != "alice" {
		t.Error("a removed file dropped the previous tokens")
	}
	if _, err := OpenTokenFile(path, nil); err == nil {
		t.Error("opened a missing file")
	}
}
