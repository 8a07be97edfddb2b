package safety

import (
	"strings"
	"sync"
)

// One pass over the text serves every local redaction rule: scanLines
// walks the text once, byte by byte, and notes for each line the bytes
// and the words (runs of [A-Za-z0-9_], the runs regexp's \b delimits)
// that some rule's match needs. A rule then looks only at the lines that
// hold what it needs (its anchor), and a rule whose need no line meets is
// skipped without looking at the text again. Before, each rule searched
// the whole text for each of its literals (about forty searches of a long
// heredoc, twice for a rule whose literal occurred).
//
// Every flag is a necessary condition of a match of its rule, read off
// the rule's expression: `\bcurl\b` needs the word curl, `\bpass:` the
// word pass before a colon, `(?i)\bcookie\s*:` the word cookie in any case
// (or a byte outside ASCII, which (?i) may fold: K is the Kelvin sign's
// fold of k, ſ the long s's of s). TestRedactLinesSameAsLiterals compares
// the result with the rules' literal search on random texts.

// lineFlags say what a line holds.
type lineFlags uint32

const (
	lineEq        lineFlags = 1 << iota // '='
	lineQuote                           // '"'
	lineColon                           // ':'
	lineDash                            // '-'
	lineURL                             // "://"
	lineMySQL                           // a word mysql… or mariadb…, in any case
	lineLogin                           // the word sshpass or login
	lineHTTP                            // the word curl, http, https, xh or wget
	linePassColon                       // the word pass before ':'
	lineDashPass                        // -…pass (keytool's -storepass, -keypass, …)
	lineProvider                        // the start of a provider key (sk-, ghp_, …)
	lineAWSKey                          // a word starting AKIA or ASIA
	lineGoogleKey                       // a word starting AIza
	lineJWT                             // a word starting eyJ
	lineCookie                          // the word cookie, in any case
	lineConfig                          // the word config or configure
)

// A flaggedLine is a line of the text (without its newline) that holds
// something a rule needs.
type flaggedLine struct {
	start, end int
	flags      lineFlags
}

// A lineScan is what scanLines found: the flagged lines in order, and the
// union of their flags.
type lineScan struct {
	lines []flaggedLine
	all   lineFlags
}

// patch makes ls the scan of s with spans (in order, apart) replaced by
// [REDACTED] and reports true, or reports false (then scan again) when a
// span holds a newline. A line keeps its flags: [REDACTED] adds none, and
// no word joins across it, so they are a superset of the new line's.
func (ls *lineScan) patch(s string, spans [][2]int) bool {
	for _, sp := range spans {
		if strings.IndexByte(s[sp[0]:sp[1]], '\n') >= 0 {
			return false
		}
	}
	shift, k := 0, 0
	for i, l := range ls.lines {
		for k < len(spans) && spans[k][1] <= l.start {
			shift += len(redacted) - (spans[k][1] - spans[k][0])
			k++
		}
		ls.lines[i].start += shift
		for k < len(spans) && spans[k][1] <= l.end {
			shift += len(redacted) - (spans[k][1] - spans[k][0])
			k++
		}
		ls.lines[i].end += shift
	}
	return true
}

// lineBufs holds the line buffers of scanLines.
var lineBufs = sync.Pool{New: func() any { return new([]flaggedLine) }}

// maxPooledLines bounds the buffers kept for reuse.
const maxPooledLines = 4 << 10

func putLineBuf(bp *[]flaggedLine) {
	if cap(*bp) <= maxPooledLines {
		lineBufs.Put(bp)
	}
}

// wordByte are the bytes of regexp's \w (\b's word bytes).
var wordByte = func() (t [256]bool) {
	for c := range 256 {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
	}
	return t
}()

// byteFlags are the flags single bytes give. A byte outside ASCII may be
// the case fold of a letter of a case-insensitive word.
var byteFlags = func() (t [256]lineFlags) {
	t['='], t['"'], t[':'], t['-'] = lineEq, lineQuote, lineColon, lineDash
	for c := 0x80; c < 256; c++ {
		t[c] = lineMySQL | lineCookie
	}
	return t
}()

// scanLines returns the flagged lines of s, appended to buf.
func scanLines(s string, buf []flaggedLine) lineScan {
	ls := lineScan{lines: buf}
	start, f := 0, lineFlags(0)
	for i := 0; i < len(s); {
		c := s[i]
		if wordByte[c] {
			j := i + 1
			for j < len(s) && wordByte[s[j]] {
				j++
			}
			if keywordLens[c]&(1<<min(j-i, 15)) != 0 || i > 0 && s[i-1] == '-' {
				f |= wordFlags(s, i, j)
			}
			i = j
			continue
		}
		if c == '\n' {
			ls.add(start, i, f)
			start, f = i+1, 0
		} else {
			f |= byteFlags[c]
			if c == ':' && strings.HasPrefix(s[i+1:], "//") {
				f |= lineURL
			}
		}
		i++
	}
	ls.add(start, len(s), f)
	return ls
}

func (ls *lineScan) add(start, end int, f lineFlags) {
	if f != 0 {
		ls.lines = append(ls.lines, flaggedLine{start, end, f})
		ls.all |= f
	}
}

// keywordLens says, by a word's first byte, which lengths (bit n: n
// bytes, bit 15: 15 or more) a word wordFlags looks for may have (other
// than -…pass): the words themselves, and the words that start with a
// prefix (any length from the prefix's on). scanLines calls wordFlags
// only for those.
var keywordLens = func() (t [256]uint16) {
	lens := func(c byte, n int, prefix bool) {
		for k := min(n, 15); k <= 15; k++ {
			t[c] |= 1 << k
			if !prefix && k < 15 {
				break
			}
		}
	}
	for _, w := range []string{"sshpass", "login", "curl", "http", "https", "xh", "wget", "config", "configure", "pass",
		"sk", "glpat", "xoxa", "pypi"} {
		lens(w[0], len(w), false)
	}
	for _, w := range []string{"ghp_", "github_pat_", "hf_", "npm_", "sk_live_", "rk_live_", "AKIA", "ASIA", "AIza", "eyJ"} {
		lens(w[0], len(w), true)
	}
	for _, c := range []byte("mM") { // mysql…, mariadb… in any case
		lens(c, len("mysql"), true)
	}
	for _, c := range []byte("cC") { // cookie in any case
		lens(c, len("cookie"), false)
	}
	return t
}()

// wordFlags returns the flags of the word s[i:j].
func wordFlags(s string, i, j int) lineFlags {
	w := s[i:j]
	var f lineFlags
	if i > 0 && s[i-1] == '-' && strings.HasSuffix(w, "pass") {
		f = lineDashPass
	}
	next := byte(0)
	if j < len(s) {
		next = s[j]
	}
	f |= keyPrefixFlags(w, next)
	switch w {
	case "sshpass", "login":
		f |= lineLogin
	case "curl", "http", "https", "xh", "wget":
		f |= lineHTTP
	case "config", "configure":
		f |= lineConfig
	case "pass":
		if next == ':' {
			f |= linePassColon
		}
	}
	switch w[0] | 0x20 {
	case 'm':
		if hasFoldPrefix(w, "mysql") || hasFoldPrefix(w, "mariadb") {
			f |= lineMySQL
		}
	case 'c':
		if len(w) == 6 && strings.EqualFold(w, "cookie") {
			f |= lineCookie
		}
	}
	return f
}

// keyPrefixFlags returns the flags of the provider keys' patterns for the
// word w, followed by the byte next: `\b(?:sk-ant-|sk-|gh[pousr]_|
// github_pat_|glpat-|xox[abposr]-|hf_|npm_|[sr]k_(?:live|test)_|pypi-)`,
// `\b(?:AKIA|ASIA)`, `\bAIza` and `\beyJ`, each at the start of a word.
func keyPrefixFlags(w string, next byte) lineFlags {
	switch w[0] {
	case 'A':
		if strings.HasPrefix(w, "AKIA") || strings.HasPrefix(w, "ASIA") {
			return lineAWSKey
		}
		if strings.HasPrefix(w, "AIza") {
			return lineGoogleKey
		}
		return 0
	case 'e':
		if strings.HasPrefix(w, "eyJ") {
			return lineJWT
		}
		return 0
	}
	if providerPrefix(w, next) {
		return lineProvider
	}
	return 0
}

// providerPrefix reports whether the word w, followed by next, starts
// with a provider key's prefix.
func providerPrefix(w string, next byte) bool {
	switch w[0] {
	case 'g':
		return len(w) >= 4 && w[1] == 'h' && w[3] == '_' && strings.IndexByte("pousr", w[2]) >= 0 ||
			strings.HasPrefix(w, "github_pat_") || w == "glpat" && next == '-'
	case 'h':
		return strings.HasPrefix(w, "hf_")
	case 'n':
		return strings.HasPrefix(w, "npm_")
	case 's', 'r':
		if w == "sk" && next == '-' {
			return true
		}
		return len(w) >= 8 && w[1] == 'k' && w[2] == '_' && (w[3:8] == "live_" || w[3:8] == "test_")
	case 'x':
		return len(w) == 4 && w[:3] == "xox" && strings.IndexByte("abposr", w[3]) >= 0 && next == '-'
	case 'p':
		return w == "pypi" && next == '-'
	}
	return false
}

// hasFoldPrefix reports whether the ASCII word w starts with lit in any
// case.
func hasFoldPrefix(w, lit string) bool {
	return len(w) >= len(lit) && strings.EqualFold(w[:len(lit)], lit)
}
