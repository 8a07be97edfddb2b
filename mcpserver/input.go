package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/bashvisor/bashvisor/engine"
)

// Arguments are decoded by hand rather than by schema validation so that
// every malformed call gets a message that tells the model what to fix.

// jsonType names the JSON type of a raw value for error messages.
func jsonType(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// decodeObject decodes tool arguments into their fields, rejecting anything
// but a JSON object and any field not in allowed.
func decodeObject(raw json.RawMessage, allowed ...string) (map[string]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]json.RawMessage{}, nil
	}
	if raw[0] != '{' {
		return nil, fmt.Errorf("arguments must be a JSON object, got %s", jsonType(raw))
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	for k := range m {
		if !slices.Contains(allowed, k) {
			if len(allowed) == 0 {
				return nil, fmt.Errorf("unknown field %q: the tool takes no arguments", k)
			}
			return nil, fmt.Errorf("unknown field %q: the tool accepts only %s", k, quoteList(allowed))
		}
	}
	return m, nil
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}

// stringField decodes m[name] as a string. present is false when the field
// is absent or null.
func stringField(m map[string]json.RawMessage, name string) (s string, present bool, err error) {
	raw, ok := m[name]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return "", false, nil
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", true, fmt.Errorf("field %q must be a string, got %s", name, jsonType(raw))
	}
	return s, true, nil
}

// intField decodes m[name] as a non-negative integer.
func intField(m map[string]json.RawMessage, name string) (n int64, present bool, err error) {
	raw, ok := m[name]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return 0, false, nil
	}
	var num json.Number
	if err := json.Unmarshal(raw, &num); err != nil || jsonType(raw) != "a number" {
		return 0, true, fmt.Errorf("field %q must be an integer, got %s", name, jsonType(raw))
	}
	n, err = num.Int64()
	if err != nil {
		return 0, true, fmt.Errorf("field %q must be an integer, got %s", name, num)
	}
	if n < 0 {
		return 0, true, fmt.Errorf("field %q must not be negative, got %d", name, n)
	}
	return n, true, nil
}

// parseBashInput decodes the bash tool's arguments and checks them with
// [engine.ValidateInput], the engine's own rules (empty command, longer
// than [engine.MaxCommandBytes], NUL bytes, unknown mode). Errors wrap
// [engine.ErrBadInput]. On error the returned Input holds what could be
// decoded (the command cut to 1 KiB), for the error result.
func parseBashInput(raw json.RawMessage) (engine.Input, error) {
	var in engine.Input
	m, err := decodeObject(raw, "command", "mode", "stdin", "tty", "yield_ms", "network")
	if err != nil {
		return in, fmt.Errorf("%w: %w", engine.ErrBadInput, err)
	}
	cmd, present, err := stringField(m, "command")
	if err != nil {
		return in, fmt.Errorf("%w: %w", engine.ErrBadInput, err)
	}
	if !present {
		return in, fmt.Errorf(`%w: missing required field "command" (a string of shell code to run with bash -c)`, engine.ErrBadInput)
	}
	in.Command = clip(cmd, 1024)
	if err := checkUnicode(m["command"]); err != nil {
		return in, fmt.Errorf("%w: command %w", engine.ErrBadInput, err)
	}
	mode, _, err := stringField(m, "mode")
	if err != nil {
		return in, fmt.Errorf("%w: %w", engine.ErrBadInput, err)
	}
	stdin, _, err := stringField(m, "stdin")
	if err != nil {
		return in, fmt.Errorf("%w: %w", engine.ErrBadInput, err)
	}
	tty, _, err := boolField(m, "tty")
	if err != nil {
		return in, fmt.Errorf("%w: %w", engine.ErrBadInput, err)
	}
	yield, hasYield, err := intField(m, "yield_ms")
	if err != nil {
		return in, fmt.Errorf("%w: %w", engine.ErrBadInput, err)
	}
	if hasYield && yield == 0 {
		return in, fmt.Errorf(`%w: field "yield_ms" must be at least 1`, engine.ErrBadInput)
	}
	network, err := stringsField(m, "network")
	if err != nil {
		return in, fmt.Errorf("%w: %w", engine.ErrBadInput, err)
	}
	full := engine.Input{Command: cmd, Mode: engine.Mode(mode), Stdin: stdin, TTY: tty, YieldMS: yield, Network: network}
	if err := engine.ValidateInput(full); err != nil {
		return in, err
	}
	return full, nil
}

// boolField decodes m[name] as a boolean.
// stringsField decodes m[name] as an array of at most 16 strings.
func stringsField(m map[string]json.RawMessage, name string) ([]string, error) {
	raw, ok := m[name]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	var v []string
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("field %q must be an array of strings, got %s", name, jsonType(raw))
	}
	if len(v) > 16 {
		return nil, fmt.Errorf("field %q has %d entries, at most 16", name, len(v))
	}
	return v, nil
}

func boolField(m map[string]json.RawMessage, name string) (b, present bool, err error) {
	raw, ok := m[name]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return false, false, nil
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, true, fmt.Errorf("field %q must be a boolean, got %s", name, jsonType(raw))
	}
	return b, true, nil
}

// checkUnicode checks a JSON string as it arrived, before decoding: the
// JSON decoder silently turns invalid UTF-8 and lone UTF-16 surrogate
// escapes ("\udc80", which JSON allows but no character is) into U+FFFD,
// so a command that was not valid text would run changed. Both are
// refused here. (A U+FFFD the client itself put in the text cannot be told
// apart from one it meant, and passes.)
func checkUnicode(raw json.RawMessage) error {
	if !utf8.Valid(raw) {
		return errors.New("is not valid UTF-8; send it as UTF-8 text")
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++ // the escaped character; only \uXXXX can encode a surrogate
		if i >= len(raw) || raw[i] != 'u' {
			continue
		}
		r, ok := hex4(raw, i+1)
		if !ok || !utf16.IsSurrogate(r) {
			continue
		}
		if r < 0xDC00 { // a high surrogate must be followed by a low one
			if lo, ok := hex4(raw, i+7); ok && i+6 < len(raw) && raw[i+5] == '\\' && raw[i+6] == 'u' && lo >= 0xDC00 && lo <= 0xDFFF {
				i += 10
				continue
			}
		}
		return fmt.Errorf("contains the escape \\u%04x, a lone UTF-16 surrogate that encodes no character (it would turn into U+FFFD); send valid UTF-8 text", r)
	}
	return nil
}

// hex4 decodes the four hex digits at raw[i:i+4].
func hex4(raw []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(raw) {
		return 0, false
	}
	var r rune
	for _, c := range raw[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// clip cuts s to at most n bytes on a UTF-8 boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// noArgs are bash_jobs's (empty) arguments.
type noArgs struct{}

// parseNoArgs checks bash_jobs's (empty) arguments.
func parseNoArgs(raw json.RawMessage) (noArgs, error) {
	_, err := decodeObject(raw)
	return noArgs{}, err
}

// jobArg names the job a tool acts on: the tool's opening looks it up
// (see [jobNamer]).
type jobArg struct{ jobID string }

func (a jobArg) job() string { return a.jobID }

// parseJobID decodes bash_kill's arguments.
func parseJobID(raw json.RawMessage) (jobArg, error) {
	m, err := decodeObject(raw, "job_id")
	if err != nil {
		return jobArg{}, err
	}
	id, err := jobIDField(m)
	return jobArg{id}, err
}

func jobIDField(m map[string]json.RawMessage) (string, error) {
	id, present, err := stringField(m, "job_id")
	if err != nil {
		return "", err
	}
	if !present {
		return "", errors.New(`missing required field "job_id" (the job_id of a background result; bash_jobs lists them)`)
	}
	if id == "" {
		return "", errors.New(`field "job_id" is empty (give the job_id of a background result; bash_jobs lists them)`)
	}
	return id, nil
}

// outputArgs are bash_output's decoded arguments, ready for
// engine.JobOutput.
type outputArgs struct {
	jobArg
	tail, offset, limit int64
	ranged              bool          // offset or limit given
	wait                time.Duration // wait_ms
}

func parseOutputArgs(raw json.RawMessage) (outputArgs, error) {
	var a outputArgs
	m, err := decodeObject(raw, "job_id", "tail_bytes", "offset", "limit", "wait_ms")
	if err != nil {
		return a, err
	}
	if a.jobID, err = jobIDField(m); err != nil {
		return a, err
	}
	if a.wait, err = waitField(m, "wait_ms", 0); err != nil {
		return a, err
	}
	tail, hasTail, err := intField(m, "tail_bytes")
	if err != nil {
		return a, err
	}
	offset, hasOffset, err := intField(m, "offset")
	if err != nil {
		return a, err
	}
	limit, hasLimit, err := intField(m, "limit")
	if err != nil {
		return a, err
	}
	if hasTail && (hasOffset || hasLimit) {
		return a, errors.New(`give either "tail_bytes" or "offset"/"limit", not both`)
	}
	switch {
	case hasTail:
		if tail == 0 {
			return a, errors.New(`field "tail_bytes" must be at least 1`)
		}
		a.tail = min(tail, maxReadBytes)
	case hasOffset || hasLimit:
		a.ranged = true
		a.offset = offset
		a.limit = limit
		if a.limit == 0 || a.limit > maxReadBytes {
			a.limit = maxReadBytes
		}
	default:
		a.tail = defaultTailBytes
	}
	return a, nil
}

// maxWait bounds the waits of bash_output and bash_write (wait_ms,
// yield_ms): as long as Engine.WaitOutput waits at most.
const maxWait = 30 * time.Second

// waitField decodes m[name] as milliseconds to wait, at most maxWait
// (longer waits are cut to it); def when absent.
func waitField(m map[string]json.RawMessage, name string, def time.Duration) (time.Duration, error) {
	ms, present, err := intField(m, name)
	if err != nil || !present {
		return def, err
	}
	return min(time.Duration(min(ms, 1<<40))*time.Millisecond, maxWait), nil
}

// writeArgs are bash_write's decoded arguments.
type writeArgs struct {
	jobArg
	input string
	close bool
	wait  time.Duration
}

// defaultWriteWait is how long bash_write waits for output after writing
// when the call gives no yield_ms.
const defaultWriteWait = 250 * time.Millisecond

func parseWriteArgs(raw json.RawMessage) (writeArgs, error) {
	var a writeArgs
	m, err := decodeObject(raw, "job_id", "input", "close", "yield_ms")
	if err != nil {
		return a, err
	}
	if a.jobID, err = jobIDField(m); err != nil {
		return a, err
	}
	var present bool
	if a.input, present, err = stringField(m, "input"); err != nil {
		return a, err
	}
	if err := checkUnicode(m["input"]); present && err != nil {
		return a, fmt.Errorf("input %w", err)
	}
	if a.close, _, err = boolField(m, "close"); err != nil {
		return a, err
	}
	if !present && !a.close {
		return a, errors.New(`give "input" (the bytes to send, e.g. "yes\n") or "close": true`)
	}
	if a.wait, err = waitField(m, "yield_ms", defaultWriteWait); err != nil {
		return a, err
	}
	return a, nil
}
