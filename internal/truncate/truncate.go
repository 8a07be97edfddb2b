// Package truncate keeps a command's output in bounded memory and renders it
// in its exact truncation formats.
//
// One [Buffer] is created per command. A reader goroutine writes the
// command's combined output into it while other goroutines may ask for
// [Buffer.Total], [Buffer.LastLine] or a [Buffer.Result] snapshot at any time.
// Memory is bounded whatever the command prints: a Buffer stores at most Max
// bytes of prefix plus a ring of recent bytes (max(Tail, 4 KiB) bytes for the
// middle and head strategies, 4*Max bytes for the tail strategy), so writing
// 10 GiB costs the same as writing 200 KiB. Write never allocates once those
// buffers have reached their final size.
//
// # Formats
//
// middle (the default). If the output has at most Max bytes it is returned
// whole. Otherwise the text is exactly
//
//	[output truncated in middle: got 300.0 KiB, showing the first 32 KiB and the last 96 KiB]\nHEAD\n\n[snip]\n\nTAIL
//
// where HEAD is (at most) the first Head bytes and TAIL (at most) the last
// Tail bytes. "got" is the total number of bytes the command produced,
// formatted by [Humanize]; the sizes shown are Head and Tail, formatted the
// same way except that a whole number of the unit is printed without
// decimals (32768 → "32 KiB", 1536 → "1.5 KiB", 900 → "900 B"). By default
// Head and Tail fill Max (a quarter and three quarters), so the text's size
// grows steadily with the output's up to Max and stays there: a longer
// output is never shown shorter than a shorter one.
//
// head. The first Max bytes with the header
//
//	[output truncated: showing first N of M bytes]\n
//
// where N is the number of output bytes shown and M the total.
//
// tail. The last Max chars (runes) with the header
//
//	[Output truncated: showing last N chars of M chars]\n
//
// Chars are counted incrementally as UTF-8 sequence starts (bytes that are not
// continuation bytes), which is the rune count for valid UTF-8; for binary
// output the counts are approximate. The tail text holds at most Max runes,
// so at most 4*Max bytes.
//
// # UTF-8
//
// Cuts never split a UTF-8 sequence: the head cut moves back and the tail cut
// moves forward to a sequence boundary, so HEAD and TAIL may be up to three
// bytes shorter than configured. Invalid UTF-8 (binary output) is replaced by
// one U+FFFD per run of invalid bytes, like [strings.ToValidUTF8], so Text is
// always valid UTF-8. Replacement can grow text (a lone invalid byte becomes
// three bytes); sizes are therefore enforced on the sanitised text: HEAD and
// TAIL never exceed Head and Tail bytes, and when sanitising makes an output
// of at most Max bytes longer than Max, the middle (or head, or tail) cut is
// applied to the sanitised text and Truncated is set. In the middle strategy
// Head+Tail is clamped to Max, so Text never exceeds Max bytes plus the
// header line and the "\n\n[snip]\n\n" separator.
//
// # Spool
//
// When SpoolDir is set and the raw output first passes the limit (Total >
// Max; for the tail strategy, more than Max chars or 4*Max bytes), the Buffer creates
// SpoolDir/output-*.log, writes everything seen so far and then every later
// Write into it, up to SpoolCap bytes in total, so the file's content is
// exactly the first min(Total, SpoolCap) bytes of the output. Output.SpoolFile
// names it; the file is kept after [Buffer.Close]. Output that never passed
// the limit is never spooled (also when only U+FFFD replacement made it
// longer than Max). Spool errors do not fail Write: the first one is
// remembered and returned by Close.
package truncate

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/render"
	"github.com/bashvisor/bashvisor/internal/secret"
)

// Defaults used for zero (or negative) Config fields (Head and Tail
// default to parts of Max: see Config).
const (
	DefaultMax      = 128 << 10
	DefaultSpoolCap = 64 << 20
)

// minRing is the smallest ring kept for the middle and head strategies, so
// LastLine sees a useful window even with a tiny Tail.
const minRing = 4 << 10

// Config configures a Buffer. Zero fields take the defaults.
type Config struct {
	// Strategy says which part of an over-long output is kept: the first
	// Head and last Tail bytes (config.TruncateMiddle, the default; also
	// for an empty or unknown one), the last Max chars (TruncateTail) or the
	// first Max bytes (TruncateHead).
	Strategy config.Truncation
	// Max is the most bytes returned (default 131072). For the tail
	// strategy it is the most chars returned.
	Max int
	// Head is the number of bytes kept from the start by the middle
	// strategy (default: a quarter of Max, or what Tail leaves of it).
	Head int
	// Tail is the number of bytes kept from the end by the middle strategy
	// (default: the rest of Max). If Head+Tail exceeds Max both are scaled
	// down to fit.
	Tail int
	// SpoolDir is where the full output is written once it passes the
	// limit; "" means no spool.
	SpoolDir string
	// SpoolCap is the most bytes written to the spool file (default 64 MiB).
	SpoolCap int64
	// Render says how the kept bytes become the text of Result, Since and
	// LastLine (default render.Raw: the bytes, invalid UTF-8 replaced).
	// Everything else counts raw bytes: Total, the limits, the cuts and
	// the spool file (see "Rendering" in the package doc).
	Render render.Mode
	// Screen is the terminal's size for render.Terminal.
	Screen render.Size
	// Redactor, when set with a rendering Render, replaces secret values in
	// the rendered text again: rendering can join bytes that escape
	// sequences kept apart in the (already redacted) raw output.
	Redactor *secret.Redactor
}

// DefaultConfig returns the default configuration: middle strategy, 128 KiB
// max, 32 KiB head and 96 KiB tail, 64 MiB spool cap, no spool directory.
func DefaultConfig() Config {
	return Config{
		Strategy: config.TruncateMiddle,
		Max:      DefaultMax,
		Head:     DefaultMax / 4,
		Tail:     DefaultMax - DefaultMax/4,
		SpoolCap: DefaultSpoolCap,
	}
}

// normalize fills defaults and clamps Head+Tail to Max.
func (c Config) normalize() Config {
	d := DefaultConfig()
	switch c.Strategy {
	case config.TruncateMiddle, config.TruncateTail, config.TruncateHead:
	default:
		c.Strategy = config.TruncateMiddle
	}
	if c.Max <= 0 {
		c.Max = d.Max
	}
	switch {
	case c.Head <= 0 && c.Tail <= 0:
		c.Head = max(c.Max/4, 1)
		c.Tail = max(c.Max-c.Head, 1)
	case c.Head <= 0:
		c.Head = max(c.Max-c.Tail, 1)
	case c.Tail <= 0:
		c.Tail = max(c.Max-c.Head, 1)
	}
	if c.SpoolCap <= 0 {
		c.SpoolCap = d.SpoolCap
	}
	if c.Head+c.Tail > c.Max {
		h := int(int64(c.Max) * int64(c.Head) / int64(c.Head+c.Tail))
		c.Head, c.Tail = h, c.Max-h
	}
	return c
}

// Output is a rendered snapshot of a Buffer.
type Output struct {
	Text      string // the text to show, always valid UTF-8
	Truncated bool   // whether Text is not the whole output
	Total     int64  // bytes written in total
	SpoolFile string // path of the spool file, "" if none
}

// Buffer collects a command's output in bounded memory. It is safe for
// concurrent use: typically one goroutine Writes while others read
// snapshots with Total, LastLine and Result.
type Buffer struct {
	mu    sync.Mutex
	cfg   Config
	total atomic.Int64 // written under mu, read lock-free by Total

	over   bool   // raw output has passed the limit
	chars  int64  // tail strategy: UTF-8 sequence starts seen
	prefix []byte // middle/head: the start of the output (≤ Max bytes)
	ring   ring   // recent bytes

	spool     *os.File
	spoolName string
	spooled   int64
	spoolErr  error
	closed    bool
}

// New returns an empty Buffer for cfg; zero fields take defaults.
func New(cfg Config) *Buffer {
	cfg = cfg.normalize()
	b := &Buffer{cfg: cfg}
	if cfg.Strategy == config.TruncateTail {
		b.ring.size = 4 * cfg.Max
	} else {
		b.ring.size = max(cfg.Tail, minRing)
	}
	if cfg.Render != render.Raw {
		b.ring.size += lookback
	}
	return b
}

// Write appends p to the output. It always returns len(p), nil: spool errors
// are remembered and reported by Close.
func (b *Buffer) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	b.mu.Lock()
	total := b.total.Load() + int64(len(p))
	if b.cfg.Strategy == config.TruncateTail {
		b.chars += int64(len(p) - countContinuation(p))
		if b.over {
			b.spoolWrite(p)
		} else if b.chars > int64(b.cfg.Max) || total > int64(b.ring.size) {
			// Not over before this Write, so the ring holds everything.
			b.over = true
			b.startSpool(b.ring.contents(), p)
		}
		b.ring.write(p)
	} else {
		switch {
		case b.over:
			b.spoolWrite(p)
			b.ring.write(p)
		case total <= int64(b.cfg.Max):
			b.prefix = appendCapped(b.prefix, p, b.cfg.Max)
		default:
			b.over = true
			k := b.cfg.Max - len(b.prefix)
			b.prefix = appendCapped(b.prefix, p[:k], b.cfg.Max)
			rest := p[k:]
			b.startSpool(b.prefix, rest)
			b.ring.write(b.prefix)
			b.ring.write(rest)
			if b.cfg.Strategy == config.TruncateMiddle {
				// Only HEAD is needed from now on; release the rest.
				b.prefix = bytes.Clone(b.prefix[:b.cfg.Head])
			}
		}
	}
	b.total.Store(total)
	b.mu.Unlock()
	return len(p), nil
}

// Total returns the number of bytes written so far.
func (b *Buffer) Total() int64 { return b.total.Load() }

// LastLine returns the latest non-blank line of the output, complete or
// still being written, with surrounding blanks trimmed. Both '\n' and '\r'
// end a line, so progress bars that redraw with '\r' report their latest
// state. The result is valid UTF-8 and at most maxBytes bytes (the start of
// the line is kept); maxBytes <= 0 means no limit. Only the recent window
// the Buffer keeps is searched, so a very long line is reported from the
// window's start.
func (b *Buffer) LastLine(maxBytes int) string {
	if b.cfg.Render != render.Raw {
		return b.renderedLastLine(maxBytes)
	}
	b.mu.Lock()
	d := b.prefix
	if b.over || b.cfg.Strategy == config.TruncateTail {
		d = b.ring.contents()
	}
	end := len(d)
	for end > 0 && isBlank(d[end-1]) {
		end--
	}
	start := bytes.LastIndexAny(d[:end], "\r\n") + 1
	for start < end && isBlank(d[start]) {
		start++
	}
	line := d[start:end]
	if maxBytes <= 0 {
		maxBytes = 3 * len(line) // room for every byte to become U+FFFD
	}
	s, _ := appendValid(make([]byte, 0, min(len(line), maxBytes)), line, maxBytes)
	b.mu.Unlock()
	return string(s)
}

func isBlank(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// Result renders the output seen so far. It may be called at any time,
// also while Writes are still arriving.
func (b *Buffer) Result() Output {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := Output{Total: b.total.Load(), SpoolFile: b.spoolName}
	if out.Total == 0 {
		return out
	}
	switch {
	case b.cfg.Render != render.Raw:
		out.Text, out.Truncated = b.renderedResult(out.Total)
	case b.cfg.Strategy == config.TruncateTail:
		out.Text, out.Truncated = b.renderTail()
	case b.cfg.Strategy == config.TruncateHead:
		out.Text, out.Truncated = b.renderHead(out.Total)
	default:
		out.Text, out.Truncated = b.renderMiddle(out.Total)
	}
	return out
}

func (b *Buffer) renderMiddle(total int64) (string, bool) {
	c := b.cfg
	if !b.over {
		s, _ := appendValid(make([]byte, 0, len(b.prefix)), b.prefix, 3*len(b.prefix))
		if len(s) <= c.Max {
			return string(s), false
		}
		// Sanitising pushed it over Max: cut the sanitised text.
		return middle(total, c, cutBack(s, c.Head), cutFront(s, c.Tail)), true
	}
	head, _ := appendValid(nil, trimPartial(b.prefix[:c.Head]), c.Head)
	raw := skipContinuation(b.ring.last(c.Tail))
	tail, _ := appendValid(nil, raw, 3*len(raw))
	return middle(total, c, head, cutFront(tail, c.Tail)), true
}

func middle(total int64, c Config, head, tail []byte) string {
	var sb strings.Builder
	sb.Grow(80 + len(head) + len(tail))
	sb.WriteString("[output truncated in middle: got ")
	sb.WriteString(Humanize(total))
	sb.WriteString(", showing the first ")
	sb.WriteString(humanizeLimit(int64(c.Head)))
	sb.WriteString(" and the last ")
	sb.WriteString(humanizeLimit(int64(c.Tail)))
	sb.WriteString("]\n")
	sb.Write(head)
	sb.WriteString("\n\n[snip]\n\n")
	sb.Write(tail)
	return sb.String()
}

func (b *Buffer) renderHead(total int64) (string, bool) {
	limit := b.cfg.Max
	raw := b.prefix
	if b.over {
		raw = trimPartial(raw)
	}
	s, n := appendValid(make([]byte, 0, min(len(raw), limit)), raw, limit)
	if !b.over && n == len(raw) {
		return string(s), false
	}
	var sb strings.Builder
	sb.Grow(64 + len(s))
	sb.WriteString("[output truncated: showing first ")
	sb.WriteString(strconv.Itoa(n))
	sb.WriteString(" of ")
	sb.WriteString(strconv.FormatInt(total, 10))
	sb.WriteString(" bytes]\n")
	sb.Write(s)
	return sb.String(), true
}

func (b *Buffer) renderTail() (string, bool) {
	limit := b.cfg.Max
	raw := b.ring.contents()
	if b.over {
		// Start at the limit-th sequence start from the end.
		i, n := len(raw), 0
		for i > 0 && n < limit {
			i--
			if utf8.RuneStart(raw[i]) {
				n++
			}
		}
		raw = raw[i:]
		if i == 0 {
			// The ring's first bytes may end a sequence whose start it
			// dropped: the tail starts at a sequence boundary, as a cut
			// does (not with a U+FFFD the whole output does not have).
			raw = skipContinuation(raw)
		}
	}
	s, _ := appendValid(make([]byte, 0, len(raw)), raw, 3*len(raw))
	n := utf8.RuneCount(s)
	m := int64(n) // exact when the ring holds the whole output
	if n > limit {
		// Sanitising added runes: drop leading ones.
		i := len(s)
		for range limit {
			_, w := utf8.DecodeLastRune(s[:i])
			i -= w
		}
		s, n = s[i:], limit
	} else if !b.over {
		return string(s), false
	}
	if b.over {
		m = max(b.chars, int64(n))
	}
	var sb strings.Builder
	sb.Grow(64 + len(s))
	sb.WriteString("[Output truncated: showing last ")
	sb.WriteString(strconv.Itoa(n))
	sb.WriteString(" chars of ")
	sb.WriteString(strconv.FormatInt(m, 10))
	sb.WriteString(" chars]\n")
	sb.Write(s)
	return sb.String(), true
}

// Close closes the spool file, which is kept on disk. It returns the first
// spool error (create, write or close), if any. Writes after Close are
// still counted and buffered but never spooled.
func (b *Buffer) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	if b.spool != nil {
		if err := b.spool.Close(); err != nil && b.spoolErr == nil {
			b.spoolErr = err
		}
		b.spool = nil
	}
	return b.spoolErr
}

// startSpool creates the spool file and writes parts into it.
func (b *Buffer) startSpool(parts ...[]byte) {
	if b.cfg.SpoolDir == "" || b.closed {
		return
	}
	f, err := os.CreateTemp(b.cfg.SpoolDir, "output-*.log")
	if err != nil {
		b.spoolErr = err
		return
	}
	b.spool, b.spoolName = f, f.Name()
	for _, p := range parts {
		b.spoolWrite(p)
	}
}

// spoolWrite appends p to the spool, up to SpoolCap bytes in total. After an
// error the spool stops growing.
func (b *Buffer) spoolWrite(p []byte) {
	if b.spool == nil || b.spoolErr != nil || b.spooled >= b.cfg.SpoolCap {
		return
	}
	if room := b.cfg.SpoolCap - b.spooled; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := b.spool.Write(p)
	b.spooled += int64(n)
	if err != nil {
		b.spoolErr = err
	}
}

var units = [...]string{"B", "KiB", "MiB", "GiB", "TiB"}

// Humanize formats a byte count in the largest binary unit (B, KiB, MiB,
// GiB, TiB) it reaches, with one decimal for KiB and above: 900 → "900 B",
// 1536 → "1.5 KiB", 307200 → "300.0 KiB". A value that would round to
// 1024.0 of a unit is shown in the next unit ("1.0 MiB").
func Humanize(n int64) string {
	s, _ := humanize(n)
	return s
}

// humanizeLimit formats like Humanize but prints a whole number of the unit
// without decimals (131072 → "128 KiB").
func humanizeLimit(n int64) string {
	s, u := humanize(n)
	if u > 0 && n%(int64(1)<<(10*u)) == 0 {
		return strconv.FormatInt(n>>(10*u), 10) + " " + units[u]
	}
	return s
}

func humanize(n int64) (string, int) {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B", 0
	}
	u := 1
	for u < len(units)-1 && n >= int64(1)<<(10*(u+1)) {
		u++
	}
	v := float64(n) / float64(int64(1)<<(10*u))
	if v >= 1023.95 && u < len(units)-1 {
		u++
		v /= 1024
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + units[u], u
}

// Since returns the output written from byte offset on, for a live view
// of a running command: valid UTF-8 text (invalid bytes become U+FFFD) of
// at most limit bytes of output. When more was written than limit, or the
// Buffer no longer holds the bytes at offset (only its recent window is
// kept once the output is over the limit), the text is the latest part
// and skipped counts the bytes after offset that it leaves out. An
// incomplete UTF-8 sequence at the end is held back; next is the offset to
// ask from the next time.
func (b *Buffer) Since(offset int64, limit int) (text string, skipped, next int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	total := b.total.Load()
	if offset >= total || limit <= 0 {
		return "", 0, max(offset, 0)
	}
	offset = max(offset, 0)
	if b.cfg.Render != render.Raw {
		return b.renderedSince(offset, limit)
	}
	d := b.prefix // everything while under the limit (not the tail strategy)
	if b.over || b.cfg.Strategy == config.TruncateTail {
		d = b.ring.contents()
	}
	start := total - int64(len(d))
	from := max(offset, start)
	if total-from > int64(limit) {
		from = total - int64(limit)
	}
	chunk := d[from-start:]
	if from > offset { // cut here: the front may be inside a sequence
		lead := skipContinuation(chunk)
		from += int64(len(chunk) - len(lead))
		chunk = lead
	}
	held := len(chunk) - len(trimPartial(chunk))
	chunk = chunk[:len(chunk)-held]
	return strings.ToValidUTF8(string(chunk), "\uFFFD"), from - offset, total - int64(held)
}
