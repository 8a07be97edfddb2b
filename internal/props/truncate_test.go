package props

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/render"
	"github.com/bashvisor/bashvisor/internal/truncate"
)

// outputGen draws command output: runs of ASCII, newlines, multi-byte
// runes, invalid bytes and cut-off sequences, so cuts land everywhere.
func outputGen(maxLen int) *rapid.Generator[[]byte] {
	piece := rapid.OneOf(
		rapid.Map(rapid.StringMatching(`[a-z0-9 ]{1,40}`), func(s string) []byte { return []byte(s) }),
		rapid.Just([]byte("\n")),
		rapid.Map(rapid.SampledFrom([]string{"é", "€", "𝄞", "日本語", "ß\n", "\u00a0"}), func(s string) []byte { return []byte(s) }),
		rapid.Map(rapid.SliceOfN(rapid.Byte(), 1, 4), func(b []byte) []byte { return b }), // often invalid
		rapid.Map(rapid.SampledFrom([]string{"\xe2\x82", "\xf0\x9d", "\x80", "\xff"}), func(s string) []byte { return []byte(s) }),
	)
	return rapid.Custom(func(t *rapid.T) []byte {
		var b []byte
		n := rapid.IntRange(0, 60).Draw(t, "pieces")
		for range n {
			p := piece.Draw(t, "piece")
			if rep := rapid.IntRange(1, 8).Draw(t, "rep"); rep > 1 && len(b) < maxLen/2 {
				p = bytes.Repeat(p, rep*rapid.IntRange(1, 40).Draw(t, "mult"))
			}
			b = append(b, p...)
			if len(b) > maxLen {
				return b[:maxLen]
			}
		}
		return b
	})
}

// effective mirrors the Config documentation: defaults for zero fields
// and Head+Tail scaled down to fit Max.
func effective(c truncate.Config) truncate.Config {
	d := truncate.DefaultConfig()
	if c.Max <= 0 {
		c.Max = d.Max
	}
	if c.Head <= 0 {
		c.Head = d.Head
	}
	if c.Tail <= 0 {
		c.Tail = d.Tail
	}
	if c.Head+c.Tail > c.Max {
		h := int(int64(c.Max) * int64(c.Head) / int64(c.Head+c.Tail))
		c.Head, c.Tail = h, c.Max-h
	}
	return c
}

var (
	middleHeader = regexp.MustCompile(`^\[output truncated in middle: got ([0-9.]+ [KMGT]?i?B), showing the first ([0-9.]+ [KMGT]?i?B) and the last ([0-9.]+ [KMGT]?i?B)\]\n`)
	headHeader   = regexp.MustCompile(`^\[output truncated: showing first ([0-9]+) of ([0-9]+) bytes\]\n`)
	tailHeader   = regexp.MustCompile(`^\[Output truncated: showing last ([0-9]+) chars of ([0-9]+) chars\]\n`)
)

// TestTruncation: for any output, any limits and any write chunking, the
// result is valid UTF-8, bounded, in the exact format of its strategy, its
// kept parts are exact prefixes/suffixes of the (sanitised) output, and
// the spool file holds exactly the first min(Total, SpoolCap) bytes.
func TestTruncation(t *testing.T) {
	spoolDir := t.TempDir()
	rapid.Check(t, func(t *rapid.T) {
		cfg := truncate.Config{
			Strategy: rapid.SampledFrom([]config.Truncation{config.TruncateMiddle, config.TruncateHead, config.TruncateTail}).Draw(t, "strategy"),
			Max:      rapid.IntRange(1, 400).Draw(t, "max"),
			Head:     rapid.IntRange(1, 200).Draw(t, "head"),
			Tail:     rapid.IntRange(1, 200).Draw(t, "tail"),
			SpoolCap: int64(rapid.IntRange(1, 3000).Draw(t, "spoolcap")),
		}
		spool := rapid.Bool().Draw(t, "spool")
		if spool {
			cfg.SpoolDir = spoolDir
		}
		data := outputGen(3000).Draw(t, "data")
		b := truncate.New(cfg)
		for rest := data; len(rest) > 0; {
			n := min(len(rest), rapid.IntRange(1, 700).Draw(t, "chunk"))
			if w, err := b.Write(rest[:n]); w != n || err != nil {
				t.Fatalf("Write = %d, %v", w, err)
			}
			rest = rest[n:]
		}
		out := b.Result()
		if err := b.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if out.SpoolFile != "" {
			defer os.Remove(out.SpoolFile)
		}
		checkTruncation(t, effective(cfg), data, out)
		// The spool: only when truncated and spooling is on; exactly the
		// first min(Total, SpoolCap) bytes.
		if out.SpoolFile != "" {
			if !spool || !out.Truncated || filepath.Dir(out.SpoolFile) != spoolDir {
				t.Fatalf("unexpected spool file %s (spool=%v truncated=%v)", out.SpoolFile, spool, out.Truncated)
			}
			got, err := os.ReadFile(out.SpoolFile)
			if err != nil {
				t.Fatal(err)
			}
			want := data[:min(int64(len(data)), cfg.SpoolCap)]
			if !bytes.Equal(got, want) {
				t.Fatalf("spool holds %d bytes, want the first %d", len(got), len(want))
			}
		} else if spool && int64(len(data)) > int64(4*cfg.Max) {
			t.Fatalf("output of %d bytes over the limit was not spooled", len(data))
		}
	})
}

func checkTruncation(t *rapid.T, c truncate.Config, data []byte, out truncate.Output) {
	clean := strings.ToValidUTF8(string(data), "\uFFFD")
	if !utf8.ValidString(out.Text) {
		t.Fatalf("invalid UTF-8: %q", out.Text)
	}
	if out.Total != int64(len(data)) {
		t.Fatalf("Total %d, want %d", out.Total, len(data))
	}
	if !out.Truncated {
		if out.Text != clean {
			t.Fatalf("untruncated text %q, want %q", out.Text, clean)
		}
		return
	}
	switch c.Strategy {
	case config.TruncateHead:
		m := headHeader.FindStringSubmatch(out.Text)
		if m == nil {
			t.Fatalf("head header: %q", out.Text)
		}
		body := out.Text[len(m[0]):]
		if len(body) > c.Max || !strings.HasPrefix(clean, body) || m[2] != strconv.Itoa(len(data)) {
			t.Fatalf("head: body %d bytes (max %d), prefix=%v, header %q", len(body), c.Max, strings.HasPrefix(clean, body), m[0])
		}
		if utf8.Valid(data) && len(data) > c.Max {
			k := c.Max
			for k > 0 && !utf8.RuneStart(data[k]) {
				k--
			}
			if body != string(data[:k]) || m[1] != strconv.Itoa(k) {
				t.Fatalf("head of valid UTF-8: %d bytes, want %d", len(body), k)
			}
		}
	case config.TruncateTail:
		m := tailHeader.FindStringSubmatch(out.Text)
		if m == nil {
			t.Fatalf("tail header: %q", out.Text)
		}
		body := out.Text[len(m[0]):]
		n := utf8.RuneCountInString(body)
		if n > c.Max || strconv.Itoa(n) != m[1] || !strings.HasSuffix(clean, body) {
			t.Fatalf("tail: %d runes (max %d), header %q, suffix=%v", n, c.Max, m[0], strings.HasSuffix(clean, body))
		}
		// The tail strategy keeps Max runes (not bytes): exact for valid
		// UTF-8.
		if utf8.Valid(data) {
			runes := []rune(string(data))
			want := string(runes[max(0, len(runes)-c.Max):])
			if body != want || m[2] != strconv.Itoa(len(runes)) {
				t.Fatalf("tail of valid UTF-8: %q (header %q), want the last %d runes of %d", body, m[0], c.Max, len(runes))
			}
		}
	default:
		m := middleHeader.FindStringSubmatch(out.Text)
		if m == nil {
			t.Fatalf("middle header: %q", out.Text)
		}
		if m[1] != truncate.Humanize(int64(len(data))) {
			t.Fatalf("got %q, want %q", m[1], truncate.Humanize(int64(len(data))))
		}
		head, tail, ok := strings.Cut(out.Text[len(m[0]):], "\n\n[snip]\n\n")
		if !ok {
			t.Fatalf("no snip: %q", out.Text)
		}
		if strings.Contains(tail, "\n\n[snip]\n\n") && !strings.Contains(clean, "\n\n[snip]\n\n") {
			t.Fatalf("two snips: %q", out.Text)
		}
		if len(head) > c.Head || len(tail) > c.Tail || !strings.HasPrefix(clean, head) || !strings.HasSuffix(clean, tail) {
			t.Fatalf("middle: head %d/%d prefix=%v, tail %d/%d suffix=%v", len(head), c.Head, strings.HasPrefix(clean, head),
				len(tail), c.Tail, strings.HasSuffix(clean, tail))
		}
		if len(out.Text)-len(m[0])-len("\n\n[snip]\n\n") > c.Max {
			t.Fatalf("middle text over Max: %d", len(out.Text))
		}
		if utf8.Valid(data) && len(data) > c.Max {
			h := c.Head
			for h > 0 && !utf8.RuneStart(data[h]) {
				h--
			}
			s := len(data) - c.Tail
			for s < len(data) && !utf8.RuneStart(data[s]) {
				s++
			}
			if head != string(data[:h]) || tail != string(data[s:]) {
				t.Fatalf("middle of valid UTF-8: head %d bytes (want %d), tail %d bytes (want %d)", len(head), h, len(tail), len(data)-s)
			}
		}
	}
}

// TestTruncationDefaultsLarge: the SPEC §2.4 numbers for outputs around and
// far above 128 KiB.
func TestTruncationDefaultsLarge(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		size := rapid.OneOf(rapid.IntRange(131000, 131200), rapid.IntRange(131072, 1<<20)).Draw(t, "size")
		unit := rapid.SampledFrom([]string{"a", "é", "€\n", "𝄞"}).Draw(t, "unit")
		data := []byte(strings.Repeat(unit, size/len(unit)+1)[:size])
		out := renderAll(truncate.DefaultConfig(), data)
		checkTruncation(t, effective(truncate.DefaultConfig()), data, out)
		// A cut-off last character becomes U+FFFD, which may push an output
		// of exactly Max bytes over it.
		if clean := strings.ToValidUTF8(string(data), "\uFFFD"); out.Truncated != (len(clean) > 131072) {
			t.Fatalf("size %d (sanitised %d) truncated=%v", size, len(clean), out.Truncated)
		}
		// Max, plus the header and the snip marker.
		if out.Truncated && len(out.Text) > 131072+128 {
			t.Fatalf("text %d bytes", len(out.Text))
		}
	})
}

// renderAll is what a Buffer with cfg shows after being given all of data.
func renderAll(cfg truncate.Config, data []byte) truncate.Output {
	b := truncate.New(cfg)
	b.Write(data)
	out := b.Result()
	b.Close()
	return out
}

// renderedGen draws output a terminal program writes: text, line ends,
// colours, titles, cursor moves within a line, NULs and invalid bytes.
func renderedGen(maxLen int) *rapid.Generator[[]byte] {
	pieces := []string{"hello", "wörld ", "日本", "\n", "\r\n", "\r", "\b", "\t", "\x1b[31m", "\x1b[0m", "\x1b[2K",
		"\x1b[1G", "\x1b[K", "\x1b]0;title\x07", "\x00", "\x07", "\xff", "\xe2\x82", "\u0085", "12%", "[=====>   ]"}
	return rapid.Custom(func(t *rapid.T) []byte {
		var b []byte
		for len(b) < maxLen {
			p := rapid.SampledFrom(pieces).Draw(t, "piece")
			b = append(b, bytes.Repeat([]byte(p), rapid.IntRange(1, 30).Draw(t, "rep"))...)
			if rapid.IntRange(0, 8).Draw(t, "stop") == 0 {
				break
			}
		}
		return b[:min(len(b), maxLen)]
	})
}

// isClean: valid UTF-8 without control characters but newline and tab.
func isClean(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r < 0xa0) {
			return false
		}
	}
	return true
}

// TestTruncationRendered: with rendering (render.Clean, the engine's
// default), for any output, limits and chunking, the text is clean, in
// its strategy's format and bounds, whole (the rendering of all of it)
// when not truncated; Total and the spool file still hold the raw bytes;
// and Since, asked as progress does until the Buffer is closed, adds up
// to the rendering of the whole output when nothing was skipped.
func TestTruncationRendered(t *testing.T) {
	spoolDir := t.TempDir()
	rapid.Check(t, func(t *rapid.T) {
		cfg := truncate.Config{
			Strategy: rapid.SampledFrom([]config.Truncation{config.TruncateMiddle, config.TruncateHead, config.TruncateTail}).Draw(t, "strategy"),
			Max:      rapid.IntRange(1, 400).Draw(t, "max"),
			Head:     rapid.IntRange(1, 200).Draw(t, "head"),
			Tail:     rapid.IntRange(1, 200).Draw(t, "tail"),
			SpoolDir: spoolDir,
			Render:   render.Clean,
		}
		data := renderedGen(3000).Draw(t, "data")
		b := truncate.New(cfg)
		var streamed strings.Builder
		var next, skipped int64
		for rest := data; len(rest) > 0; {
			n := min(len(rest), rapid.IntRange(1, 300).Draw(t, "chunk"))
			b.Write(rest[:n])
			rest = rest[n:]
			text, skip, nx := b.Since(next, 1<<20)
			streamed.WriteString(text)
			skipped, next = skipped+skip, nx
		}
		out := b.Result()
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		text, skip, _ := b.Since(next, 1<<20) // closed: the rest, held back lines too
		streamed.WriteString(text)
		skipped += skip
		if out.SpoolFile != "" {
			defer os.Remove(out.SpoolFile)
			if got, _ := os.ReadFile(out.SpoolFile); !bytes.Equal(got, data) {
				t.Fatalf("spool holds %d bytes, want the raw %d", len(got), len(data))
			}
		}
		c := effective(cfg)
		whole, _ := render.AppendClean(nil, data, render.CleanOptions{})
		if out.Total != int64(len(data)) {
			t.Fatalf("Total %d, want %d", out.Total, len(data))
		}
		if skipped == 0 && streamed.String() != string(whole) {
			t.Fatalf("Since added up to %q, want %q", streamed.String(), whole)
		}
		body := out.Text
		if out.Truncated {
			if i := strings.IndexByte(body, '\n'); i >= 0 {
				body = body[i+1:]
			}
		} else if body != string(whole) {
			t.Fatalf("untruncated %q, want %q", body, whole)
		}
		if !isClean(body) {
			t.Fatalf("not clean: %q", body)
		}
		switch {
		case !out.Truncated:
		case c.Strategy == config.TruncateMiddle:
			head, tail, ok := strings.Cut(body, "\n\n[snip]\n\n")
			if !ok || len(head) > c.Head || len(tail) > c.Tail || !middleHeader.MatchString(out.Text) {
				t.Fatalf("middle: %q", out.Text)
			}
		case c.Strategy == config.TruncateHead:
			if len(body) > c.Max || !headHeader.MatchString(out.Text) {
				t.Fatalf("head: %q", out.Text)
			}
		default:
			if utf8.RuneCountInString(body) > c.Max || !tailHeader.MatchString(out.Text) {
				t.Fatalf("tail: %q", out.Text)
			}
		}
	})
}
