package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/bashvisor/bashvisor/internal/testenv"
)

// What the agent clients people use hand the model of a bash call: each
// client runs against a fake model endpoint (fakeModel) that has it call
// the bash tool once per command of clientCalls, over stdio, and then
// answers "done"; the client's last request to the model carries every
// tool result as the model would read it. The designed text is the
// server's own: the text content of its tools/call response, recorded on
// the stdio wire. The clients are pinned in testdata/clients and
// installed by `make clients` into .clients at the top of the checkout
// (or the directory BASHVISOR_CLIENTS names); without them the test
// skips, or fails when REQUIRE_CLIENTS=1 (CI).

// clientCall is one tool call the fake model makes.
type clientCall struct {
	tool string // toolBash, toolJobs, …
	args map[string]any
}

func (c clientCall) String() string {
	if cmd, ok := c.args["command"].(string); ok {
		return fmt.Sprintf("%s %.30q", c.tool, cmd)
	}
	return fmt.Sprintf("%s %v", c.tool, c.args)
}

// clientCalls are the calls each client's model makes, in order: a 22 KB
// heredoc whose output is one line, 108,894 bytes of output (whole in the
// engine's text), 168,894 bytes (which the engine truncates), 13,893 and
// 8,893 bytes, a failure, and a background job listed, read and killed.
func clientCalls() []clientCall {
	var heredoc strings.Builder
	heredoc.WriteString("cat > big.txt <<'EOF'\n")
	for i := range 600 {
		fmt.Fprintf(&heredoc, "line %03d of a file the model writes..\n", i)
	}
	heredoc.WriteString("EOF\nwc -l big.txt")
	var calls []clientCall
	for _, cmd := range []string{heredoc.String(), "seq 1 20000", "seq 1 30000", "seq 1 3000", "seq 1 2000", "ls /nonexistent-dir"} {
		calls = append(calls, clientCall{toolBash, map[string]any{"command": cmd}})
	}
	return append(calls,
		clientCall{toolBash, map[string]any{"command": "echo serving; sleep 300", "mode": "background"}},
		clientCall{toolJobs, map[string]any{}},
		clientCall{toolOutput, map[string]any{"job_id": "job-1", "wait_ms": 2000}},
		clientCall{toolKill, map[string]any{"job_id": "job-1"}})
}

// clientBins returns the directory holding the clients' node_modules/.bin.
func clientBins(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("BASHVISOR_CLIENTS")
	if dir == "" {
		dir = filepath.Join("..", ".clients")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"claude", "codex"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", ".bin", name)); err != nil {
			testenv.Need(t, testenv.Clients, fmt.Errorf("%s not installed in %s (make clients): %w", name, dir, err))
		}
	}
	return filepath.Join(dir, "node_modules", ".bin")
}

// fakeModel is a model endpoint speaking just enough of the Anthropic
// Messages API (POST /v1/messages) and the OpenAI Responses API (POST
// /v1/responses, streamed) for a client to call a tool named like the
// bash tool once per command and then end its turn. It keeps every
// request body.
type fakeModel struct {
	calls []clientCall
	ts    *httptest.Server

	mu       sync.Mutex
	requests []modelRequest
}

// modelRequest is one request the model got.
type modelRequest struct {
	path string
	body []byte
}

func newFakeModel(t *testing.T, calls []clientCall) *fakeModel {
	m := &fakeModel{calls: calls}
	m.ts = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.ts.Close)
	return m
}

func (m *fakeModel) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	m.requests = append(m.requests, modelRequest{r.URL.Path, body})
	m.mu.Unlock()
	switch {
	case strings.HasSuffix(r.URL.Path, "/count_tokens"):
		// Claude Code counts a large tool result's tokens: about 4 bytes each.
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"input_tokens":%d}`, len(body)/4)
	case strings.HasSuffix(r.URL.Path, "/messages"):
		m.anthropic(w, body)
	case strings.HasSuffix(r.URL.Path, "/responses"):
		m.responses(w, body)
	default:
		http.NotFound(w, r)
	}
}

// anthropic answers a Messages API request: a tool_use of the bash tool
// for the next command when the request offers the tool, else text.
func (m *fakeModel) anthropic(w http.ResponseWriter, body []byte) {
	var req struct {
		Stream   bool `json:"stream"`
		Tools    []struct{ Name string }
		Messages []struct {
			Content json.RawMessage
		}
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	prefix := "" // Claude Code names an MCP server's tools mcp__SERVER__TOOL
	for _, tl := range req.Tools {
		if p, ok := strings.CutSuffix(tl.Name, "__"+toolBash); ok {
			prefix = p + "__"
		}
	}
	done := bytes.Count(body, []byte(`"type":"tool_result"`))
	var block map[string]any
	stop := "end_turn"
	if prefix != "" && done < len(m.calls) {
		block = map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", done+1), "name": prefix + m.calls[done].tool,
			"input": m.calls[done].args}
		stop = "tool_use"
	} else {
		block = map[string]any{"type": "text", "text": "done"}
	}
	msg := map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": "fake",
		"content": []any{block}, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 10}}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(msg)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	start := map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_1", "type": "message", "role": "assistant",
		"model": "fake", "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 1}}}
	events := []map[string]any{start}
	if block["type"] == "tool_use" {
		input, _ := json.Marshal(block["input"])
		events = append(events,
			map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "tool_use", "id": block["id"], "name": block["name"], "input": map[string]any{}}},
			map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
	} else {
		events = append(events,
			map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}},
			map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "done"}})
	}
	events = append(events,
		map[string]any{"type": "content_block_stop", "index": 0},
		map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 10}},
		map[string]any{"type": "message_stop"})
	for _, e := range events {
		data, _ := json.Marshal(e)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e["type"], data)
	}
}

// responses answers a Responses API request: a function_call of the bash
// tool for the next command when the request offers it (Codex offers an
// MCP server's tools in a namespace, mcp__SERVER), else a message.
func (m *fakeModel) responses(w http.ResponseWriter, body []byte) {
	var req struct {
		Tools []struct {
			Type, Name string
			Tools      []struct{ Name string }
		}
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	namespace := ""
	for _, tl := range req.Tools {
		if tl.Type == "namespace" && slices.ContainsFunc(tl.Tools, func(f struct{ Name string }) bool { return f.Name == toolBash }) {
			namespace = tl.Name
		}
	}
	done := bytes.Count(body, []byte(`"type":"function_call_output"`))
	w.Header().Set("Content-Type", "text/event-stream")
	var item map[string]any
	if namespace != "" && done < len(m.calls) {
		args, _ := json.Marshal(m.calls[done].args)
		item = map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d", done+1), "call_id": fmt.Sprintf("call_%d", done+1),
			"namespace": namespace, "name": m.calls[done].tool, "arguments": string(args)}
	} else {
		item = map[string]any{"type": "message", "role": "assistant", "id": "msg_1",
			"content": []any{map[string]any{"type": "output_text", "text": "done"}}}
	}
	events := []map[string]any{
		{"type": "response.created", "response": map[string]any{"id": "resp_1"}},
		{"type": "response.output_item.done", "output_index": 0, "item": item},
		{"type": "response.completed", "response": map[string]any{"id": "resp_1", "usage": map[string]any{
			"input_tokens": 10, "input_tokens_details": nil, "output_tokens": 10, "output_tokens_details": nil, "total_tokens": 20}}},
	}
	for _, e := range events {
		data, _ := json.Marshal(e)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e["type"], data)
	}
}

// recordedServer writes a script that runs the demo binary's stdio MCP
// server (with flags) in dir, recording what it sends to the client in
// wire.
func recordedServer(t *testing.T, dir, wire string, flags ...string) string {
	t.Helper()
	var args strings.Builder
	for _, f := range flags {
		fmt.Fprintf(&args, " %q", f)
	}
	script := filepath.Join(t.TempDir(), "bashvisor-mcp")
	text := fmt.Sprintf("#!/bin/bash\nset -o pipefail\nunset BASHVISOR_MCP_TOKEN\n%q mcp -C %q%s | tee -a %q\n", demoBin, dir, args.String(), wire)
	if err := os.WriteFile(script, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

// designedTexts are the text contents of the tools/call responses the
// server sent, in order, and the number of resource links each carried.
func designedTexts(t *testing.T, wire string) (texts []string, links []int) {
	t.Helper()
	f, err := os.Open(wire)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var msg struct {
			Result struct {
				Content []struct{ Type, Text string }
			}
		}
		if json.Unmarshal(sc.Bytes(), &msg) != nil || len(msg.Result.Content) == 0 || msg.Result.Content[0].Type != "text" {
			continue
		}
		texts = append(texts, msg.Result.Content[0].Text)
		n := 0
		for _, c := range msg.Result.Content {
			if c.Type == "resource_link" {
				n++
			}
		}
		links = append(links, n)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return texts, links
}

// handedResult is one tool result as a client hands it to the model.
type handedResult struct {
	text    string // every text the result carries but the two below
	framing string // what the client adds of its own (Codex: "Wall time: …\nOutput:")
	// links is what the client makes of the result's resource links
	// (the server's, beside the designed text): Claude Code a text
	// "[Resource link: NAME] URI (DESCRIPTION)", Codex the link's JSON.
	links string
}

// lastRequest is the body of the last request the model got on a path
// ending in suffix.
func (m *fakeModel) lastRequest(suffix string) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(m.requests) - 1; i >= 0; i-- {
		if strings.HasSuffix(m.requests[i].path, suffix) {
			return m.requests[i].body
		}
	}
	return nil
}

// anthropicResults are the tool_result blocks of a Messages API request,
// in order.
func anthropicResults(t *testing.T, body []byte) []handedResult {
	t.Helper()
	var req struct {
		Messages []struct {
			Content json.RawMessage
		}
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("the last request: %v", err)
	}
	var out []handedResult
	for _, msg := range req.Messages {
		var blocks []struct {
			Type    string
			Content json.RawMessage
		}
		if json.Unmarshal(msg.Content, &blocks) != nil {
			continue // a string
		}
		for _, b := range blocks {
			if b.Type == "tool_result" {
				out = append(out, handed(b.Content))
			}
		}
	}
	return out
}

// responsesResults are the function_call_output items of a Responses API
// request, in order.
func responsesResults(t *testing.T, body []byte) []handedResult {
	t.Helper()
	var req struct {
		Input []struct {
			Type   string
			Output json.RawMessage
		}
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("the last request: %v", err)
	}
	var out []handedResult
	for _, item := range req.Input {
		if item.Type == "function_call_output" {
			out = append(out, handed(item.Output))
		}
	}
	return out
}

// codexFraming is the text Codex puts before an MCP tool's content.
var codexFraming = regexp.MustCompile(`^Wall time: [0-9.]+ seconds\nOutput:$`)

// handed sorts a tool result's content (a string, or content parts: their
// texts, any other part as its JSON) into the text, the client's framing
// and the resource links.
func handed(raw json.RawMessage) handedResult {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return handedResult{text: s}
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return handedResult{text: string(raw)}
	}
	var text, framing, links strings.Builder
	for _, p := range parts {
		var part struct{ Type, Text string }
		if json.Unmarshal(p, &part) != nil || !strings.HasSuffix(part.Type, "text") {
			text.Write(p)
			continue
		}
		var link struct{ Type string }
		switch {
		case codexFraming.MatchString(part.Text):
			framing.WriteString(part.Text)
		case strings.HasPrefix(part.Text, "[Resource link: "),
			json.Unmarshal([]byte(part.Text), &link) == nil && link.Type == "resource_link":
			links.WriteString(part.Text)
		default:
			text.WriteString(part.Text)
		}
	}
	return handedResult{text: text.String(), framing: framing.String(), links: links.String()}
}

// jsLen is JavaScript's length of s: what the clients count.
func jsLen(s string) int { return len(utf16.Encode([]rune(s))) }

// runClient runs a client to its end, within timeout.
func runClient(t *testing.T, timeout time.Duration, env []string, dir, bin string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	log := out.String()
	if len(log) > 4000 {
		log = log[:2000] + "\n…\n" + log[len(log)-2000:]
	}
	t.Logf("%s %s: %v in %v\n%s", filepath.Base(bin), args[0], err, time.Since(start).Round(time.Millisecond), log)
	if ctx.Err() != nil {
		t.Fatalf("%s did not finish in %v", filepath.Base(bin), timeout)
	}
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(bin), err)
	}
}

// A client: how to run it against the fake model with the recorded
// server, and how its requests carry the tool results.
type agentClient struct {
	name string
	path string // the request path ending that carries tool results
	// budget is the longest tool result (characters) the client hands
	// the model whole; beyond it the client cuts the text or replaces it.
	// Claude Code: 25,000 tokens (MAX_MCP_OUTPUT_TOKENS; the fake model
	// counts 4 bytes a token, real digit-heavy output about 2); Codex:
	// about 12,000 characters (measured: 11,984 of 13,893 handed). The
	// server's output budget for the client (clientOutputMax) keeps every
	// designed text under it.
	budget int
	// outputMax is the server's output budget for the client.
	outputMax int
	run       func(t *testing.T, bins, modelURL, work, server string)
	results   func(t *testing.T, body []byte) []handedResult
}

var agentClients = []agentClient{
	{name: "claude-code", path: "/v1/messages", budget: 100_000, outputMax: claudeOutputMax, run: runClaude, results: anthropicResults},
	{name: "codex", path: "/v1/responses", budget: 12_000, outputMax: codexOutputMax, run: runCodex, results: responsesResults},
}

// runClaude: `claude -p` with the server in --mcp-config and its bash
// tool allowed.
func runClaude(t *testing.T, bins, modelURL, work, server string) {
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"bashvisor": map[string]any{
		"type": "stdio", "command": server}}})
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "ANTHROPIC_BASE_URL=" + modelURL,
		"ANTHROPIC_API_KEY=dummy", "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
	runClient(t, clientTimeout, env, work, filepath.Join(bins, "claude"), "-p", "run the commands",
		"--mcp-config", string(cfg), "--strict-mcp-config", "--allowedTools", "mcp__bashvisor")
}

// runCodex: `codex exec` with the fake model as a custom provider
// (Responses API) and the server in [mcp_servers], its tools approved.
func runCodex(t *testing.T, bins, modelURL, work, server string) {
	home := t.TempDir()
	config := fmt.Sprintf(`model = "fake"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "read-only"

[model_providers.fake]
name = "fake"
base_url = %q
wire_api = "responses"
env_key = "FAKE_MODEL_KEY"
request_max_retries = 0
stream_max_retries = 0

[mcp_servers.bashvisor]
command = %q
default_tools_approval_mode = "approve"
`, modelURL+"/v1", server)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CODEX_HOME=" + home, "FAKE_MODEL_KEY=dummy"}
	runClient(t, clientTimeout, env, work, filepath.Join(bins, "codex"), "exec", "--skip-git-repo-check", "run the commands")
}

// clientTimeout bounds one client's run (about a second on an idle
// machine).
const clientTimeout = 60 * time.Second

// capture runs c against a fake model that has it run calls through a
// recorded stdio server with flags; it returns the server's texts, the
// resource links beside each, and what the client handed the model, one
// each per call.
func capture(t *testing.T, c agentClient, bins string, calls []clientCall, flags ...string) (designed []string, links []int, handed []handedResult) {
	t.Helper()
	m := newFakeModel(t, calls)
	work := t.TempDir()
	wire := filepath.Join(t.TempDir(), "wire.jsonl")
	c.run(t, bins, m.ts.URL, work, recordedServer(t, work, wire, flags...))
	designed, links = designedTexts(t, wire)
	handed = c.results(t, m.lastRequest(c.path))
	if len(designed) != len(calls) || len(handed) != len(calls) {
		t.Fatalf("%d calls: the server answered %d, the client handed the model %d", len(calls), len(designed), len(handed))
	}
	return designed, links, handed
}

// What Claude Code and Codex hand the model of bash results is the
// designed text, within 10 % for every call: a 22 KB heredoc printing one
// line, outputs of 108,894 and 168,894 bytes, which the server cuts to
// the client's output budget (Options.OutputMax: Codex 10,000 bytes,
// Claude Code 40,000) so that the model reads the engine's cut and its
// header rather than the client's cut or error, 13,893 and 8,893 bytes,
// a failure, and a background job's start, listing, output and kill. No
// result carries a resource link (Claude Code renders one as 138 chars of
// text, Codex as 236 of JSON); what the client adds of its own is logged.
// With -output-max -1 the engine's 128 KiB applies again; with the
// server's -structured flag the model is handed JSON instead, and the
// results carry their links.
func TestClientsHandTheModelTheText(t *testing.T) {
	needDemo(t)
	bins := clientBins(t)
	calls := clientCalls()
	for _, c := range agentClients {
		t.Run(c.name, func(t *testing.T) {
			t.Run("text", func(t *testing.T) {
				designed, links, handed := capture(t, c, bins, calls)
				for i, call := range calls {
					d, h := jsLen(designed[i]), jsLen(handed[i].text)
					t.Logf("%s: designed text %d chars, handed to the model %d, +%d of the client's own (%q), +%d of resource links: %.300s",
						call, d, h, jsLen(handed[i].framing), handed[i].framing, jsLen(handed[i].links), handed[i].links)
					if d > c.budget {
						t.Errorf("%s: a designed text of %d chars, beyond the client's budget (%d chars)", call, d, c.budget)
					}
					if math.Abs(float64(h-d)) > 0.1*float64(d) {
						t.Errorf("%s: the model is handed %d chars for a designed text of %d:\n%.300s\n…\n%s", call, h, d, handed[i].text, tail(handed[i].text, 300))
					}
					if links[i] != 0 || handed[i].links != "" {
						t.Errorf("%s: %d resource links, handed as %q", call, links[i], handed[i].links)
					}
				}
				for _, i := range []int{1, 2} { // seq 1 20000, seq 1 30000
					if !strings.HasPrefix(designed[i], "[output truncated in middle: got ") || len(designed[i]) < c.outputMax || len(designed[i]) > c.outputMax+1000 {
						t.Errorf("%s: the server's text (%d bytes) is not cut to the client's budget of %d: %.200q", calls[i], len(designed[i]), c.outputMax, designed[i])
					}
				}
				if !strings.HasPrefix(handed[0].text, "600 big.txt") || !strings.Contains(handed[8].text, "serving") {
					t.Errorf("the heredoc's result: %.300q; the job's output: %.300q", handed[0].text, handed[8].text)
				}
			})
			t.Run("output-max", func(t *testing.T) {
				designed, _, handed := capture(t, c, bins, calls[1:2], "-output-max", "-1")
				t.Logf("-output-max -1 %s: designed text %d chars, handed to the model %d", calls[1], jsLen(designed[0]), jsLen(handed[0].text))
				if len(designed[0]) != 108894 {
					t.Errorf("with -output-max -1 the server's text is %d bytes, not the whole 108,894: %.200q", len(designed[0]), designed[0])
				}
			})
			t.Run("structured", func(t *testing.T) {
				started := clientCall{toolBash, map[string]any{"command": "echo serving", "mode": "background"}}
				designed, links, handed := capture(t, c, bins, []clientCall{calls[0], started}, "-structured")
				d, h := jsLen(designed[0]), jsLen(handed[0].text)
				t.Logf("-structured %s: designed text %d chars, handed to the model %d: %.200s", calls[0], d, h, handed[0].text)
				if h < 10*d || !strings.Contains(handed[0].text, `"exit_code"`) {
					t.Errorf("with -structured the model is handed %d chars for a designed text of %d: %.300q", h, d, handed[0].text)
				}
				if links[0] != 0 || links[1] != 1 {
					t.Errorf("with -structured the results carry %v resource links, want [0 1] (the job's output)", links)
				}
			})
		})
	}
}

// tail is the last n bytes of s.
func tail(s string, n int) string { return s[max(0, len(s)-n):] }

// readmeClientLines are the shell lines of README.md's "Connect an agent"
// section that start with prog (claude or codex): the add line and the
// check line.
func readmeClientLines(t *testing.T, prog string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Connect an agent\n")
	if !ok {
		t.Fatal(`README.md has no "## Connect an agent" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var lines []string
	for i, block := range strings.Split(section, "```") {
		if i%2 == 0 || !strings.HasPrefix(block, "sh\n") {
			continue
		}
		for l := range strings.SplitSeq(block, "\n") {
			if strings.HasPrefix(l, prog+" ") {
				lines = append(lines, l)
			}
		}
	}
	return lines
}

// TestREADMEConnectsClients follows the README's first screen literally
// with the real clients: in a project directory, with `bashvisor` on
// PATH (here the demo binary, recording the wire) and, as the issue found
// in a shell set up for the HTTP server, BASHVISOR_MCP_TOKEN exported,
// each client's two lines run as written; `claude mcp list` must say
// Connected and `codex mcp list` must list the server. Then each client,
// with only the configuration its README line wrote (plus the fake model
// and, for Codex, tool approval), runs one bash call through it.
func TestREADMEConnectsClients(t *testing.T) {
	needDemo(t)
	bins := clientBins(t)
	pathDir, project, wire := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "wire.jsonl")
	wrapper := fmt.Sprintf("#!/bin/bash\nset -o pipefail\n%q \"$@\" | tee -a %q\n", demoBin, wire)
	if err := os.WriteFile(filepath.Join(pathDir, "bashvisor"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	call := clientCall{toolBash, map[string]any{"command": "echo readme-$((6*7))"}}
	for _, c := range agentClients {
		t.Run(c.name, func(t *testing.T) {
			prog := map[string]string{"claude-code": "claude", "codex": "codex"}[c.name]
			lines := readmeClientLines(t, prog)
			if len(lines) != 2 || !strings.Contains(lines[0], " mcp add ") || !strings.Contains(lines[1], " mcp list") {
				t.Fatalf("README's %s lines: %q, want an mcp add line and an mcp list line", prog, lines)
			}
			home := t.TempDir()
			env := []string{"PATH=" + pathDir + ":" + bins + ":" + os.Getenv("PATH"), "HOME=" + home,
				"BASHVISOR_MCP_TOKEN=set-for-the-http-server", "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1",
				"DISABLE_ERROR_REPORTING=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
			var out []byte
			for _, l := range lines {
				ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
				cmd := exec.CommandContext(ctx, "bash", "-c", l)
				cmd.Dir, cmd.Env, cmd.WaitDelay = project, env, 5*time.Second
				var err error
				out, err = cmd.CombinedOutput()
				cancel()
				t.Logf("$ %s\n%s", l, out)
				if err != nil {
					t.Fatalf("%s: %v", l, err)
				}
			}
			if want := map[string]string{"claude": "✔ Connected", "codex": "enabled"}[prog]; !strings.Contains(string(out), "bashvisor") || !strings.Contains(string(out), want) {
				t.Fatalf("%s: %q, want bashvisor %s", lines[1], out, want)
			}
			m := newFakeModel(t, []clientCall{call})
			switch prog {
			case "claude":
				runClient(t, clientTimeout, append(env, "ANTHROPIC_BASE_URL="+m.ts.URL, "ANTHROPIC_API_KEY=dummy"), project,
					filepath.Join(bins, "claude"), "-p", "run the commands", "--allowedTools", "mcp__bashvisor")
			case "codex":
				provider := fmt.Sprintf(`model_providers.fake={name="fake",base_url=%q,wire_api="responses",env_key="FAKE_MODEL_KEY",request_max_retries=0,stream_max_retries=0}`, m.ts.URL+"/v1")
				runClient(t, clientTimeout, append(env, "FAKE_MODEL_KEY=dummy"), project, filepath.Join(bins, "codex"), "exec",
					"--skip-git-repo-check", "-c", `model="fake"`, "-c", `model_provider="fake"`, "-c", provider,
					"-c", `approval_policy="never"`, "-c", `sandbox_mode="read-only"`,
					"-c", `mcp_servers.bashvisor.default_tools_approval_mode="approve"`, "run the commands")
			}
			handed := c.results(t, m.lastRequest(c.path))
			if len(handed) != 1 || !strings.Contains(handed[0].text, "readme-42") {
				t.Fatalf("the model was handed %+v, want the bash call's output readme-42", handed)
			}
		})
	}
}
