package safety

import (
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// headerPieces are what TestHeaderMatchesSameAsRegexp's texts are made of:
// names, schemes in any case, blanks (all of \s, and \v), colons, quotes,
// dashes, word bytes and a byte outside ASCII.
var headerPieces = []string{"Authorization", "password", "x", "-", "_", "1", ":", ": ", " ", "\t", "\n", "\f", "\r", "\v",
	"Bearer", "bearer ", "BASIC", "token", "Token\t", "bot", "digest", "apikey", "key", "KEY ", "\"", "'", "v4lue", "#",
	"é", "to\u212Aen ", "ba\u017Fic "}

// TestHeaderMatchesSameAsRegexp: headerMatches returns what the header
// rule's expression finds, or leaves the text to it.
func TestHeaderMatchesSameAsRegexp(t *testing.T) {
	var rule redactRule
	for _, r := range redactRules() {
		if r.find != nil {
			rule = r
		}
	}
	if rule.re == nil {
		t.Fatal("no rule has a hand-written matcher")
	}
	matched := 0
	prop := func(t *rapid.T) {
		s := strings.Join(rapid.SliceOfN(rapid.SampledFrom(headerPieces), 1, 14).Draw(t, "pieces"), "")
		want := rule.re.FindAllStringSubmatchIndex(s, -1)
		got, ok := headerMatches(s)
		if !ok {
			if strings.IndexFunc(s, func(r rune) bool { return r >= 0x80 }) < 0 {
				t.Fatalf("headerMatches(%q) left an ASCII text to the expression", s)
			}
			return
		}
		if len(want) > 0 {
			matched++
		}
		if !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("headerMatches(%q) = %v, the expression finds %v", s, got, want)
		}
	}
	for range 30 { // 3,000 texts: a matcher that took \f for a blank failed in 521
		rapid.Check(t, prop)
	}
	if matched == 0 {
		t.Error("no text drawn matched: nothing was compared")
	}
}

// literalScan flags the lines of s as redaction did before scanLines:
// each line that holds one of a local rule's prefilter literals (where
// the literal starts) gets the rule's anchor, and every need is met.
func literalScan(s string) *lineScan {
	flags := map[int]lineFlags{} // by line start
	mark := func(pre prefilter, f lineFlags) {
		for _, lit := range pre {
			for i := 0; i < len(s); {
				k := strings.Index(s[i:], lit)
				if k < 0 {
					break
				}
				start := strings.LastIndexByte(s[:i+k], '\n') + 1
				flags[start] |= f
				i = newlineAt(s, i+k) + 1
			}
		}
	}
	for _, r := range redactRules() {
		if r.local {
			mark(r.pre, r.anchor)
		}
	}
	_, configSetPre := configSet()
	mark(configSetPre, lineConfig)
	ls := &lineScan{all: ^lineFlags(0)}
	for start := 0; start <= len(s); {
		end := newlineAt(s, start)
		if f := flags[start]; f != 0 {
			ls.lines = append(ls.lines, flaggedLine{start, end, f})
		}
		start = end + 1
	}
	return ls
}

// literalRedact is redactSecrets with the lines flagged by literalScan,
// made again after each rule that changed the text.
func literalRedact(s string) string {
	out := redactAssignNodes(&source{text: s})
	for _, r := range redactRules() {
		out, _ = r.apply(out, literalScan(out), false)
	}
	return redactConfigSet(out, literalScan(out), false)
}

// redactLinePieces are what TestRedactLinesSameAsLiterals's texts are made
// of: the rules' keywords with what follows them (whole, and cut in two),
// separators, and words or bytes that may join or fold into a keyword.
var redactLinePieces = func() []string {
	examples := []string{"curl -u u:S3CR", "http --user=u:S3CR", "xh -a u:S3CR", "wget -U u:S3CR", "https -u u:S3CR",
		"sshpass -p S3CR", "docker login -p S3CR", "mysql -pS3CR", "MySQL -pS3CR", "mariadb-dump -pS3CR", "mysqldump\n-pS3CR",
		"my\u017Fql -pS3CR", "openssl pass:S3CR", "keytool -storepass S3CR", "-srckeypass S3CR", "Cookie: S3CR",
		"Set-Cookie: S3CR", "coo\u212Aie: S3CR", "npm config set _authToken S3CR", "aws configure set aws_secret_access_key S3CR",
		"git config user.password S3CR", "https://u:S3CR@h", "ftp://S3CR@h", "sk-ant-abcdefghijklmnopqrst", "ghp_abcdefghijklmnopqrst",
		"github_pat_abcdefghijklmnopqr", "glpat-abcdefghijklmnopqrst", "xoxb-abcdefghijklmnopqrst", "hf_abcdefghijklmnopqrst",
		"npm_abcdefghijklmnopqrst", "sk_live_abcdefghijklmnopqrst", "rk_test_abcdefghijklmnopqrst", "ghs_abcdefghijklmnopqrst", "pypi-abcdefghijklmnopqrst", "AKIAABCDEFGHIJKLMNOP",
		"AIzaabcdefghijklmnopqrstuvwxyz0123", "eyJabcdefghij.eyJabcdefghij.abcdefghij", "token: S3CR", "password=S3CR"}
	var pieces []string
	for _, e := range examples {
		pieces = append(pieces, e, e[:len(e)/2], e[len(e)/2:])
	}
	return append(pieces, " ", "\t", "\n", "\"", "'", "=", "-", "_", "x", ";", "|", "\u017F", "\u212A", "é")
}()

// TestRedactLinesSameAsLiterals: redaction with the lines scanLines flags
// (and patches after a rule) redacts as with the lines that hold the
// rules' literals, on random texts of the rules' keywords.
func TestRedactLinesSameAsLiterals(t *testing.T) {
	texts := append([]string(nil), redactTexts...)
	texts = append(texts, heredocCommand(10<<10))
	for _, s := range texts {
		if got, want := redactSecrets(&source{text: s}), literalRedact(s); got != want {
			t.Errorf("redaction of %q:\n%q\nwith the literals' lines:\n%q", clip(s), got, want)
		}
	}
	prop := func(t *rapid.T) {
		s := strings.Join(rapid.SliceOfN(rapid.SampledFrom(redactLinePieces), 1, 8).Draw(t, "pieces"), "")
		if got, want := redactSecrets(&source{text: s}), literalRedact(s); got != want {
			t.Fatalf("redaction of %q:\n%q\nwith the literals' lines:\n%q", s, got, want)
		}
	}
	for range 100 { // 10,000 texts
		rapid.Check(t, prop)
	}
}
