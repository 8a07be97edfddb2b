package render

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

var size = Size{Cols: 120, Rows: 40}

func term(s string, from int) string { return string(AppendTerminal(nil, []byte(s), size, from)) }

func TestTerminal(t *testing.T) {
	// A curses-like program: alternate screen, cursor addressing, erase,
	// a status line; it draws over a frame that was there before.
	var tui strings.Builder
	tui.WriteString("before\r\n\x1b[?1049h\x1b[H\x1b[2J")
	for frame := range 3 {
		tui.WriteString("\x1b[H")
		for row := range 5 {
			fmt.Fprintf(&tui, "\x1b[%d;1H\x1b[7m%3d\x1b[m task-%d frame %d\x1b[K", row+1, row, row, frame)
		}
		tui.WriteString("\x1b[40;1Hq:quit\x1b[1;1H")
	}
	screen := tui.String()
	want := "  0 task-0 frame 2\n  1 task-1 frame 2\n  2 task-2 frame 2\n  3 task-3 frame 2\n  4 task-4 frame 2" +
		strings.Repeat("\n", 35) + "q:quit"
	for _, c := range []struct{ name, in, want string }{
		{"colours", "\x1b[31mred\x1b[0m plain\r\nline2\r\n", "red plain\nline2\n"},
		{"progress bar", "10%\r20%\r100%\r\n", "100%\n"},
		{"repl", ">>> print(6*7)\r\n42\r\n>>> ", ">>> print(6*7)\n42\n>>> "},
		{"full screen", screen, want},
		{"back from the alternate screen", screen + "\x1b[?1049l", "before\n"},
		{"wide and combining", "日本\u0301語\r\n", "日本\u0301語\n"},
		{"clear keeps no frames", "frame 1\x1b[H\x1b[2Jframe 2", "frame 2"},
		{"clear with scrollback", "a\r\nb\r\n\x1b[H\x1b[2J\x1b[3Jc", "c"},
		{"nothing", "", ""},
	} {
		if got := term(c.in, 0); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
	// Lines that scroll off are kept, oldest first.
	var lines strings.Builder
	for i := range 100 {
		fmt.Fprintf(&lines, "line %d\r\n", i)
	}
	got := strings.Split(term(lines.String(), 0), "\n")
	if len(got) != 101 || got[0] != "line 0" || got[99] != "line 99" || got[100] != "" {
		t.Errorf("scrollback: %d lines, %q ... %q", len(got), got[0], got[len(got)-2:])
	}
}

// What a slice changed: the rest of the text when the output only added
// to it (a REPL's answer after its prompt), else the text from the first
// line that changed.
func TestTerminalSince(t *testing.T) {
	repl := ">>> print(6*7)\r\n42\r\n>>> "
	for _, c := range []struct {
		name, in string
		from     int
		want     string
	}{
		{"echo and answer after the prompt", repl, 4, "print(6*7)\n42\n>>> "},
		{"echo only", ">>> 1+1\r\n", 4, "1+1\n"},
		{"from the start", repl, 0, ">>> print(6*7)\n42\n>>> "},
		{"at the end", repl, len(repl), ""},
		{"redraw", "top 1\r\nrow a\r\n\x1b[Htop 2\r\nrow b\r\n", 14, "top 2\nrow b\n"},
		{"scrolled", "a\r\nb\r\n", 3, "b\n"},
	} {
		if got := term(c.in, c.from); got != c.want {
			t.Errorf("%s: %q", c.name, got)
		}
	}
}

// Terminal queries (cursor position, device attributes) are answered on
// the emulator's own pipe, which must not block a replay.
func TestTerminalQueriesDoNotBlock(t *testing.T) {
	done := make(chan string, 1)
	go func() {
		done <- term(strings.Repeat("\x1b[6n\x1b[c\x1b[>c\x1b[5n\x1b[?2004$p", 2000)+"ok", 0)
	}()
	select {
	case got := <-done:
		if got != "ok" {
			t.Errorf("%q", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a replay with terminal queries hangs")
	}
}

// The replay window: at most WindowBytes bytes and WindowLines line feeds,
// starting at the output's start or after a line feed.
func TestWindowStart(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 3*WindowBytes).Draw(t, "n")
		line := rapid.IntRange(1, 400).Draw(t, "line")
		src := bytes.Repeat(append(bytes.Repeat([]byte{'x'}, line-1), '\n'), n/line+1)[:n]
		atStart := rapid.Bool().Draw(t, "atStart")
		ws := WindowStart(src, atStart)
		w := src[ws:]
		if len(w) > WindowBytes || bytes.Count(w, []byte{'\n'}) > WindowLines {
			t.Fatalf("window of %d bytes, %d lines", len(w), bytes.Count(w, []byte{'\n'}))
		}
		if ws > 0 && src[ws-1] != '\n' && ws != len(src)-WindowBytes {
			t.Fatalf("window starts at %d, not after a line feed", ws)
		}
		if atStart && len(src) <= WindowBytes && bytes.Count(src, []byte{'\n'}) <= WindowLines && ws != 0 {
			t.Fatalf("whole output fits, window starts at %d", ws)
		}
		if !atStart && ws == 0 && len(src) > 0 && bytes.IndexByte(src, '\n') >= 0 {
			t.Fatalf("a slice from the middle starts at its first byte")
		}
	})
}

// Any byte stream renders to clean text (valid UTF-8, no control
// characters) in bounded time.
func TestTerminalProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := outputGen(true).Draw(t, "in")
		extra := rapid.SampledFrom([]string{"", "\x1b[?1049h", "\x1b[5;5H", "\x1b[2J", "\x1b[10S", "\x1b[3;7r"}).Draw(t, "extra")
		in = append([]byte(extra), in...)
		from := rapid.IntRange(0, len(in)).Draw(t, "from")
		out := string(AppendTerminal(nil, in, Size{Cols: 20, Rows: 5}, from))
		if !isClean(out) {
			t.Fatalf("%q -> %q", in, out)
		}
	})
}

// A scroll region whose bottom is below the screen ends at the last line,
// as in xterm (the emulator alone indexed past its lines and panicked).
func TestTerminalScrollRegionBeyondScreen(t *testing.T) {
	body := "a\nb\nc\nd\ne\nf\ng\nh"
	sz := Size{Cols: 20, Rows: 5}
	got := string(AppendTerminal(nil, []byte("\x1b[3;7r"+body), sz, 0))
	want := string(AppendTerminal(nil, []byte("\x1b[3;5r"+body), sz, 0))
	if got != want || !strings.Contains(got, "h") {
		t.Fatalf("region 3;7 on 5 rows: %q, want %q (region 3;5)", got, want)
	}
}

// Input on which the emulator panics renders as clean text instead.
func TestTerminalEmulatorPanicFallsBack(t *testing.T) {
	// Found by TestTerminalProperties: from = 1 cuts the region's sequence,
	// so it reaches the emulator unclamped; the reverse index (C1 0x8d) at
	// the region's edge then indexed past the screen.
	in := []byte("\x1b[3;7rhello\x00hello\x00hellohello\t\t\r\x00" + strings.Repeat("hello", 11) +
		"\u65e5\u672c\U0001f680\x00\t\t\t\t\x8d" + strings.Repeat("hello", 5) + "\x1b[31mhello\x00")
	out := string(AppendTerminal(nil, in, Size{Cols: 20, Rows: 5}, 1))
	if !isClean(out) || !strings.Contains(out, "hello") {
		t.Fatalf("%q -> %q", in, out)
	}
}
