package render

import (
	"bytes"
	"unicode/utf8"
)

// Mode says how output bytes become text.
type Mode uint8

// The modes.
const (
	// Raw: the bytes as written, invalid UTF-8 replaced.
	Raw Mode = iota
	// Clean: escape sequences and control bytes removed, carriage
	// returns and backspaces applied within a line.
	Clean
	// Terminal: the text of a terminal emulator that was sent the bytes.
	Terminal
)

// String names m: "raw", "clean" or "terminal".
func (m Mode) String() string {
	switch m {
	case Clean:
		return "clean"
	case Terminal:
		return "terminal"
	}
	return "raw"
}

// HoldMax bounds what Clean holds back at the end of src when more may
// follow: an unfinished escape sequence or a line being redrawn longer
// than this is rendered (or, for a sequence, dropped) as it is.
const HoldMax = 4 << 10

// CleanOptions say where a slice sits in its stream.
type CleanOptions struct {
	// From is where the text starts in src: the bytes before it are
	// context (a few dozen bytes before a cut), parsed so that an escape
	// sequence cut by the slice's start is recognised, but not rendered.
	From int
	// More says that the stream may go on after src (a running command):
	// an unfinished escape sequence or UTF-8 sequence at the end is not
	// consumed, so that the next slice starts with it.
	More bool
	// HoldLine, with More, also holds back the last line while it has
	// no newline (up to HoldMax bytes): a line still being written, or a
	// progress bar being redrawn with \r, is rendered once, finished and
	// in its last state, instead of one fragment per slice (a later
	// slice cannot take back what an earlier one showed).
	HoldLine bool
}

// AppendClean appends the [Clean] text of src[o.From:] to dst and returns
// it with the number of bytes of src consumed (len(src) unless o.More
// held some back; never less than o.From). Carriage returns overwrite
// only what this call appended.
func AppendClean(dst, src []byte, o CleanOptions) ([]byte, int) {
	from := min(max(o.From, 0), len(src))
	if !o.More && bytes.IndexByte(src[:from], 0x1b) < 0 && fast(src[from:]) {
		return append(dst, src[from:]...), len(src)
	}
	c := cleaner{dst: dst, line: len(dst), cur: len(dst)}
	n := c.run(src, from, o.More)
	if o.More && o.HoldLine && n > c.lineSrc && n-c.lineSrc <= HoldMax {
		// Leave out the last line: everything it rendered is after its
		// start in dst (cursor moves stay within a line).
		return c.dst[:c.line], c.lineSrc
	}
	return c.dst, n
}

// fast reports whether p needs no cleaning: valid UTF-8 without control
// bytes other than newline and tab, DEL or C1 controls.
func fast(p []byte) bool {
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c >= 0x20 && c < 0x7f, c == '\n', c == '\t':
		case c < 0x80:
			return false
		case c == 0xc2 && i+1 < len(p) && p[i+1] < 0xa0:
			return false // C1 control, or invalid
		default:
			r, w := utf8.DecodeRune(p[i:])
			if r == utf8.RuneError && w == 1 {
				return false
			}
			i += w - 1
		}
	}
	return true
}

// cleaner is the state of one AppendClean.
type cleaner struct {
	dst       []byte
	line, cur int // in dst: start of the current line, the cursor
	// lineSrc is where the current line starts in src.
	lineSrc int
}

const replacement = "\uFFFD"

// run renders src[from:], parsing src[:from] for escape state only, and
// returns how much of src it consumed: with more, an unfinished escape
// sequence or UTF-8 sequence at the end is left.
func (c *cleaner) run(src []byte, from int, more bool) int {
	c.lineSrc = from
	invalid := false // the previous byte was part of an invalid run
	for i := 0; i < len(src); {
		b := src[i]
		emit := i >= from
		switch {
		case b == 0x1b:
			end, ok := seqEnd(src, i)
			if !ok {
				if more && len(src)-i <= HoldMax {
					return max(i, from)
				}
				return len(src) // an unfinished sequence at the end is dropped
			}
			if emit {
				c.escape(src[i:end])
			}
			i, invalid = end, false
		case b >= 0x20 && b < 0x7f:
			// A run of printable ASCII, at once (not across from).
			j := i + 1
			for j < len(src) && src[j] >= 0x20 && src[j] < 0x7f && (j != from || emit) {
				j++
			}
			if emit {
				c.putRun(src[i:j])
			}
			i, invalid = j, false
		case b < 0x80:
			if emit {
				c.control(b, i)
			}
			i, invalid = i+1, false
		default:
			r, w := utf8.DecodeRune(src[i:])
			if r == utf8.RuneError && w == 1 {
				if more && !utf8.FullRune(src[i:]) {
					return max(i, from) // cut short: the rest may follow
				}
				if emit && !invalid {
					c.put([]byte(replacement))
				}
				i, invalid = i+1, true
				continue
			}
			if emit && r >= 0xa0 { // C1 controls are dropped
				c.put(src[i : i+w])
			}
			i, invalid = i+w, false
		}
	}
	return len(src)
}

// control handles an ASCII byte (not ESC) at src index i.
func (c *cleaner) control(b byte, i int) {
	switch {
	case b == '\t':
		c.put([]byte{b})
	case b == '\n', b == '\v', b == '\f':
		c.dst = append(c.dst, '\n')
		c.line, c.cur = len(c.dst), len(c.dst)
		c.lineSrc = i + 1
	case b == '\r':
		c.cur = c.line
	case b == '\b':
		c.back(1)
	}
}

// putRun writes a run of printable ASCII at the cursor.
func (c *cleaner) putRun(p []byte) {
	if c.cur == len(c.dst) {
		c.dst = append(c.dst, p...)
		c.cur = len(c.dst)
		return
	}
	for i := range p {
		c.put(p[i : i+1])
	}
}

// put writes a rune (its UTF-8 bytes) at the cursor, overwriting the rune
// there.
func (c *cleaner) put(r []byte) {
	if c.cur == len(c.dst) {
		c.dst = append(c.dst, r...)
		c.cur = len(c.dst)
		return
	}
	_, w := utf8.DecodeRune(c.dst[c.cur:])
	if w == len(r) {
		copy(c.dst[c.cur:], r)
	} else {
		tail := append([]byte(nil), c.dst[c.cur+w:]...)
		c.dst = append(append(c.dst[:c.cur], r...), tail...)
	}
	c.cur += len(r)
}

// back moves the cursor n runes left, not past the line's start.
func (c *cleaner) back(n int) {
	for ; n > 0 && c.cur > c.line; n-- {
		_, w := utf8.DecodeLastRune(c.dst[c.line:c.cur])
		c.cur -= w
	}
}

// forward moves the cursor n runes right, adding spaces at the line's end.
func (c *cleaner) forward(n int) {
	for ; n > 0; n-- {
		if c.cur == len(c.dst) {
			c.dst = append(c.dst, ' ')
			c.cur++
			continue
		}
		_, w := utf8.DecodeRune(c.dst[c.cur:])
		c.cur += w
	}
}

// escape applies what a line needs of an escape sequence (seq starts with
// ESC): CSI n D, C, G and K move or erase within the line; everything else
// is dropped.
func (c *cleaner) escape(seq []byte) {
	if len(seq) < 3 || seq[1] != '[' {
		return
	}
	final := seq[len(seq)-1]
	params := seq[2 : len(seq)-1]
	n := 0
	for _, p := range params {
		if p < '0' || p > '9' {
			if p == ';' {
				break
			}
			return // private or intermediate: not one of ours
		}
		n = min(n*10+int(p-'0'), 1<<16)
	}
	switch final {
	case 'D':
		c.back(max(n, 1))
	case 'C':
		c.forward(max(n, 1))
	case 'G':
		c.cur = c.line
		c.forward(max(n, 1) - 1)
	case 'K':
		switch n {
		case 0:
			c.dst = c.dst[:c.cur]
		case 1: // from the line's start through the cursor
			k := utf8.RuneCount(c.dst[c.line:c.cur])
			end := c.cur
			if end < len(c.dst) {
				_, w := utf8.DecodeRune(c.dst[end:])
				end += w
			}
			m := utf8.RuneCount(c.dst[c.line:end])
			rest := append([]byte(nil), c.dst[end:]...)
			c.dst = append(append(c.dst[:c.line], bytes.Repeat([]byte{' '}, m)...), rest...)
			c.cur = c.line + k
		case 2:
			c.dst = c.dst[:c.line]
			c.cur = c.line
		}
	}
}

// seqEnd returns the end of the escape sequence that starts at src[i]
// (ESC), and false when src ends before it does. A sequence interrupted by
// CAN or SUB ends there (they are dropped with it); one broken by another
// byte ends before that byte.
func seqEnd(src []byte, i int) (int, bool) {
	j := i + 1
	if j >= len(src) {
		return 0, false
	}
	switch src[j] {
	case '[': // CSI: parameters, intermediates, a final byte
		for j++; j < len(src); j++ {
			switch b := src[j]; {
			case b >= 0x20 && b <= 0x3f:
			case b >= 0x40 && b <= 0x7e:
				return j + 1, true
			case b == 0x18 || b == 0x1a:
				return j + 1, true
			default:
				return j, true
			}
		}
		return 0, false
	case ']', 'P', 'X', '^', '_': // strings: OSC (ends with BEL or ST), DCS, SOS, PM, APC (ST)
		osc := src[j] == ']'
		for j++; j < len(src); j++ {
			if j-i > HoldMax { // too long for a real one: drop only its start
				return i + 2, true
			}
			switch b := src[j]; {
			case b == 0x07 && osc, b == 0x18, b == 0x1a:
				return j + 1, true
			case b == 0x1b:
				if j+1 >= len(src) {
					return 0, false
				}
				if src[j+1] == '\\' {
					return j + 2, true
				}
				return j, true // another sequence starts: this one is broken
			}
		}
		return 0, false
	}
	// ESC, intermediates (0x20-0x2f), a final byte (0x30-0x7e).
	for ; j < len(src); j++ {
		switch b := src[j]; {
		case b >= 0x20 && b <= 0x2f:
		case b >= 0x30 && b <= 0x7e:
			return j + 1, true
		default:
			return j, true // not a sequence: ESC alone is dropped
		}
	}
	return 0, false
}
