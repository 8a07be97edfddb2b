package truncate

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// ring keeps the last size bytes written. Its buffer grows on demand up to
// size, so short outputs stay small; once full, writes never allocate.
type ring struct {
	size int
	buf  []byte // len(buf) < size while filling; == size once full
	pos  int    // once full: index of the oldest byte (next write position)
}

func (r *ring) write(p []byte) {
	if len(p) >= r.size {
		if cap(r.buf) < r.size {
			r.buf = make([]byte, r.size)
		}
		r.buf = r.buf[:r.size]
		copy(r.buf, p[len(p)-r.size:])
		r.pos = 0
		return
	}
	if len(r.buf) < r.size {
		k := min(len(p), r.size-len(r.buf))
		r.buf = appendCapped(r.buf, p[:k], r.size)
		p = p[k:]
		if len(p) == 0 {
			return
		}
		r.pos = 0 // just became full
	}
	n := copy(r.buf[r.pos:], p)
	copy(r.buf, p[n:])
	r.pos = (r.pos + len(p)) % r.size
}

// contents returns everything in the ring, oldest first. It aliases the
// ring's memory when the data is contiguous.
func (r *ring) contents() []byte {
	if len(r.buf) < r.size || r.pos == 0 {
		return r.buf
	}
	out := make([]byte, 0, r.size)
	out = append(out, r.buf[r.pos:]...)
	return append(out, r.buf[:r.pos]...)
}

// last returns the last n bytes in the ring (fewer if it holds fewer).
func (r *ring) last(n int) []byte {
	c := r.contents()
	return c[len(c)-min(n, len(c)):]
}

// appendCapped appends p to buf, growing the backing array geometrically
// but never beyond limit bytes of capacity. len(buf)+len(p) must be <= limit.
func appendCapped(buf, p []byte, limit int) []byte {
	if need := len(buf) + len(p); need > cap(buf) {
		c := min(max(2*cap(buf), need, 1024), limit)
		nb := make([]byte, len(buf), c)
		copy(nb, buf)
		buf = nb
	}
	return append(buf, p...)
}

// countContinuation counts UTF-8 continuation bytes (10xxxxxx) in p, eight
// bytes at a time.
func countContinuation(p []byte) int {
	const hi = 0x8080808080808080
	n := 0
	for len(p) >= 8 {
		x := binary.LittleEndian.Uint64(p)
		// bit 7 set and bit 6 clear in each byte
		n += bits.OnesCount64(x & hi &^ (x << 1))
		p = p[8:]
	}
	for _, c := range p {
		if c&0xC0 == 0x80 {
			n++
		}
	}
	return n
}

const replacement = "\uFFFD"

// appendValid appends src to dst with each run of invalid UTF-8 replaced by
// U+FFFD (as strings.ToValidUTF8 does), stopping before the appended text
// would exceed limit bytes; it never splits a rune. It returns the extended
// dst and the number of src bytes consumed.
func appendValid(dst, src []byte, limit int) ([]byte, int) {
	if len(src) <= limit && utf8.Valid(src) {
		return append(dst, src...), len(src)
	}
	room := limit
	i := 0
	for i < len(src) {
		// Extend a run of valid UTF-8.
		j := i
		for j < len(src) {
			if src[j] < utf8.RuneSelf {
				j++
				continue
			}
			r, w := utf8.DecodeRune(src[j:])
			if r == utf8.RuneError && w == 1 {
				break
			}
			j += w
		}
		if j-i > room {
			cut := i + room
			for cut > i && !utf8.RuneStart(src[cut]) {
				cut--
			}
			return append(dst, src[i:cut]...), cut
		}
		dst = append(dst, src[i:j]...)
		room -= j - i
		i = j
		if i == len(src) {
			break
		}
		// A run of invalid bytes becomes one U+FFFD.
		if room < len(replacement) {
			return dst, i
		}
		dst = append(dst, replacement...)
		room -= len(replacement)
		for i++; i < len(src); i++ {
			if src[i] < utf8.RuneSelf {
				break
			}
			if r, w := utf8.DecodeRune(src[i:]); r != utf8.RuneError || w != 1 {
				break
			}
		}
	}
	return dst, i
}

// trimPartial drops a trailing UTF-8 sequence that is cut short (its lead
// byte announces more bytes than follow), moving a head cut back to a
// sequence boundary.
func trimPartial(s []byte) []byte {
	for i := len(s) - 1; i >= 0 && i >= len(s)-(utf8.UTFMax-1); i-- {
		if utf8.RuneStart(s[i]) {
			if !utf8.FullRune(s[i:]) {
				return s[:i]
			}
			return s
		}
	}
	return s
}

// skipContinuation drops up to three leading continuation bytes, moving a
// tail cut forward to a sequence boundary.
func skipContinuation(s []byte) []byte {
	for k := 0; k < utf8.UTFMax-1 && len(s) > 0 && !utf8.RuneStart(s[0]); k++ {
		s = s[1:]
	}
	return s
}

// cutBack returns the longest prefix of valid UTF-8 s of at most n bytes
// that ends on a rune boundary.
func cutBack(s []byte, n int) []byte {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// cutFront returns the longest suffix of valid UTF-8 s of at most n bytes
// that starts on a rune boundary.
func cutFront(s []byte, n int) []byte {
	if n >= len(s) {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}
