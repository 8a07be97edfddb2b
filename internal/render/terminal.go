package render

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/charmbracelet/x/vt"
)

// Size is a terminal's size in character cells.
type Size struct{ Cols, Rows int }

// The window a terminal replay covers: the last WindowBytes bytes of the
// output, and at most WindowLines line feeds, starting after a line feed
// when it does not start at the output's start.
const (
	WindowBytes = 64 << 10
	WindowLines = 500
)

// scrollbackLines bounds the emulator's scrollback (lines that scrolled
// off the top within the window; a line longer than the width takes
// several).
const scrollbackLines = 2000

// WindowStart returns where a terminal replay of src begins: 0 when src
// begins at the output's start (atStart) and holds at most WindowBytes
// bytes and WindowLines line feeds, otherwise just after the line feed
// that leaves at most that much (or, when one line is longer,
// len(src)-WindowBytes).
func WindowStart(src []byte, atStart bool) int {
	lo := max(0, len(src)-WindowBytes)
	end, n := len(src), 0
	for {
		j := bytes.LastIndexByte(src[lo:end], '\n')
		if j < 0 {
			break
		}
		if n == WindowLines {
			return lo + j + 1
		}
		n++
		end = lo + j
	}
	if lo == 0 && atStart {
		return 0
	}
	if j := bytes.IndexByte(src[lo:], '\n'); j >= 0 {
		return lo + j + 1
	}
	return lo
}

// AppendTerminal appends the [Terminal] text of src to dst: the text of a
// terminal of size sz, blank at first, that was sent src (the caller
// chooses the window, see WindowStart). With 0 < from <= len(src) it
// appends only what src[from:] changed: when the terminal's text after
// src[:from] is a prefix of its text after src (output that only added),
// the rest of the latter; otherwise the latter from the start of the
// first line that differs (a full-screen program redrew). A terminal's
// text is its scrollback lines, oldest first, then its screen's lines
// down to the last one that is not blank or holds the cursor; trailing
// blanks are trimmed, except up to the cursor on a line that has text (a
// prompt keeps its space).
//
// Should the emulator fail on some input (it has panicked on scroll regions
// and reverse index at a region's edge), the text is src[from:] rendered
// by [AppendClean] instead: a command's output never takes the engine down.
func AppendTerminal(dst, src []byte, sz Size, from int) (out []byte) {
	if sz.Cols <= 0 || sz.Rows <= 0 {
		sz = Size{Cols: 80, Rows: 24}
	}
	whole, start := src, max(0, min(from, len(src)))
	defer func() {
		if recover() != nil {
			out, _ = AppendClean(dst, whole, CleanOptions{From: start})
		}
	}()
	e := vt.NewEmulator(sz.Cols, sz.Rows)
	e.SetScrollbackSize(scrollbackLines)
	if pw, ok := e.InputPipe().(*io.PipeWriter); ok {
		// Nobody reads the answers to terminal queries: with the pipe
		// closed, the emulator's writes of them fail at once instead of
		// blocking.
		_ = pw.Close()
	} else {
		drained := make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, e)
			close(drained)
		}()
		defer func() {
			_ = e.Close()
			<-drained
		}()
	}
	var before string
	if from > 0 && from <= len(src) {
		feed(e, src[:from], sz.Rows)
		before = screenText(e)
		src = src[from:]
	}
	feed(e, src, sz.Rows)
	after := screenText(e)
	k := commonPrefix(before, after)
	if k < len(before) {
		k = strings.LastIndexByte(after[:k], '\n') + 1
	}
	return append(dst, after[k:]...)
}

// feed sends p to e, a terminal of rows lines. Two control sequences are
// changed on the way. Erase in display (CSI 2 J) is sent as save cursor,
// home, erase below, restore cursor: the same screen, but the lines are
// not pushed to the scrollback first (xterm does not; the emulator would,
// and a program that clears and redraws would fill it with its frames). A
// scroll region (CSI top ; bottom r) whose bottom is below the screen
// ends at the screen's last line, as xterm does (the emulator indexes past
// its lines and panics).
func feed(e *vt.Emulator, p []byte, rows int) {
	from := 0 // p[from:] is still to be written
	for at := 0; ; {
		i := bytes.Index(p[at:], []byte("\x1b["))
		if i < 0 {
			break
		}
		i += at
		j := i + 2
		for j < len(p) && (p[j] >= '0' && p[j] <= '9' || p[j] == ';') {
			j++
		}
		if j == len(p) {
			break
		}
		at = j + 1
		var repl []byte
		switch params := p[i+2 : j]; {
		case p[j] == 'J' && string(params) == "2":
			repl = []byte("\x1b7\x1b[H\x1b[J\x1b8")
		case p[j] == 'r':
			repl = []byte("\x1b[" + clampRegion(string(params), rows) + "r")
		default:
			continue // written with what follows
		}
		_, _ = e.Write(p[from:i])
		_, _ = e.Write(repl)
		from = at
	}
	if from < len(p) {
		_, _ = e.Write(p[from:])
	}
}

// clampRegion returns the parameters of a scroll region (DECSTBM) with
// its bottom at most rows.
func clampRegion(params string, rows int) string {
	top, bottom, ok := strings.Cut(params, ";")
	if !ok {
		return params
	}
	b, err := strconv.Atoi(bottom)
	if err != nil || b <= rows {
		return params
	}
	if t, err := strconv.Atoi(top); err == nil && t >= rows {
		return "" // top at or below the last line: no region (xterm ignores it; this resets it)
	}
	return top + ";" + strconv.Itoa(rows)
}

// screenText is e's text (see AppendTerminal), valid UTF-8.
func screenText(e *vt.Emulator) string {
	var b strings.Builder
	for _, l := range e.Scrollback().Lines() {
		b.WriteString(strings.TrimRight(l.String(), " "))
		b.WriteByte('\n')
	}
	lines := strings.Split(e.String(), "\n")
	cur := e.CursorPosition()
	last := -1
	for i, l := range lines {
		if strings.TrimRight(l, " ") != "" || i == cur.Y {
			last = i
		}
	}
	for i := 0; i <= last && i < len(lines); i++ {
		l := strings.TrimRight(lines[i], " ")
		if i == cur.Y && l != "" {
			if pad := cur.X - utf8.RuneCountInString(l); pad > 0 {
				l += strings.Repeat(" ", pad)
			}
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(l)
	}
	return strings.Map(dropControl, strings.ToValidUTF8(b.String(), replacement))
}

// dropControl drops the control characters the emulator keeps in a cell
// (C1 controls it does not act on): what it returns is clean text.
func dropControl(r rune) rune {
	if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r < 0xa0) {
		return -1
	}
	return r
}

// commonPrefix returns the length of the longest common prefix of a and b
// that ends on a rune boundary.
func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	for i > 0 && i < len(b) && !utf8.RuneStart(b[i]) {
		i--
	}
	return i
}
