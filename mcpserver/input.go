package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

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

var modes = []engine.Mode{engine.ModeDefault, engine.ModeSlow, engine.ModeBackground}

// parseBashInput decodes and checks the bash tool's arguments. On error the
// returned Input holds what could be decoded (the command cut to 1 KiB),
// for the error result.
func parseBashInput(raw json.RawMessage, maxBytes int) (engine.Input, error) {
	var in engine.Input
	m, err := decodeObject(raw, "command", "mode")
	if err != nil {
		return in, err
	}
	cmd, present, err := stringField(m, "command")
	if err != nil {
		return in, err
	}
	if !present {
		return in, errors.New(`missing required field "command" (a string of shell code to run with bash -c)`)
	}
	if len(cmd) > maxBytes {
		in.Command = clip(cmd, 1024)
		return in, fmt.Errorf("command is %s, more than the limit of %s (%d bytes); write long scripts to a file in smaller pieces and run the file",
			humanBytes(int64(len(cmd))), humanBytes(int64(maxBytes)), maxBytes)
	}
	in.Command = cmd
	if i := strings.IndexByte(cmd, 0); i >= 0 {
		return in, fmt.Errorf("command contains a NUL byte (at byte %d); bash cannot receive NUL bytes in a command, use printf '\\0' to produce one", i)
	}
	if strings.TrimSpace(cmd) == "" {
		return in, errors.New(`field "command" is empty`)
	}
	mode, present, err := stringField(m, "mode")
	if err != nil {
		return in, err
	}
	if present && mode != "" {
		in.Mode = engine.Mode(mode)
		if !slices.Contains(modes, in.Mode) {
			return in, fmt.Errorf(`field "mode" must be one of "default", "slow" or "background", got %q`, clip(mode, 64))
		}
	}
	return in, nil
}

// clip cuts s to at most n bytes on a UTF-8 boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// parseNoArgs checks bash_jobs's (empty) arguments.
func parseNoArgs(raw json.RawMessage) error {
	_, err := decodeObject(raw)
	return err
}

// parseJobID decodes bash_kill's arguments.
func parseJobID(raw json.RawMessage) (string, error) {
	m, err := decodeObject(raw, "job_id")
	if err != nil {
		return "", err
	}
	return jobIDField(m)
}

func jobIDField(m map[string]json.RawMessage) (string, error) {
	id, present, err := stringField(m, "job_id")
	if err != nil {
		return "", err
	}
	if !present || id == "" {
		return "", errors.New(`missing required field "job_id" (the job_id of a background result; bash_jobs lists them)`)
	}
	return id, nil
}

// outputArgs are bash_output's decoded arguments, ready for
// engine.JobOutput.
type outputArgs struct {
	jobID               string
	tail, offset, limit int64
}

func parseOutputArgs(raw json.RawMessage) (outputArgs, error) {
	var a outputArgs
	m, err := decodeObject(raw, "job_id", "tail_bytes", "offset", "limit")
	if err != nil {
		return a, err
	}
	if a.jobID, err = jobIDField(m); err != nil {
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
		a.offset = offset
		a.limit = limit
		if a.limit == 0 || a.limit > maxReadBytes {
			a.limit = maxReadBytes
		}
	default:
		a.tail = DefaultTailBytes
	}
	return a, nil
}
