// Package checkcli is the check command of bashvisor's command lines
// (demo check, and the product CLI's check): a command's analysis, never
// its execution, one at a time or a batch read from a stream.
package checkcli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/safety"
)

// Config is what an analysis depends on besides the command.
type Config struct {
	// Profile is the permission profile evaluated after the safety rules;
	// nil: none.
	Profile *safety.Profile
	// Dir is the working directory for the display form; "": no display
	// form in the output.
	Dir string
	// Stdin is how the command's stdin would be given, as engine.Input
	// has it: "" or "null" (nothing), "pipe" (input sent later) or "tty"
	// (a terminal). With pipe and tty, programs that may run code they
	// read ask (see safety.Options.StdinFed).
	Stdin string
}

// Output is one verdict, the JSON form of check: the safety verdict, the
// display form (with Config.Dir) and, when the profile overrides the
// verdict (deny or ask), its decision and the pattern that decided. Bad
// input (what the engine refuses before any analysis: an empty command,
// NUL bytes, ...) is decision "error" with the reason.
type Output struct {
	safety.Verdict
	Display    string `json:"display,omitempty"`
	Permission string `json:"permission,omitempty"`
	PermRule   string `json:"permission_rule,omitempty"`
}

// Check analyses one command. The outcome is what the engine would act on;
// err is non-nil (and out the "error" verdict) for bad input.
func Check(command string, cfg Config) (out Output, o safety.Outcome, err error) {
	if err := engine.ValidateInput(engine.Input{Command: command}); err != nil {
		return Output{Verdict: safety.Verdict{Decision: "error", Reason: err.Error()}}, o, err
	}
	a := safety.Analyze(command, safety.Options{WorkDir: cfg.Dir, Profile: cfg.Profile,
		StdinFed: cfg.Stdin == "pipe" || cfg.Stdin == "tty", Terminal: cfg.Stdin == "tty"})
	o = a.Outcome
	out = Output{Verdict: o.Verdict}
	if cfg.Dir != "" {
		out.Display = a.Display
	}
	if cfg.Profile != nil && o.Decision != o.Verdict.Decision {
		out.Permission = string(o.Decision)
		out.PermRule = o.Rule
	}
	return out, o, nil
}

// Summary counts a batch's answers.
type Summary struct {
	Allow, Block, Deny, Ask, Error int
}

// Worst returns the most severe decision of a batch: block or deny over
// ask, ask over an error, an error over allow ("" for an empty batch).
func (s Summary) Worst() string {
	switch {
	case s.Block > 0:
		return string(safety.Block)
	case s.Deny > 0:
		return string(safety.Deny)
	case s.Ask > 0:
		return string(safety.Ask)
	case s.Error > 0:
		return "error"
	case s.Allow > 0:
		return string(safety.Allow)
	}
	return ""
}

// maxLine bounds one input line: a command of engine.MaxCommandBytes,
// JSON-escaped (at most 6 bytes a byte), and its quotes.
const maxLine = 6*engine.MaxCommandBytes + 2

// Batch reads commands from r, each a JSON string on its own line
// ("ls -la"), and writes one JSON verdict (Output) per line to w, in
// order, so that a harness or CI can vet a corpus in one process. Blank
// lines are skipped. A line that is not a JSON string gets an "error"
// verdict naming the line; the batch goes on. The error returned is a
// read or write error.
func Batch(r io.Reader, w io.Writer, cfg Config) (Summary, error) {
	var sum Summary
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(trimSpace(line)) == 0 {
			continue
		}
		var command string
		var out Output
		var o safety.Outcome
		if err := jsonString(line, &command); err != nil {
			out = Output{Verdict: safety.Verdict{Decision: "error",
				Reason: fmt.Sprintf("line %d: not a JSON string: %v", n, err)}}
		} else {
			out, o, _ = Check(command, cfg)
		}
		switch {
		case out.Decision == "error":
			sum.Error++
		case o.Decision == safety.Block:
			sum.Block++
		case o.Decision == safety.Deny:
			sum.Deny++
		case o.Decision == safety.Ask:
			sum.Ask++
		default:
			sum.Allow++
		}
		if err := enc.Encode(out); err != nil {
			return sum, fmt.Errorf("writing verdicts: %w", err)
		}
	}
	if err := sc.Err(); err != nil {
		bw.Flush()
		return sum, fmt.Errorf("reading commands: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return sum, fmt.Errorf("writing verdicts: %w", err)
	}
	return sum, nil
}

// jsonString decodes line, a JSON string, into s as json.Unmarshal does.
// A line that is only a quoted string with escapes other than surrogate
// pairs and valid UTF-8 (what jq -c and json.Marshal write) is decoded
// directly: for a
// 10 KB command, encoding/json's validation and decoding cost several
// times the command's analysis. Anything else goes to json.Unmarshal.
func jsonString(line []byte, s *string) error {
	if n := len(line); n >= 2 && line[0] == '"' && line[n-1] == '"' {
		b := make([]byte, 0, n-2)
		ascii := true
		for i := 1; i < n-1; i++ {
			c := line[i]
			switch {
			case c == '\\' && i+1 < n-1:
				i++
				if line[i] == 'u' && i+5 < n {
					r, err := strconv.ParseUint(string(line[i+1:i+5]), 16, 16)
					if err != nil || utf16.IsSurrogate(rune(r)) {
						return json.Unmarshal(line, s) // not JSON, or a surrogate pair
					}
					b, i = utf8.AppendRune(b, rune(r)), i+4
					continue
				}
				e := strings.IndexByte(`"\/bfnrt`, line[i])
				if e < 0 {
					return json.Unmarshal(line, s) // not JSON: its error
				}
				b = append(b, "\"\\/\b\f\n\r\t"[e])
			case c == '"' || c == '\\' || c < 0x20:
				return json.Unmarshal(line, s) // not JSON: its error
			default:
				ascii = ascii && c < utf8.RuneSelf
				b = append(b, c)
			}
		}
		if ascii || utf8.Valid(b) {
			*s = string(b)
			return nil
		}
	}
	return json.Unmarshal(line, s)
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
