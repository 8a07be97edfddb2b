package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/engine"
)

func TestRunExitCodes(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		args   []string
		code   int
		stdout string // prefix
		stderr string // prefix
	}{
		{[]string{"-C", dir, "--", "echo", "hi"}, 0, "hi\n", ""},
		{[]string{"-C", dir, "exit 3"}, 3, "[command failed: exit code 3]\n", ""},
		{[]string{"-C", dir, "-timeout", "200ms", "-grace", "100ms", "echo part; sleep 5"}, exitTimeout, "[command timed out after 200ms]\npart\n", ""},
		{[]string{"-C", dir, "git push --force origin main"}, exitBlocked, "[command blocked: ", ""},
		// Errors of the CLI itself: on stderr, in a CLI's words.
		{[]string{"-C", dir + "/missing", "true"}, exitSystem, "", "demo run: -C: stat " + dir + "/missing: no such file or directory\n"},
		{[]string{"-C", dir, "-mode", "warp", "true"}, exitSystem, "", `demo run: bad input: unknown mode "warp" (want default, slow or background)` + "\n"},
		{[]string{"-C", dir, "--", ""}, exitSystem, "", "demo run: bad input: command is empty\n"},
		// One argument cannot hold it (nor could bash's); two joined by a space can.
		{[]string{"-C", dir, strings.Repeat("x", 1<<16), strings.Repeat("x", engine.MaxCommandBytes-1<<16)}, exitSystem, "",
			"demo run: bad input: command is 128.0 KiB (131072 bytes), over the limit of 131071 bytes"},
	}
	for _, c := range cases {
		r := demo(t, nil, append([]string{"run"}, c.args...)...)
		if r.code != c.code || !strings.HasPrefix(r.stdout, c.stdout) || (c.stdout == "") != (r.stdout == "") ||
			!strings.HasPrefix(r.stderr, c.stderr) || (c.stderr == "") != (r.stderr == "") {
			t.Errorf("run %.80q: %v\nwant exit %d, stdout %q, stderr %q", c.args, r, c.code, c.stdout, c.stderr)
		}
		if strings.Contains(r.stdout+r.stderr, "conversation may need to be recreated") {
			t.Errorf("run %q speaks to an agent: %v", c.args, r)
		}
	}
}

// TestRunLimits: -memory, -cpu-time and -pids set the command's limits.
func TestRunLimits(t *testing.T) {
	dir := t.TempDir()
	r := demo(t, nil, "run", "-C", dir, "-json", "-cpu-time", "300ms", "-pids", "64", "-memory", "1GiB", "while :; do :; done")
	var res engine.Result
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatal(r, err)
	}
	if res.Status != engine.StatusFailed || res.CPUMS < 300 ||
		!strings.HasPrefix(res.Output, "[command failed: CPU time limit exceeded (limit 300ms") {
		t.Fatalf("%+v", res)
	}
	for _, bad := range [][]string{{"-memory", "lots"}, {"-cpu-time", "-1s"}} {
		if r := demo(t, nil, append(append([]string{"run", "-C", dir}, bad...), "true")...); r.code != exitUsage || !strings.Contains(r.stderr, bad[0]) {
			t.Errorf("run %q: %v", bad, r)
		}
	}
}

func TestRunJSON(t *testing.T) {
	r := demo(t, nil, "run", "-C", t.TempDir(), "-json", "echo out; exit 2")
	if r.code != 2 {
		t.Fatal(r)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"status": "failed", "exit_code": 2.0, "output": "[command failed: exit code 2]\nout\n", "truncated": false, "output_bytes": 4.0} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
	for _, k := range []string{"duration_ms", "command", "display"} {
		if _, ok := m[k]; !ok {
			t.Errorf("field %s missing", k)
		}
	}
	// With -json, a bad input is a result like any other.
	r = demo(t, nil, "run", "-C", t.TempDir(), "-json", "--", "")
	if r.code != exitSystem || !strings.Contains(r.stdout, `"status": "error"`) || !strings.Contains(r.stdout, "[error: bad input: command is empty]") {
		t.Errorf("run -json '': %v", r)
	}
}

// The complete output a truncated result names is still there after the
// CLI exits, and stderr says where; a result naming no file leaves
// nothing behind.
func TestRunKeepsWhatItNames(t *testing.T) {
	tmp := t.TempDir()
	env := []string{"TMPDIR=" + tmp}
	for _, args := range [][]string{{"run", "--", "seq 1 100000"}, {"run", "-json", "--", "seq 1 100000"}} {
		r := demo(t, env, args...)
		if r.code != 0 {
			t.Fatal(r)
		}
		m := regexp.MustCompile(`\[full output: (\S+)\]`).FindStringSubmatch(r.stdout)
		if len(args) == 3 && m == nil {
			t.Fatalf("no full output named: %v", r)
		}
		var file string
		if m != nil {
			file = m[1]
		} else {
			var res engine.Result
			if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
				t.Fatal(err)
			}
			file = res.FullOutputFile
		}
		fi, err := os.Stat(file)
		if err != nil || fi.Size() != 588895 {
			t.Errorf("%q: the full output file %s: %v %v", args, file, fi, err)
		}
		if !strings.HasPrefix(file, tmp+"/bashvisor-run-") || r.stderr != "demo run: the complete output (575.1 KiB) is kept in "+file+"; delete it when done\n" {
			t.Errorf("%q: file %s, stderr %q", args, file, r.stderr)
		}
		rel, _ := filepath.Rel(tmp, file) // bashvisor-run-*/conversation-*/output-*.log
		os.RemoveAll(filepath.Join(tmp, strings.SplitN(rel, "/", 2)[0]))
	}
	if r := demo(t, env, "run", "echo small"); r.code != 0 || r.stdout != "small\n" || r.stderr != "" {
		t.Fatal(r)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left behind in $TMPDIR: %v", left)
	}
}

func TestSchema(t *testing.T) {
	var s struct {
		Name         string          `json:"name"`
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"input_schema"`
		OutputSchema json.RawMessage `json:"output_schema"`
	}
	r := demo(t, nil, "schema", "-C", "/work/x", "-timeout", "7s")
	if r.code != 0 {
		t.Fatal(r)
	}
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatal(err)
	}
	if s.Name != "bash" || !strings.HasSuffix(s.Description, "<pwd>/work/x</pwd>") || !strings.Contains(s.Description, "stopped after 7s") ||
		!json.Valid(s.InputSchema) || !strings.Contains(string(s.InputSchema), `"enum"`) || s.OutputSchema != nil {
		t.Fatalf("%+v", s)
	}
	r = demo(t, nil, "schema", "-output")
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil || r.code != 0 {
		t.Fatal(r, err)
	}
	var out struct {
		Properties map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(s.OutputSchema, &out); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"status", "exit_code", "output", "truncated", "full_output_file", "job_id"} {
		if out.Properties[k] == nil {
			t.Errorf("output schema lacks %s: %s", k, s.OutputSchema)
		}
	}
}
