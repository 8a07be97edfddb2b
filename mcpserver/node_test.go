package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// The node side of the tests: the official MCP conformance suite and the
// official TypeScript SDK's client, pinned by testdata/node's
// package-lock.json and installed with `npm ci` into a cache directory
// named after the lock file (reused while the lock does not change).
// Without npm or the registry the tests skip, or fail when REQUIRE_TOOLS=1
// (CI).

var (
	nodeOnce sync.Once
	nodeDir  string
	nodeErr  error
)

// nodeTools returns the directory holding the installed node_modules.
func nodeTools(t *testing.T) string {
	t.Helper()
	testenv.NeedsTool(t, "npm")
	nodeOnce.Do(func() { nodeDir, nodeErr = installNodeTools() })
	testenv.Need(t, testenv.Tools, nodeErr)
	return nodeDir
}

func installNodeTools() (string, error) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", errors.New("npm not found")
	}
	lock, err := os.ReadFile("testdata/node/package-lock.json")
	if err != nil {
		return "", err
	}
	pkg, err := os.ReadFile("testdata/node/package.json")
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(append(pkg, lock...))
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "bashvisor-tests", "node-"+hex.EncodeToString(sum[:6]))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".bin", "conformance")); err == nil {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "install-")
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(filepath.Dir(dir), 0o755); err == nil {
			tmp, err = os.MkdirTemp(filepath.Dir(dir), "install-")
		}
	}
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	for name, data := range map[string][]byte{"package.json": pkg, "package-lock.json": lock} {
		if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
			return "", err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--fetch-retries=2")
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm ci: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, "node_modules", ".bin", "conformance")); serr == nil {
			return dir, nil // installed meanwhile by another test binary
		}
		return "", err
	}
	return dir, nil
}

// node runs a node program of dir with the node it installed (>= 22).
func node(t *testing.T, dir string, timeout time.Duration, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", "node"), args...)
	cmd.Dir = dir
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// conformanceFixture lists the conformance checks that need the suite's
// fixture server (its test_* tools, prompts and resources, or features
// this server does not offer): they fail against any other server.
// Every other check must pass.
var conformanceFixture = map[string]string{
	"completion-complete":                                    "no completions",
	"elicitation-sep1034-general":                            "fixture tool test_elicitation_sep1034_defaults",
	"elicitation-sep1330-general":                            "fixture tool test_elicitation_sep1330_enums",
	"json-schema-2020-12-tool-found":                         "fixture tool json_schema_2020_12_tool",
	"prompts-list":                                           "no prompts (the server refuses prompts/list, as it declares none)",
	"sep-2549-prompts-list-caching-hints":                    "no prompts",
	"resources-read-binary":                                  "fixture resource test://",
	"resources-read-text":                                    "fixture resource test://",
	"resources-templates-read":                               "fixture template test://",
	"resources-subscribe":                                    "no subscriptions",
	"resources-unsubscribe":                                  "no subscriptions",
	"sep-2575-server-rejects-undeclared-capability":          "fixture tool test_missing_capability",
	"sep-2575-missing-capability-http-400":                   "fixture tool test_missing_capability",
	"sep-2575-http-server-no-independent-requests-on-stream": "fixture tool test_streaming_elicitation",
	"sep-2575-server-no-log-without-loglevel":                "fixture tool test_logging_tool",
}

// conformanceFixturePrefixes are families of fixture checks.
var conformanceFixturePrefixes = []string{
	"tools-call-",  // fixture tools test_simple_text, test_image_content, ...
	"prompts-get-", // fixture prompts
	"sep-2243-server-",
	"sep-2322-", // fixture tools test_input_required_result_*
}

// The official MCP conformance suite, every server scenario at both
// protocol versions, against Handler on a loopback listener: sessions at
// 2025-11-25, stateless at 2026-07-28. Every check passes except those
// that need the suite's own fixture server.
func TestConformance(t *testing.T) {
	dir := nodeTools(t)
	s := newSessServer(t, nil, Options{}, HTTPOptions{NoAuth: true})
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			out := t.TempDir()
			stdout, stderr, err := node(t, dir, 5*time.Minute, "node_modules/.bin/conformance", "server",
				"--url", s.url, "--spec-version", version, "--suite", "all", "-o", out)
			t.Logf("conformance %s: exit %v\n%s", version, err, summary(stdout))
			if strings.TrimSpace(stdout) == "" {
				t.Fatalf("no output; stderr:\n%s", stderr)
			}
			files, _ := filepath.Glob(filepath.Join(out, "*", "checks.json"))
			passed, failed := 0, 0
			for _, f := range files {
				var checks []struct {
					ID, Status, ErrorMessage string
				}
				data, err := os.ReadFile(f)
				if err != nil || json.Unmarshal(data, &checks) != nil {
					t.Fatalf("%s: %v", f, err)
				}
				for _, c := range checks {
					switch c.Status {
					case "SUCCESS":
						passed++
					case "FAILURE":
						if _, ok := conformanceFixture[c.ID]; ok || slices.ContainsFunc(conformanceFixturePrefixes, func(p string) bool { return strings.HasPrefix(c.ID, p) }) {
							continue
						}
						failed++
						t.Errorf("%s: %s: %s", filepath.Base(filepath.Dir(f)), c.ID, c.ErrorMessage)
					}
				}
			}
			t.Logf("%d checks passed, %d failed (besides the fixture's)", passed, failed)
			if passed < 40 {
				t.Errorf("only %d checks passed in %d scenarios", passed, len(files))
			}
		})
	}
}

// summary is the conformance runner's summary section.
func summary(stdout string) string {
	if i := strings.Index(stdout, "=== SUMMARY ==="); i >= 0 {
		return stdout[i:]
	}
	return stdout
}

// tsResult is testdata/node/client.mjs's output.
type tsResult struct {
	ProtocolVersion string            `json:"protocolVersion"`
	SessionID       string            `json:"sessionId"`
	Results         []json.RawMessage `json:"results"`
}

// tsClient runs the TypeScript SDK's client as principal token (naming
// conversation conv when set) through ops, one session.
func tsClient(t *testing.T, dir, url, token, conv string, ops ...map[string]any) tsResult {
	t.Helper()
	script, err := filepath.Abs("testdata/node/client.mjs")
	if err != nil {
		t.Fatal(err)
	}
	// The script imports the SDK from dir's node_modules.
	local := filepath.Join(dir, "client.mjs")
	if data, err := os.ReadFile(script); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(local, data, 0o644); err != nil {
		t.Fatal(err)
	}
	opsJSON, _ := json.Marshal(ops)
	stdout, stderr, err := node(t, dir, time.Minute, local, url, token, conv, string(opsJSON))
	if err != nil {
		t.Fatalf("ts client: %v\n%s\n%s", err, stdout, stderr)
	}
	var r tsResult
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("ts client output %q: %v", stdout, err)
	}
	return r
}

// The official TypeScript SDK's client (sessions, protocol 2025-11-25)
// as two principals: each runs commands, jobs and resource reads; neither
// reaches the other's, by job id, URI, or the same conversation name.
func TestTypeScriptClient(t *testing.T) {
	dir := nodeTools(t)
	s := tenantServer(t, func(c *engine.Config) { c.Output.Max = 2000 }, Options{})
	type toolResult struct {
		Content []struct {
			Type, Text, URI string
		} `json:"content"`
		StructuredContent map[string]any `json:"structuredContent"`
		IsError           bool           `json:"isError"`
		Error             string         `json:"error"`
		Contents          []struct {
			Text string `json:"text"`
		} `json:"contents"`
		Resources []struct {
			URI string `json:"uri"`
		} `json:"resources"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	parse := func(raw json.RawMessage) toolResult {
		var r toolResult
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		return r
	}
	// alice, in her conversation "work" (it outlives her session).
	a := tsClient(t, dir, s.url, aliceToken, "work",
		map[string]any{"tools": true},
		map[string]any{"tool": toolBash, "args": map[string]any{"command": "echo hello from ts"}},
		map[string]any{"tool": toolBash, "args": map[string]any{"command": "echo alice-secret; sleep 300", "mode": "background"}},
		map[string]any{"tool": toolBash, "args": map[string]any{"command": "seq 1 20000"}},
	)
	if a.ProtocolVersion != "2025-11-25" || a.SessionID == "" || len(a.Results) != 4 {
		t.Fatalf("alice: %+v", a)
	}
	// Unrestricted commands change the workspace directly: no bash_undo.
	if r := parse(a.Results[0]); len(r.Tools) != 5 {
		t.Errorf("tools/list: %+v", r)
	}
	if r := parse(a.Results[1]); r.IsError || r.Content[0].Text != "hello from ts\n" {
		t.Errorf("echo: %+v", r)
	}
	job := parse(a.Results[2])
	big := parse(a.Results[3])
	if len(job.Content) != 2 || len(big.Content) != 2 || job.Content[1].Type != "resource_link" || big.Content[1].Type != "resource_link" {
		t.Fatalf("links: %+v %+v", job, big)
	}
	jobID, _ := job.StructuredContent["job_id"].(string)
	jobURI, fullURI := job.Content[1].URI, big.Content[1].URI
	waitFor := func() {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			r := parse(tsClient(t, dir, s.url, aliceToken, "work", map[string]any{"read": jobURI}).Results[0])
			if len(r.Contents) == 1 && r.Contents[0].Text == "alice-secret\n" {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatal("alice's job output never arrived")
	}
	waitFor()
	r := parse(tsClient(t, dir, s.url, aliceToken, "work", map[string]any{"read": fullURI}).Results[0])
	if len(r.Contents) != 1 || !strings.HasSuffix(r.Contents[0].Text, "19999\n20000\n") {
		t.Errorf("alice reads her full output: %+v", r)
	}

	// bob: the same conversation name, then his own session.
	for _, conv := range []string{"work", ""} {
		b := tsClient(t, dir, s.url, bobToken, conv,
			map[string]any{"tool": toolJobs},
			map[string]any{"tool": toolOutput, "args": map[string]any{"job_id": jobID}},
			map[string]any{"tool": toolKill, "args": map[string]any{"job_id": jobID}},
			map[string]any{"tool": toolWrite, "args": map[string]any{"job_id": jobID, "input": "x"}},
			map[string]any{"read": jobURI},
			map[string]any{"read": fullURI},
			map[string]any{"list": true},
		)
		if r := parse(b.Results[0]); r.IsError || !strings.Contains(r.Content[0].Text, "No background jobs") && strings.Contains(r.Content[0].Text, "job-") {
			t.Errorf("bob (%q) lists: %+v", conv, r)
		}
		for i, raw := range b.Results[1:6] {
			if r := parse(raw); !(r.IsError || r.Error != "") || strings.Contains(string(raw), "alice-secret") || strings.Contains(string(raw), "20000") {
				t.Errorf("bob (%q) op %d reached alice's: %s", conv, i+1, raw)
			}
		}
		if r := parse(b.Results[6]); len(r.Resources) != 0 {
			t.Errorf("bob (%q) lists resources %+v", conv, r.Resources)
		}
	}
	// alice's job lives on, unharmed.
	r = parse(tsClient(t, dir, s.url, aliceToken, "work", map[string]any{"tool": toolKill, "args": map[string]any{"job_id": jobID}}).Results[0])
	if r.IsError || r.StructuredContent["status"] != "killed" {
		t.Errorf("alice kills her job: %+v", r)
	}
}

// tsProgress is testdata/node/progress.mjs's output.
type tsProgress struct {
	Calls []struct {
		Progress []string `json:"progress"`
		Skipped  int64    `json:"skipped"`
		Text     string   `json:"text"`
		IsError  bool     `json:"isError"`
		Error    string   `json:"error"`
	} `json:"calls"`
	Errors []string `json:"errors"`
}

// runTSProgress runs progress.mjs with spec (see the script).
func runTSProgress(t *testing.T, dir string, spec map[string]any) tsProgress {
	t.Helper()
	data, err := os.ReadFile("testdata/node/progress.mjs")
	if err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(dir, "progress.mjs")
	if err := os.WriteFile(local, data, 0o644); err != nil {
		t.Fatal(err)
	}
	specJSON, _ := json.Marshal(spec)
	stdout, stderr, err := node(t, dir, 3*time.Minute, local, string(specJSON))
	if err != nil {
		t.Fatalf("ts progress client: %v\n%s\n%s", err, stdout, stderr)
	}
	var p tsProgress
	if err := json.Unmarshal([]byte(stdout), &p); err != nil {
		t.Fatalf("ts progress client output %q: %v", stdout, err)
	}
	return p
}

// Every line of a command's output reaches the official TypeScript
// client's progress handler before the call's result, over stdio and
// streamable HTTP: the SDK runs a notification's handler a microtask
// after it read the message but drops a call's progress handler at once
// when the result arrives, so a last notification read together with the
// result used to be lost ("unknown token") in most runs on a loaded
// machine. The server now pings the client between a call's last
// notification and its result.
func TestTypeScriptProgressBeforeResult(t *testing.T) {
	needDemo(t)
	dir := nodeTools(t)
	const calls = 6
	cmd := `for i in $(seq 1 12); do echo "line $i of $BV_RUN"; sleep 0.15; done`
	var args []map[string]any
	for i := range calls {
		args = append(args, map[string]any{"command": "BV_RUN=" + strconv.Itoa(i) + "; " + cmd})
	}
	s := tenantServer(t, nil, Options{ProgressInterval: 500 * time.Millisecond})
	for name, spec := range map[string]map[string]any{
		"stdio": {"stdio": []string{demoBin, "mcp", "-C", t.TempDir()}, "calls": args},
		"http":  {"url": s.url, "token": aliceToken, "calls": args},
	} {
		t.Run(name, func(t *testing.T) {
			p := runTSProgress(t, dir, spec)
			if len(p.Calls) != calls {
				t.Fatalf("%+v", p)
			}
			for i, c := range p.Calls {
				var want strings.Builder
				for k := 1; k <= 12; k++ {
					fmt.Fprintf(&want, "line %d of %d\n", k, i)
				}
				if c.Error != "" || c.IsError || c.Text != want.String() {
					t.Fatalf("call %d: %+v", i, c)
				}
				if got := strings.Join(c.Progress, ""); got != want.String() || c.Skipped != 0 {
					t.Errorf("call %d: progress carried %q (skipped %d), want every line: %q", i, got, c.Skipped, want.String())
				}
			}
			for _, e := range p.Errors {
				t.Errorf("client error: %s", e)
			}
		})
	}
}

// What the model reads, measured with the official TypeScript SDK's
// client: Claude Code and Codex hand the model
// JSON.stringify(structuredContent) of a result that has one, else its
// text. By default every tool's result has none, so for each call — a
// 22 KB heredoc, 108 KB of output, a failure, a background job and the
// job tools — the model is handed the designed text (within 10 %); a
// program that asks with _meta "bashvisor/structured" gets the fields
// (the command included).
func TestModelReadsTheText(t *testing.T) {
	dir := nodeTools(t)
	s := newSessServer(t, nil, Options{}, HTTPOptions{Token: aliceToken})
	var heredoc strings.Builder
	heredoc.WriteString("cat > big.txt <<'EOF'\n")
	for i := range 600 {
		fmt.Fprintf(&heredoc, "line %03d of a file the model writes..\n", i)
	}
	heredoc.WriteString("EOF\nwc -l big.txt")
	if heredoc.Len() < 22000 {
		t.Fatalf("heredoc of %d bytes", heredoc.Len())
	}
	calls := []map[string]any{
		{"tool": toolBash, "args": map[string]any{"command": heredoc.String()}},
		{"tool": toolBash, "args": map[string]any{"command": "seq 1 20000"}},
		{"tool": toolBash, "args": map[string]any{"command": "ls /nonexistent-dir"}},
		{"tool": toolBash, "args": map[string]any{"command": "echo serving; sleep 300", "mode": "background"}},
		{"tool": toolJobs},
		{"tool": toolOutput, "args": map[string]any{"job_id": "job-1", "wait_ms": 2000}},
		{"tool": toolKill, "args": map[string]any{"job_id": "job-1"}},
	}
	var ops []map[string]any
	for _, c := range calls {
		ops = append(ops, c)
	}
	for _, c := range calls[:3] { // the same, asking for the fields
		structured := maps.Clone(c)
		structured["meta"] = map[string]any{metaStructured: true}
		ops = append(ops, structured)
	}
	r := tsClient(t, dir, s.url, aliceToken, "", ops...)
	if len(r.Results) != len(ops) {
		t.Fatalf("%d results for %d calls", len(r.Results), len(ops))
	}
	type result struct {
		Content    []struct{ Type, Text string } `json:"content"`
		Structured map[string]any                `json:"structuredContent"`
		Handed     string                        `json:"handed"`
		Error      string                        `json:"error"`
	}
	parsed := make([]result, len(r.Results))
	for i, raw := range r.Results {
		if err := json.Unmarshal(raw, &parsed[i]); err != nil || parsed[i].Error != "" || len(parsed[i].Content) == 0 {
			t.Fatalf("result %d: %s %v", i, raw, err)
		}
	}
	for i, c := range calls {
		res := parsed[i]
		designed := len(utf16.Encode([]rune(res.Content[0].Text))) // JavaScript's length
		handed := len(utf16.Encode([]rune(res.Handed)))
		t.Logf("%s %.40q: designed text %d chars, handed to the model %d", c["tool"], fmt.Sprint(c["args"]), designed, handed)
		if res.Structured != nil || math.Abs(float64(handed-designed)) > 0.1*float64(designed) {
			t.Errorf("%s %.60q: the model is handed %d chars (structured %v) for a designed text of %d", c["tool"], fmt.Sprint(c["args"]), handed, res.Structured != nil, designed)
		}
	}
	if got := parsed[0].Content[0].Text; got != "600 big.txt\n" {
		t.Errorf("heredoc: %q", got)
	}
	for i, c := range calls[:3] {
		res := parsed[len(calls)+i]
		cmd, _ := c["args"].(map[string]any)["command"].(string)
		if res.Structured["command"] != cmd || res.Structured["output"] != res.Content[0].Text {
			t.Errorf("%.40q asked for the fields: %v", cmd, res.Structured)
		}
		t.Logf("%.40q with the fields: designed text %d chars, handed to the model %d", cmd, len(res.Content[0].Text), len(res.Handed))
	}
}
