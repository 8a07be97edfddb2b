//go:build linux

package gitpolicy

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
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

// safeKey checks one variable of a new repository's config: only what
// git init and git clone write (and a few keys that hold data, such as
// user.name), with values that run nothing. It returns why not, or "".
func safeKey(e configEntry) string {
	oneOf := func(vals ...string) string {
		for _, v := range vals {
			if strings.EqualFold(e.Value, v) {
				return ""
			}
		}
		return "value " + quote(e.Value) + " is not one git init or clone writes"
	}
	boolean := func() string {
		if isBool(e) {
			return ""
		}
		return "value " + quote(e.Value) + " is not a boolean"
	}
	switch e.Section + "." + e.Key {
	case "core.repositoryformatversion":
		if e.Sub == "" {
			return oneOf("0", "1")
		}
	case "core.filemode", "core.bare", "core.ignorecase", "core.precomposeunicode", "core.symlinks",
		"core.sparsecheckout", "core.sparsecheckoutcone", "index.sparse", "user.useconfigonly":
		if e.Sub == "" {
			return boolean()
		}
	case "core.logallrefupdates":
		if e.Sub == "" && (isBool(e) || strings.EqualFold(e.Value, "always")) {
			return ""
		}
		return "value " + quote(e.Value) + " is not a boolean or always"
	case "core.autocrlf":
		if e.Sub == "" && (isBool(e) || strings.EqualFold(e.Value, "input")) {
			return ""
		}
		return "value " + quote(e.Value) + " is not a boolean or input"
	case "core.sharedrepository":
		if e.Sub == "" && (isBool(e) || validShared(e.Value)) {
			return ""
		}
		return "value " + quote(e.Value) + " is not a sharing mode"
	case "extensions.objectformat":
		if e.Sub == "" {
			return oneOf("sha1", "sha256")
		}
	case "extensions.refstorage":
		if e.Sub == "" {
			return oneOf("files", "reftable")
		}
	case "extensions.partialclone", "user.name", "user.email":
		if e.Sub == "" {
			return ""
		}
	case "remote.url":
		if e.Sub != "" {
			return safeURL(e.Value)
		}
	case "remote.fetch", "remote.partialclonefilter", "branch.remote", "branch.merge":
		if e.Sub != "" {
			return ""
		}
	case "remote.mirror", "remote.promisor":
		if e.Sub != "" {
			return boolean()
		}
	case "remote.tagopt":
		if e.Sub != "" {
			return oneOf("--no-tags", "--tags")
		}
	}
	return "it is not among the keys git init and git clone write"
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
