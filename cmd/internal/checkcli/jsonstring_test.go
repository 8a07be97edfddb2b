package checkcli

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// jsonString decodes every line as json.Unmarshal does: the same string,
// an error exactly when it errs. Lines: hand-picked edge cases, the JSON
// encoding of random strings (escapes, control bytes, invalid UTF-8,
// non-ASCII), and random bytes between quotes.
func TestJSONStringAsUnmarshal(t *testing.T) {
	lines := []string{
		`""`, `"a"`, `"a\"b"`, `"a\\"`, `"a\\\"b"`, `"\/\b\f\n\r\t"`, `"\u00e9\u2028"`, `"\ud83d\ude00"`,
		`"\x"`, `"a\"`, `"a"b"`, "\"a\tb\"", "\"a\nb\"", `"é"`, "\"\xff\"", "\"\xc3\"", ` "a"`, `"a" `,
		`"a`, `a"`, `"`, `''`, `null`, `1`, `["a"]`, `"\\u0041"`, `"\u0041"`, "\"\x7f\"", `"\\\\"`,
		`"\u003e x \u0026"`, `"\uDE00"`, `"\uD83D"`, `"\u12"`, `"\u12G4"`, `"\u+123"`, `"\u-123"`, `"\u"`, `"\u0000"`, `"\uFFFF"`,
	}
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "ab\\\"/\n\t\x00\x1f\x7f\xc3\xa9\xff u0eD8F"
	for range 5000 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		enc, _ := json.Marshal(string(b))
		lines = append(lines, string(enc), `"`+string(b)+`"`)
	}
	const hex = "0123456789abcdefABCDEF"
	for range 3000 { // \uXXXX escapes among plain bytes
		b := []byte{'"'}
		for range r.IntN(6) {
			b = append(b, 'x', '\\', 'u')
			for range 4 {
				b = append(b, hex[r.IntN(len(hex))])
			}
		}
		lines = append(lines, string(append(b, '"')))
	}
	for _, line := range lines {
		var got, want string
		gotErr, wantErr := jsonString([]byte(line), &got), json.Unmarshal([]byte(line), &want)
		if (gotErr != nil) != (wantErr != nil) || got != want {
			t.Errorf("%q: %q, %v; json.Unmarshal: %q, %v", line, got, gotErr, want, wantErr)
		}
	}
}
