package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/engine"
)

// lockedBuffer collects a child's stderr.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// stdioServer starts `demo mcp ARGS` and connects to it over stdio.
func stdioServer(t testing.TB, args ...string) (*mcp.ClientSession, *exec.Cmd, *lockedBuffer) {
	t.Helper()
	needDemo(t)
	cmd := exec.Command(demoBin, append([]string{"mcp", "-grace", "200ms"}, args...)...)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to demo mcp: %v\nstderr:\n%s", err, stderr)
	}
	t.Cleanup(func() {
		cs.Close()
		if t.Failed() || os.Getenv("BV_DEBUG_STDERR") != "" {
			t.Logf("demo mcp stderr:\n%s", stderr)
		}
	})
	return cs, cmd, stderr
}

func TestStdio(t *testing.T) {
	dir := t.TempDir()
	cs, _, _ := stdioServer(t, "-C", dir, "-timeout", "1s")
	ctx := context.Background()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(lt.Tools) != 5 { // no bash_undo without workspace-write
		t.Fatalf("tools %v", lt.Tools)
	}
	for _, tool := range lt.Tools {
		if tool.Name == toolBash && !strings.HasSuffix(tool.Description, "<pwd>"+dir+"</pwd>") {
			t.Errorf("description does not end with <pwd>%s</pwd>:\n%s", dir, tool.Description)
		}
	}
	for _, c := range []struct {
		args   map[string]any
		status engine.Status
		prefix string
	}{
		{map[string]any{"command": "pwd"}, engine.StatusOK, dir + "\n"},
		{map[string]any{"command": "echo to-stderr >&2; exit 2"}, engine.StatusFailed, "[command failed: exit code 2]\nto-stderr\n"},
		{map[string]any{"command": "echo x; sleep 10"}, engine.StatusTimedOut, "[command timed out after 1s]\nx\n"},
		{map[string]any{"command": "tty; [ -e /dev/tty ] && ! echo > /dev/tty 2>/dev/null && echo no-tty"}, engine.StatusOK, "not a tty\n"},
		{map[string]any{"command": "yes | head -c 500000"}, engine.StatusOK, "[output truncated in middle"},
		{map[string]any{"command": strings.Repeat("#", 1<<20)}, engine.StatusError, "[error: bad input: command is 1.0 MiB"},
		{map[string]any{"command": "echo \x00"}, engine.StatusError, "[error: bad input: command contains a NUL byte"},
		{map[string]any{"command": "ls", "mode": "turbo"}, engine.StatusError, `[error: bad input: unknown mode "turbo"`},
		{map[string]any{"command": "sleep 0.1", "mode": "background"}, engine.StatusStarted, "<pid>"},
	} {
		r := bash(t, ctx, cs, c.args)
		if r.Status != c.status || !strings.HasPrefix(r.Output, c.prefix) {
			t.Errorf("%.60q: got %s %.200q, want %s %q", c.args["command"], r.Status, r.Output, c.status, c.prefix)
		}
	}
	// Cancellation kills the process group in the server's child.
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	pids := startSleeper(t, cctx, cs, errc)
	cancel()
	<-errc
	waitDead(t, 5*time.Second, pids...)
}

// startDemo starts `demo mcp ARGS` over pipes the test controls (unlike
// mcp.CommandTransport, which waits for the process itself).
func startDemo(t *testing.T, args ...string) (*mcp.ClientSession, *exec.Cmd, io.WriteCloser, *lockedBuffer) {
	t.Helper()
	needDemo(t)
	cmd := exec.Command(demoBin, append([]string{"mcp", "-grace", "200ms"}, args...)...)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(), &mcp.IOTransport{Reader: stdout, Writer: stdin}, nil)
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("%v\n%s", err, stderr)
	}
	return cs, cmd, stdin, stderr
}

// waitExit waits for the demo to exit 0.
func waitExit(t *testing.T, cmd *exec.Cmd, stderr *lockedBuffer, why string) {
	t.Helper()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Errorf("demo mcp after %s: %v\n%s", why, err, stderr)
		}
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		<-waited
		t.Fatalf("demo mcp did not exit after %s\n%s", why, stderr)
	}
	if strings.Contains(stderr.String(), "level=ERROR") {
		t.Errorf("errors logged:\n%s", stderr)
	}
}

// Closing stdin (the client going away) stops the server: running
// commands and background jobs are terminated and it exits 0. (The
// go-sdk client's Close waits for in-flight calls before closing stdin, so
// the test closes the pipe itself, as a crashed client would.)
func TestStdioShutdownOnEOF(t *testing.T) {
	cs, cmd, stdin, stderr := startDemo(t, "-C", t.TempDir())
	ctx := context.Background()
	job := bash(t, ctx, cs, map[string]any{"command": "sleep 300", "mode": "background"})
	errc := make(chan error, 1)
	pids := startSleeper(t, ctx, cs, errc)
	start := time.Now()
	stdin.Close()
	waitExit(t, cmd, stderr, "stdin EOF")
	t.Logf("stopped in %v", time.Since(start))
	waitDead(t, 5*time.Second, append(pids, job.PID)...)
	<-errc
	cs.Close()
}

func TestStdioShutdownOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cs, cmd, _, stderr := startDemo(t, "-C", t.TempDir())
			ctx := context.Background()
			job := bash(t, ctx, cs, map[string]any{"command": "sleep 300", "mode": "background"})
			errc := make(chan error, 1)
			pids := startSleeper(t, ctx, cs, errc)
			cmd.Process.Signal(sig)
			waitExit(t, cmd, stderr, sig.String())
			waitDead(t, 5*time.Second, append(pids, job.PID)...)
			<-errc
			cs.Close()
		})
	}
}

func TestStdioAudit(t *testing.T) {
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	cs, _, _ := stdioServer(t, "-C", t.TempDir(), "-audit", audit)
	ctx := context.Background()
	bash(t, ctx, cs, map[string]any{"command": "echo SECRET_OUTPUT"})
	bash(t, ctx, cs, map[string]any{"command": "exit 3", "mode": "slow"})
	cs.Close()
	b, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "SECRET_OUTPUT\\n") {
		t.Errorf("audit log holds command output:\n%s", b)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 {
		t.Fatalf("audit log:\n%s", b)
	}
	var rec struct {
		Command, Decision, Mode, Status string
		ExitCode                        *int `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(lines[1]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Command != "exit 3" || rec.Decision != "allow" || rec.Mode != "slow" || rec.Status != "failed" || rec.ExitCode == nil || *rec.ExitCode != 3 {
		t.Errorf("audit record %s", lines[1])
	}
}

// `demo mcp -http` end to end: listens where told, requires the token,
// serves the tools, stops on SIGTERM with exit 0.
func TestDemoHTTP(t *testing.T) {
	needDemo(t)
	cmd := exec.Command(demoBin, "mcp", "-grace", "200ms", "-C", t.TempDir(), "-http", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "BASHVISOR_MCP_TOKEN=tok-0123456789abcdef")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var url string
	re := regexp.MustCompile(`listening on (http://\S+/mcp) \(the -token or \$BASHVISOR_MCP_TOKEN\)`)
	timeout := time.After(10 * time.Second)
	for url == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("demo mcp -http exited")
			}
			if m := re.FindStringSubmatch(line); m != nil {
				url = m[1]
			}
		case <-timeout:
			t.Fatal("demo mcp -http did not start")
		}
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	if resp, err := (&http.Client{Transport: tr}).Post(url, "application/json", strings.NewReader(initializeBody)); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: withToken{"tok-0123456789abcdef", tr}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := bash(t, context.Background(), cs, map[string]any{"command": "echo via demo http"}); r.Output != "via demo http\n" {
		t.Errorf("%+v", r)
	}
	cs.Close()
	cmd.Process.Signal(syscall.SIGTERM)
	for range lines { // drain until stderr closes
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("demo mcp -http after SIGTERM: %v", err)
	}
}

// `demo mcp -profile standard`: "ask" commands go to the user through
// elicitation when the client supports it.
func TestStdioApproval(t *testing.T) {
	needDemo(t)
	const why = "permission profile \"standard\" asks a person before running `git push origin main`"
	for _, c := range []struct {
		name   string
		el     *elicitor
		status engine.Status
		text   string
	}{
		{"accept", &elicitor{action: "accept"}, engine.StatusFailed, "[command failed: exit code 128]"}, // it ran: not a git repository
		{"decline", &elicitor{action: "decline"}, engine.StatusDenied, "[command denied: the user declined to approve it]"},
		{"no elicitation", nil, engine.StatusNeedsApproval, "[command needs approval: " + why + ". Ask the user: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(demoBin, "mcp", "-C", t.TempDir(), "-profile", "standard")
			stderr := &lockedBuffer{}
			cmd.Stderr = stderr
			var opts mcp.ClientOptions
			if c.el != nil {
				opts.ElicitationHandler = c.el.handle
			}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, &opts).
				Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			r := bash(t, context.Background(), cs, map[string]any{"command": "git push origin main"})
			if r.Status != c.status || !strings.HasPrefix(r.Output, c.text) {
				t.Errorf("got %s %q, want %s %q\n%s", r.Status, r.Output, c.status, c.text, stderr)
			}
			// The person is told why, without the advice meant for the agent.
			if c.el != nil && (len(c.el.asked) != 1 || !strings.Contains(c.el.asked[0], "Why: "+why+".") || strings.Contains(c.el.asked[0], "Ask the user")) {
				t.Errorf("elicitation messages: %q", c.el.asked)
			}
		})
	}
}

// Nothing but JSON-RPC messages ever reaches stdout; logs go to stderr.
func TestStdioStdoutIsProtocolOnly(t *testing.T) {
	needDemo(t)
	cmd := exec.Command(demoBin, "mcp", "-v", "-C", t.TempDir())
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	msgs := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo out; echo err >&2"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"bash","arguments":{"command":"exit 1"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"nope"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"bash","arguments":"not an object"}}`,
	}
	for _, m := range msgs {
		io.WriteString(stdin, m+"\n")
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	seen := map[float64]bool{}
	for len(seen) < 5 && sc.Scan() {
		var msg map[string]any
		if err := json.Unmarshal(sc.Bytes(), &msg); err != nil || msg["jsonrpc"] != "2.0" {
			t.Fatalf("non-protocol line on stdout: %q", sc.Text())
		}
		if id, ok := msg["id"].(float64); ok {
			seen[id] = true
		}
	}
	stdin.Close()
	for sc.Scan() {
		var msg map[string]any
		if err := json.Unmarshal(sc.Bytes(), &msg); err != nil || msg["jsonrpc"] != "2.0" {
			t.Fatalf("non-protocol line on stdout: %q", sc.Text())
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit: %v\n%s", err, stderr)
	}
	if len(seen) != 5 {
		t.Errorf("answered %v", seen)
	}
	if !strings.Contains(stderr.String(), "level=") {
		t.Errorf("no logs on stderr with -v:\n%s", stderr)
	}
}

func TestStdioConcurrentCalls(t *testing.T) {
	// 50 at once: more than the default admission limits let one
	// conversation run (they would queue, not fail).
	cs, _, _ := stdioServer(t, "-C", t.TempDir(), "-max-running", "128")
	parallelSleeps(t, cs, 50)
}

// testLineWriter lets the test write whole lines between the client's.
type testLineWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (l *testLineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *testLineWriter) Close() error { return l.w.Close() }

// divert passes the server's lines to the client except the answers to
// the test's own lines (id null or a string id: the go-sdk client numbers
// its requests), which go to the returned channel.
func divert(t *testing.T, stdout io.Reader) (io.ReadCloser, <-chan map[string]any) {
	pr, pw := io.Pipe()
	mine := make(chan map[string]any, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("non-JSON line on stdout: %q", sc.Text())
				continue
			}
			id, hasID := m["id"]
			if _, str := id.(string); hasID && (id == nil || str) {
				mine <- m
				continue
			}
			pw.Write(append(sc.Bytes(), '\n'))
		}
		pw.CloseWithError(sc.Err())
		close(mine)
	}()
	return pr, mine
}

// A malformed line on stdin gets a JSON-RPC error and the server goes on
// serving the same session: calls work and background jobs live on. (The
// go-sdk's stdio transport alone ends the session, and with it every job.)
func TestStdioMalformedLines(t *testing.T) {
	needDemo(t)
	cmd := exec.Command(demoBin, "mcp", "-grace", "200ms", "-C", t.TempDir())
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	stdinPipe, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdin := &testLineWriter{w: stdinPipe}
	fromServer, answers := divert(t, stdout)
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, &mcp.IOTransport{Reader: fromServer, Writer: stdin}, nil)
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("%v\n%s", err, stderr)
	}
	job := bash(t, ctx, cs, map[string]any{"command": "sleep 300", "mode": "background"})

	next := func(line string) map[string]any {
		t.Helper()
		io.WriteString(stdin, line+"\n")
		select {
		case m := <-answers:
			return m
		case <-time.After(10 * time.Second):
			t.Fatalf("no answer to %.80q\n%s", line, stderr)
			return nil
		}
	}
	for _, c := range []struct {
		line string
		code float64
		id   any
	}{
		{"this is not JSON", -32700, nil},
		{`{"jsonrpc":"2.0","id":"cut","method":"ping"`, -32700, nil},
		{"{}", -32600, nil},
		{"[]", -32600, nil},
		{`"a string"`, -32600, nil},
		{"42", -32600, nil},
		{`{"jsonrpc":"1.0","id":"old","method":"ping"}`, -32600, "old"},
		{`{"jsonrpc":"2.0","id":true,"method":"ping"}`, -32600, nil},
		{`[{"jsonrpc":"2.0","id":"batched","method":"ping"}]`, -32600, nil},
	} {
		m := next(c.line)
		e, _ := m["error"].(map[string]any)
		if m["jsonrpc"] != "2.0" || e == nil || e["code"] != c.code || m["id"] != c.id {
			t.Errorf("answer to %q: %v, want code %v id %v", c.line, m, c.code, c.id)
		}
	}
	// Blank lines are skipped without an answer: the next answer is the
	// ping's.
	io.WriteString(stdin, "\n   \r\n")
	if m := next(`{"jsonrpc":"2.0","id":"p1","method":"ping"}`); m["id"] != "p1" || m["error"] != nil {
		t.Errorf("ping after blank lines: %v", m)
	}
	// A command that is not valid text is refused, not run changed.
	for line, want := range map[string]string{
		`{"jsonrpc":"2.0","id":"u1","method":"tools/call","params":{"name":"bash","arguments":{"command":"echo \udc80"}}}`:                       `[error: bad input: command contains the escape \udc80`,
		"{\"jsonrpc\":\"2.0\",\"id\":\"u2\",\"method\":\"tools/call\",\"params\":{\"name\":\"bash\",\"arguments\":{\"command\":\"echo \xff\"}}}": "[error: bad input: command is not valid UTF-8",
	} {
		m := next(line)
		b, _ := json.Marshal(m["result"])
		var res struct {
			Content []struct{ Text string }
			IsError bool
		}
		json.Unmarshal(b, &res)
		if len(res.Content) != 1 || !strings.HasPrefix(res.Content[0].Text, want) || !res.IsError {
			t.Errorf("answer to %.60q: %s, want %q", line, b, want)
		}
	}

	if r := bash(t, ctx, cs, map[string]any{"command": "echo still serving"}); r.Output != "still serving\n" {
		t.Errorf("after malformed lines: %+v", r)
	}
	var jobs jobsResult
	call(t, ctx, cs, toolJobs, nil, &jobs)
	if len(jobs.Jobs) != 1 || jobs.Jobs[0].JobID != job.JobID || jobs.Jobs[0].Status != engine.JobRunning {
		t.Errorf("background job after malformed lines: %+v", jobs.Jobs)
	}
	stdin.Close()
	waitExit(t, cmd, stderr, "stdin EOF")
	waitDead(t, 5*time.Second, job.PID)
	cs.Close()
	for range answers { // until the server's stdout closed
	}
	if n := strings.Count(stderr.String(), "refused a malformed message"); n != 9 {
		t.Errorf("%d refusals logged, want 9:\n%s", n, stderr)
	}
}
