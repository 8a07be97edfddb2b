package egress

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// form is one way a secret can appear in what a host sends back, and how
// its placeholder appears the same way: old (the secret so transformed)
// is replaced by new (the placeholder so transformed), always of the same
// length, so Content-Length and WebSocket frame lengths hold.
//
// A base64 form is the characters that hold only the secret's bits at
// one alignment; the characters at its edges hold some of the secret's
// bits and some of its neighbours' (edge[0] before, edge[1] after): their
// secret bits are rewritten too, the neighbours' kept.
type form struct {
	old, new []byte
	b64      bool
	edge     [2]edgeBits
}

// edgeBits is the secret's share of one base64 character: the bits mask
// holds, old when the secret's, new when the placeholder's. A zero mask:
// no such character.
type edgeBits struct{ mask, old, new byte }

// secretForms lists the forms of secret and its placeholder ph (of the
// same shape) a host could send back: as is; JSON-escaped (`\"`, `\\`,
// `\/`, `\u003c` for <>& as Go escapes them, every character other than
// a letter or digit as `\u00XX`, every character so; hex in either
// case); URL-escaped (query and path escaping, every character other
// than a letter or digit as %XX, every character so; either case); and
// in base64 (standard or URL alphabet, padded or not) at each of the
// three alignments a secret can have inside an encoded whole. Duplicates
// are dropped. A secret transformed otherwise (split by a line break of
// MIME base64, hex, escaped only in part) is not caught.
func secretForms(secret, ph string) []form {
	seen := map[string]bool{}
	var fs []form
	add := func(f form) {
		if len(f.old) != len(f.new) || len(f.old) == 0 {
			return // never: a placeholder has its secret's shape (sameLength checks)
		}
		key := fmt.Sprintf("%s|%v|%v", f.old, f.b64, f.edge)
		if !seen[key] {
			seen[key] = true
			fs = append(fs, f)
		}
	}
	for _, t := range textTransforms {
		add(form{old: []byte(t(secret)), new: []byte(t(ph))})
	}
	for _, f := range base64Forms(secret, ph) {
		add(f)
	}
	return fs
}

// textTransforms are the escapings of secretForms other than base64.
var textTransforms = func() []func(string) string {
	ts := []func(string) string{func(s string) string { return s }}
	for _, hex := range []string{"0123456789abcdef", "0123456789ABCDEF"} {
		for _, which := range []func(byte) bool{
			func(c byte) bool { return c == '"' || c == '\\' },
			func(c byte) bool { return c == '"' || c == '\\' || c == '/' },
			func(c byte) bool { return c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' },
			func(c byte) bool { return c == '"' || c == '\\' || c == '/' || c == '<' || c == '>' || c == '&' },
		} {
			ts = append(ts, jsonEscaper(which, hex, true))
		}
		for _, which := range []func(byte) bool{
			func(c byte) bool { return class(c) == nil },
			func(byte) bool { return true },
		} {
			ts = append(ts, jsonEscaper(which, hex, true), jsonEscaper(which, hex, false))
		}
		for _, which := range []func(byte) bool{
			func(c byte) bool { return shouldEscape(c, false) },
			func(c byte) bool { return shouldEscape(c, true) },
			func(c byte) bool { return class(c) == nil },
			func(byte) bool { return true },
		} {
			ts = append(ts, urlEscaper(which, hex))
		}
	}
	return ts
}()

// jsonEscaper escapes the characters which picks as JSON does: with
// short, `"` and `\` by a backslash and `/` as `\/`; others (all without
// short) as \u00XX in the hex given.
func jsonEscaper(which func(byte) bool, hex string, short bool) func(string) string {
	return func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			switch c := s[i]; {
			case !which(c):
				b.WriteByte(c)
			case short && (c == '"' || c == '\\' || c == '/'):
				b.WriteByte('\\')
				b.WriteByte(c)
			default:
				b.WriteString(`\u00`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&15])
			}
		}
		return b.String()
	}
}

// urlEscaper percent-escapes the characters which picks, in the hex
// given.
func urlEscaper(which func(byte) bool, hex string) func(string) string {
	return func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			if c := s[i]; which(c) {
				b.WriteByte('%')
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&15])
			} else {
				b.WriteByte(c)
			}
		}
		return b.String()
	}
}

// shouldEscape is what net/url's QueryEscape (path false) or PathEscape
// (path true) escapes among printable ASCII.
func shouldEscape(c byte, path bool) bool {
	if class(c) != nil || strings.IndexByte("-_.~", c) >= 0 {
		return false
	}
	if path {
		return strings.IndexByte("$&+:=@", c) < 0
	}
	return true
}

// base64Forms are the forms of secret in base64 at each alignment, in
// both alphabets (one form where they agree).
func base64Forms(secret, ph string) []form {
	var fs []form
	for shift := range 3 {
		pad := make([]byte, shift)
		so := base64.RawStdEncoding.EncodeToString(append(pad, secret...))
		po := base64.RawStdEncoding.EncodeToString(append(pad, ph...))
		first, end := 8*shift, 8*(shift+len(secret)) // the secret's bits
		i0, i1 := (first+5)/6, end/6                 // its whole characters
		f := form{b64: true, old: []byte(so[i0:i1]), new: []byte(po[i0:i1])}
		if 6*i0 > first {
			f.edge[0] = edgeOf(so[i0-1], po[i0-1], 6*(i0-1), first, end)
		}
		if 6*i1 < end {
			f.edge[1] = edgeOf(so[i1], po[i1], 6*i1, first, end)
		}
		fs = append(fs, f)
		if url := urlAlphabet(f); !bytes.Equal(url.old, f.old) || !bytes.Equal(url.new, f.new) {
			fs = append(fs, url)
		}
	}
	return fs
}

// edgeOf is the secret's share (bits first to end of the whole) of the
// character at bit at, in the secret's and the placeholder's encodings.
func edgeOf(sc, pc byte, at, first, end int) edgeBits {
	var mask byte
	for j := range 6 {
		if at+j >= first && at+j < end {
			mask |= 1 << (5 - j)
		}
	}
	return edgeBits{mask: mask, old: b64Value[sc] & mask, new: b64Value[pc] & mask}
}

func urlAlphabet(f form) form {
	r := strings.NewReplacer("+", "-", "/", "_")
	f.old, f.new = []byte(r.Replace(string(f.old))), []byte(r.Replace(string(f.new)))
	return f
}

// b64Value is each character's value in either base64 alphabet (0xff:
// none).
var b64Value = func() (v [256]byte) {
	for i := range v {
		v[i] = 0xff
	}
	const std = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for i := range len(std) {
		v[std[i]] = byte(i)
	}
	v['-'], v['_'] = 62, 63
	return v
}()

// rewrite puts the placeholder's bits in place of the secret's in the
// base64 character *c, if it holds the secret's, in c's own alphabet.
func (e edgeBits) rewrite(c *byte) {
	v := b64Value[*c]
	if e.mask == 0 || v == 0xff || v&e.mask != e.old {
		return
	}
	v = v&^e.mask | e.new
	switch {
	case v < 62:
		*c = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"[v]
	case *c == '-' || *c == '_':
		*c = "-_"[v-62]
	default:
		*c = "+/"[v-62]
	}
}

// apply rewrites f's match at b[j:] (and its base64 edges) in place.
func (f *form) apply(b []byte, j int) {
	end := j + len(f.old)
	if f.b64 {
		if j > 0 {
			f.edge[0].rewrite(&b[j-1])
		}
		if end < len(b) {
			f.edge[1].rewrite(&b[end])
		}
	}
	copy(b[j:], f.new)
}

// hold is how many bytes at the end of b to keep for the next read: the
// longest tail that begins f (a whole base64 match still waiting for its
// following character included), and for base64 the character before.
func (f *form) hold(b []byte) int {
	longest := len(f.old) - 1
	if f.b64 && f.edge[1].mask != 0 {
		longest++
	}
	last := len(b) - 1
	for k := min(longest, len(b)); k > 0; k-- {
		if b[last] == f.old[k-1] && bytes.HasSuffix(b, f.old[:k]) {
			if f.b64 && f.edge[0].mask != 0 && k < len(b) {
				k++
			}
			return k
		}
	}
	return 0
}

// matcher finds the forms of a host's secrets in one pass: every form is
// at least minLen long, so each match holds a window of window bytes
// starting at a multiple of step (minLen-window+1); only there is the
// window looked up, first in a bit table, then among the forms' windows,
// and a hit checked against its form.
type matcher struct {
	forms   []form
	step    int
	bits    [1 << 10]uint64 // of window hashes
	anchors map[uint64][]anchor
}

const window = 8 // a form is at least 8 bytes (checkSecret: 8 letters or digits)

// anchor is a window of a form: forms[form].old[off:off+window].
type anchor struct{ form, off int }

func newMatcher(fs []form) *matcher {
	m := &matcher{forms: fs, anchors: map[uint64][]anchor{}}
	minLen := 0
	for i, f := range fs {
		if len(f.old) < window {
			panic("egress: a secret's form shorter than the matcher's window")
		}
		if minLen == 0 || len(f.old) < minLen {
			minLen = len(f.old)
		}
		for off := 0; off+window <= len(f.old); off++ {
			k := windowKey(f.old[off:])
			m.anchors[k] = append(m.anchors[k], anchor{i, off})
			h := windowHash(k)
			m.bits[h>>6] |= 1 << (h & 63)
		}
	}
	m.step = minLen - window + 1
	return m
}

func windowKey(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

func windowHash(k uint64) uint64 { return (k * 0x9E3779B97F4A7C15) >> (64 - 16) }

// replace rewrites the forms' matches in b in place, leftmost first
// (the longer at one place), none overlapping. With more (b is not the
// stream's end), a base64 match whose following character is not yet in
// b is left for the next call (see hold).
func (m *matcher) replace(b []byte, more bool) {
	if m == nil || len(m.forms) == 0 {
		return
	}
	type match struct{ at, form int }
	var found []match
	for i := 0; i+window <= len(b); i += m.step {
		k := windowKey(b[i:])
		if h := windowHash(k); m.bits[h>>6]&(1<<(h&63)) == 0 {
			continue
		}
		for _, a := range m.anchors[k] {
			f := &m.forms[a.form]
			at := i - a.off
			end := at + len(f.old)
			if at < 0 || end > len(b) || !bytes.Equal(b[at:end], f.old) {
				continue
			}
			if f.b64 && end == len(b) && more && f.edge[1].mask != 0 {
				continue
			}
			found = append(found, match{at, a.form})
		}
	}
	if len(found) == 0 {
		return
	}
	slices.SortFunc(found, func(x, y match) int {
		if x.at != y.at {
			return x.at - y.at
		}
		return len(m.forms[y.form].old) - len(m.forms[x.form].old)
	})
	done := 0 // b[:done] rewritten
	for _, f := range found {
		if f.at >= done {
			m.forms[f.form].apply(b, f.at)
			done = f.at + len(m.forms[f.form].old)
		}
	}
}

// hold is how many bytes at b's end to keep for the next read (the most
// any form holds).
func (m *matcher) hold(b []byte) int {
	keep := 0
	if m == nil {
		return 0
	}
	for i := range m.forms {
		keep = max(keep, m.forms[i].hold(b))
	}
	return keep
}

// sameLength reports whether every form's placeholder is as long as its
// secret (what a stream whose lengths are counted elsewhere, a
// WebSocket's frames, relies on).
func sameLength(fs []form) bool {
	for _, f := range fs {
		if len(f.old) != len(f.new) {
			return false
		}
	}
	return true
}

// literalForm is the form of a string only as is.
func literalForm(old, new string) form { return form{old: []byte(old), new: []byte(new)} }

// scrubHeader turns every form of m in h back into its placeholder's.
func scrubHeader(m *matcher, h http.Header) {
	for _, vs := range h {
		for i, v := range vs {
			if len(v) < window {
				continue
			}
			b := []byte(v)
			m.replace(b, false)
			if string(b) != v {
				vs[i] = string(b)
			}
		}
	}
}
