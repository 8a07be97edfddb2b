package safety

import (
	"regexp"
	"sort"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"

	"github.com/bashvisor/bashvisor/internal/secret"
)

// redacted replaces a credential in logged command text.
const redacted = "[REDACTED]"

// RedactSecrets returns command with the credentials it recognises
// replaced by [REDACTED], leaving the rest readable. It is used for logs
// (the audit log, debug logs); the command that runs is never changed. It
// recognises:
//
//   - values assigned to secret names (secret.IsSecret), wherever NAME=value
//     appears: `PGPASSWORD=x psql`, `export API_KEY=x`, `env GH_TOKEN=x`,
//     `docker run -e NAME=x`, npm's `//host/:_authToken=x`, form bodies
//     `user=u&password=x`, query strings `?access_token=x`;
//   - JSON members with secret names: `{"password":"x"}`, also with
//     escaped quotes;
//   - headers with secret names or credentials: `Authorization: Bearer x`,
//     `X-Api-Key: x`, `PRIVATE-TOKEN: x`, `Cookie: …`;
//   - flags with secret names and their values: `--password=x`,
//     `--token x`, `--oauth2-bearer x`, `--client-secret x` (not flags that
//     name a file, a variable or stdin: `--token-file`, `--password-stdin`);
//   - `mysql -px` (and the other mysql and mariadb tools), `sshpass -p x`,
//     `… login -p x` (docker, podman, helm), `curl -u user:x`, openssl's
//     `pass:x`, keytool's `-storepass x`;
//   - `aws configure set KEY x`, `npm|pnpm|yarn|git|poetry config [set] KEY
//     x` when a part of KEY is a secret name;
//   - URL credentials: `https://user:x@host`, `https://x@host`;
//   - provider keys wherever they appear, keeping their prefix:
//     `sk-ant-…`, `sk-…`, `ghp_…` (and gho_, ghu_, ghs_, ghr_,
//     github_pat_), `glpat-…`, `AKIA…`/`ASIA…`, `xoxb-…`, `AIza…`, `hf_…`,
//     `npm_…`, `sk_live_…`, `pypi-…`, JWTs and PEM private keys.
//
// It is a best effort on text, not a parser of every tool's options.
func RedactSecrets(command string) string {
	return redactSecrets(&source{text: command})
}

// redactSecrets is RedactSecrets on a source that other analyses share.
func redactSecrets(src *source) string {
	return redactWith(src, false)
}

// redactWith is redactSecrets; full runs every pattern on the whole text.
// Otherwise one pass over the lines (scanLines) tells each local rule
// where to look; it is made again only after a rule changed the text.
func redactWith(src *source, full bool) string {
	if src.text == "" {
		return src.text
	}
	out := redactAssignNodes(src)
	bp := lineBufs.Get().(*[]flaggedLine)
	defer putLineBuf(bp)
	var ls lineScan
	valid := false // ls describes out
	for _, r := range redactRules() {
		if !valid && r.local && !full {
			ls, valid = scanLines(out, (*bp)[:0]), true
			*bp = ls.lines
		}
		if next, spans := r.apply(out, &ls, full); spans != nil {
			valid = valid && ls.patch(out, spans)
			out = next
		}
	}
	if !valid && !full {
		ls = scanLines(out, (*bp)[:0])
		*bp = ls.lines
	}
	return redactConfigSet(out, &ls, full)
}

// redactLog is what a log shows of a command: the known secret values
// replaced first (the patterns may replace part of a known value and leave
// the rest unrecognisable), then what RedactSecrets recognises. When no
// known value occurs, the source's tree is reused; otherwise the text with
// the values replaced is different text, parsed on its own.
func redactLog(src *source, known *secret.Redactor) string {
	if t := known.String(src.text); t != src.text {
		return redactSecrets(&source{text: t})
	}
	return redactSecrets(src)
}

// redactAssignNodes replaces the values of secret assignments the shell
// parser finds (`A=x cmd`, `export A="x y"`, `declare A=x`). A command
// that does not parse is returned unchanged: the patterns still apply.
func redactAssignNodes(src *source) string {
	command := src.text
	if len(command) > maxCommandBytes || strings.IndexByte(command, '=') < 0 {
		return command // too long to parse, or no assignment with a value
	}
	f, err := src.tree()
	if err != nil {
		return command
	}
	type span struct{ start, end int }
	var spans []span
	syntax.Walk(f, func(n syntax.Node) bool {
		a, ok := n.(*syntax.Assign)
		if !ok || a.Name == nil || a.Value == nil || len(a.Value.Parts) == 0 || !secret.IsSecret(a.Name.Value) {
			return true
		}
		spans = append(spans, span{src.off(a.Value.Pos()), src.off(a.Value.End())})
		return true
	})
	if len(spans) == 0 {
		return command
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	var b strings.Builder
	last := 0
	for _, s := range spans {
		if s.start < last || s.end > len(command) || s.start > s.end {
			continue
		}
		b.WriteString(command[last:s.start])
		b.WriteString(redacted)
		last = s.end
	}
	b.WriteString(command[last:])
	return b.String()
}

// A redactRule replaces, in each match of re, the first of groups that
// took part in the match with [REDACTED], when ok (if set) accepts the
// match's submatches.
//
// Redaction is linear in the text: a rule whose matches stay within a line
// (local) runs only on the lines whose flags (see scanLines) include its
// anchor and that near (if set) accepts, a cheap test of the line (a
// NAME= whose NAME is a secret name), and only when some line of the text
// has the flags in need; span more lines after such a line may hold the
// rest of a match. Most long commands are heredocs of source code, whose
// lines hold = and : everywhere but secret names nowhere.
type redactRule struct {
	re     *regexp.Regexp
	groups []int
	ok     func(m []string) bool
	local  bool
	anchor lineFlags // local: the lines a match starts on (or, for a key line, ends on) have one of these
	need   lineFlags // local: some line of the text has each of these
	near   func(line string) bool
	span   int
	// start (if set) returns, for a line near accepts, the offset in it
	// from which the rule's matches are searched: a place no match that
	// starts earlier in the line can reach over (see headerStart); -1
	// rejects the line, as near does.
	start func(line string) int
	// find (if set) returns re's FindAllStringSubmatchIndex(s, -1),
	// faster, or false to leave s to re.
	find func(s string) ([][]int, bool)
	pre  prefilter // set by redactRules from re
	scan *litScan  // pre's scanner, when it has many literals
}

// passes reports whether s holds one of the prefilter's literals.
func (r redactRule) passes(s string) bool {
	if r.scan != nil {
		return r.scan.pass(s)
	}
	return r.pre.pass(s)
}

// apply redacts s, whose lines ls describes, and returns the spans of s
// it replaced (nil: none); full runs the expression on the whole text, as
// the windows of a local rule must find the same (a test compares the
// two).
func (r redactRule) apply(s string, ls *lineScan, full bool) (string, [][2]int) {
	var w rewrite
	if full || !r.local {
		if !r.passes(s) {
			return s, nil
		}
		r.replace(&w, s, 0, s)
	} else {
		if ls.all&r.anchor == 0 || ls.all&r.need != r.need {
			return s, nil
		}
		for _, win := range windows(s, ls, r.anchor, r.near, r.start, r.span) {
			r.replace(&w, s, win[0], s[win[0]:win[1]])
		}
	}
	if w.spans == nil {
		return s, nil
	}
	w.b.WriteString(s[w.last:])
	return w.b.String(), w.spans
}

// A rewrite is a text being redacted: b holds it up to last, with
// [REDACTED] for each of spans.
type rewrite struct {
	b     strings.Builder
	last  int
	spans [][2]int
}

// replace writes to w the text of s from w.last to each match of re in
// window (which starts at offset off of s) and [REDACTED] for its group.
func (r redactRule) replace(w *rewrite, s string, off int, window string) {
	ms, found := [][]int(nil), false
	if r.find != nil {
		ms, found = r.find(window)
	}
	if !found {
		ms = r.re.FindAllStringSubmatchIndex(window, -1)
	}
	for _, m := range ms {
		start, end := -1, -1
		for _, g := range r.groups {
			if m[2*g] >= 0 {
				start, end = off+m[2*g], off+m[2*g+1]
				break
			}
		}
		if start < 0 || start < w.last || start == end || paramRef().MatchString(s[start:end]) {
			continue // nothing, or a reference ($TOKEN) that reveals nothing
		}
		if r.ok != nil {
			subs := make([]string, len(m)/2)
			for i := range subs {
				if m[2*i] >= 0 {
					subs[i] = window[m[2*i]:m[2*i+1]]
				}
			}
			if !r.ok(subs) {
				continue
			}
		}
		if w.b.Len() == 0 {
			w.b.Grow(len(s) + 8*len(redacted)) // one allocation for most texts
		}
		w.b.WriteString(s[w.last:start])
		w.b.WriteString(redacted)
		w.last = end
		w.spans = append(w.spans, [2]int{start, end})
	}
}

// windows returns the windows of s around the lines that ls flags with
// one of anchor, that near (if set) accepts and that from (if set) does
// not reject (-1), in order and apart: each such line, from the offset
// from gives, with the newline before it (a pattern may start at \s) and
// span more lines. A line that starts with a colon (after blanks) is
// taken with the lines before it up to one that is not blank (a NAME\s*:
// or "key"\s*: may break lines before the colon), and a window grows past
// its end while it ends in a colon (a JSON value may follow on a later
// line) and until each quote open in it closes (a quoted value may hold
// newlines).
func windows(s string, ls *lineScan, anchor lineFlags, near func(string) bool, from func(string) int, span int) [][2]int {
	var lines [][2]int // candidate lines, unordered
	for _, l := range ls.lines {
		if l.flags&anchor == 0 {
			continue
		}
		start := keyLineStart(s, l.start)
		if near != nil && !near(s[start:l.end]) {
			continue
		}
		off := 0
		if from != nil {
			if off = from(s[start:l.end]); off < 0 {
				continue
			}
		}
		lines = append(lines, [2]int{start + off, l.end})
	}
	if len(lines) == 0 {
		return nil
	}
	sort.Slice(lines, func(i, j int) bool { return lines[i][0] < lines[j][0] })
	var out [][2]int
	var q quoteFinder
	for _, l := range lines {
		start, end := max(l[0]-1, 0), l[1]
		for k := 0; k < span && end < len(s); k++ {
			end = newlineAt(s, end+1)
		}
		end = q.grow(s, start, end)
		if n := len(out); n > 0 && start <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], end)
			continue
		}
		out = append(out, [2]int{start, end})
	}
	return out
}

// newlineAt returns the offset of the newline that ends the line holding
// offset i of s, or len(s).
func newlineAt(s string, i int) int {
	if e := strings.IndexByte(s[i:], '\n'); e >= 0 {
		return i + e
	}
	return len(s)
}

// keyLineStart returns where the window of the line that starts at start
// begins: the line itself, or, when it starts with a colon after blanks,
// the line before it that is not blank.
func keyLineStart(s string, start int) int {
	if j := skipBlank(s, start); start == 0 || j >= len(s) || s[j] != ':' {
		return start
	}
	k := start - 1 // the newline before the line
	for k > 0 && strings.IndexByte(blanks, s[k-1]) >= 0 {
		k--
	}
	return strings.LastIndexByte(s[:k], '\n') + 1
}

// blanks are the bytes regexp's \s matches (not \v).
const blanks = " \t\n\f\r"

// A quoteFinder finds the next quote of s after an offset, remembering the
// last answer for each quote so that windows stays linear.
type quoteFinder struct {
	set      [2]bool
	from, at [2]int
}

// next returns the offset of the first quote q (0 for ', 1 for ") at or
// after i, or -1.
func (f *quoteFinder) next(s string, q, i int) int {
	if f.set[q] && f.from[q] <= i && (i <= f.at[q] || f.at[q] < 0) {
		return f.at[q]
	}
	at := strings.IndexByte(s[i:], "'\""[q])
	if at >= 0 {
		at += i
	}
	f.set[q], f.from[q], f.at[q] = true, i, at
	return at
}

// grow returns the end of the window s[start:end] grown past the line
// that holds the next quote after end of each kind the window holds (a
// value quoted in the window may close there), and past lines while the
// window ends in a colon and blanks.
func (f *quoteFinder) grow(s string, start, end int) int {
	end = colonGrow(s, start, end)
	e := end
	for q := range 2 {
		if strings.IndexByte(s[start:e], "'\""[q]) < 0 {
			continue
		}
		if at := f.next(s, q, e); at >= 0 {
			end = max(end, newlineAt(s, at))
		}
	}
	return colonGrow(s, start, end)
}

// colonGrow returns the end of the window s[start:end] grown by lines
// while it ends in a colon followed by blanks only ("key":\n\n"value").
func colonGrow(s string, start, end int) int {
	for end < len(s) && strings.HasSuffix(strings.TrimRight(s[start:end], blanks), ":") {
		end = newlineAt(s, end+1)
	}
	return end
}

// nearSecretAssign reports whether line has NAME= with a secret NAME.
func nearSecretAssign(line string) bool {
	for i := 0; i < len(line); i++ {
		k := strings.IndexByte(line[i:], '=')
		if k < 0 {
			return false
		}
		i += k
		j := i
		for j > 0 && isIdentChar(line[j-1]) {
			j--
		}
		if j < i && secret.IsSecret(line[j:i]) {
			return true
		}
	}
	return false
}

// nearSecretKey reports whether line has a quoted key with a secret name
// ("password", \"token\") followed by what the JSON rule needs before the
// value: a colon and a quote, as far as the line goes (the value may be on
// the next line). A key with a value that is not a string
// ("token": None) is not near.
func nearSecretKey(line string) bool {
	for i := 0; i < len(line); i++ {
		k := strings.IndexByte(line[i:], '"')
		if k < 0 {
			return false
		}
		i += k
		j := i + 1
		for j < len(line) && (isIdentChar(line[j]) || line[j] == '.' || line[j] == '-') {
			j++
		}
		if j > i+1 && j < len(line) && (line[j] == '"' || line[j] == '\\') && jsonValueFollows(line, j) && secret.IsSecret(line[i+1:j]) {
			return true
		}
	}
	return false
}

// jsonValueFollows reports whether line, from the end j of a key, may go
// on as the JSON rule's `\\?"\s*:\s*\\?"` does: the key's closing quote,
// then a colon and a value's opening quote, or the line's end at a place
// where \s* could take the newline.
func jsonValueFollows(line string, j int) bool {
	if line[j] == '\\' {
		j++
	}
	if j >= len(line) || line[j] != '"' {
		return false
	}
	if j = skipBlank(line, j+1); j == len(line) {
		return true
	}
	if line[j] != ':' {
		return false
	}
	if j = skipBlank(line, j+1); j == len(line) {
		return true
	}
	if line[j] == '\\' {
		j++
	}
	return j < len(line) && line[j] == '"'
}

// skipBlank returns the offset of the first byte of line from i on that
// regexp's \s does not match.
func skipBlank(line string, i int) int {
	for i < len(line) && strings.IndexByte(blanks, line[i]) >= 0 {
		i++
	}
	return i
}

// nearDashPass reports whether line has what the keytool rule
// `\s-(?:src|dest|new)?(?:store|key)?pass[ \t]+` needs: -storepass,
// -keypass, -srcstorepass, ... after a blank (or at the line's start,
// where the window's newline is the blank), followed by a blank.
func nearDashPass(line string) bool {
	for i := 0; ; {
		k := strings.Index(line[i:], "pass")
		if k < 0 {
			return false
		}
		k += i
		i = k + 4
		if i >= len(line) || line[i] != ' ' && line[i] != '\t' {
			continue
		}
		for _, a := range []string{"", "store", "key"} {
			for _, b := range []string{"", "src", "dest", "new"} {
				opt := "-" + b + a
				if strings.HasSuffix(line[:k], opt) && (k == len(opt) || skipBlank(line, k-len(opt)-1) == k-len(opt)) {
					return true
				}
			}
		}
	}
}

// nearCookie reports whether line mentions a cookie header.
func nearCookie(line string) bool {
	for _, k := range []byte{'k', 'K'} { // rare in code: found fast
		for i := 0; i < len(line); i++ {
			j := strings.IndexByte(line[i:], k)
			if j < 0 {
				break
			}
			i += j
			if i >= 3 && i+3 <= len(line) && strings.EqualFold(line[i-3:i+3], "cookie") {
				return true
			}
		}
	}
	return false
}

// nearSecretFlag reports whether line has an option -NAME or --NAME with a
// secret NAME.
func nearSecretFlag(line string) bool {
	for i := 0; i < len(line); i++ {
		k := strings.IndexByte(line[i:], '-')
		if k < 0 {
			return false
		}
		i += k
		if i > 0 && !strings.ContainsRune(blanks+"\"'", rune(line[i-1])) {
			continue
		}
		j := i + 1
		if j < len(line) && line[j] == '-' {
			j++
		}
		e := j
		for e < len(line) && (isIdentChar(line[e]) && line[e] != '_' || line[e] == '-') {
			e++
		}
		if e > j && secretFlag(line[j:e]) {
			return true
		}
		i = max(i, e-1)
	}
	return false
}

// paramRef matches a value that only refers to a variable.
var paramRef = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^["']?\$\{?[A-Za-z_][A-Za-z0-9_]*\}?["']?$`)
})

// Pieces of the patterns: a shell word value (quoted or bare), the rest of
// a simple command (no separator), and a value that is not a flag.
const (
	wordValue = `"[^"]*"|'[^']*'|[^\s"';&|()<>]+`
	sameCmd   = `[^;&|\n]*?`
	argValue  = `"[^"]*"|'[^']*'|[^\s"';&|()<>-][^\s"';&|()<>]*`
)

// secretFlag reports whether a flag name (without dashes) names a
// credential passed as its value.
func secretFlag(name string) bool {
	n := strings.ToLower(name)
	if strings.HasPrefix(n, "no-") || n == "key" || n == "keys" || n == "private-key" {
		return false // a boolean, or the path of a key file
	}
	for _, suf := range []string{"-file", "-path", "-env", "-stdin", "-dir", "-cmd", "-command", "-helper", "-type", "-id", "-name"} {
		if strings.HasSuffix(n, suf) {
			return false
		}
	}
	return secret.IsSecret(n)
}

// redactRules are the patterns RedactSecrets applies, compiled on first
// use: a command-line start that never redacts (no audit log, no command
// log) does not pay the ~0.5–1 ms of compiling them.
var redactRules = sync.OnceValue(func() []redactRule {
	rules := []redactRule{
		// PEM private keys, whole.
		{re: regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----((?s:.*?))(?:-----END [A-Z ]*PRIVATE KEY-----|$)`), groups: []int{1}},
		// NAME=value with a secret NAME.
		{re: regexp.MustCompile(`\b([A-Za-z_][A-Za-z0-9_]*)=(` + wordValue + `)`), groups: []int{2},
			ok: func(m []string) bool { return secret.IsSecret(m[1]) }, local: true, anchor: lineEq, near: nearSecretAssign},
		// JSON members: "password": "x", also as \"password\":\"x\".
		{re: regexp.MustCompile(`\\?"([A-Za-z0-9_.-]+)\\?"\s*:\s*\\?"((?:[^"\\]|\\[^"])*)\\?"`), groups: []int{2},
			ok: func(m []string) bool { return secret.IsSecret(m[1]) }, local: true, anchor: lineQuote, near: nearSecretKey, span: 1},
		// Headers (and YAML-ish NAME: value): Authorization: Bearer x.
		{re: regexp.MustCompile(`(?i)\b([A-Za-z][A-Za-z0-9-]*)\s*:[ \t]*(?:(?:bearer|basic|token|bot|digest|apikey|key)[ \t]+)?([^\s"']+)`), groups: []int{2},
			ok: func(m []string) bool { return secretHeader(m[1]) && !strings.HasPrefix(m[2], "//") }, local: true, anchor: lineColon,
			start: headerStart, find: headerMatches},
		// Cookie: the whole value.
		{re: regexp.MustCompile(`(?i)\b(?:set-)?cookie\s*:[ \t]*([^"'\n]+)`), groups: []int{1}, local: true, anchor: lineColon, need: lineCookie, near: nearCookie},
		// --flag=value, --flag value, -flag value with a secret flag name.
		{re: regexp.MustCompile(`(?:^|[\s"'])--?([A-Za-z0-9][A-Za-z0-9-]*)(?:=(` + wordValue + `)|[ \t]+(` + argValue + `))`), groups: []int{2, 3},
			ok: func(m []string) bool { return secretFlag(m[1]) }, local: true, anchor: lineDash, near: nearSecretFlag},
		// mysql -pX (attached only: -p alone prompts, -P is the port), maybe on the next line.
		{re: regexp.MustCompile(`(?i:\b(?:mysql[a-z_]*|mariadb[a-z-]*))\b` + sameCmd + `\s-p(` + wordValue + `)`), groups: []int{1}, local: true, anchor: lineMySQL, span: 1},
		// sshpass -p X, … login -p X (docker, podman, helm registry, oras).
		{re: regexp.MustCompile(`\b(?:sshpass|login)\b` + sameCmd + `\s-p[ \t]*(` + argValue + `)`), groups: []int{1}, local: true, anchor: lineLogin, span: 1},
		// curl/httpie/wget -u user:X: the password.
		{re: regexp.MustCompile(`\b(?:curl|http|https|xh|wget)\b` + sameCmd + `\s(?:-u|--user|-U|--proxy-user|-a)(?:[ \t]*|=)["']?[^\s:"']*:([^\s"']+)`), groups: []int{1}, local: true, anchor: lineHTTP, span: 1},
		// openssl pass:X; keytool -storepass X.
		{re: regexp.MustCompile(`\bpass:([^\s"']+)`), groups: []int{1}, local: true, anchor: linePassColon},
		{re: regexp.MustCompile(`\s-(?:src|dest|new)?(?:store|key)?pass[ \t]+(` + argValue + `)`), groups: []int{1}, local: true, anchor: lineDashPass, near: nearDashPass},
		// URL credentials: scheme://user:X@ and http(s)://X@.
		{re: regexp.MustCompile(`://[^/\s:@"']*:([^/\s@"']+)@`), groups: []int{1}, local: true, anchor: lineURL},
		{re: regexp.MustCompile(`(?i)\b(?:https?|ftps?|wss?)://([^/\s:@"']+)@`), groups: []int{1}, local: true, anchor: lineURL},
		// Provider keys, anywhere; the prefix stays.
		{re: regexp.MustCompile(`\b(?:sk-ant-|sk-|gh[pousr]_|github_pat_|glpat-|xox[abposr]-|hf_|npm_|[sr]k_(?:live|test)_|pypi-)([A-Za-z0-9_-]{16,})`), groups: []int{1}, local: true, anchor: lineProvider},
		{re: regexp.MustCompile(`\b(?:AKIA|ASIA)([0-9A-Z]{16})\b`), groups: []int{1}, local: true, anchor: lineAWSKey},
		{re: regexp.MustCompile(`\bAIza([0-9A-Za-z_-]{30,})`), groups: []int{1}, local: true, anchor: lineGoogleKey},
		{re: regexp.MustCompile(`\b(eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})`), groups: []int{1}, local: true, anchor: lineJWT},
	}
	for i := range rules {
		rules[i].pre = newPrefilter(rules[i].re.String(), "")
		rules[i].scan = newLitScan(rules[i].pre)
	}
	return rules
})

// configSetRe finds tools' "config set KEY VALUE" commands.
// Compiled on first use, as redactRules.
var configSet = sync.OnceValues(func() (*regexp.Regexp, prefilter) {
	re := regexp.MustCompile(`\b(?:aws\s+configure\s+set|(?:npm|pnpm|yarn|git|poetry|pip|composer|gh)\s+config(?:\s+set)?)\s`)
	return re, newPrefilter(re.String(), "")
})

// redactConfigSet replaces VALUE in `aws configure set KEY VALUE` and the
// like when a part of KEY (split at '.', ':' and '/') is a secret name;
// ls describes s's lines, unless full.
func redactConfigSet(s string, ls *lineScan, full bool) string {
	configSetRe, configSetPre := configSet()
	var locs [][]int
	if full {
		if !configSetPre.pass(s) {
			return s
		}
		locs = configSetRe.FindAllStringIndex(s, -1)
	} else {
		if ls.all&lineConfig == 0 {
			return s
		}
		for _, w := range windows(s, ls, lineConfig, nearConfigSet, nil, 0) {
			for _, l := range configSetRe.FindAllStringIndex(s[w[0]:w[1]], -1) {
				locs = append(locs, []int{w[0] + l[0], w[0] + l[1]})
			}
		}
	}
	for i := len(locs) - 1; i >= 0; i-- { // back to front: offsets stay valid
		rest := s[locs[i][1]:]
		end := strings.IndexAny(rest, ";&|\n")
		if end < 0 {
			end = len(rest)
		}
		var key string
		off := locs[i][1]
		skip := false
		for _, w := range shellFields(rest[:end]) {
			word := rest[w[0]:w[1]]
			switch {
			case skip:
				skip = false
				continue
			case strings.HasPrefix(word, "-"):
				skip = optionsWithValue[word]
				continue
			case key == "":
				key = strings.Trim(word, `"'`)
				continue
			}
			if secretKey(key) && word != redacted {
				s = s[:off+w[0]] + redacted + s[off+w[1]:]
			}
			break
		}
	}
	return s
}

// nearConfigSet reports whether line has a tool's config command: "aws
// configure" or TOOL config.
func nearConfigSet(line string) bool {
	if strings.Contains(line, "configure") {
		return true
	}
	for i := 0; i < len(line); i++ {
		k := strings.Index(line[i:], "config")
		if k < 0 {
			return false
		}
		i += k
		j := i
		for j > 0 && (line[j-1] == ' ' || line[j-1] == '\t') {
			j--
		}
		e := j
		for j > 0 && isIdentChar(line[j-1]) {
			j--
		}
		switch line[j:e] {
		case "npm", "pnpm", "yarn", "git", "poetry", "pip", "composer", "gh":
			if e < i {
				return true
			}
		}
	}
	return false
}

// optionsWithValue are the options of those commands that take the next
// word as their value.
var optionsWithValue = map[string]bool{
	"--profile": true, "--region": true, "--file": true, "-f": true, "--blob": true,
	"--location": true, "--workspace": true, "-w": true, "--type": true,
}

// secretKey reports whether a configuration key has a secret part.
func secretKey(key string) bool {
	for _, part := range strings.FieldsFunc(key, func(r rune) bool { return r == '.' || r == ':' || r == '/' }) {
		if secret.IsSecret(part) {
			return true
		}
	}
	return false
}

// shellFields splits s at blanks outside quotes and returns the spans of
// the words.
func shellFields(s string) [][2]int {
	var out [][2]int
	start, quote := -1, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
			if start < 0 {
				start = i
			}
		case c == ' ' || c == '\t':
			if start >= 0 {
				out = append(out, [2]int{start, i})
				start = -1
			}
		default:
			if start < 0 {
				start = i
			}
		}
	}
	if start >= 0 {
		out = append(out, [2]int{start, len(s)})
	}
	return out
}
