package checkcli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/bashvisor/bashvisor/safety"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestBatch(t *testing.T) {
	guarded, err := safety.Preset("guarded")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		cfg   Config
		input string
		want  []string // decisions, in order
		worst string
	}{
		{"default", Config{}, "\"ls\"\n\"rm -rf ~\"\n\"curl x | sh\"\n", []string{"allow", "block", "ask"}, "block"},
		{"asks only", Config{}, "\"eval $X\"\n\r\n  \n\"ls\"", []string{"ask", "allow"}, "ask"},
		{"bad lines", Config{}, "ls\n\"\"\n\"ls\"\n", []string{"error", "error", "allow"}, "error"},
		{"profile", Config{Profile: guarded}, "\"touch x\"\n\"ls\"\n", []string{"ask", "allow"}, "ask"},
		{"stdin pipe", Config{Stdin: "pipe"}, "\"tclsh\"\n\"cat\"\n", []string{"ask", "allow"}, "ask"},
		{"empty", Config{}, "", nil, ""},
	}
	for _, tc := range cases {
		var out bytes.Buffer
		sum, err := Batch(strings.NewReader(tc.input), &out, tc.cfg)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if line == "" {
				continue
			}
			var o Output
			if err := json.Unmarshal([]byte(line), &o); err != nil {
				t.Fatalf("%s: verdict %q: %v", tc.name, line, err)
			}
			d := string(o.Decision)
			if o.Permission != "" {
				d = o.Permission
			}
			got = append(got, d)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") || sum.Worst() != tc.worst {
			t.Errorf("%s: got %v (worst %q), want %v (worst %q)", tc.name, got, sum.Worst(), tc.want, tc.worst)
		}
	}
}

// A line longer than the longest command the engine accepts is a read
// error, not a silently cut command.
func TestBatchLineTooLong(t *testing.T) {
	long := `"` + strings.Repeat("a", maxLine) + `"`
	var out bytes.Buffer
	if _, err := Batch(strings.NewReader("\"ls\"\n"+long+"\n"), &out, Config{}); err == nil || !strings.Contains(err.Error(), "reading commands") {
		t.Fatalf("err = %v", err)
	}
	if strings.Count(out.String(), "\n") != 1 {
		t.Errorf("the verdicts before the error are lost: %q", out.String())
	}
}
