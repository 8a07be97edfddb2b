package mcpserver

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/engine"
)

// writeJob sends input with bash_write and returns its structured answer
// and text (isError must be false).
func writeJob(t *testing.T, cs *mcp.ClientSession, args map[string]any) (engine.JobOutput, string) {
	t.Helper()
	var jo engine.JobOutput
	res, text := call(t, context.Background(), cs, toolWrite, args, &jo)
	if res.IsError {
		t.Fatalf("bash_write %v: %s", args, text)
	}
	validate(t, outputOutputSchema, res.StructuredContent)
	return jo, text
}

// readUntil long-polls bash_output until the job's whole output contains
// want.
func readUntil(t *testing.T, cs *mcp.ClientSession, id, want string) engine.JobOutput {
	t.Helper()
	var jo engine.JobOutput
	for deadline := time.Now().Add(20 * time.Second); ; {
		call(t, context.Background(), cs, toolOutput, map[string]any{"job_id": id, "offset": 0, "wait_ms": 1000}, &jo)
		if strings.Contains(jo.Data, want) {
			return jo
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q not in %q", want, jo.Data)
		}
		call(t, context.Background(), cs, toolOutput, map[string]any{"job_id": id, "offset": jo.Size, "wait_ms": 1000}, nil)
	}
}

func TestInteractiveSchema(t *testing.T) {
	s := newSetup(t, nil, Options{Structured: true})
	lt, err := s.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var write, bashTool *mcp.Tool
	for _, tool := range lt.Tools {
		switch tool.Name {
		case toolWrite:
			write = tool
		case toolBash:
			bashTool = tool
		}
	}
	if write == nil || write.OutputSchema == nil || !strings.Contains(write.Description, "yield_ms") {
		t.Fatalf("bash_write: %+v", write)
	}
	b, _ := json.Marshal(bashTool.InputSchema)
	var sch struct {
		Properties map[string]struct {
			Type string
			Enum []string
		}
	}
	json.Unmarshal(b, &sch)
	if p := sch.Properties; p["stdin"].Type != "string" || strings.Join(p["stdin"].Enum, ",") != "null,pipe" ||
		p["tty"].Type != "boolean" || p["yield_ms"].Type != "integer" {
		t.Errorf("bash input schema %s", b)
	}
	// The description explains yield, stdin and tty in at most four lines.
	var lines int
	for _, l := range strings.Split(bashTool.Description, "\n") {
		if strings.Contains(l, "yield_ms") || strings.Contains(l, "stdin") || strings.Contains(l, "tty") || strings.Contains(l, "bash_write") {
			lines++
		}
	}
	if lines == 0 || lines > 4 {
		t.Errorf("%d lines about interactive jobs in:\n%s", lines, bashTool.Description)
	}
}

// With -on-timeout background, a command at its timeout yields with the
// output so far and the job's file gets the rest once.
func TestYieldOverMCP(t *testing.T) {
	s := newSetup(t, func(c *engine.Config) { c.Timeout, c.OnTimeout = 2*time.Second, engine.OnTimeoutBackground }, Options{})
	start := time.Now()
	r := bash(t, context.Background(), s.cs, map[string]any{"command": "for i in $(seq 5); do echo $i; sleep 1; done"})
	const line = "[command still running after 2s: moved to background as job-1; read it with bash_output, stop it with bash_kill]"
	if r.Status != engine.StatusStarted || r.JobID != "job-1" || r.PID == 0 || !strings.HasSuffix(r.Output, "\n"+line) {
		t.Fatalf("%+v", r)
	}
	if d := time.Since(start); d < 2*time.Second || d > 10*time.Second {
		t.Errorf("yielded after %v, want ~2s", d)
	}
	before := strings.Fields(strings.TrimSuffix(r.Output, line))
	if len(before) < 1 || len(before) > 3 || before[0] != "1" {
		t.Fatalf("output so far %q", before)
	}
	// The read that shows the completion line shows the ended state too
	// (TestJobFileAndStateAgree).
	jo := readUntil(t, s.cs, r.JobID, "[background process completed]")
	after := strings.TrimSuffix(jo.Data, "\n\n[background process completed]")
	if got := strings.Join(append(before, strings.Fields(after)...), " "); got != "1 2 3 4 5" || jo.Job.Status != engine.JobCompleted {
		t.Fatalf("before %q, file %q (%s): want 1..5 once each", before, jo.Data, jo.Job.Status)
	}
	// The description says so.
	lt, _ := s.cs.ListTools(context.Background(), nil)
	for _, tool := range lt.Tools {
		if tool.Name == toolBash && !strings.Contains(tool.Description, "moves to the background (still running) after 2s") {
			t.Errorf("description:\n%s", tool.Description)
		}
	}
	// yield_ms: a call may yield early in the default kill mode too.
	r = bash(t, context.Background(), s.cs, map[string]any{"command": "echo early; sleep 30", "yield_ms": 300})
	if r.Status != engine.StatusStarted || !strings.HasPrefix(r.Output, "early\n[command still running after 300ms: moved to background as job-2;") {
		t.Fatalf("yield_ms: %+v", r)
	}
	call(t, context.Background(), s.cs, toolKill, map[string]any{"job_id": r.JobID}, nil)
}

func TestStdinOverMCP(t *testing.T) {
	s := newSetup(t, nil, Options{})
	ctx := context.Background()
	r := bash(t, ctx, s.cs, map[string]any{"command": "read x; echo got:$x; read y; echo then:$y", "mode": "background", "stdin": "pipe"})
	if r.Status != engine.StatusStarted {
		t.Fatalf("%+v", r)
	}
	jo, text := writeJob(t, s.cs, map[string]any{"job_id": r.JobID, "input": "abc\n", "yield_ms": 5000})
	if jo.Data != "got:abc\n" || jo.Offset != 0 || jo.Job.Status != engine.JobRunning || !strings.HasPrefix(text, "[job "+r.JobID+" running") {
		t.Fatalf("bash_write: %q %+v", text, jo)
	}
	// close after the last line: the job ends, and bash_write returns the
	// new output only.
	jo, text = writeJob(t, s.cs, map[string]any{"job_id": r.JobID, "input": "def\n", "close": true, "yield_ms": 5000})
	if !strings.HasPrefix(jo.Data, "then:def\n") || jo.Offset != 8 {
		t.Fatalf("bash_write: %q %+v", text, jo)
	}
	// A finished job, a job without a pipe, another conversation's job,
	// and bad arguments each get a clear error.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var j engine.JobOutput
		call(t, ctx, s.cs, toolOutput, map[string]any{"job_id": r.JobID}, &j)
		if j.Job.Status != engine.JobRunning || time.Now().After(deadline) {
			break
		}
	}
	noPipe := bash(t, ctx, s.cs, map[string]any{"command": "sleep 30", "mode": "background"})
	other := newSetup(t, nil, Options{ConversationID: "other"})
	bash(t, ctx, other.cs, map[string]any{"command": "cat", "mode": "background", "stdin": "pipe"})
	for _, c := range []struct {
		cs   *mcp.ClientSession
		args map[string]any
		want string
	}{
		{s.cs, map[string]any{"job_id": r.JobID, "input": "x"}, "has ended"},
		{s.cs, map[string]any{"job_id": noPipe.JobID, "input": "x"}, `started without stdin "pipe" or tty`},
		{other.cs, map[string]any{"job_id": noPipe.JobID, "input": "x"}, "no such job"},
		{s.cs, map[string]any{"job_id": "job-99", "input": "x"}, "no such job"},
		{s.cs, map[string]any{"job_id": r.JobID}, `give "input"`},
		{s.cs, map[string]any{"job_id": r.JobID, "input": 3}, `field "input" must be a string`},
	} {
		res, text := call(t, ctx, c.cs, toolWrite, c.args, nil)
		if !res.IsError || !strings.Contains(text, c.want) {
			t.Errorf("bash_write %v: %v %q, want an error with %q", c.args, res.IsError, text, c.want)
		}
	}
	// Asking for stdin in default mode without a yield is refused.
	bad := bash(t, ctx, s.cs, map[string]any{"command": "cat", "stdin": "pipe"})
	if bad.Status != engine.StatusError || !strings.Contains(bad.Output, "mode=background, or yield_ms") {
		t.Errorf("%+v", bad)
	}
	call(t, ctx, s.cs, toolKill, map[string]any{"job_id": noPipe.JobID}, nil)
}

// On a terminal: python3 -i evaluates 1+1 sent with bash_write, and
// Ctrl-C sent with bash_write interrupts a sleep.
func TestTTYOverMCP(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 (Debian's python3 package) is needed for the terminal test:", err)
	}
	s := newSetup(t, nil, Options{})
	// A REPL runs code that arrives later, so it needs the user's approval
	// (asked through elicitation when the client can).
	repl := map[string]any{"command": "python3 -i -q", "mode": "background", "tty": true}
	if r := bash(t, context.Background(), s.cs, repl); r.Status != engine.StatusNeedsApproval || !strings.Contains(r.Output, "input sent later") {
		t.Fatalf("without approval: %+v", r)
	}
	el := &elicitor{action: "accept"}
	cs := connect(t, s.srv, &mcp.ClientOptions{ElicitationHandler: el.handle})
	r := bash(t, context.Background(), cs, repl)
	if r.Status != engine.StatusStarted || len(el.asked) != 1 {
		t.Fatalf("approved: %+v (asked %d times)", r, len(el.asked))
	}
	readUntil(t, cs, r.JobID, ">>> ")
	jo, text := writeJob(t, cs, map[string]any{"job_id": r.JobID, "input": "1+1\r", "yield_ms": 5000})
	if !strings.HasPrefix(jo.Data, "1+1\n2\n") { // what changed on the terminal: the echo after the prompt, the answer

		t.Fatalf("python: %q", text)
	}
	// The terminal echoes the input at once; the answer comes later and is
	// what bash_write waits for.
	jo, text = writeJob(t, cs, map[string]any{"job_id": r.JobID, "input": "import time; time.sleep(0.5); print(6*7)\r", "yield_ms": 5000})
	if !strings.Contains(jo.Data, "print(6*7)\n42\n") {
		t.Fatalf("answer after the echo: %q", text)
	}
	writeJob(t, cs, map[string]any{"job_id": r.JobID, "close": true})

	r = bash(t, context.Background(), s.cs, map[string]any{"command": "echo ready; sleep 60; echo after", "mode": "background", "tty": true})
	readUntil(t, s.cs, r.JobID, "ready")
	start := time.Now()
	writeJob(t, s.cs, map[string]any{"job_id": r.JobID, "input": "\u0003"})
	jo = readUntil(t, s.cs, r.JobID, "[background process")
	if jo.Job.Status == engine.JobRunning || strings.Contains(jo.Data, "after") || time.Since(start) > 20*time.Second {
		t.Fatalf("Ctrl-C did not interrupt sleep: %+v after %v", jo, time.Since(start))
	}
}

// bash_output wait_ms returns when new output arrives (or the job ends),
// not before and not at the end of the wait.
func TestOutputWait(t *testing.T) {
	s := newSetup(t, nil, Options{})
	r := bash(t, context.Background(), s.cs, map[string]any{"command": "echo first; sleep 1; echo second; sleep 30", "mode": "background"})
	readUntil(t, s.cs, r.JobID, "first")
	start := time.Now()
	var jo engine.JobOutput
	call(t, context.Background(), s.cs, toolOutput, map[string]any{"job_id": r.JobID, "wait_ms": 20000}, &jo)
	if d := time.Since(start); !strings.Contains(jo.Data, "second") || d > 15*time.Second {
		t.Fatalf("after %v: %+v", d, jo)
	}
	call(t, context.Background(), s.cs, toolKill, map[string]any{"job_id": r.JobID}, nil)
}

// Progress notifications carry the new output: together, all of a 3 s
// command's output, in the notifications' _meta and in their messages.
func TestProgressCarriesOutput(t *testing.T) {
	e := newEngine(t, nil)
	srv := New(e, Options{WorkingDir: t.TempDir(), ProgressInterval: 300 * time.Millisecond, Structured: true})
	var mu sync.Mutex
	var meta, msgs strings.Builder
	var n int
	st, ct := mcp.NewInMemoryTransports()
	wire := &progressCounter{Transport: ct}
	cs := connectOver(t, srv, st, wire, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			n++
			out, _ := req.Params.Meta[metaOutput].(string)
			if sk, _ := req.Params.Meta[metaSkipped].(float64); sk != 0 {
				meta.WriteString("[skipped]")
			}
			meta.WriteString(out)
			if _, rest, ok := strings.Cut(req.Params.Message, "\n"); ok {
				msgs.WriteString(rest)
			}
		},
	})
	params := &mcp.CallToolParams{Name: toolBash, Arguments: map[string]any{"command": "for i in $(seq 30); do echo line $i; sleep 0.1; done"}}
	params.SetProgressToken("tok")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	var r engine.Result
	decode(t, res, &r)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		done := int64(n) == wire.n.Load()
		mu.Unlock()
		if done || time.Now().After(deadline) {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if r.Status != engine.StatusOK || meta.String() != r.Output || msgs.String() != r.Output || n < 3 {
		t.Fatalf("%d notifications: _meta %q, messages %q; output %q", n, meta.String(), msgs.String(), r.Output)
	}
}

// The progress sender keeps at most progressOutputMax of output it
// has not sent, cut on a character boundary, and counts what it dropped.
func TestProgressOutputBounded(t *testing.T) {
	p := &progress{wake: make(chan struct{}, 1)}
	chunk := strings.Repeat("é", 5000) // 10,000 bytes
	p.update(engine.Progress{Output: chunk})
	p.update(engine.Progress{Output: "x" + chunk})
	if len(p.out) > progressOutputMax || p.skipped+int64(len(p.out)) != 20001 || !strings.HasSuffix(string(p.out), chunk) || !utf8.Valid(p.out) {
		t.Fatalf("kept %d bytes, skipped %d", len(p.out), p.skipped)
	}
	p.update(engine.Progress{Output: "y", Skipped: 7})
	if string(p.out) != "y" || p.skipped != 20001+7 {
		t.Fatalf("after a gap: %q, skipped %d", p.out, p.skipped)
	}
}
