package truncate

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bashvisor/bashvisor/internal/render"
	"github.com/bashvisor/bashvisor/internal/secret"
)

func renderBuffer(mode render.Mode, max int, red *secret.Redactor) *Buffer {
	return New(Config{Max: max, Head: max / 4, Tail: max / 4, Render: mode, Screen: render.Size{Cols: 80, Rows: 10}, Redactor: red})
}

func TestRenderedResult(t *testing.T) {
	b := renderBuffer(render.Clean, 1000, nil)
	b.Write([]byte("\x1b[01;34mdir\x1b[0m\n10%\r100%\n\x00done"))
	if out := b.Result(); out.Text != "dir\n100%\ndone" || out.Truncated || out.Total != 30 {
		t.Errorf("%+v", out)
	}
	// Over the limit: head and tail rendered on their own; a sequence cut
	// by the tail's start is not shown in pieces.
	b = renderBuffer(render.Clean, 1000, nil)
	for i := range 200 {
		fmt.Fprintf(b, "\x1b[32mline %d\x1b[0m\n", i)
	}
	out := b.Result()
	head, tail, ok := strings.Cut(out.Text, "\n\n[snip]\n\n")
	if !out.Truncated || !ok || !strings.HasPrefix(head, "[output truncated in middle: got 3.4 KiB, showing the first 250 B and the last 250 B]\nline 0\nline 1\n") ||
		!strings.HasSuffix(tail, "line 198\nline 199\n") || strings.Contains(out.Text, "\x1b") {
		t.Errorf("%q", out.Text)
	}
	// A terminal's output is its screen.
	b = renderBuffer(render.Terminal, 1000, nil)
	b.Write([]byte("\x1b[?1049h\x1b[H\x1b[2Jtop\x1b[3;1Hrow 3\x1b[1;1H"))
	if out := b.Result(); out.Text != "top\n\nrow 3" {
		t.Errorf("terminal: %q", out.Text)
	}
}

// Since, as progress asks for it: a line being redrawn with \r comes once
// it is finished, in its last state; the Buffer's close flushes the rest.
func TestRenderedSince(t *testing.T) {
	b := renderBuffer(render.Clean, 1<<20, nil)
	var got []string
	next := int64(0)
	since := func() {
		text, _, n := b.Since(next, 1<<16)
		got, next = append(got, text), n
	}
	b.Write([]byte("start\n 10%"))
	since()
	b.Write([]byte("\r 50%\x1b[3"))
	since()
	b.Write([]byte("1m\r100%\x1b[0m\ndone, no newline"))
	since()
	b.Close()
	since()
	if want := []string{"start\n", "", "100%\n", "done, no newline"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%q, want %q", got, want)
	}
	if next != b.Total() {
		t.Errorf("next %d, total %d", next, b.Total())
	}
	if l := b.LastLine(0); l != "done, no newline" {
		t.Errorf("last line %q", l)
	}
	b = renderBuffer(render.Clean, 1<<20, nil)
	b.Write([]byte("downloading\n\x1b[32m 42%\x1b[0m [====>  ]\r"))
	if l := b.LastLine(0); l != "42% [====>  ]" {
		t.Errorf("last line of a progress bar: %q", l)
	}
}

// A secret value that escape sequences, control bytes or a carriage return
// split in the raw output (so the raw stream's redaction cannot see it)
// is redacted in every rendered text.
func TestRenderedRedaction(t *testing.T) {
	const value = "hunter2-s3cr3t-value"
	red := secret.NewRedactor(map[string]string{"API_TOKEN": value})
	for _, raw := range []string{
		"token: hunter2-\x1b[31ms3cr3t\x1b[0m-value\n",
		"token: hunter2-s3cr\x00\x073t-value\n",
		"token: XXXXXXX-s3cr3t-value\rtoken: hunter2\n",
		"token: hunter2-s3cr3t-valuX\be\n",
	} {
		for _, mode := range []render.Mode{render.Clean, render.Terminal} {
			b := renderBuffer(mode, 1<<20, red)
			b.Write([]byte(raw))
			text, _, _ := b.Since(0, 1<<16)
			b.Close()
			for what, s := range map[string]string{"result": b.Result().Text, "since": text, "last line": b.LastLine(0)} {
				if strings.Contains(s, value) || !strings.Contains(s, "[REDACTED:API_TOKEN]") {
					t.Errorf("%s %q: %s %q", mode, raw, what, s)
				}
			}
		}
	}
}

// FuzzBufferRendered: with rendering, the text is clean and does not
// depend on how the output was split into Writes.
func FuzzBufferRendered(f *testing.F) {
	f.Add([]byte("\x1b[31mred\x1b[0m\r\nok\x00\n"), uint8(1), uint16(8), uint8(3))
	f.Add([]byte("10%\r20%\x1b[K\x1b]0;t\x07\xff"), uint8(2), uint16(300), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, mode uint8, max uint16, chunk uint8) {
		cfg := Config{Max: int(max%512) + 1, Render: []render.Mode{render.Clean, render.Terminal}[mode%2], Screen: render.Size{Cols: 20, Rows: 5}}
		out := resultOf(t, cfg, data, int(chunk)+1)
		if whole := renderOut(cfg, data); whole != out {
			t.Fatalf("chunked %+v != whole %+v", out, whole)
		}
		body := out.Text
		if out.Truncated {
			_, body, _ = strings.Cut(out.Text, "]\n")
		}
		for _, r := range body {
			if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r < 0xa0) || r == utf8.RuneError && !strings.Contains(body, "\uFFFD") {
				t.Fatalf("control character %q in %q", r, body)
			}
		}
	})
}

// coloured is n bytes of `ls --color=always`-like output: mostly escape
// sequences around short names.
func coloured(n int) []byte {
	var b []byte
	for i := 0; len(b) < n; i++ {
		b = fmt.Appendf(b, "\x1b[0m\x1b[01;34mdir-%d\x1b[0m  \x1b[01;32mrun-%d.sh\x1b[0m  file-%d.txt\n", i, i, i)
	}
	return b[:n]
}

// BenchmarkRenderedResult: what rendering adds to Result (the text of a
// finished command) against no rendering (render.Raw), for 100 KiB of
// output under the 128 KiB limit and 1 MiB over it. Compare the ns/op of
// raw and clean (and terminal) within one run.
func BenchmarkRenderedResult(b *testing.B) {
	for _, data := range []struct {
		name string
		p    []byte
	}{{"plain-100KiB", logLines(100 << 10)}, {"coloured-100KiB", coloured(100 << 10)}, {"coloured-1MiB", coloured(1 << 20)}} {
		for _, mode := range []render.Mode{render.Raw, render.Clean, render.Terminal} {
			b.Run(data.name+"/"+mode.String(), func(b *testing.B) {
				buf := New(Config{Render: mode, Screen: render.Size{Cols: 120, Rows: 40}})
				buf.Write(data.p)
				b.ReportAllocs()
				for b.Loop() {
					_ = buf.Result()
				}
			})
		}
	}
}

// BenchmarkRenderedSince: one progress report's cost, 16 KiB of new
// output, raw against clean.
func BenchmarkRenderedSince(b *testing.B) {
	p := coloured(64 << 10)
	for _, mode := range []render.Mode{render.Raw, render.Clean} {
		b.Run(mode.String(), func(b *testing.B) {
			buf := New(Config{Render: mode})
			buf.Write(p)
			b.ReportAllocs()
			for b.Loop() {
				_, _, _ = buf.Since(int64(len(p))-16<<10, 16<<10)
			}
		})
	}
}
