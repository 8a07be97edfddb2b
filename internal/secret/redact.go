package secret

import (
	"bytes"
	"encoding/binary"
	"io"
	"slices"
	"strings"
)

// MinLen is the shortest value a Redactor replaces. Shorter values ("1",
// "true", "admin") occur in ordinary output too often to be worth hiding,
// and hiding them would garble it.
const MinLen = 8

// A Redactor replaces known secret values with [REDACTED:NAME]. Matching is
// exact and byte-wise: no encodings (base64, URL escapes) and no case
// folding. Where values overlap, the leftmost match wins, and of the values
// that match there, the longest.
//
// A Redactor is immutable and safe for concurrent use. The nil *Redactor
// and one without values redact nothing, at the cost of a nil check.
type Redactor struct {
	values [][]byte // distinct values of at least MinLen bytes
	repls  [][]byte // "[REDACTED:NAME]" for values[i]
	maxLen int      // longest value
	// The gram index (see find): for each value, its grams at offsets
	// 0..stride-1, and a bitmap of their hashes that rejects almost every
	// other gram with one load.
	grams map[uint32][]gramAt
	bits  *[1 << (hashBits - 6)]uint64
}

// gramAt says that value v has a given gram at offset k.
type gramAt struct{ v, k int }

// NewRedactor returns a Redactor for secrets, which maps variable names to
// their values. Values shorter than MinLen are ignored; a value held by
// several names is reported under the first name in sorted order.
func NewRedactor(secrets map[string]string) *Redactor {
	r := &Redactor{}
	names := make([]string, 0, len(secrets))
	for n := range secrets {
		names = append(names, n)
	}
	slices.Sort(names)
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		v := secrets[n]
		if len(v) < MinLen || seen[v] {
			continue
		}
		seen[v] = true
		r.values = append(r.values, []byte(v))
		r.repls = append(r.repls, []byte("[REDACTED:"+n+"]"))
		r.maxLen = max(r.maxLen, len(v))
	}
	if len(r.values) > 0 {
		r.grams = make(map[uint32][]gramAt)
		r.bits = new([1 << (hashBits - 6)]uint64)
		for i, v := range r.values {
			for k := range stride {
				g := binary.LittleEndian.Uint32(v[k:])
				r.grams[g] = append(r.grams[g], gramAt{v: i, k: k})
				h := hashGram(g)
				r.bits[h>>6] |= 1 << (h & 63)
			}
		}
	}
	return r
}

// Searching. Every value has at least MinLen bytes, so an occurrence
// starting at s contains, for the one probe position q in [s, s+stride)
// of a grid with step stride, the gram (4 bytes) at q, and q+gram <=
// s+MinLen. find therefore loads one gram every stride bytes, tests its
// hash in a bitmap, and only on a hit looks the gram up and compares
// values. Compared with one bytes.Index per value it costs the same
// whatever the number of values (see BenchmarkCopy).
const (
	gram     = 4
	stride   = MinLen - gram + 1
	hashBits = 16
)

func hashGram(g uint32) uint32 { return (g * 0x9E3779B1) >> (32 - hashBits) }

// find returns the leftmost match at or after pos in d and, of the values
// matching there, the longest: its position and value index, or -1, -1.
func (r *Redactor) find(d []byte, pos int) (at, best int) {
	at, best = -1, -1
	bits := r.bits
	for q := pos; q+gram <= len(d); q += stride {
		g := binary.LittleEndian.Uint32(d[q:])
		h := hashGram(g)
		if bits[h>>6]&(1<<(h&63)) == 0 {
			continue
		}
		// Matches found at q start in (q-stride, q]; later probes find
		// only later starts, so the leftmost here is the leftmost.
		for _, c := range r.grams[g] {
			s := q - c.k
			v := r.values[c.v]
			if s < pos || (at >= 0 && (s > at || (s == at && len(v) <= len(r.values[best])))) {
				continue
			}
			if bytes.HasPrefix(d[s:], v) {
				at, best = s, c.v
			}
		}
		if at >= 0 {
			return at, best
		}
	}
	return -1, -1
}

// Len returns the number of values r replaces.
func (r *Redactor) Len() int {
	if r == nil {
		return 0
	}
	return len(r.values)
}

// String returns s with every value replaced. It returns s itself when
// nothing matches.
func (r *Redactor) String(s string) string {
	if r.Len() == 0 || !r.containsString(s) {
		return s
	}
	var b bytes.Buffer
	b.Grow(len(s))
	_, _ = r.scan(&b, []byte(s), true)
	return b.String()
}

// Bytes returns p with every value replaced: p itself when nothing
// matches, otherwise a new slice.
func (r *Redactor) Bytes(p []byte) []byte {
	if r.Len() == 0 || !r.contains(p) {
		return p
	}
	var b bytes.Buffer
	b.Grow(len(p))
	_, _ = r.scan(&b, p, true)
	return b.Bytes()
}

func (r *Redactor) containsString(s string) bool {
	for _, v := range r.values {
		if strings.Contains(s, string(v)) {
			return true
		}
	}
	return false
}

func (r *Redactor) contains(p []byte) bool {
	for _, v := range r.values {
		if bytes.Contains(p, v) {
			return true
		}
	}
	return false
}

// Writer returns a StreamWriter that writes to w what is written to it,
// with every value replaced, also a value split across writes. Close it
// (or Flush it) at the end of the stream: it holds back a tail that may
// begin a value.
func (r *Redactor) Writer(w io.Writer) *StreamWriter {
	s := &StreamWriter{w: w}
	if r.Len() > 0 {
		s.r = r
	}
	return s
}

// A StreamWriter redacts a stream (see [Redactor.Writer]). Bytes that could
// be the beginning of a value are held back until the next Write decides
// them — at most the longest value's length minus one, and only when the
// data written so far ends with a prefix of a value — so what reaches the
// underlying writer never contains a value or a piece of one, and
// concatenated it equals [Redactor.String] of everything written. Without
// values it is a pass-through.
//
// A StreamWriter is not safe for concurrent use. After an error from the
// underlying writer it stops: that Write and every later call return the
// error.
type StreamWriter struct {
	w    io.Writer
	r    *Redactor // nil: nothing to redact
	held []byte    // undecided tail of the data written so far
	buf  []byte    // held + the next write
	err  error
}

// Write redacts p and writes what is decided to the underlying writer. It
// returns len(p) unless the underlying writer failed.
func (s *StreamWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.r == nil {
		return s.w.Write(p)
	}
	d := p
	if len(s.held) > 0 {
		s.buf = append(append(s.buf[:0], s.held...), p...)
		d = s.buf
	}
	rest, err := s.r.scan(s.w, d, false)
	if err != nil {
		s.err = err
		return 0, err
	}
	s.held = append(s.held[:0], rest...)
	return len(p), nil
}

// Flush writes the held-back tail, redacting the values it contains; a
// value that continues in a later Write is then no longer recognised, so
// flush only where the stream ends or cannot continue a value.
func (s *StreamWriter) Flush() error {
	if s.err != nil {
		return s.err
	}
	if s.r == nil || len(s.held) == 0 {
		return nil
	}
	_, err := s.r.scan(s.w, s.held, true)
	s.held = s.held[:0]
	if err != nil {
		s.err = err
	}
	return err
}

// Close flushes the held-back tail. It does not close the underlying
// writer.
func (s *StreamWriter) Close() error { return s.Flush() }

// scan writes d to w with every value replaced (leftmost, then longest).
// Unless final, it stops at the first position from which d's end is a
// proper prefix of a value (the match is undecided until more data comes)
// and returns the bytes from there, which it did not write.
func (r *Redactor) scan(w io.Writer, d []byte, final bool) ([]byte, error) {
	undecided := len(d)
	if !final {
		undecided = r.undecided(d, 0)
	}
	pos := 0
	for {
		at, best := r.find(d, pos)
		if undecided < len(d) && (at < 0 || undecided <= at) {
			// A value may begin at undecided (maybe a longer one than
			// the match at the same position): keep it for later.
			if err := write(w, d[pos:undecided]); err != nil {
				return nil, err
			}
			return d[undecided:], nil
		}
		if at < 0 {
			return nil, write(w, d[pos:])
		}
		if err := write(w, d[pos:at]); err != nil {
			return nil, err
		}
		if _, err := w.Write(r.repls[best]); err != nil {
			return nil, err
		}
		pos = at + len(r.values[best])
		if undecided < pos {
			undecided = r.undecided(d, pos)
		}
	}
}

// undecided returns the first position p >= from at which d[p:] is a
// proper prefix of a value, or len(d). Only the last maxLen-1 bytes can
// qualify.
func (r *Redactor) undecided(d []byte, from int) int {
	best := len(d)
	for _, v := range r.values {
		s := max(from, len(d)-(len(v)-1))
		for s < best {
			i := bytes.IndexByte(d[s:best], v[0])
			if i < 0 {
				break
			}
			p := s + i
			if bytes.HasPrefix(v, d[p:]) {
				best = p
				break
			}
			s = p + 1
		}
	}
	return best
}

func write(w io.Writer, p []byte) error {
	if len(p) == 0 {
		return nil
	}
	_, err := w.Write(p)
	return err
}
