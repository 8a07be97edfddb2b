package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/engine"
)

func TestRunExitCodes(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"-C", dir, "--", "echo", "hi"}, 0, "hi\n"},
		{[]string{"-C", dir, "exit 3"}, 3, "[command failed: exit code 3]\n"},
		{[]string{"-C", dir, "-timeout", "200ms", "-grace", "100ms", "echo part; sleep 5"}, exitTimeout, "[command timed out after 200ms]\npart\n"},
		{[]string{"-C", dir, "git push --force origin main"}, exitBlocked, "[command blocked: "},
		{[]string{"-C", dir + "/missing", "true"}, exitSystem, "[error: working directory does not exist: "},
		{[]string{"-C", dir, "-mode", "warp", "true"}, exitSystem, "[error: bad input: unknown mode"},
		{[]string{"-C", dir}, exitUsage, ""},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := cmdRun(c.args, &stdout, &stderr)
		if code != c.code || !strings.HasPrefix(stdout.String(), c.out) {
			t.Errorf("run %q: exit %d stdout %q stderr %q; want exit %d and %q", c.args, code, stdout.String(), stderr.String(), c.code, c.out)
		}
	}
}

func TestRunJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := cmdRun([]string{"-C", t.TempDir(), "-json", "echo out; exit 2"}, &stdout, &stderr); code != 2 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var r map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"status": "failed", "exit_code": 2.0, "output": "[command failed: exit code 2]\nout\n", "truncated": false, "output_bytes": 4.0} {
		if r[k] != want {
			t.Errorf("%s = %v, want %v", k, r[k], want)
		}
	}
	for _, k := range []string{"duration_ms", "command", "display"} {
		if _, ok := r[k]; !ok {
			t.Errorf("field %s missing", k)
		}
	}
}

func TestSchema(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := cmdSchema([]string{"-C", "/work/x"}, &stdout, &stderr); code != 0 {
		t.Fatal(stderr.String())
	}
	var s struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	if s.Name != "bash" || !strings.HasSuffix(s.Description, "<pwd>/work/x</pwd>") || !json.Valid(s.InputSchema) ||
		!bytes.Contains(s.InputSchema, []byte(`"enum"`)) {
		t.Fatalf("%+v", s)
	}
	_ = engine.InputSchema
}

func TestTour(t *testing.T) {
	if testing.Short() {
		t.Skip("the tour takes a few seconds")
	}
	var stdout, stderr bytes.Buffer
	if code := cmdTour(nil, &stdout, &stderr); code != 0 {
		t.Fatalf("tour exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"status ok", "status failed, exit 2", "status timed_out", "truncated true", "killed processes left running", "SIGKILL", "[background process completed]", "engine shut down",
		"[command cancelled]", "status blocked", "write denied", "network denied", "scratch ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("tour output lacks %q", want)
		}
	}
}
