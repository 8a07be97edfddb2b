package render

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"
)

func clean(s string) string {
	out, _ := AppendClean(nil, []byte(s), CleanOptions{})
	return string(out)
}

func TestClean(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"plain", "hello\nworld\n", "hello\nworld\n"},
		{"ls --color", "\x1b[0m\x1b[01;34mdir\x1b[0m  \x1b[01;32mrun.sh\x1b[0m  file.txt\n", "dir  run.sh  file.txt\n"},
		{"sgr 256 and truecolor", "\x1b[38;5;196mred\x1b[48;2;0;0;255mblue\x1b[m\n", "redblue\n"},
		{"progress bar", "10%\r20%\r100%\n", "100%\n"},
		{"progress bar, erase", "progress 10\rprogress 5\x1b[K\ndone\n", "progress 5\ndone\n"},
		{"npm style", "\x1b[1Gfetching a\x1b[0K\x1b[1Gfetching b\x1b[0K\x1b[1Gadded 3 packages\x1b[0K\n", "added 3 packages\n"},
		{"erase whole line", "old text\x1b[2Knew\n", "new\n"},
		{"erase to start", "abcdef\x1b[3D\x1b[1K!\n", "   !ef\n"},
		{"cursor right", "a\x1b[3Cb\n", "a   b\n"},
		{"crlf", "one\r\ntwo\r\n", "one\ntwo\n"},
		{"trailing cr", "50%\r", "50%"},
		{"overwrite shorter", "100%\r50%\n", "50%%\n"},
		{"backspace", "abc\bX\n", "abX\n"},
		{"backspace at start", "\b\bab\n", "ab\n"},
		{"overwrite multibyte", "héllo\rHE\n", "HEllo\n"},
		{"nul and bel", "a\x00b\x07c\x00\n", "abc\n"},
		{"other controls", "a\x01\x02\x1f\x7fb\n", "ab\n"},
		{"vt ff", "a\vb\fc", "a\nb\nc"},
		{"tab kept", "a\tb\n", "a\tb\n"},
		{"invalid utf-8", "a\xff\xfeb\xc3\n", "a\uFFFDb\uFFFD\n"},
		{"c1 controls", "a\u0085b\u009b31mc\n", "ab31mc\n"},
		{"osc title bel", "\x1b]0;my title\x07text\n", "text\n"},
		{"osc link st", "\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\\n", "link\n"},
		{"dcs", "\x1bPq#0;2;0;0;0#0~~@@\x1b\\after\n", "after\n"},
		{"charset and keypad", "\x1b(B\x1b=\x1b7x\x1b8\n", "x\n"},
		{"private csi", "\x1b[?25l\x1b[?1049hhidden cursor\x1b[?25h\n", "hidden cursor\n"},
		{"cursor to other lines dropped", "a\x1b[2;5Hb\x1b[Ac\n", "abc\n"},
		{"esc then control", "a\x1b\nb", "a\nb"},
		{"can aborts", "a\x1b[31\x18b", "ab"},
		{"broken csi", "a\x1b[31\x01b", "ab"},
		{"unfinished at end", "a\x1b[3", "a"},
		{"lone esc at end", "a\x1b", "a"},
		{"unicode", "日本語 🚀\n", "日本語 🚀\n"},
	} {
		if got := clean(c.in); got != c.want {
			t.Errorf("%s: %q -> %q, want %q", c.name, c.in, got, c.want)
		}
	}
}

func TestCleanHoldsBack(t *testing.T) {
	for _, c := range []struct {
		name, in string
		o        CleanOptions
		want     string
		n        int
	}{
		{"unfinished sequence, more", "abc\x1b[3", CleanOptions{More: true}, "abc", 3},
		{"unfinished character, more", "abc\xe2\x82", CleanOptions{More: true}, "abc", 3},
		{"unfinished character, final", "abc\xe2\x82", CleanOptions{}, "abc\uFFFD", 5},
		{"line held", "done\n50%\r60%", CleanOptions{More: true, HoldLine: true}, "done\n", 5},
		{"line not held without HoldLine", "done\n50%\r60%", CleanOptions{More: true}, "done\n60%", 12},
		{"prompt held", "done\nname? ", CleanOptions{More: true, HoldLine: true}, "done\n", 5},
		{"line final", "done\n50%\r60%", CleanOptions{HoldLine: true}, "done\n60%", 12},
		{"long line not held", "x" + strings.Repeat("y", HoldMax+1), CleanOptions{More: true, HoldLine: true}, "x" + strings.Repeat("y", HoldMax+1), HoldMax + 2},
		{"context: sequence cut by the start", "xx\x1b[31mred", CleanOptions{From: 4}, "red", 10},
		{"context: rune cut by the start", "\xe6\x97\xa5本", CleanOptions{From: 1}, "本", 6},
		{"context is not rendered", "abc\rdef", CleanOptions{From: 4}, "def", 7},
	} {
		out, n := AppendClean(nil, []byte(c.in), c.o)
		if string(out) != c.want || n != c.n {
			t.Errorf("%s: %q -> %q, %d; want %q, %d", c.name, c.in, out, n, c.want, c.n)
		}
	}
	// A carriage return never reaches into what dst held before.
	out, _ := AppendClean([]byte("[header]\nkeep"), []byte("\rX"), CleanOptions{})
	if string(out) != "[header]\nkeepX" {
		t.Errorf("%q", out)
	}
	// A sequence longer than HoldMax is not held back for ever.
	long := "a\x1b]0;" + strings.Repeat("t", HoldMax+10)
	if _, n := AppendClean(nil, []byte(long), CleanOptions{More: true}); n != len(long) {
		t.Errorf("long unfinished OSC: consumed %d of %d", n, len(long))
	}
}

// outputGen draws terminal-ish output: text, line ends, escape sequences,
// control bytes, cursor moves within a line, invalid and cut UTF-8.
func outputGen(cursor bool) *rapid.Generator[[]byte] {
	pieces := []string{"hello", "wörld", "日本", "🚀", "\n", "\r\n", "\t", "\x1b[31m", "\x1b[0m", "\x1b[?25l",
		"\x1b]0;title\x07", "\x1b]8;;u\x1b\\", "\x1bPdata\x1b\\", "\x1b(B", "\x00", "\x07", "\x7f", "\xff", "\xe2\x82", "\u0085", "\x1b"}
	if cursor {
		pieces = append(pieces, "\r", "\b", "\x1b[3D", "\x1b[2C", "\x1b[5G", "\x1b[K", "\x1b[1K", "\x1b[2K")
	}
	return rapid.Custom(func(t *rapid.T) []byte {
		var b []byte
		for range rapid.IntRange(0, 40).Draw(t, "n") {
			if rapid.IntRange(0, 9).Draw(t, "raw") == 0 {
				b = append(b, rapid.SliceOfN(rapid.Byte(), 1, 3).Draw(t, "bytes")...)
				continue
			}
			b = append(b, rapid.SampledFrom(pieces).Draw(t, "piece")...)
		}
		return b
	})
}

// isClean reports whether s is valid UTF-8 without control characters but
// newline and tab.
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

// Any output renders to valid UTF-8 without control characters, and
// rendering that again changes nothing.
func TestCleanProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := outputGen(true).Draw(t, "in")
		out := clean(string(in))
		if !isClean(out) {
			t.Fatalf("%q -> %q", in, out)
		}
		if again := clean(out); again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q", in, out, again)
		}
		if len(out) > 3*len(in) {
			t.Fatalf("%d bytes from %d", len(out), len(in))
		}
	})
}

// Rendered slice by slice as a stream arrives (More and HoldLine, with the
// bytes before each slice as context, as truncate.Buffer.Since does), any
// output reads exactly as rendered whole: nothing lost, nothing doubled,
// carriage returns applied.
func TestCleanStreaming(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := outputGen(true).Draw(t, "in")
		var got []byte
		next := 0
		for upto := 0; upto < len(in); {
			upto = min(len(in), upto+rapid.IntRange(1, 20).Draw(t, "chunk"))
			ctx := max(next-64, 0)
			var n int
			got, n = AppendClean(got, in[ctx:upto], CleanOptions{From: next - ctx, More: upto < len(in), HoldLine: true})
			next = ctx + n
		}
		if next != len(in) && len(in) > 0 {
			t.Fatalf("consumed %d of %d", next, len(in))
		}
		if want := clean(string(in)); string(got) != want {
			t.Fatalf("%q: streamed %q, whole %q", in, got, want)
		}
	})
}

func FuzzClean(f *testing.F) {
	for _, s := range []string{"\x1b[31mx\x1b[0m", "a\rb\x1b[K", "\x1b]0;t\x07", "\xff\x00", "a\x1b[2Kb\x1b[1Kc"} {
		f.Add([]byte(s), 0, true)
	}
	f.Fuzz(func(t *testing.T, in []byte, from int, more bool) {
		from = min(max(from, 0), len(in))
		out, n := AppendClean(nil, in, CleanOptions{From: from, More: more, HoldLine: more})
		if n < from || n > len(in) || (!more && n != len(in)) {
			t.Fatalf("consumed %d (from %d, len %d)", n, from, len(in))
		}
		if !isClean(string(out)) {
			t.Fatalf("%q -> %q", in, out)
		}
		if !bytes.Equal([]byte(clean(string(out))), out) {
			t.Fatalf("not idempotent: %q", out)
		}
	})
}
