package safety

import (
	"strings"

	"github.com/bashvisor/bashvisor/internal/secret"
)

// The header rule's expression,
//
//	(?i)\b([A-Za-z][A-Za-z0-9-]*)\s*:[ \t]*(?:(?:bearer|basic|token|bot|digest|apikey|key)[ \t]+)?([^\s"']+)
//
// is the most used of the redaction rules (every line with a secret word
// before a colon, such as a comment "# password: see docs", runs it), and
// regexp's backtracker takes about a microsecond for a window of twenty
// bytes. headerMatches finds the same matches by hand;
// TestHeaderMatchesSameAsRegexp compares the two on random texts.

// headerMatches returns what the header rule's
// FindAllStringSubmatchIndex(s, -1) returns, and false (and nothing) when
// s holds a byte outside ASCII: (?i) folds the Kelvin sign into the k of
// token and the long s into the s of basic, which it leaves to regexp.
func headerMatches(s string) ([][]int, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return nil, false
		}
	}
	var out [][]int
	for p := 0; p < len(s); {
		m := headerMatchAt(s, p)
		if m == nil {
			p++
			continue
		}
		out = append(out, m)
		p = m[1]
	}
	return out, true
}

// headerMatchAt returns the header rule's match starting at p (start,
// end, then the name's and the value's), or nil. The name and the blanks
// are greedy, and a shorter name or fewer blanks leave a byte that is not
// a colon; of the scheme words at most one matches at a place, and when no
// value follows it the value starts where the scheme did.
func headerMatchAt(s string, p int) []int {
	if !isASCIILetter(s[p]) || p > 0 && wordByte[s[p-1]] {
		return nil // \b[A-Za-z]
	}
	e := p + 1
	for e < len(s) && (wordByte[s[e]] && s[e] != '_' || s[e] == '-') {
		e++
	}
	c := skipBlank(s, e)
	if c >= len(s) || s[c] != ':' {
		return nil
	}
	v := skipSpaceTab(s, c+1)
	if k := schemeLen(s[v:]); k > 0 && v+k < len(s) && (s[v+k] == ' ' || s[v+k] == '\t') {
		b := skipSpaceTab(s, v+k)
		if end := headerValueEnd(s, b); end > b {
			return []int{p, end, p, e, b, end}
		}
	}
	if end := headerValueEnd(s, v); end > v {
		return []int{p, end, p, e, v, end}
	}
	return nil
}

// headerSchemes are the scheme words of the header rule, in its order.
var headerSchemes = []string{"bearer", "basic", "token", "bot", "digest", "apikey", "key"}

// schemeLen returns the length of the scheme word s starts with (in any
// case), or 0.
func schemeLen(s string) int {
	for _, w := range headerSchemes {
		if hasFoldPrefix(s, w) {
			return len(w)
		}
	}
	return 0
}

// headerValueEnd returns the end of the run of bytes from i on that are
// not blanks or quotes ([^\s"']*).
func headerValueEnd(s string, i int) int {
	for i < len(s) && s[i] != '"' && s[i] != '\'' && s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\f' && s[i] != '\r' {
		i++
	}
	return i
}

// skipSpaceTab returns the offset of the first byte of s from i on that
// is not a space or a tab.
func skipSpaceTab(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

func isASCIILetter(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

// secretHeaderAt returns the offset in line of the first NAME: whose NAME
// is a header that carries credentials, or -1.
func secretHeaderAt(line string) int {
	for i := 0; i < len(line); i++ {
		k := strings.IndexByte(line[i:], ':')
		if k < 0 {
			return -1
		}
		i += k
		j := i
		for j > 0 && strings.IndexByte(blanks, line[j-1]) >= 0 {
			j--
		}
		e := j
		for j > 0 && (isIdentChar(line[j-1]) && line[j-1] != '_' || line[j-1] == '-') {
			j--
		}
		j = nameStart(line, j, e)
		if j < e && secretHeader(line[j:e]) {
			return j
		}
	}
	return -1
}

// nameStart returns where the header rule's `\b[A-Za-z][A-Za-z0-9-]*`
// starts in the run line[j:e] of letters, digits and dashes: at the first
// letter that starts the run or follows a dash (-Authorization: is
// Authorization:), or e.
func nameStart(line string, j, e int) int {
	for p := j; p < e; p++ {
		if c := line[p] | 0x20; c >= 'a' && c <= 'z' && (p == j || line[p-1] == '-') {
			return p
		}
	}
	return e
}

// headerStart is where the header rule's search may start in a line, or
// -1 when the line has no NAME: with NAME a header that carries
// credentials (or a cookie): at the first secret NAME when no match of
// `NAME\s*:[ \t]*(?:SCHEME[ \t]+)?VALUE` that starts earlier can reach
// over it, else at the line's start. One can only when the NAME stands
// right after the colon (and blanks, and maybe a scheme word) of an
// earlier match, or inside an earlier VALUE (a run of bytes that are not
// blanks or quotes). So that the whole text's leftmost matches are
// found, the line's start is kept otherwise. A long line of code with a
// trailing "# password: see docs" is then searched from "password" on.
func headerStart(line string) int {
	j := secretHeaderAt(line)
	if j <= 0 {
		return j
	}
	if c := line[j-1]; strings.IndexByte(blanks, c) < 0 && c != '"' && c != '\'' {
		return 0 // inside an earlier VALUE, maybe
	}
	k := strings.TrimRight(line[:j], blanks)
	if strings.HasSuffix(k, ":") {
		return 0
	}
	w := k[strings.LastIndexAny(k, blanks+":")+1:]
	switch strings.ToLower(w) {
	case "bearer", "basic", "token", "bot", "digest", "apikey", "key":
		return 0 // maybe the scheme word after an earlier NAME:
	}
	return j
}

// secretHeader reports whether an HTTP header carries a credential.
func secretHeader(name string) bool {
	switch strings.ToLower(name) {
	case "authorization", "proxy-authorization", "cookie", "set-cookie":
		return true
	}
	return secret.IsSecret(name)
}
