package truncate

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/bashvisor/bashvisor/config"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// logLines returns n bytes of realistic build-log text.
func logLines(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "[%06d] compiling pkg/module_%d.go ok\n", i, i%97)
	}
	return b.Bytes()[:n]
}

// feed writes data into b in chunks of the given size (0 = all at once).
func feed(t testing.TB, b *Buffer, data []byte, chunk int) {
	t.Helper()
	if chunk <= 0 {
		chunk = len(data) + 1
	}
	for len(data) > 0 {
		k := min(chunk, len(data))
		if n, err := b.Write(data[:k]); n != k || err != nil {
			t.Fatalf("Write = %d, %v; want %d, nil", n, err, k)
		}
		data = data[k:]
	}
}

var chunkSizes = []int{0, 1, 3, 7, 4096, 65536}

func TestHumanize(t *testing.T) {
	for _, tc := range []struct {
		n          int64
		got, limit string
	}{
		{0, "0 B", "0 B"},
		{900, "900 B", "900 B"},
		{1023, "1023 B", "1023 B"},
		{1024, "1.0 KiB", "1 KiB"},
		{1536, "1.5 KiB", "1.5 KiB"},
		{131072, "128.0 KiB", "128 KiB"},
		{131073, "128.0 KiB", "128.0 KiB"},
		{307200, "300.0 KiB", "300 KiB"},
		{1<<20 - 1, "1.0 MiB", "1.0 MiB"},
		{1 << 20, "1.0 MiB", "1 MiB"},
		{64 << 20, "64.0 MiB", "64 MiB"},
		{3 << 29, "1.5 GiB", "1.5 GiB"},
		{10 << 30, "10.0 GiB", "10 GiB"},
		{5 << 40, "5.0 TiB", "5 TiB"},
		{2048 << 40, "2048.0 TiB", "2048 TiB"},
	} {
		if got := Humanize(tc.n); got != tc.got {
			t.Errorf("Humanize(%d) = %q, want %q", tc.n, got, tc.got)
		}
		if got := humanizeLimit(tc.n); got != tc.limit {
			t.Errorf("humanizeLimit(%d) = %q, want %q", tc.n, got, tc.limit)
		}
	}
}

func TestMiddleExactFormat300KiB(t *testing.T) {
	data := logLines(300 << 10)
	want := "[output truncated in middle: got 300.0 KiB, showing the first 32 KiB and the last 96 KiB]\n" +
		string(data[:32<<10]) + "\n\n[snip]\n\n" + string(data[len(data)-96<<10:])
	for _, chunk := range chunkSizes {
		b := New(Config{})
		feed(t, b, data, chunk)
		out := b.Result()
		if out.Text != want {
			t.Fatalf("chunk %d: text differs\n got %q...\nwant %q...", chunk, out.Text[:100], want[:100])
		}
		if !out.Truncated || out.Total != 300<<10 || out.SpoolFile != "" {
			t.Fatalf("chunk %d: got %+v", chunk, out)
		}
	}
}

func TestMiddleBoundaries(t *testing.T) {
	const max = DefaultMax
	for _, n := range []int{0, 1, max - 1, max, max + 1} {
		data := logLines(n)
		for _, chunk := range chunkSizes {
			out := resultOf(t, Config{}, data, chunk)
			if out.Total != int64(n) {
				t.Fatalf("n=%d: Total %d", n, out.Total)
			}
			if n <= max {
				if out.Truncated || out.Text != string(data) {
					t.Fatalf("n=%d chunk=%d: want whole output, got truncated=%v len=%d", n, chunk, out.Truncated, len(out.Text))
				}
				continue
			}
			// Steady: one byte over Max shows Max bytes.
			want := "[output truncated in middle: got 128.0 KiB, showing the first 32 KiB and the last 96 KiB]\n" +
				string(data[:32<<10]) + "\n\n[snip]\n\n" + string(data[n-96<<10:])
			if !out.Truncated || out.Text != want {
				t.Fatalf("n=%d chunk=%d: unexpected text %q", n, chunk, out.Text[:80])
			}
		}
	}
}

func resultOf(t testing.TB, cfg Config, data []byte, chunk int) Output {
	t.Helper()
	b := New(cfg)
	feed(t, b, data, chunk)
	out := b.Result()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMiddleUTF8Straddle(t *testing.T) {
	// "€" is 3 bytes (e2 82 ac). Put one across the head cut (4096) and one
	// across the tail cut (len-4096).
	head := append(bytes.Repeat([]byte("h"), 4095), "€"...) // bytes 4095..4097
	mid := bytes.Repeat([]byte("m"), 200<<10)
	tail := append([]byte("€"), bytes.Repeat([]byte("t"), 4094)...) // cut falls on its 2nd byte
	data := slicesConcat(head, mid, tail)
	for _, chunk := range chunkSizes {
		out := resultOf(t, Config{Head: 4096, Tail: 4096}, data, chunk)
		h, tl := sections(t, out.Text)
		if h != strings.Repeat("h", 4095) {
			t.Fatalf("chunk %d: head cut not moved back: ...%q", chunk, h[len(h)-5:])
		}
		if tl != strings.Repeat("t", 4094) {
			t.Fatalf("chunk %d: tail cut not moved forward: %q...", chunk, tl[:5])
		}
	}
	// A 4-byte rune starting one byte before the head cut.
	data = slicesConcat(bytes.Repeat([]byte("h"), 4095), []byte("😀"), mid)
	h, _ := sections(t, resultOf(t, Config{Head: 4096, Tail: 4096}, data, 0).Text)
	if len(h) != 4095 {
		t.Fatalf("head len %d, want 4095", len(h))
	}
}

// sections splits a middle-truncated text into HEAD and TAIL.
func sections(t *testing.T, text string) (string, string) {
	t.Helper()
	if !utf8.ValidString(text) {
		t.Fatal("text is not valid UTF-8")
	}
	_, rest, ok := strings.Cut(text, "]\n")
	if !ok {
		t.Fatalf("no header in %q", text)
	}
	h, tl, ok := strings.Cut(rest, "\n\n[snip]\n\n")
	if !ok {
		t.Fatalf("no snip in %q", text)
	}
	return h, tl
}

func slicesConcat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestInvalidUTF8(t *testing.T) {
	ff := func(n int) []byte { return bytes.Repeat([]byte{0xff}, n) }
	alt := bytes.Repeat([]byte("\xffa"), 64<<10) // 128 KiB, sanitises to 256 KiB
	for _, tc := range []struct {
		name      string
		data      []byte
		text      string // "" = check only bounds
		truncated bool
	}{
		{"ff small", ff(10), "\uFFFD", false},
		{"ff max", ff(DefaultMax), "\uFFFD", false},
		{"ff over", ff(300 << 10), "[output truncated in middle: got 300.0 KiB, showing the first 32 KiB and the last 96 KiB]\n\uFFFD\n\n[snip]\n\n\uFFFD", true},
		{"alternating grows past max", alt, "", true},
		{"truncated lone lead at end", []byte("ok\xe2\x82"), "ok\uFFFD", false},
		{"valid U+FFFD kept", []byte("a\uFFFDb"), "a\uFFFDb", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, chunk := range chunkSizes {
				out := resultOf(t, Config{}, tc.data, chunk)
				checkMiddleBounds(t, out, DefaultConfig())
				if out.Truncated != tc.truncated {
					t.Fatalf("chunk %d: Truncated = %v", chunk, out.Truncated)
				}
				if tc.text != "" && out.Text != tc.text {
					t.Fatalf("chunk %d: Text = %q, want %q", chunk, out.Text, tc.text)
				}
			}
		})
	}
	// The alternating case: HEAD and TAIL are cut from the sanitised text.
	h, tl := sections(t, renderOut(Config{}, alt).Text)
	if len(h) > 32<<10 || len(tl) > 96<<10 || !strings.HasPrefix(h, "\uFFFDa\uFFFDa") || !strings.HasSuffix(tl, "\uFFFDa") {
		t.Fatalf("bad sections: head %d bytes %q..., tail %d bytes", len(h), h[:8], len(tl))
	}
}

func checkMiddleBounds(t *testing.T, out Output, cfg Config) {
	t.Helper()
	cfg = cfg.normalize()
	if !utf8.ValidString(out.Text) {
		t.Fatalf("invalid UTF-8 in Text")
	}
	if !out.Truncated {
		if len(out.Text) > cfg.Max {
			t.Fatalf("untruncated text has %d bytes > Max %d", len(out.Text), cfg.Max)
		}
		return
	}
	header, _, _ := strings.Cut(out.Text, "\n")
	if limit := len(header) + 1 + cfg.Max + len("\n\n[snip]\n\n"); len(out.Text) > limit {
		t.Fatalf("text has %d bytes > %d", len(out.Text), limit)
	}
}

// TestMixedRandom compares chunked writes of random mixed data against a
// straightforward whole-input reference.
func TestMixedRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := [][]byte{[]byte("abc "), []byte("é"), []byte("€"), []byte("😀"), []byte("\n"), {0xff}, {0x80}, {0xe2, 0x82}, []byte("\uFFFD")}
	for iter := 0; iter < 300; iter++ {
		cfg := Config{Max: 1 + rng.IntN(300), Head: 1 + rng.IntN(100), Tail: 1 + rng.IntN(100)}
		var data []byte
		for n := rng.IntN(800); len(data) < n; {
			data = append(data, pieces[rng.IntN(len(pieces))]...)
		}
		chunk := 1 + rng.IntN(50)
		out := resultOf(t, cfg, data, chunk)
		checkMiddleBounds(t, out, cfg)
		if whole := renderOut(cfg, data); whole != out {
			t.Fatalf("chunked %+v != whole %+v", out, whole)
		}
		c := cfg.normalize()
		if len(data) <= c.Max {
			if s := strings.ToValidUTF8(string(data), "\uFFFD"); len(s) <= c.Max && out.Text != s {
				t.Fatalf("want sanitised whole %q, got %q", s, out.Text)
			}
		} else if utf8.Valid(data) {
			h, tl := sections(t, out.Text)
			if !strings.HasPrefix(string(data), h) || len(h) < c.Head-3 || !strings.HasSuffix(string(data), tl) || len(tl) < c.Tail-3 {
				t.Fatalf("head %q / tail %q do not match data", h, tl)
			}
		}
	}
}

func TestAppendValidMatchesToValidUTF8(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte{'a', 0x80, 0xbf, 0xc3, 0xa9, 0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x98, 0x80, 0xff, 0xed, 0xa0}
	for iter := 0; iter < 5000; iter++ {
		src := make([]byte, rng.IntN(20))
		for i := range src {
			src[i] = alphabet[rng.IntN(len(alphabet))]
		}
		got, n := appendValid(nil, src, 1<<20)
		if want := strings.ToValidUTF8(string(src), "\uFFFD"); string(got) != want || n != len(src) {
			t.Fatalf("appendValid(%q) = %q, %d; want %q", src, got, n, want)
		}
		limit := rng.IntN(30)
		got, n = appendValid(nil, src, limit)
		if len(got) > limit || !utf8.Valid(got) || string(got) != strings.ToValidUTF8(string(src[:n]), "\uFFFD") {
			t.Fatalf("appendValid(%q, %d) = %q, %d", src, limit, got, n)
		}
	}
}

func TestEmpty(t *testing.T) {
	for _, s := range []config.Truncation{config.TruncateMiddle, config.TruncateHead, config.TruncateTail} {
		b := New(Config{Strategy: s})
		b.Write(nil)
		if out := b.Result(); out != (Output{}) {
			t.Fatalf("%s: %+v", s, out)
		}
		if l := b.LastLine(10); l != "" {
			t.Fatalf("LastLine = %q", l)
		}
	}
}

func TestClampHeadTail(t *testing.T) {
	data := logLines(1000)
	out := renderOut(Config{Max: 100, Head: 4096, Tail: 4096}, data)
	h, tl := sections(t, out.Text)
	if h != string(data[:50]) || tl != string(data[950:]) {
		t.Fatalf("head %q tail %q", h, tl)
	}
	if !strings.HasPrefix(out.Text, "[output truncated in middle: got 1000 B, showing the first 50 B and the last 50 B]\n") {
		t.Fatalf("header: %q", out.Text)
	}
}

func TestTail(t *testing.T) {
	line := "héllo wörld → 😀\n" // 16 runes, 23 bytes
	for _, tc := range []struct {
		name      string
		max       int
		data      string
		want      string
		truncated bool
	}{
		{"fits in chars though bytes exceed", 16, line, line, false},
		{"one over", 15, line, "[Output truncated: showing last 15 chars of 16 chars]\néllo wörld → 😀\n", true},
		{"many lines", 5, strings.Repeat(line, 1000), "[Output truncated: showing last 5 chars of 16000 chars]\n → 😀\n", true},
		{"ascii", 4, "abcdefgh", "[Output truncated: showing last 4 chars of 8 chars]\nefgh", true},
		{"invalid bytes", 10, "ab\xff\xffcd", "ab\uFFFDcd", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, chunk := range chunkSizes {
				out := resultOf(t, Config{Strategy: config.TruncateTail, Max: tc.max}, []byte(tc.data), chunk)
				if out.Text != tc.want || out.Truncated != tc.truncated || out.Total != int64(len(tc.data)) {
					t.Fatalf("chunk %d: got %+v\nwant %q", chunk, out, tc.want)
				}
			}
		})
	}
}

func TestTailBinaryBounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	data := make([]byte, 50000)
	for i := range data {
		data[i] = byte(rng.UintN(256))
	}
	for _, max := range []int{1, 10, 1000, 100000} {
		out := resultOf(t, Config{Strategy: config.TruncateTail, Max: max}, data, 4096)
		body := out.Text
		if out.Truncated {
			_, body, _ = strings.Cut(out.Text, "]\n")
		}
		if !utf8.ValidString(out.Text) || utf8.RuneCountInString(body) > max {
			t.Fatalf("max %d: %d runes, valid=%v", max, utf8.RuneCountInString(body), utf8.ValidString(out.Text))
		}
	}
}

func TestHead(t *testing.T) {
	for _, tc := range []struct {
		name, data, want string
		truncated        bool
	}{
		{"fits", "0123456789", "0123456789", false},
		{"over", "0123456789abc", "[output truncated: showing first 10 of 13 bytes]\n0123456789", true},
		{"straddle", "01234567€abc", "[output truncated: showing first 8 of 14 bytes]\n01234567", true},
		{"invalid grows", "\xffa\xffa\xffa", "[output truncated: showing first 4 of 6 bytes]\n\uFFFDa\uFFFDa", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, chunk := range chunkSizes {
				out := resultOf(t, Config{Strategy: config.TruncateHead, Max: 10}, []byte(tc.data), chunk)
				if out.Text != tc.want || out.Truncated != tc.truncated {
					t.Fatalf("chunk %d: got %+v, want %q", chunk, out, tc.want)
				}
			}
		})
	}
}

func TestSpool(t *testing.T) {
	data := logLines(20000)
	for _, tc := range []struct {
		name     string
		cfg      Config
		data     []byte
		spooled  int // -1 = no spool file
		truncate bool
	}{
		{"not truncated", Config{Max: 20000}, data, -1, false},
		{"capped", Config{Max: 1000, SpoolCap: 5000}, data, 5000, true},
		{"cap above total", Config{Max: 1000, SpoolCap: 1 << 20}, data, len(data), true},
		{"default cap", Config{Max: 1000}, data, len(data), true},
		{"head", Config{Strategy: config.TruncateHead, Max: 19999}, data, len(data), true},
		{"tail not truncated", Config{Strategy: config.TruncateTail, Max: 20000}, data, -1, false},
		{"tail", Config{Strategy: config.TruncateTail, Max: 300, SpoolCap: 7777}, data, 7777, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, chunk := range []int{0, 1, 999, 4096} {
				dir := t.TempDir()
				tc.cfg.SpoolDir = dir
				out := resultOf(t, tc.cfg, tc.data, chunk)
				if out.Truncated != tc.truncate {
					t.Fatalf("Truncated = %v", out.Truncated)
				}
				files, _ := filepath.Glob(filepath.Join(dir, "*"))
				if tc.spooled < 0 {
					if out.SpoolFile != "" || len(files) != 0 {
						t.Fatalf("unexpected spool %q %v", out.SpoolFile, files)
					}
					continue
				}
				if len(files) != 1 || out.SpoolFile != files[0] || !strings.HasPrefix(filepath.Base(files[0]), "output-") || !strings.HasSuffix(files[0], ".log") {
					t.Fatalf("spool file %q, dir has %v", out.SpoolFile, files)
				}
				got, err := os.ReadFile(out.SpoolFile)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, tc.data[:tc.spooled]) {
					t.Fatalf("chunk %d: spool has %d bytes, want the first %d of the input", chunk, len(got), tc.spooled)
				}
			}
		})
	}
}

func TestSpoolError(t *testing.T) {
	b := New(Config{Max: 10, SpoolDir: filepath.Join(t.TempDir(), "missing")})
	if n, err := b.Write(make([]byte, 100)); n != 100 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if out := b.Result(); !out.Truncated || out.SpoolFile != "" {
		t.Fatalf("%+v", out)
	}
	if err := b.Close(); err == nil {
		t.Fatal("Close did not report the spool error")
	}
}

func TestLastLine(t *testing.T) {
	for _, tc := range []struct {
		data string
		max  int
		want string
	}{
		{"", 80, ""},
		{"one\ntwo\n", 80, "two"},
		{"one\ntwo", 80, "two"},
		{"one\n\n\n", 80, "one"},
		{"one\n  \t\n", 80, "one"},
		{"  indented  \n", 80, "indented"},
		{"10%\r50%\r90%", 80, "90%"},
		{"10%\r50%\r\n", 80, "50%"},
		{"build\nhéllo", 2, "h"},
		{"build\nhéllo", 3, "hé"},
		{"build\nhéllo", 0, "héllo"},
		{"bad \xff\xfe line", 80, "bad \uFFFD line"},
		{"\n\n\n", 80, ""},
	} {
		b := New(Config{})
		feed(t, b, []byte(tc.data), 1)
		if got := b.LastLine(tc.max); got != tc.want {
			t.Errorf("LastLine(%q, %d) = %q, want %q", tc.data, tc.max, got, tc.want)
		}
	}
	// After truncation the line comes from the recent window.
	b := New(Config{Max: 1000})
	feed(t, b, logLines(1<<20), 65536)
	feed(t, b, []byte("\nfinal line\n"), 0)
	if got := b.LastLine(80); got != "final line" {
		t.Fatalf("LastLine after truncation = %q", got)
	}
	b = New(Config{Strategy: config.TruncateTail, Max: 1000})
	feed(t, b, []byte("a\nlast partial"), 0)
	if got := b.LastLine(80); got != "last partial" {
		t.Fatalf("tail LastLine = %q", got)
	}
}

// TestConcurrent runs a writer against readers; run it with -race.
func TestConcurrent(t *testing.T) {
	for _, s := range []config.Truncation{config.TruncateMiddle, config.TruncateHead, config.TruncateTail} {
		t.Run(string(s), func(t *testing.T) {
			cfg := Config{Strategy: s, Max: 8 << 10, SpoolDir: t.TempDir()}
			b := New(cfg)
			data := logLines(2 << 20)
			var wg sync.WaitGroup
			done := make(chan struct{})
			for range 3 {
				wg.Go(func() {
					var last int64
					for {
						select {
						case <-done:
							return
						default:
						}
						out := b.Result()
						if out.Total < last || !utf8.ValidString(out.Text) || b.Total() < out.Total {
							t.Error("inconsistent snapshot")
							return
						}
						last = out.Total
						_ = b.LastLine(100)
					}
				})
			}
			feed(t, b, data, 64<<10)
			close(done)
			wg.Wait()
			out := b.Result()
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if out.Total != int64(len(data)) || !out.Truncated {
				t.Fatalf("%+v", out)
			}
			if got, _ := os.ReadFile(out.SpoolFile); !bytes.Equal(got, data) {
				t.Fatalf("spool has %d bytes, want %d", len(got), len(data))
			}
		})
	}
}

// TestMemoryBounded writes 1 GiB and checks that the heap did not grow with it.
func TestMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 1 GiB")
	}
	chunk := logLines(64 << 10)
	for _, s := range []config.Truncation{config.TruncateMiddle, config.TruncateHead, config.TruncateTail} {
		t.Run(string(s), func(t *testing.T) {
			total := 1 << 30
			if raceEnabled && s == config.TruncateTail {
				total = 128 << 20 // the race detector makes char counting ~40x slower
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			b := New(Config{Strategy: s})
			for written := 0; written < total; written += len(chunk) {
				b.Write(chunk)
			}
			runtime.ReadMemStats(&after)
			out := b.Result()
			runtime.KeepAlive(b)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%s: %d MiB written, %d bytes allocated in total", s, total>>20, alloc)
			// Prefix (128 KiB) + ring (4 KiB, or 512 KiB for tail) + growth copies.
			if alloc > 2<<20 {
				t.Fatalf("allocated %d bytes for %d MiB of output", alloc, total>>20)
			}
			if out.Total != int64(total) || !out.Truncated {
				t.Fatalf("%+v", out.Total)
			}
		})
	}
}

func BenchmarkWrite(b *testing.B) {
	chunk := logLines(64 << 10)
	for _, bc := range []struct {
		name string
		cfg  Config
	}{
		{"middle", Config{}},
		{"head", Config{Strategy: config.TruncateHead}},
		{"tail", Config{Strategy: config.TruncateTail}},
		{"middle-spool", Config{SpoolDir: b.TempDir(), SpoolCap: 1 << 62}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			buf := New(bc.cfg)
			defer buf.Close()
			for range 16 { // reach steady state: buffers at their final size
				buf.Write(chunk)
			}
			b.SetBytes(int64(len(chunk)))
			b.ReportAllocs()
			for b.Loop() {
				buf.Write(chunk)
			}
		})
	}
}

func BenchmarkResult(b *testing.B) {
	buf := New(Config{})
	buf.Write(logLines(1 << 20))
	b.ReportAllocs()
	for b.Loop() {
		_ = buf.Result()
	}
}

// FuzzBuffer checks, for any input, configuration and chunking, that the
// result is valid UTF-8, within its size bounds, and independent of how the
// output was split into Writes.
func FuzzBuffer(f *testing.F) {
	f.Add([]byte("hello\nworld\n"), uint8(0), uint16(5), uint8(2), uint8(2), uint8(3))
	f.Add([]byte("h€llo\xff\xfew😀rld\xe2\x82"), uint8(1), uint16(4), uint8(1), uint8(1), uint8(1))
	f.Add(bytes.Repeat([]byte("\xffa"), 100), uint8(2), uint16(50), uint8(20), uint8(20), uint8(7))
	f.Fuzz(func(t *testing.T, data []byte, strat uint8, max uint16, head, tail, chunk uint8) {
		cfg := Config{
			Strategy: []config.Truncation{config.TruncateMiddle, config.TruncateHead, config.TruncateTail}[strat%3],
			Max:      int(max%512) + 1,
			Head:     int(head) + 1,
			Tail:     int(tail) + 1,
		}
		out := resultOf(t, cfg, data, int(chunk)+1)
		if whole := renderOut(cfg, data); whole != out {
			t.Fatalf("chunked %+v != whole %+v", out, whole)
		}
		if out.Total != int64(len(data)) || !utf8.ValidString(out.Text) {
			t.Fatalf("bad output %+v", out)
		}
		body := out.Text
		if out.Truncated {
			_, body, _ = strings.Cut(out.Text, "]\n")
		}
		switch cfg.Strategy {
		case config.TruncateMiddle:
			checkMiddleBounds(t, out, cfg)
		case config.TruncateHead:
			if len(body) > cfg.Max || !strings.HasPrefix(strings.ToValidUTF8(string(data), "\uFFFD"), body) {
				t.Fatalf("head body %q", body)
			}
		case config.TruncateTail:
			if utf8.RuneCountInString(body) > cfg.Max || !strings.HasSuffix(strings.ToValidUTF8(string(data), "\uFFFD"), body) && utf8.Valid(data) {
				t.Fatalf("tail body %q", body)
			}
		}
	})
}

func TestWriteAfterClose(t *testing.T) {
	dir := t.TempDir()
	b := New(Config{Max: 10, SpoolDir: dir})
	b.Write([]byte("0123456789"))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Write([]byte("abc")); n != 3 || err != nil {
		t.Fatalf("Write after Close = %d, %v", n, err)
	}
	out := b.Result()
	if !out.Truncated || out.Total != 13 || out.SpoolFile != "" {
		t.Fatalf("%+v", out)
	}
	if files, _ := os.ReadDir(dir); len(files) != 0 {
		t.Fatalf("spool created after Close: %v", files)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// render is what a Buffer with cfg shows after being given all of data.
func renderOut(cfg Config, data []byte) Output {
	b := New(cfg)
	b.Write(data)
	out := b.Result()
	b.Close()
	return out
}

// Since returns every byte exactly once across calls while the output
// fits its window, holds back a split UTF-8 sequence, and skips (saying
// how much) what it cannot return.
func TestSince(t *testing.T) {
	b := New(Config{Max: 1000, SpoolCap: -1})
	var got strings.Builder
	var off int64
	for _, p := range []string{"hello ", "w\xc3", "\xb6rld\n", "line two\n"} {
		b.Write([]byte(p))
		text, skipped, next := b.Since(off, 1<<10)
		if skipped != 0 {
			t.Fatalf("skipped %d", skipped)
		}
		got.WriteString(text)
		off = next
	}
	if got.String() != "hello wörld\nline two\n" {
		t.Fatalf("%q", got.String())
	}
	// At most max bytes: the latest, with the rest counted.
	text, skipped, next := b.Since(0, 5)
	if text != " two\n" || skipped != int64(len("hello wörld\nline")) || next != b.Total() {
		t.Fatalf("%q %d %d", text, skipped, next)
	}
	// Past the limit only the recent window is kept.
	big := New(Config{Max: 100, Head: 10, Tail: 50, SpoolCap: -1})
	big.Write([]byte(strings.Repeat("a", 10000) + "end\n"))
	text, skipped, _ = big.Since(0, 1<<20)
	if !strings.HasSuffix(text, "end\n") || skipped == 0 || int64(len(text))+skipped != big.Total() {
		t.Fatalf("%d bytes, skipped %d of %d", len(text), skipped, big.Total())
	}
	if text, skipped, next := big.Since(big.Total(), 10); text != "" || skipped != 0 || next != big.Total() {
		t.Fatalf("nothing new: %q %d %d", text, skipped, next)
	}
}

// The middle strategy's budget is steady: the text shown grows with the
// output up to Max and stays there (a longer output is never shown
// shorter than a shorter one), and the header says what is shown.
func TestMiddleSteadyBudget(t *testing.T) {
	prev := 0
	for _, n := range []int{DefaultMax - 1, DefaultMax, DefaultMax + 1, DefaultMax + 4096, 164 << 10, 1 << 20} {
		data := bytes.Repeat([]byte("x"), n)
		out := resultOf(t, Config{}, data, 0)
		shown := len(out.Text)
		if out.Truncated {
			h, tl := sections(t, out.Text)
			shown = len(h) + len(tl)
			if !strings.HasPrefix(out.Text, "[output truncated in middle: got "+Humanize(int64(n))+", showing the first 32 KiB and the last 96 KiB]\n") {
				t.Fatalf("n=%d: header %q", n, out.Text[:100])
			}
		}
		if shown < prev || shown > DefaultMax {
			t.Fatalf("n=%d: %d bytes shown after %d (max %d)", n, shown, prev, DefaultMax)
		}
		prev = shown
	}
}

// TestTailStartsAtSequenceBoundary: a tail whose kept bytes begin inside
// a multi-byte character (its first bytes dropped from the ring) starts at
// the next character, as the whole output read cleanly ends (found by
// internal/props' TestTruncation, seed 15553722030548820001): before, the
// character's last bytes showed as a U+FFFD the output does not have.
func TestTailStartsAtSequenceBoundary(t *testing.T) {
	data := append([]byte(strings.Repeat("€", 4)), bytes.Repeat([]byte{0x80}, 22)...)
	b := New(Config{Strategy: config.TruncateTail, Max: 8, Head: 1, Tail: 1})
	if _, err := b.Write(data); err != nil {
		t.Fatal(err)
	}
	out := b.Result()
	clean := strings.ToValidUTF8(string(data), "\uFFFD")
	body := out.Text[strings.Index(out.Text, "]\n")+2:]
	if !out.Truncated || !strings.HasSuffix(clean, body) || body == "" {
		t.Fatalf("tail %q of %q, want a suffix of %q", out.Text, data, clean)
	}
}
