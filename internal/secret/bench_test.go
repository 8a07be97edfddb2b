package secret

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// sink copies what it is given, like the output buffer the engine writes
// into (a memmove per write).
type sink struct{ buf []byte }

func (s *sink) Write(p []byte) (int, error) {
	s.buf = append(s.buf[:0], p...)
	return len(p), nil
}

// benchText is 1 MiB of build-log-like text: words, paths, hex ids and
// token-like strings, with no secret in it.
func benchText() []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"ok", "PASS", "FAIL", "--- RUN", "github.com/x/y", "/usr/lib/go/src/", "error:", "warning:",
		"0x7ffd", "sk-", "ghp_", "AKIA", "=", "\n", "\n", " ", " ", " ", "build", "test", "main.go:42"}
	var b strings.Builder
	for b.Len() < 1<<20 {
		b.WriteString(words[rng.IntN(len(words))])
		if rng.IntN(8) == 0 {
			fmt.Fprintf(&b, "%x", rng.Uint64())
		}
	}
	return []byte(b.String()[:1<<20])
}

// benchSecrets returns n token-like secrets of 40 bytes.
func benchSecrets(n int) map[string]string {
	rng := rand.New(rand.NewPCG(3, 4))
	const chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	m := map[string]string{}
	for i := range n {
		var b strings.Builder
		b.WriteString([]string{"ghp_", "sk-ant-", "AKIA", "xoxb-"}[i%4])
		for b.Len() < 40 {
			b.WriteByte(chars[rng.IntN(len(chars))])
		}
		m[fmt.Sprintf("SECRET_%d", i)] = b.String()
	}
	return m
}

// BenchmarkCopy writes 64 KiB chunks (the engine's read size) into a sink:
// plainly, and through a StreamWriter with 0, 1, 5 and 20 secrets. Run
// with -benchtime=16384x for 1 GiB per case.
func BenchmarkCopy(b *testing.B) {
	text := benchText()
	const chunk = 64 << 10
	run := func(b *testing.B, w interface{ Write([]byte) (int, error) }) {
		b.SetBytes(chunk)
		off := 0
		for b.Loop() {
			w.Write(text[off : off+chunk])
			off = (off + chunk) % len(text)
		}
	}
	b.Run("plain", func(b *testing.B) { run(b, &sink{}) })
	for _, n := range []int{0, 1, 5, 20} {
		b.Run(fmt.Sprintf("redact-%d", n), func(b *testing.B) {
			run(b, NewRedactor(benchSecrets(n)).Writer(&sink{}))
		})
	}
	// A secret printed every ~4 KiB.
	b.Run("redact-5-matches", func(b *testing.B) {
		secrets := benchSecrets(5)
		v := secrets["SECRET_0"]
		t := []byte(string(text))
		for i := 4096; i+len(v) < len(t); i += 4096 {
			copy(t[i:], v)
		}
		text = t
		run(b, NewRedactor(secrets).Writer(&sink{}))
	})
}
