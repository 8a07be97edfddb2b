//go:build linux

package gitpolicy

import (
	"bytes"
	"strings"
)

// The grammars of git's ref files: each line of each file must read
// as git writes it, or the file is refused.

// isHex reports whether s is non-empty lower-case hex.
func isHex(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !isDigit(c) && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// isOID reports whether s is an object id of the repository's hash.
func (k *checker) isOID(e entry, s string) bool {
	return len(s) == 2*k.hashSize(e.g) && isHex(s)
}

// lines splits b into lines; a file must end with a newline, or be
// empty ("" when it does not).
func lines(b []byte) ([]string, bool) {
	if len(b) == 0 {
		return nil, true
	}
	if b[len(b)-1] != '\n' {
		return nil, false
	}
	return strings.Split(string(b[:len(b)-1]), "\n"), true
}

// refOrOID checks a ref or HEAD: "ref: refs/..." or an object id, on
// one line.
func refOrOID(k *checker, e entry, b []byte) string {
	ls, ok := lines(b)
	if !ok || len(ls) != 1 {
		return "a ref that is not one line"
	}
	if t, ok := strings.CutPrefix(ls[0], "ref: "); ok {
		if why := checkRefname(t); why != "" || !strings.HasPrefix(t, "refs/") {
			return "a symbolic ref to " + quote(t) + ", which is not a ref below refs/"
		}
		return ""
	}
	if !k.isOID(e, ls[0]) {
		return "a ref that holds neither an object id nor a symbolic ref"
	}
	return ""
}

// oidLines checks a file of object ids, one a line.
func oidLines(k *checker, e entry, b []byte) string {
	ls, ok := lines(b)
	if !ok {
		return "object ids without a final newline"
	}
	for _, l := range ls {
		if !k.isOID(e, l) {
			return "a line that is not an object id"
		}
	}
	return ""
}

// fetchHead checks FETCH_HEAD: an object id, a tab, "not-for-merge"
// or nothing, a tab, a description.
func fetchHead(k *checker, e entry, b []byte) string {
	ls, ok := lines(b)
	if !ok {
		return "FETCH_HEAD without a final newline"
	}
	for _, l := range ls {
		f := strings.SplitN(l, "\t", 3)
		if len(f) != 3 || !k.isOID(e, f[0]) || (f[1] != "" && f[1] != "not-for-merge") {
			return "a FETCH_HEAD line git does not write"
		}
	}
	return ""
}

// packedRefs checks packed-refs: a "# pack-refs with:" header, lines
// "<oid> <ref>", and "^<oid>" after a tag.
func packedRefs(k *checker, e entry, b []byte) string {
	ls, ok := lines(b)
	if !ok {
		return "packed-refs without a final newline"
	}
	for i, l := range ls {
		if i == 0 && strings.HasPrefix(l, "# pack-refs with:") {
			continue
		}
		if p, ok := strings.CutPrefix(l, "^"); ok && k.isOID(e, p) {
			continue
		}
		oid, name, ok := strings.Cut(l, " ")
		if !ok || !k.isOID(e, oid) || !strings.HasPrefix(name, "refs/") || checkRefname(name) != "" {
			return "a packed-refs line git does not write"
		}
	}
	return ""
}

// infoRefs checks info/refs: "<oid>\t<ref>" lines.
func infoRefs(k *checker, e entry, b []byte) string {
	ls, ok := lines(b)
	if !ok {
		return "info/refs without a final newline"
	}
	for _, l := range ls {
		oid, name, ok := strings.Cut(l, "\t")
		name = strings.TrimSuffix(name, "^{}")
		if !ok || !k.isOID(e, oid) || checkRefname(name) != "" {
			return "an info/refs line git does not write"
		}
	}
	return ""
}

// reflog checks a reflog: each line the old and new object ids, an
// identity, a time and a message.
func reflog(k *checker, e entry, b []byte) string {
	ls, ok := lines(b)
	if !ok {
		return "a reflog without a final newline"
	}
	for _, l := range ls {
		f := strings.SplitN(l, " ", 3)
		if len(f) != 3 || !k.isOID(e, f[0]) || !k.isOID(e, f[1]) {
			return "a reflog line git does not write"
		}
	}
	return ""
}

// mergeRR checks rerere's MERGE_RR: records "<hash>\t<path>\0", whose
// paths rerere writes.
func mergeRR(_ *checker, _ entry, b []byte) string {
	for _, rec := range bytes.Split(b, []byte{0}) {
		if len(rec) == 0 {
			continue
		}
		id, path, ok := strings.Cut(string(rec), "\t")
		if !ok || !isHex(strings.Split(id, ".")[0]) {
			return "a MERGE_RR record git does not write"
		}
		if why := verifyPath(path, modeFile); why != "" {
			return "a MERGE_RR path " + quote(path) + " " + why
		}
	}
	return ""
}

// isPseudoref reports whether name is an upper-case pseudo-ref
// (ORIG_HEAD, AUTO_MERGE, ...).
func isPseudoref(name string) bool {
	if name == "" {
		return false
	}
	for i := range len(name) {
		if c := name[i]; !(c >= 'A' && c <= 'Z') && c != '_' {
			return false
		}
	}
	return true
}

// checkRefname is git's check_refname_format (refs.c) for a full ref
// name: it says what is wrong, or "".
func checkRefname(name string) string {
	if name == "" || name == "@" {
		return "is empty or @"
	}
	if strings.HasSuffix(name, ".") {
		return "ends with ."
	}
	for _, c := range strings.Split(name, "/") {
		switch {
		case c == "":
			return "has an empty component"
		case c[0] == '.':
			return "has a component that starts with ."
		case strings.HasSuffix(c, ".lock"):
			return "has a component that ends with .lock"
		}
	}
	if strings.Contains(name, "..") || strings.Contains(name, "@{") {
		return "holds .. or @{"
	}
	if strings.ContainsFunc(name, func(r rune) bool {
		return r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r)
	}) {
		return "holds a character refs may not hold"
	}
	return ""
}
