//go:build linux

package gitpolicy

import (
	"slices"
	"strconv"
	"strings"
)

// The configuration git takes from its environment, parsed as git
// parses it (config.c, git_config_from_parameters): GIT_CONFIG_COUNT's
// GIT_CONFIG_KEY_n and GIT_CONFIG_VALUE_n, then GIT_CONFIG_PARAMETERS
// (what `git -c` passes to the git processes it starts, and what a
// user may export). Git dies, running nothing, on a malformed list or
// key; the judge keeps what it parsed up to the fault (more than git
// reads, never less).

// envEntries are the configuration entries of env (get reads one
// variable, the last of its name).
func envEntries(env []string, get func(string) string) []configEntry {
	var out []configEntry
	if n, ok := gitCount(get("GIT_CONFIG_COUNT")); ok && n > 0 {
		// Every GIT_CONFIG_KEY_i with i < n, however many (git reads
		// them all; a missing one makes it die).
		type kv struct {
			i   int
			key string
		}
		var keys []kv
		for _, e := range env {
			name, val, _ := strings.Cut(e, "=")
			s, ok := strings.CutPrefix(name, "GIT_CONFIG_KEY_")
			if !ok {
				continue
			}
			if i, err := strconv.Atoi(s); err == nil && i >= 0 && i < n && strconv.Itoa(i) == s {
				keys = append(keys, kv{i, val})
			}
		}
		slices.SortStableFunc(keys, func(a, b kv) int { return a.i - b.i })
		keys = slices.CompactFunc(keys, func(a, b kv) bool { return a.i == b.i }) // the first (get's last)
		for _, k := range keys {
			if e, ok := parseKey(get("GIT_CONFIG_KEY_"+strconv.Itoa(k.i)), get("GIT_CONFIG_VALUE_"+strconv.Itoa(k.i)), false); ok {
				out = append(out, e)
			}
		}
	}
	return append(out, configParameters(get("GIT_CONFIG_PARAMETERS"))...)
}

// gitCount parses GIT_CONFIG_COUNT as git does (strtoul, base 10, the
// whole string: leading white space and a sign allowed; at most
// INT_MAX).
func gitCount(s string) (int, bool) {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg, s = s[0] == '-', s[1:]
	}
	if s == "" {
		return 0, !neg // "" is 0; a lone sign is no number
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || s[0] == '+' || s[0] == '-' || (neg && n != 0) || n > 1<<31-1 {
		return 0, false
	}
	return int(n), true
}

// configParameters parses GIT_CONFIG_PARAMETERS as git does
// (parse_config_env_list): shell-single-quoted items separated by white
// space, each either 'section.key=value' (the old form: the first "="
// ends the key, which is trimmed; no "=" is a boolean true) or
// 'section.key'='value' (a value quoted on its own) or 'section.key'=
// (a boolean true).
func configParameters(s string) []configEntry {
	var out []configEntry
	for s != "" {
		key, rest, ok := sqDequoteStep(s)
		if !ok {
			return out
		}
		var e configEntry
		switch {
		case rest == "" || isSpace(rest[0]): // 'key=value'
			k, v, eq := strings.Cut(key, "=")
			e, ok = parseKey(strings.Trim(k, " \t\n\v\f\r"), v, !eq)
		case rest[0] == '=':
			rest = rest[1:]
			switch {
			case rest != "" && rest[0] == '\'':
				var v string
				if v, rest, ok = sqDequoteStep(rest); !ok || (rest != "" && !isSpace(rest[0])) {
					return out
				}
				e, ok = parseKey(key, v, false)
			case rest == "" || isSpace(rest[0]): // 'key'=
				e, ok = parseKey(key, "", true)
			default:
				return out
			}
		default:
			return out
		}
		if !ok {
			return out
		}
		out = append(out, e)
		s = strings.TrimLeft(rest, " \t\n\v\f\r")
	}
	return out
}

func isSpace(c byte) bool { return strings.IndexByte(" \t\n\v\f\r", c) >= 0 }

// sqDequoteStep reads one shell-single-quoted word at the start of s as
// git's sq_dequote_step does: 'text', where '\” and '\!' outside the
// quotes stand for ' and ! and the quoting goes on. It returns the word
// and what follows it.
func sqDequoteStep(s string) (word, rest string, ok bool) {
	if s == "" || s[0] != '\'' {
		return "", "", false
	}
	var b strings.Builder
	for i := 1; ; {
		j := strings.IndexByte(s[i:], '\'')
		if j < 0 {
			return "", "", false // unterminated
		}
		b.WriteString(s[i : i+j])
		i += j + 1 // past the closing quote
		if i+2 < len(s) && s[i] == '\\' && (s[i+1] == '\'' || s[i+1] == '!') && s[i+2] == '\'' {
			b.WriteByte(s[i+1])
			i += 3
			continue
		}
		return b.String(), s[i:], true
	}
}

// parseKey makes an entry of key and value as git_config_parse_key
// does: section (letters, digits, "-"), an optional subsection (case
// kept, no newline) and the variable's name (a letter, then letters,
// digits, "-"), the section and name lower-cased. bare marks a boolean
// true (no value given).
func parseKey(key, value string, bare bool) (configEntry, bool) {
	first, last := strings.IndexByte(key, '.'), strings.LastIndexByte(key, '.')
	// git refuses only a key without a dot or ending in one: ".x.y"
	// (an empty section, subsection "x") is read.
	if last <= 0 || last == len(key)-1 {
		return configEntry{}, false
	}
	keyChars := func(s string) bool {
		for i := 0; i < len(s); i++ {
			c := s[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
		return true
	}
	sec, name := key[:first], key[last+1:]
	if !keyChars(sec) || !keyChars(name) || !('a' <= name[0]|0x20 && name[0]|0x20 <= 'z') {
		return configEntry{}, false
	}
	e := configEntry{Section: strings.ToLower(sec), Key: strings.ToLower(name), Value: value, Bare: bare}
	if first < last {
		e.Sub = key[first+1 : last]
		if strings.IndexByte(e.Sub, '\n') >= 0 {
			return configEntry{}, false
		}
	}
	return e, true
}

// gitBool reads a boolean variable of git's environment as git_env_bool
// does: true, yes, on (any case) or a non-zero integer (C's base
// prefixes and a k, m or g unit allowed) are true; false, no, off, ""
// or zero are false; anything else makes git die (ok false).
func gitBool(s string) (v, ok bool) {
	switch strings.ToLower(s) {
	case "true", "yes", "on":
		return true, true
	case "false", "no", "off", "":
		return false, true
	}
	t := strings.TrimLeft(s, " \t\n\v\f\r")
	if n := len(t); n > 0 && strings.IndexByte("kKmMgG", t[n-1]) >= 0 {
		t = t[:n-1]
	}
	if u := strings.ToLower(strings.TrimLeft(t, "+-")); strings.Contains(u, "_") || strings.HasPrefix(u, "0b") || strings.HasPrefix(u, "0o") {
		return false, false // Go's, not C's
	}
	n, err := strconv.ParseInt(cBase(t), 0, 64)
	if err != nil {
		return false, false
	}
	return n != 0, true
}

// cBase turns C's octal prefix (a leading 0) into Go's for ParseInt
// with base 0 ("0x" is the same in both).
func cBase(s string) string {
	sign := ""
	if s != "" && (s[0] == '+' || s[0] == '-') {
		sign, s = s[:1], s[1:]
	}
	if len(s) > 1 && s[0] == '0' && s[1] >= '0' && s[1] <= '9' {
		s = "0o" + s[1:]
	}
	return sign + s
}
