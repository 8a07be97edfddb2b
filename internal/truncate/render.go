package truncate

import (
	"bytes"
	"strconv"
	"unicode/utf8"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/render"
)

// Rendering (Config.Render other than render.Raw). The Buffer keeps raw
// bytes exactly as without rendering; rendering happens when text is
// asked for, on the bytes kept, so Write costs the same. What changes:
//
//   - Result renders the whole output when the Buffer still holds it (for
//     a terminal: when its replay window, render.WindowStart, covers it),
//     and cuts the rendered text like raw text when that is over Max.
//     Otherwise it renders the first Head bytes and the last Tail bytes on
//     their own (a terminal's tail is replayed on a blank screen, from a
//     line feed). HEAD and TAIL are at most Head and Tail bytes of
//     rendered text, so the text is at most Max bytes plus the header, as
//     for raw output. "got" and the head strategy's "of M bytes" count raw
//     bytes; its "showing first N" counts the bytes of text shown, and the
//     tail strategy counts rendered characters (M: raw ones).
//   - Since's text is the rendering of the bytes since offset; a clean
//     rendering holds back an unfinished escape sequence and the last
//     line until its newline (a progress bar redrawn with \r shows once,
//     finished), or until the Buffer is closed. For a
//     terminal it is what those bytes changed on the screen (see
//     render.AppendTerminal), so terminal texts do not add up to the
//     whole output. Offsets stay raw.
//   - LastLine is the clean rendering of the last line, in both modes.
//   - Every rendered text is redacted again with Config.Redactor, before
//     it is cut.

// lookback is how many bytes before a cut are parsed for an escape
// sequence that the cut splits; the ring keeps that many more.
const lookback = 64

// renderText renders raw (atStart: it begins at the output's start) in
// the Buffer's mode and redacts it. whole is false when a terminal's
// replay window left out the start of raw.
func (b *Buffer) renderText(raw []byte, atStart bool) (out []byte, whole bool) {
	whole = atStart
	if b.cfg.Render == render.Terminal {
		ws := render.WindowStart(raw, atStart)
		out = render.AppendTerminal(nil, raw[ws:], b.cfg.Screen, 0)
		whole = whole && ws == 0
	} else {
		from := 0
		if !atStart {
			from = min(lookback, len(raw))
		}
		out, _ = render.AppendClean(nil, raw, render.CleanOptions{From: from})
	}
	return b.cfg.Redactor.Bytes(out), whole
}

// withContext returns the last n bytes of the ring preceded by up to
// lookback bytes of context; atStart says that it is the whole output.
func (b *Buffer) withContext(n int, total int64) (raw []byte, atStart bool) {
	c := b.ring.contents()
	if int64(len(c)) == total && n >= len(c) {
		return c, true
	}
	return c[len(c)-min(len(c), n+lookback):], false
}

func (b *Buffer) renderedResult(total int64) (string, bool) {
	c := b.cfg
	switch c.Strategy {
	case config.TruncateTail:
		raw, atStart := b.withContext(len(b.ring.contents()), total)
		s, whole := b.renderText(raw, atStart)
		n := utf8.RuneCount(s)
		if n <= c.Max && whole {
			return string(s), false
		}
		m := int64(n)
		if n > c.Max {
			i := len(s)
			for range c.Max {
				_, w := utf8.DecodeLastRune(s[:i])
				i -= w
			}
			s, n = s[i:], c.Max
		}
		if !whole {
			m = max(b.chars, int64(n))
		}
		return "[Output truncated: showing last " + strconv.Itoa(n) + " chars of " + strconv.FormatInt(m, 10) + " chars]\n" + string(s), true
	case config.TruncateHead:
		raw := b.prefix
		if b.over {
			raw = trimPartial(raw)
		}
		s, _ := b.renderText(raw, true)
		if !b.over && len(s) <= c.Max {
			return string(s), false
		}
		s = cutBack(s, c.Max)
		return "[output truncated: showing first " + strconv.Itoa(len(s)) + " of " + strconv.FormatInt(total, 10) + " bytes]\n" + string(s), true
	}
	if !b.over {
		s, whole := b.renderText(b.prefix, true)
		switch {
		case whole && len(s) <= c.Max:
			return string(s), false
		case whole:
			return middle(total, c, cutBack(s, c.Head), cutFront(s, c.Tail)), true
		}
		head, _ := b.renderText(trimPartial(b.prefix[:c.Head]), true)
		return middle(total, c, cutBack(head, c.Head), cutFront(s, c.Tail)), true
	}
	head, _ := b.renderText(trimPartial(b.prefix[:c.Head]), true)
	raw, _ := b.withContext(c.Tail, total)
	tail, _ := b.renderText(raw, false)
	return middle(total, c, cutBack(head, c.Head), cutFront(tail, c.Tail)), true
}

// renderedSince is Since for a rendering Buffer; b.mu is held.
func (b *Buffer) renderedSince(offset int64, limit int) (text string, skipped, next int64) {
	total := b.total.Load()
	d := b.prefix
	if b.over || b.cfg.Strategy == config.TruncateTail {
		d = b.ring.contents()
	}
	start := total - int64(len(d))
	from := max(offset, start)
	if total-from > int64(limit) {
		from = total - int64(limit)
	}
	if b.cfg.Render == render.Terminal {
		ws := int64(render.WindowStart(d, start == 0))
		rel := max(from-start-ws, 0)
		out := render.AppendTerminal(nil, d[ws:], b.cfg.Screen, int(rel))
		out = cutFront(b.cfg.Redactor.Bytes(out), limit)
		return string(out), max(start+ws-offset, 0), total
	}
	ctx := max(from-lookback, start)
	out, n := render.AppendClean(nil, d[ctx-start:], render.CleanOptions{
		From: int(from - ctx), More: !b.closed, HoldLine: true,
	})
	return string(b.cfg.Redactor.Bytes(out)), from - offset, ctx + int64(n)
}

// renderedLastLine is LastLine for a rendering Buffer: the clean rendering
// of the last line that renders to something, trimmed.
func (b *Buffer) renderedLastLine(maxBytes int) string {
	b.mu.Lock()
	d := b.prefix
	if b.over || b.cfg.Strategy == config.TruncateTail {
		d = b.ring.contents()
	}
	var line []byte
	for end := len(d); end > 0 && len(line) == 0; {
		start := bytes.LastIndexByte(d[:end], '\n') + 1
		line, _ = render.AppendClean(line[:0], d[start:end], render.CleanOptions{})
		line = bytes.TrimSpace(line)
		end = start - 1
	}
	b.mu.Unlock()
	line = b.cfg.Redactor.Bytes(line)
	if maxBytes > 0 {
		line = cutBack(line, maxBytes)
	}
	return string(line)
}
