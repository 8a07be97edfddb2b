package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/engine"
)

func jsonEqual(t *testing.T, a, b any) bool {
	t.Helper()
	norm := func(v any) any {
		var raw []byte
		switch v := v.(type) {
		case []byte:
			raw = v
		case json.RawMessage:
			raw = v
		default:
			var err error
			if raw, err = json.Marshal(v); err != nil {
				t.Fatal(err)
			}
		}
		var out any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

func TestToolsAndSchemas(t *testing.T) {
	for _, restricted := range []bool{false, true} {
		t.Run(fmt.Sprint("restricted=", restricted), func(t *testing.T) {
			s := newSetup(t, nil, Options{Sandbox: sandboxIf(restricted), Structured: restricted})
			ctx := context.Background()
			lt, err := s.cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			tools := map[string]*mcp.Tool{}
			for _, tool := range lt.Tools {
				tools[tool.Name] = tool
			}
			if tools[toolUndo] != nil {
				t.Errorf("bash_undo offered without workspace-write, where nothing can be undone")
			}
			for _, name := range []string{toolBash, toolJobs, toolOutput, toolKill, toolWrite} {
				tool := tools[name]
				if tool == nil {
					t.Fatalf("tool %s missing; have %v", name, lt.Tools)
				}
				if (tool.OutputSchema != nil) != restricted || tool.Description == "" {
					t.Errorf("%s: output schema %v with Structured %v, description %q", name, tool.OutputSchema, restricted, tool.Description)
				}
			}
			bash := tools[toolBash]
			if !jsonEqual(t, bash.InputSchema, engine.InputSchema()) {
				t.Errorf("bash input schema %v != engine.InputSchema() %s", bash.InputSchema, engine.InputSchema())
			}
			want := s.e.Description(engine.ToolContext{WorkingDir: s.dir, Sandbox: sandboxIf(restricted)})
			if bash.Description != want {
				t.Errorf("description:\n%s\nwant:\n%s", bash.Description, want)
			}
			if !strings.HasSuffix(bash.Description, "<pwd>"+s.dir+"</pwd>") {
				t.Errorf("description does not end with <pwd>%s</pwd>", s.dir)
			}
			if restricted != strings.Contains(bash.Description, "Sandbox read-only") {
				t.Errorf("restricted=%v but description:\n%s", restricted, bash.Description)
			}
			// The enum the SPEC requires is really in the schema.
			var sch struct {
				Properties struct {
					Mode struct{ Enum []string }
				}
				Required []string
			}
			b, _ := json.Marshal(bash.InputSchema)
			json.Unmarshal(b, &sch)
			if !reflect.DeepEqual(sch.Properties.Mode.Enum, []string{"default", "slow", "background"}) || !reflect.DeepEqual(sch.Required, []string{"command"}) {
				t.Errorf("input schema %s", b)
			}
		})
	}
}

// Every tool's result is its text (and links) only, unless the server
// has Structured or the call asks with _meta "bashvisor/structured": then
// its fields too, the command among them for bash.
func TestStructuredOnRequest(t *testing.T) {
	for _, structured := range []bool{false, true} {
		s := newSetup(t, nil, Options{Structured: structured})
		ctx := context.Background()
		for _, c := range []struct {
			tool string
			args map[string]any
		}{
			{toolBash, map[string]any{"command": "echo one two"}},
			{toolBash, map[string]any{"command": "echo up; sleep 30", "mode": "background"}},
			{toolJobs, map[string]any{}},
			{toolOutput, map[string]any{"job_id": "job-1"}},
			{toolKill, map[string]any{"job_id": "job-1"}},
		} {
			for _, asked := range []bool{false, true} {
				p := &mcp.CallToolParams{Name: c.tool, Arguments: c.args}
				if asked {
					p.Meta = mcp.Meta{metaStructured: true}
				}
				res, err := s.cs.CallTool(ctx, p)
				if err != nil || res.IsError {
					t.Fatalf("%s %v: %v %+v", c.tool, c.args, err, res)
				}
				if want := structured || asked; (res.StructuredContent != nil) != want {
					t.Errorf("%s %v (server Structured %v, asked %v): structured content %v", c.tool, c.args, structured, asked, res.StructuredContent)
				}
			}
		}
		var r engine.Result
		call(t, ctx, s.cs, toolBash, map[string]any{"command": "echo fields"}, &r)
		if r.Command != "echo fields" || r.Output != "fields\n" || r.Status != engine.StatusOK {
			t.Errorf("fields asked for: %+v", r)
		}
	}
}

func TestStatuses(t *testing.T) {
	s := newSetup(t, func(c *engine.Config) { c.Timeout = time.Second }, Options{})
	ctx := context.Background()
	type check struct {
		args   map[string]any
		status engine.Status
		output string // prefix
		exit   int    // -1: none
	}
	for name, c := range map[string]check{
		"ok":        {map[string]any{"command": "echo hello"}, engine.StatusOK, "hello\n", 0},
		"ok-slow":   {map[string]any{"command": "echo slow", "mode": "slow"}, engine.StatusOK, "slow\n", 0},
		"failed":    {map[string]any{"command": "echo oops; exit 3"}, engine.StatusFailed, "[command failed: exit code 3]\noops\n", 3},
		"signal":    {map[string]any{"command": "kill -9 $$"}, engine.StatusFailed, "[command failed: killed by SIGKILL]", 137},
		"timed_out": {map[string]any{"command": "echo partial; sleep 30"}, engine.StatusTimedOut, "[command timed out after 1s]\npartial\n", -1},
		"started":   {map[string]any{"command": "sleep 0.1", "mode": "background"}, engine.StatusStarted, "<pid>", -1},
	} {
		t.Run(name, func(t *testing.T) {
			r := bash(t, ctx, s.cs, c.args)
			if r.Status != c.status || !strings.HasPrefix(r.Output, c.output) {
				t.Fatalf("got %s %q, want %s %q", r.Status, r.Output, c.status, c.output)
			}
			if c.exit >= 0 && (r.ExitCode == nil || *r.ExitCode != c.exit) {
				t.Errorf("exit code %v, want %d", r.ExitCode, c.exit)
			}
			if r.Command != c.args["command"] {
				t.Errorf("command %q", r.Command)
			}
			if c.status == engine.StatusStarted && (r.JobID == "" || r.PID == 0 || r.OutputFile == "") {
				t.Errorf("background result without job_id/pid/output_file: %+v", r)
			}
		})
	}
}

func TestBadWorkingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gone")
	s := newSetup(t, nil, Options{WorkingDir: dir})
	r := bash(t, context.Background(), s.cs, map[string]any{"command": "true"})
	want := "[error: working directory does not exist: " + dir
	if r.Status != engine.StatusError || !strings.HasPrefix(r.Output, want) {
		t.Fatalf("got %s %q, want error %q", r.Status, r.Output, want)
	}
}

func TestTruncation(t *testing.T) {
	s := newSetup(t, nil, Options{})
	r := bash(t, context.Background(), s.cs, map[string]any{"command": "head -c 300000 /dev/zero | tr '\\0' a; echo; echo END"})
	if r.Status != engine.StatusOK || !r.Truncated || r.OutputBytes != 300005 {
		t.Fatalf("status %s truncated %v bytes %d", r.Status, r.Truncated, r.OutputBytes)
	}
	if !strings.HasPrefix(r.Output, "[output truncated in middle: got 293.0 KiB, showing the first 32 KiB and the last 96 KiB]\naaaa") || !strings.Contains(r.Output, "a\nEND\n") {
		t.Errorf("output head %q tail %q", r.Output[:80], r.Output[len(r.Output)-20:])
	}
	// The header and the "[full output: PATH]" line come on top of the
	// 128 KiB shown; the path is as long as TMPDIR makes it.
	if len(r.Output) > 128<<10+200+len(r.FullOutputFile) {
		t.Errorf("output is %d bytes: tail %q", len(r.Output), r.Output[len(r.Output)-300:])
	}
	if r.FullOutputFile != "" {
		if fi, err := os.Stat(r.FullOutputFile); err != nil || fi.Size() != 300005 {
			t.Errorf("full output file: %v %v", fi, err)
		}
	}
}

func TestMalformedArguments(t *testing.T) {
	s := newSetup(t, nil, Options{})
	ctx := context.Background()
	big := strings.Repeat("x", 1<<20)
	for name, c := range map[string]struct {
		args any
		want string
	}{
		"no arguments":   {nil, `missing required field "command"`},
		"empty object":   {map[string]any{}, `missing required field "command"`},
		"array":          {[]any{"ls"}, "arguments must be a JSON object, got an array"},
		"string":         {"ls", "arguments must be a JSON object, got a string"},
		"command number": {map[string]any{"command": 5}, `field "command" must be a string, got a number`},
		"command object": {map[string]any{"command": map[string]any{"x": 1}}, `field "command" must be a string, got an object`},
		"command null":   {map[string]any{"command": nil}, `missing required field "command"`},
		"empty command":  {map[string]any{"command": "  "}, `command is empty`},
		"unknown mode":   {map[string]any{"command": "ls", "mode": "fast"}, `unknown mode "fast" (want default, slow or background)`},
		"mode number":    {map[string]any{"command": "ls", "mode": 2}, `field "mode" must be a string, got a number`},
		"unknown field":  {map[string]any{"command": "ls", "timeout": 600}, `unknown field "timeout": the tool accepts only "command", "mode", "stdin", "tty", "yield_ms" and "network"`},
		"1 MiB command":  {map[string]any{"command": big}, "command is 1.0 MiB (1048576 bytes), over the limit of 131071 bytes"},
		"one byte over":  {map[string]any{"command": strings.Repeat("x", engine.MaxCommandBytes+1)}, "command is 128.0 KiB (131072 bytes), over the limit of 131071 bytes"},
		"NUL byte":       {map[string]any{"command": "echo a\x00b"}, "command contains a NUL byte (at byte 6)"},
		"lone surrogate": {json.RawMessage(`{"command": "echo \udc80"}`), `command contains the escape \udc80, a lone UTF-16 surrogate`},
		"high surrogate": {json.RawMessage(`{"command": "echo \uD83D."}`), `command contains the escape \ud83d, a lone UTF-16 surrogate`},
	} {
		t.Run(name, func(t *testing.T) {
			r := bash(t, ctx, s.cs, c.args)
			if r.Status != engine.StatusError || !strings.HasPrefix(r.Output, "[error: bad input: ") || !strings.Contains(r.Output, c.want) {
				t.Fatalf("got %s %q, want error containing %q", r.Status, r.Output, c.want)
			}
			if len(r.Command) > 2048 {
				t.Errorf("error result echoes a %d-byte command", len(r.Command))
			}
		})
	}
	// Job tools too.
	for _, c := range []struct {
		tool string
		args any
		want string
	}{
		{toolOutput, map[string]any{}, `missing required field "job_id"`},
		{toolOutput, map[string]any{"job_id": 7}, `field "job_id" must be a string`},
		{toolOutput, map[string]any{"job_id": "x", "tail_bytes": -1}, `field "tail_bytes" must not be negative`},
		{toolOutput, map[string]any{"job_id": "x", "offset": 1.5}, `field "offset" must be an integer`},
		{toolOutput, map[string]any{"job_id": "x", "limit": "10"}, `field "limit" must be an integer, got a string`},
		{toolOutput, map[string]any{"job_id": "x", "tail_bytes": 10, "offset": 0}, `either "tail_bytes" or "offset"/"limit"`},
		{toolOutput, map[string]any{"job_id": ""}, `[error: bad input: field "job_id" is empty (give the job_id`},
		{toolKill, map[string]any{"job_id": ""}, `[error: bad input: field "job_id" is empty (give the job_id`},
		{toolOutput, map[string]any{"job_id": "nope"}, `[error: no such job: "nope" (bash_jobs lists the job ids)]`},
		{toolKill, map[string]any{"job_id": "nope"}, `[error: no such job: "nope" (bash_jobs lists the job ids)]`},
		{toolKill, nil, `missing required field "job_id"`},
		{toolJobs, map[string]any{"all": true}, `unknown field "all"`},
	} {
		res, text := call(t, ctx, s.cs, c.tool, c.args, nil)
		if !res.IsError || !strings.HasPrefix(text, "[error: ") || !strings.Contains(text, c.want) {
			t.Errorf("%s %v: isError %v %q, want %q", c.tool, c.args, res.IsError, text, c.want)
		}
	}
	// Still serving.
	if r := bash(t, ctx, s.cs, map[string]any{"command": "echo alive"}); r.Output != "alive\n" {
		t.Fatalf("after malformed calls: %+v", r)
	}
}

func TestBackgroundJobs(t *testing.T) {
	s := newSetup(t, nil, Options{})
	ctx := context.Background()

	// A job that finishes by itself.
	done := bash(t, ctx, s.cs, map[string]any{"command": "echo finished", "mode": "background"})
	// A job that runs until killed, with a grandchild in its group.
	r := bash(t, ctx, s.cs, map[string]any{"command": "sleep 300 & echo child $!; echo started; wait", "mode": "background"})
	if r.Status != engine.StatusStarted || r.JobID == "" {
		t.Fatalf("%+v", r)
	}
	want := fmt.Sprintf("<pid>%d</pid>\n<output_file>%s</output_file>\n<reminder>To stop: bash_kill job_id=%s</reminder>", r.PID, r.OutputFile, r.JobID)
	if r.Output != want {
		t.Errorf("background text %q, want %q", r.Output, want)
	}

	// bash_output: wait for the job's first lines.
	var jo engine.JobOutput
	var text string
	for deadline := time.Now().Add(5 * time.Second); ; {
		_, text = call(t, ctx, s.cs, toolOutput, map[string]any{"job_id": r.JobID}, &jo)
		if strings.Contains(jo.Data, "started") || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var child int
	if _, err := fmt.Sscanf(jo.Data, "child %d", &child); err != nil || jo.Job.Status != engine.JobRunning {
		t.Fatalf("bash_output %q: %+v", text, jo)
	}
	if !strings.HasPrefix(text, "[job "+r.JobID+" running, pid ") {
		t.Errorf("bash_output text %q", text)
	}
	// offset/limit paging.
	_, text = call(t, ctx, s.cs, toolOutput, map[string]any{"job_id": r.JobID, "offset": 0, "limit": 5}, &jo)
	if jo.Data != "child" || jo.EOF || !strings.HasSuffix(text, "\n[more output: call bash_output with offset=5]") {
		t.Errorf("paging: %q %+v", text, jo)
	}
	// tail_bytes.
	call(t, ctx, s.cs, toolOutput, map[string]any{"job_id": r.JobID, "tail_bytes": 8}, &jo)
	if jo.Data != "started\n" {
		t.Errorf("tail: %+v", jo)
	}

	// bash_jobs lists both.
	var jobs jobsResult
	res, text := call(t, ctx, s.cs, toolJobs, nil, &jobs)
	validate(t, jobsOutputSchema, res.StructuredContent)
	ids := map[string]engine.JobInfo{}
	for _, j := range jobs.Jobs {
		ids[j.JobID] = j
	}
	if ids[r.JobID].Status != engine.JobRunning || ids[r.JobID].PID != r.PID || ids[done.JobID].JobID == "" {
		t.Fatalf("bash_jobs: %s\n%+v", text, jobs)
	}
	if !strings.Contains(text, "job_id="+r.JobID+" pid=") {
		t.Errorf("bash_jobs text %q", text)
	}

	// bash_kill terminates the whole group.
	var killed engine.JobInfo
	res, text = call(t, ctx, s.cs, toolKill, map[string]any{"job_id": r.JobID}, &killed)
	validate(t, jobInfoSchema, res.StructuredContent)
	if res.IsError || killed.Status != engine.JobKilled {
		t.Fatalf("bash_kill: %q %+v", text, killed)
	}
	waitDead(t, 5*time.Second, r.PID, child)
	res, text = call(t, ctx, s.cs, toolOutput, map[string]any{"job_id": r.JobID}, &jo)
	validate(t, outputOutputSchema, res.StructuredContent)
	if jo.Job.Status != engine.JobKilled || !strings.Contains(jo.Data, "[background process killed") {
		t.Errorf("after kill: %q", text)
	}

	// The finished job reports its true status.
	for deadline := time.Now().Add(5 * time.Second); ; {
		_, text = call(t, ctx, s.cs, toolOutput, map[string]any{"job_id": done.JobID}, &jo)
		if jo.Job.Status != engine.JobRunning || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if jo.Job.Status != engine.JobCompleted || !strings.HasPrefix(jo.Data, "finished\n\n\n[background process completed]") || !jo.EOF {
		t.Errorf("finished job: %q %+v", text, jo)
	}
}

// startSleeper starts a foreground call whose shell and grandchild write
// their pids to a file, and returns the pids once they are written.
func startSleeper(t *testing.T, ctx context.Context, cs *mcp.ClientSession, errc chan<- error) []int {
	t.Helper()
	pidfile := filepath.Join(t.TempDir(), "pids")
	cmd := fmt.Sprintf("sleep 300 & echo $$ $! > %s; wait", pidfile)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolBash, Arguments: map[string]any{"command": cmd, "mode": "slow"}})
		errc <- err
	}()
	return readPids(t, pidfile, 2)
}

func TestCancellationKillsProcessGroup(t *testing.T) {
	s := newSetup(t, nil, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	pids := startSleeper(t, ctx, s.cs, errc)
	start := time.Now()
	cancel() // the client sends notifications/cancelled
	if err := <-errc; err == nil {
		t.Fatal("cancelled call returned no error")
	}
	r := s.res.wait(t, 10*time.Second)
	if r.Status != engine.StatusCancelled || !strings.HasPrefix(r.Output, "[command cancelled]\n") {
		t.Fatalf("result after cancel: %s %q", r.Status, r.Output)
	}
	waitDead(t, 5*time.Second, pids...)
	t.Logf("cancelled and reaped in %v", time.Since(start))
	// The session still works.
	if r := bash(t, context.Background(), s.cs, map[string]any{"command": "echo ok"}); r.Status != engine.StatusOK {
		t.Fatalf("%+v", r)
	}
}

func TestDroppedConnectionCancels(t *testing.T) {
	e := newEngine(t, nil)
	res := newResults()
	srv := New(e, Options{WorkingDir: t.TempDir(), OnResult: res.add})
	st, ct, conn := pipeTransports()
	ss, err := srv.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	pids := startSleeper(t, context.Background(), cs, errc)
	conn.Close() // the client goes away without a word
	r := res.wait(t, 10*time.Second)
	if r.Status != engine.StatusCancelled {
		t.Fatalf("result after disconnect: %s %q", r.Status, r.Output)
	}
	waitDead(t, 5*time.Second, pids...)
	<-errc
	cs.Close()
	ss.Wait()
}

func TestBaseContextCancels(t *testing.T) {
	base, stop := context.WithCancel(context.Background())
	s := newSetup(t, nil, Options{BaseContext: base})
	errc := make(chan error, 1)
	pids := startSleeper(t, context.Background(), s.cs, errc)
	stop()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if r := s.res.wait(t, 5*time.Second); r.Status != engine.StatusCancelled {
		t.Fatalf("%+v", r)
	}
	waitDead(t, 5*time.Second, pids...)
}

func TestConcurrentCalls(t *testing.T) {
	s := newSetup(t, manySlots, Options{})
	parallelSleeps(t, s.cs, 50)
}

// manySlots lets one conversation run 50 commands at once (the default
// admission limits would queue most of them).
func manySlots(c *engine.Config) {
	c.Admission = config.Admission{MaxRunning: 128, MaxRunningPerConversation: 128}
}

// parallelSleeps makes n parallel `sleep 1` calls on one session and
// checks that they ran concurrently.
func parallelSleeps(t *testing.T, cs *mcp.ClientSession, n int) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolBash, Arguments: map[string]any{"command": fmt.Sprintf("sleep 1; echo %d", i)}})
			if err != nil {
				errs <- err.Error()
				return
			}
			if text := res.Content[0].(*mcp.TextContent).Text; text != fmt.Sprintf("%d\n", i) || res.IsError {
				errs <- text
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	elapsed := time.Since(start)
	t.Logf("%d parallel `sleep 1` calls took %v", n, elapsed)
	if elapsed > 4*time.Second {
		t.Errorf("%d parallel `sleep 1` calls took %v: calls are not concurrent", n, elapsed)
	}
}

// A slow call must not delay a fast one on the same session.
func TestSlowCallDoesNotBlockOthers(t *testing.T) {
	s := newSetup(t, nil, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	startSleeper(t, ctx, s.cs, errc)
	start := time.Now()
	bash(t, context.Background(), s.cs, map[string]any{"command": "true"})
	if d := time.Since(start); d > time.Second {
		t.Errorf("a fast call took %v next to a slow one", d)
	}
	cancel()
	<-errc
	s.res.wait(t, 5*time.Second)
}

var progressRE = regexp.MustCompile(`^\d+\.\ds, \d+(\.\d)? (B|KiB)(, last: tick\d+)?(\n(tick\d+\n)+)?$`)

func TestProgressNotifications(t *testing.T) {
	e := newEngine(t, nil)
	srv := New(e, Options{WorkingDir: t.TempDir(), ProgressInterval: 300 * time.Millisecond})
	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	st, ct := mcp.NewInMemoryTransports()
	wire := &progressCounter{Transport: ct}
	cs := connectOver(t, srv, st, wire, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			got = append(got, req.Params)
			mu.Unlock()
		},
	})
	// handled waits until the handler has seen every notification the
	// client read. The server sends a call's last notification before its
	// result, but the client runs handlers on goroutines of their own, so
	// they may trail the result.
	handled := func() {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			mu.Lock()
			n := len(got)
			mu.Unlock()
			if int64(n) == wire.n.Load() {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d progress notifications read, %d handled after 10s", wire.n.Load(), n)
			}
		}
	}
	params := &mcp.CallToolParams{Name: toolBash, Arguments: map[string]any{"command": "for i in 1 2 3 4 5 6 7 8 9 10; do echo tick$i; sleep 0.2; done"}}
	params.SetProgressToken("tok-1")
	start := time.Now()
	if _, err := cs.CallTool(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	handled()
	mu.Lock()
	// ~2 s of running at one notification per 300 ms at most, and one
	// at the end with the output after the last.
	if max := int(elapsed/(300*time.Millisecond)) + 2; len(got) < 3 || len(got) > max {
		t.Errorf("%d notifications in %v, want 3..%d", len(got), elapsed, max)
	}
	last := -1.0
	for _, p := range got {
		if p.ProgressToken != "tok-1" || p.Progress <= last || !progressRE.MatchString(p.Message) {
			t.Errorf("notification %+v", p)
		}
		last = p.Progress
	}
	if len(got) > 0 && !strings.Contains(got[len(got)-1].Message, "last: tick") {
		t.Errorf("last notification %q names no output line", got[len(got)-1].Message)
	}
	// Without a token, nothing is sent.
	n := len(got)
	mu.Unlock()
	bash(t, context.Background(), cs, map[string]any{"command": "sleep 0.5"})
	handled()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n {
		t.Errorf("progress sent without a progress token")
	}
}

// progressCounter is a client transport that counts the progress
// notifications the client reads, in order with the responses.
type progressCounter struct {
	mcp.Transport
	n atomic.Int64
}

func (p *progressCounter) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := p.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &progressConn{Connection: c, n: &p.n}, nil
}

type progressConn struct {
	mcp.Connection
	n *atomic.Int64
}

func (c *progressConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil && req.Method == "notifications/progress" {
		c.n.Add(1)
	}
	return msg, err
}

func TestRestricted(t *testing.T) {
	needLandlock(t)
	s := newSetup(t, nil, Options{Sandbox: engine.Sandbox{Profile: engine.ReadOnly}})
	ctx := context.Background()
	r := bash(t, ctx, s.cs, map[string]any{"command": "echo inside"})
	if r.Status != engine.StatusOK || r.Output != "inside\n" {
		t.Fatalf("%+v", r)
	}
	r = bash(t, ctx, s.cs, map[string]any{"command": "echo x > written"})
	if r.Status != engine.StatusFailed || !strings.Contains(r.Output, "Read-only file system") {
		t.Errorf("write in restricted mode: %s %q", r.Status, r.Output)
	}
	if _, err := os.Stat(filepath.Join(s.dir, "written")); err == nil {
		t.Error("restricted command wrote into the working directory")
	}
}

func sandboxIf(on bool) engine.Sandbox {
	if on {
		return engine.Sandbox{Profile: engine.ReadOnly}
	}
	return engine.Sandbox{}
}

// A call id in _meta becomes the call's ToolContext.CallID, scoped by the
// conversation; without one the call has none.
func TestCallIDFromMeta(t *testing.T) {
	e := newEngine(t, nil)
	ids := make(chan string, 2)
	srv := newServer(e, Options{WorkingDir: t.TempDir()}, func(ctx context.Context, tc engine.ToolContext, in engine.Input) engine.Result {
		ids <- tc.CallID
		return e.Run(ctx, tc, in)
	})
	cs := connect(t, srv, nil)
	for _, meta := range []mcp.Meta{{metaCallID: "toolu_01"}, nil} {
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Meta: meta, Name: toolBash, Arguments: map[string]any{"command": "true"}}); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := <-ids, <-ids; a != "mcp/toolu_01" || b != "" {
		t.Errorf("call ids %q and %q, want %q and none", a, b, "mcp/toolu_01")
	}
}
