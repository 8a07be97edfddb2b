//go:build linux

package gitpolicy

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/bashvisor/bashvisor/internal/layer"
)

// configEntry is one variable of a git config file.
type configEntry struct {
	// Section and Key are lower case; Sub keeps its case (it is
	// case-sensitive in git), and is "" for a section without one.
	Section, Sub, Key string
	Value             string
	// Bare: the key had no "=" (a boolean true).
	Bare bool
}

// name is the variable's name as git config prints it: section.key or
// section.sub.key.
func (e configEntry) name() string {
	if e.Sub == "" {
		return e.Section + "." + e.Key
	}
	return e.Section + "." + e.Sub + "." + e.Key
}

// parseConfig parses a git config file the way git does
// (config.c:git_parse_source): [section], [section "sub"] and the
// legacy [section.sub] headers, a variable after a header on the same
// line, "=" optional (a bare key is true), values with double quotes,
// the escapes \\ \" \n \t \b, a backslash before the newline
// continuing the value on the next line, comments after # or ; outside
// quotes, and a UTF-8 byte order mark at the start. Anything git would
// reject is an error: a file that does not parse is not safe.
func parseConfig(b []byte) ([]configEntry, error) {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	p := &configParser{src: b, line: 1}
	var out []configEntry
	var section, sub string
	for {
		c, ok := p.peek()
		if !ok {
			return out, nil
		}
		switch {
		case c == '\n':
			p.next()
		case c == ' ' || c == '\t' || c == '\r':
			p.next()
		case c == '#' || c == ';':
			p.skipLine()
		case c == '[':
			s, ss, err := p.header()
			if err != nil {
				return nil, err
			}
			section, sub = s, ss
		case isAlpha(c):
			if section == "" {
				return nil, p.errorf("variable outside a section")
			}
			key, value, bare, err := p.variable()
			if err != nil {
				return nil, err
			}
			out = append(out, configEntry{Section: section, Sub: sub, Key: key, Value: value, Bare: bare})
		default:
			return nil, p.errorf("unexpected %q", c)
		}
	}
}

type configParser struct {
	src  []byte
	pos  int
	line int
}

func (p *configParser) peek() (byte, bool) {
	if p.pos >= len(p.src) {
		return 0, false
	}
	return p.src[p.pos], true
}

func (p *configParser) next() byte {
	c := p.src[p.pos]
	p.pos++
	if c == '\n' {
		p.line++
	}
	return c
}

func (p *configParser) skipLine() {
	for {
		c, ok := p.peek()
		if !ok || c == '\n' {
			return
		}
		p.next()
	}
}

func (p *configParser) errorf(format string, args ...any) error {
	return fmt.Errorf("bad config line %d: %s", p.line, fmt.Sprintf(format, args...))
}

func isAlpha(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// header parses "[section]", `[section "sub"]` or "[section.sub]".
func (p *configParser) header() (string, string, error) {
	p.next() // [
	var name strings.Builder
	for {
		c, ok := p.peek()
		if !ok || c == '\n' {
			return "", "", p.errorf("unterminated section header")
		}
		if c == ']' {
			p.next()
			s := strings.ToLower(name.String())
			if s == "" {
				return "", "", p.errorf("empty section name")
			}
			if sec, sub, ok := strings.Cut(s, "."); ok {
				// The legacy [section.sub] form: the subsection is
				// lower-cased.
				if sec == "" || sub == "" {
					return "", "", p.errorf("bad section name %q", s)
				}
				return sec, sub, nil
			}
			return s, "", nil
		}
		if c == ' ' || c == '\t' {
			return p.subsection(strings.ToLower(name.String()))
		}
		if !isAlpha(c) && !isDigit(c) && c != '-' && c != '.' {
			return "", "", p.errorf("bad character %q in section name", c)
		}
		name.WriteByte(p.next())
	}
}

// subsection parses the rest of `[section "sub"]`.
func (p *configParser) subsection(section string) (string, string, error) {
	if section == "" || strings.Contains(section, ".") {
		return "", "", p.errorf("bad section name %q", section)
	}
	for {
		c, ok := p.peek()
		if ok && (c == ' ' || c == '\t') {
			p.next()
			continue
		}
		if !ok || c != '"' {
			return "", "", p.errorf("expected a quoted subsection")
		}
		p.next()
		break
	}
	var sub strings.Builder
	for {
		c, ok := p.peek()
		if !ok || c == '\n' {
			return "", "", p.errorf("unterminated subsection")
		}
		p.next()
		if c == '"' {
			break
		}
		if c == '\\' {
			c, ok = p.peek()
			if !ok || c == '\n' {
				return "", "", p.errorf("unterminated subsection")
			}
			p.next()
		}
		sub.WriteByte(c)
	}
	if c, ok := p.peek(); !ok || c != ']' {
		return "", "", p.errorf("expected ] after the subsection")
	}
	p.next()
	return section, sub.String(), nil
}

// variable parses "key", "key = value" and the value's continuation
// lines.
func (p *configParser) variable() (string, string, bool, error) {
	var key strings.Builder
	for {
		c, ok := p.peek()
		if !ok || !(isAlpha(c) || isDigit(c) || c == '-') {
			break
		}
		key.WriteByte(p.next())
	}
	for {
		c, ok := p.peek()
		if ok && (c == ' ' || c == '\t') {
			p.next()
			continue
		}
		break
	}
	c, ok := p.peek()
	switch {
	case !ok || c == '\n':
		return strings.ToLower(key.String()), "", true, nil
	case c == '\r':
		p.next()
		return strings.ToLower(key.String()), "", true, nil
	case c == '#' || c == ';':
		p.skipLine()
		return strings.ToLower(key.String()), "", true, nil
	case c != '=':
		return "", "", false, p.errorf("bad variable name %q", key.String()+string(c))
	}
	p.next()
	v, err := p.value()
	return strings.ToLower(key.String()), v, false, err
}

// value parses a value up to the end of its (last continued) line.
func (p *configParser) value() (string, error) {
	var out strings.Builder
	quoted := false
	space := 0 // unquoted whitespace not yet written (dropped at the end)
	started := false
	for {
		c, ok := p.peek()
		if !ok || c == '\n' {
			if quoted {
				return "", p.errorf("unterminated quote")
			}
			return out.String(), nil
		}
		p.next()
		switch {
		case !quoted && (c == ' ' || c == '\t' || c == '\r'):
			if started {
				space++
			}
			continue
		case !quoted && (c == '#' || c == ';'):
			p.skipLine()
			return out.String(), nil
		}
		for ; space > 0; space-- {
			out.WriteByte(' ')
		}
		switch c {
		case '"':
			quoted = !quoted
			started = true
		case '\\':
			e, ok := p.peek()
			if !ok {
				return "", p.errorf("backslash at end of file")
			}
			p.next()
			switch e {
			case '\n':
				// continues on the next line
			case '\\', '"':
				out.WriteByte(e)
			case 'n':
				out.WriteByte('\n')
			case 't':
				out.WriteByte('\t')
			case 'b':
				out.WriteByte('\b')
			default:
				return "", p.errorf("bad escape \\%c", e)
			}
			started = true
		case 0:
			return "", errors.New("NUL byte in config")
		default:
			out.WriteByte(c)
			started = true
		}
	}
}

// isBool reports whether v is one of git's boolean values (a bare key
// is true).
func isBool(e configEntry) bool {
	if e.Bare {
		return true
	}
	switch strings.ToLower(e.Value) {
	case "true", "false", "yes", "no", "on", "off", "1", "0", "":
		return true
	}
	return false
}

// A key rule checks a value; sub says whether the key has a
// subsection (remote.NAME.url) or not (core.bare).
type keyRule struct {
	sub   bool
	check func(configEntry) string
}

func anyValue(e configEntry) string {
	if strings.ContainsFunc(e.Value, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "value " + quote(e.Value) + " holds control characters"
	}
	return ""
}

func boolean(e configEntry) string {
	if isBool(e) {
		return ""
	}
	return "value " + quote(e.Value) + " is not a boolean"
}

func number(e configEntry) string {
	if isNumber(strings.TrimPrefix(e.Value, "-")) {
		return ""
	}
	return "value " + quote(e.Value) + " is not a number"
}

// oneOf accepts the values, and booleans when withBool.
func oneOf(withBool bool, vals ...string) func(configEntry) string {
	return func(e configEntry) string {
		if withBool && isBool(e) {
			return ""
		}
		for _, v := range vals {
			if strings.EqualFold(e.Value, v) {
				return ""
			}
		}
		return "value " + quote(e.Value) + " is not one of " + strings.Join(vals, ", ")
	}
}

func urlValue(e configEntry) string { return safeURL(e.Value) }

func sharedValue(e configEntry) string {
	if isBool(e) || validShared(e.Value) {
		return ""
	}
	return "value " + quote(e.Value) + " is not a sharing mode"
}

// safeKeys are the keys that run nothing and name no file git reads as
// code, with their values' checks: what git init, git clone, git remote,
// git branch, git submodule init and git config user.* write, and
// settings of git's own behaviour. Every other key (core.fsmonitor,
// core.hooksPath, core.pager, core.editor, core.sshCommand,
// core.worktree, include.*, alias.*, filter, diff and merge drivers,
// credential helpers, gpg.program, remote.*.uploadpack, ...) is refused.
var safeKeys = map[string]keyRule{
	"core.repositoryformatversion": {check: oneOf(false, "0", "1")},
	"core.filemode":                {check: boolean}, "core.bare": {check: boolean},
	"core.ignorecase": {check: boolean}, "core.precomposeunicode": {check: boolean},
	"core.symlinks": {check: boolean}, "core.sparsecheckout": {check: boolean},
	"core.sparsecheckoutcone": {check: boolean}, "core.quotepath": {check: boolean},
	"core.trustctime": {check: boolean}, "core.splitindex": {check: boolean},
	"core.untrackedcache":   {check: oneOf(true, "keep")},
	"core.logallrefupdates": {check: oneOf(true, "always")},
	"core.autocrlf":         {check: oneOf(true, "input")},
	"core.safecrlf":         {check: oneOf(true, "warn")},
	"core.eol":              {check: oneOf(false, "lf", "crlf", "native")},
	"core.sharedrepository": {check: sharedValue},
	"core.abbrev":           {check: anyValue},
	"index.sparse":          {check: boolean}, "index.version": {check: oneOf(false, "2", "3", "4")},
	"extensions.objectformat":   {check: oneOf(false, "sha1", "sha256")},
	"extensions.worktreeconfig": {check: boolean},
	"extensions.partialclone":   {check: anyValue},
	"user.name":                 {check: anyValue}, "user.email": {check: anyValue},
	"user.useconfigonly": {check: boolean}, "user.signingkey": {check: anyValue},
	"author.name": {check: anyValue}, "author.email": {check: anyValue},
	"committer.name": {check: anyValue}, "committer.email": {check: anyValue},
	"init.defaultbranch": {check: anyValue},
	"rerere.enabled":     {check: boolean}, "rerere.autoupdate": {check: boolean},
	"gc.auto": {check: number}, "gc.autopacklimit": {check: number}, "maintenance.auto": {check: boolean},
	"pull.rebase":  {check: oneOf(true, "merges", "interactive")},
	"pull.ff":      {check: oneOf(true, "only")},
	"push.default": {check: oneOf(false, "nothing", "current", "upstream", "tracking", "simple", "matching")},
	"fetch.prune":  {check: boolean}, "merge.conflictstyle": {check: oneOf(false, "merge", "diff3", "zdiff3")},
	"color.ui":   {check: oneOf(true, "auto", "always", "never")},
	"remote.url": {sub: true, check: urlValue}, "remote.pushurl": {sub: true, check: urlValue},
	"remote.fetch": {sub: true, check: anyValue}, "remote.push": {sub: true, check: anyValue},
	"remote.partialclonefilter": {sub: true, check: anyValue},
	"remote.mirror":             {sub: true, check: boolean}, "remote.promisor": {sub: true, check: boolean},
	"remote.prune": {sub: true, check: boolean}, "remote.skipdefaultupdate": {sub: true, check: boolean},
	"remote.tagopt": {sub: true, check: oneOf(false, "--no-tags", "--tags")},
	"branch.remote": {sub: true, check: anyValue}, "branch.merge": {sub: true, check: anyValue},
	"branch.pushremote": {sub: true, check: anyValue}, "branch.description": {sub: true, check: anyValue},
	"branch.rebase":        {sub: true, check: oneOf(true, "merges", "interactive")},
	"submodule.url":        {sub: true, check: urlValue},
	"submodule.active":     {sub: true, check: boolean},
	"submodule.update":     {sub: true, check: oneOf(false, "checkout", "rebase", "merge", "none")},
	"submodule.branch":     {sub: true, check: anyValue},
	"worktree.guessremote": {check: boolean},
}

// safeKey checks one variable against safeKeys. It returns why it is
// not safe, or "".
func safeKey(e configEntry) string {
	r, ok := safeKeys[e.Section+"."+e.Key]
	if !ok || r.sub != (e.Sub != "") {
		return "it is not among the keys that run nothing"
	}
	return r.check(e)
}

// validShared reports whether v is a core.sharedRepository mode.
func validShared(v string) bool {
	switch strings.ToLower(v) {
	case "group", "all", "world", "everybody", "umask":
		return true
	}
	if len(v) < 3 || len(v) > 4 {
		return false
	}
	for _, c := range []byte(v) {
		if c < '0' || c > '7' {
			return false
		}
	}
	return true
}

// safeURL checks a remote or submodule URL: no option injection (a
// leading "-"), no transport helper ("<transport>::<address>", which
// includes ext:: and runs a program), no control characters.
func safeURL(u string) string {
	switch {
	case u == "":
		return "an empty URL"
	case strings.HasPrefix(u, "-"):
		return "URL " + quote(u) + " starts with - (read as an option)"
	case strings.Contains(u, "::"), strings.HasPrefix(strings.ToLower(u), "ext:"), strings.HasPrefix(strings.ToLower(u), "fd:"):
		return "URL " + quote(u) + " names a transport helper (a program git runs)"
	case strings.ContainsFunc(u, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return "URL " + quote(u) + " holds control characters"
	}
	return ""
}

// quote quotes s for a message, cut to a readable length.
func quote(s string) string {
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// configEntry judges config and config.worktree at the top of a git
// directory.
func (k *checker) configEntry(e entry) verdict {
	switch {
	case len(e.parts) > 1:
		return refuse(Unknown, "a file git does not write")
	case !e.g.existed && e.kind != layer.Deleted && e.mode.IsRegular():
		return k.newConfig(e.path)
	}
	return k.configFileChange(e.path, e.kind, e.mode, "a repository's configuration")
}

// newConfig checks a new repository's config file: every key is safe.
func (k *checker) newConfig(p string) verdict {
	b, why := k.read(p)
	if why != "" {
		return refuse(NewConfig, "config "+why)
	}
	entries, err := parseConfig(b)
	if err != nil {
		return refuse(NewConfig, "config that does not parse: "+err.Error())
	}
	for _, e := range entries {
		if why := safeKey(e); why != "" {
			return refuse(NewConfig, "sets "+e.name()+": "+why)
		}
	}
	return allowed
}

// configFileChange judges a change of an existing configuration file
// (what, for the reason): it must remain a regular file that parses,
// and every variable it has after and not before must be safe.
func (k *checker) configFileChange(p string, kind layer.Kind, mode fs.FileMode, what string) verdict {
	if kind == layer.Deleted || !mode.IsRegular() {
		return refuse(Config, what+" removed or replaced")
	}
	after, why := k.read(p)
	if why != "" {
		return refuse(Config, what+" "+why)
	}
	ae, err := parseConfig(after)
	if err != nil {
		return refuse(Config, what+" that does not parse: "+err.Error())
	}
	var be []configEntry
	if before, err := k.v.ReadFile(p, false, maxCheckedFile+1); err == nil {
		be, _ = parseConfig(before)
	}
	had := map[configEntry]int{}
	for _, e := range be {
		had[e]++
	}
	for _, e := range ae {
		if had[e] > 0 {
			had[e]--
			continue
		}
		if why := safeKey(e); why != "" {
			return refuse(Config, what+" sets "+e.name()+": "+why)
		}
	}
	return allowed
}
