package secret

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestRedactorString(t *testing.T) {
	r := NewRedactor(map[string]string{
		"GH_TOKEN":   "ghp_0123456789",
		"GITHUB_PAT": "ghp_0123456789", // duplicate value: reported as GH_TOKEN (sorted first)
		"SHORT":      "1234567",        // below MinLen: ignored
		"B_LONG":     "abcdefgh-ijkl",
		"A_PREFIX":   "abcdefgh", // a prefix of B_LONG, sorted first: the longer match still wins
		"EMPTY":      "",
	})
	if r.Len() != 3 {
		t.Fatalf("Len = %d, want 3", r.Len())
	}
	cases := []struct{ in, want string }{
		{"", ""},
		{"nothing here 1234567", "nothing here 1234567"},
		{"token=ghp_0123456789.", "token=[REDACTED:GH_TOKEN]."},
		{"ghp_0123456789ghp_0123456789", "[REDACTED:GH_TOKEN][REDACTED:GH_TOKEN]"},
		{"x abcdefgh-ijkl y", "x [REDACTED:B_LONG] y"},
		{"x abcdefgh-ijk y", "x [REDACTED:A_PREFIX]-ijk y"},
		{"abcdefghabcdefgh-ijkl", "[REDACTED:A_PREFIX][REDACTED:B_LONG]"},
	}
	for _, tc := range cases {
		if got := r.String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := string(r.Bytes([]byte(tc.in))); got != tc.want {
			t.Errorf("Bytes(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := streamAll(r, tc.in, 1); got != tc.want {
			t.Errorf("byte-wise stream of %q = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRedactorOverlap(t *testing.T) {
	// Leftmost wins over longest: "xxsecret-aa" starts earlier.
	r := NewRedactor(map[string]string{"A": "xxsecret-aa", "B": "secret-aa-bbbbbb"})
	if got := r.String("__xxsecret-aa-bbbbbb"); got != "__[REDACTED:A]-bbbbbb" {
		t.Errorf("got %q", got)
	}
	if got := streamAll(r, "__xxsecret-aa-bbbbbb", 3); got != "__[REDACTED:A]-bbbbbb" {
		t.Errorf("stream got %q", got)
	}
}

func TestRedactorNil(t *testing.T) {
	var r *Redactor
	if r.Len() != 0 || r.String("abcdefghij") != "abcdefghij" || string(r.Bytes([]byte("x"))) != "x" {
		t.Fatal("nil Redactor changed its input")
	}
	var b bytes.Buffer
	w := r.Writer(&b)
	w.Write([]byte("abc"))
	if b.String() != "abc" {
		t.Fatalf("nil Redactor's writer held data back: %q", b.String())
	}
	if err := w.Close(); err != nil || b.String() != "abc" {
		t.Fatalf("Close: %v, %q", err, b.String())
	}
}

// TestStreamHoldsOnlyPrefixes: a StreamWriter holds back only what may
// begin a value, so a progress reader sees complete lines at once.
func TestStreamHoldsOnlyPrefixes(t *testing.T) {
	r := NewRedactor(map[string]string{"K": "s3cr3t-value"})
	var b bytes.Buffer
	w := r.Writer(&b)
	w.Write([]byte("line one\n"))
	if b.String() != "line one\n" {
		t.Fatalf("held back a line that cannot begin a value: %q", b.String())
	}
	w.Write([]byte("two s3cr3t"))
	if b.String() != "line one\ntwo " {
		t.Fatalf("wrote %q, want the undecided prefix held", b.String())
	}
	w.Write([]byte("-value!"))
	if b.String() != "line one\ntwo [REDACTED:K]!" {
		t.Fatalf("wrote %q", b.String())
	}
	w.Write([]byte(" s3c"))
	w.Close()
	if b.String() != "line one\ntwo [REDACTED:K]! s3c" {
		t.Fatalf("Close did not flush the tail: %q", b.String())
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("disk full")
	}
	f.n--
	return len(p), nil
}

func TestStreamError(t *testing.T) {
	r := NewRedactor(map[string]string{"K": "s3cr3t-value"})
	w := r.Writer(&failWriter{n: 1})
	if _, err := w.Write([]byte("a s3cr3t-value b")); err == nil {
		t.Fatal("no error")
	}
	if _, err := w.Write([]byte("x")); err == nil {
		t.Fatal("error not sticky")
	}
	if err := w.Close(); err == nil {
		t.Fatal("Close: error not sticky")
	}
}

// streamAll writes s in chunks of n bytes and closes.
func streamAll(r *Redactor, s string, n int) string {
	var b bytes.Buffer
	w := r.Writer(&b)
	for len(s) > 0 {
		k := min(n, len(s))
		w.Write([]byte(s[:k]))
		s = s[k:]
	}
	w.Close()
	return b.String()
}

// TestStreamEqualsOneShot: for any secrets, any text and any split of it
// into writes, the stream's output is the one-shot output, and no secret
// value survives in it.
func TestStreamEqualsOneShot(t *testing.T) {
	alphabet := rapid.SampledFrom([]byte("ab-\n"))
	value := rapid.Custom(func(t *rapid.T) string {
		return string(rapid.SliceOfN(alphabet, 6, 12).Draw(t, "value"))
	})
	rapid.Check(t, func(t *rapid.T) {
		secrets := rapid.MapOfN(rapid.StringMatching(`[A-Z]{1,3}`), value, 0, 5).Draw(t, "secrets")
		r := NewRedactor(secrets)
		// Text: pieces of values and noise, so matches, overlaps and
		// near misses are frequent.
		var vals []string
		for _, v := range secrets {
			vals = append(vals, v)
		}
		var sb strings.Builder
		for range rapid.IntRange(0, 30).Draw(t, "pieces") {
			if len(vals) > 0 && rapid.Bool().Draw(t, "isValue") {
				v := rapid.SampledFrom(vals).Draw(t, "v")
				cut := rapid.IntRange(0, len(v)).Draw(t, "cut")
				sb.WriteString(v[:cut])
				if rapid.Bool().Draw(t, "whole") {
					sb.WriteString(v[cut:])
				}
				continue
			}
			sb.Write(rapid.SliceOfN(alphabet, 0, 4).Draw(t, "noise"))
		}
		text := sb.String()
		want := r.String(text)
		var b bytes.Buffer
		w := r.Writer(&b)
		rest := text
		for len(rest) > 0 {
			k := rapid.IntRange(0, len(rest)).Draw(t, "chunk")
			if n, err := w.Write([]byte(rest[:k])); n != k || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
			rest = rest[k:]
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if b.String() != want {
			t.Fatalf("stream %q != one-shot %q (text %q)", b.String(), want, text)
		}
		// No value survives: remove the markers, then look for values.
		// (A marker's name is upper-case, values are not.)
		for _, v := range secrets {
			if len(v) >= MinLen && strings.Contains(want, v) {
				t.Fatalf("value %q survived in %q", v, want)
			}
		}
	})
}
