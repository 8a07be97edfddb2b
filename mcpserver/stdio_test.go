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
		if t.Failed() {
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
	if len(lt.Tools) != 4 {
		t.Fatalf("tools %v", lt.Tools)
	}
	for _, tool := range lt.Tools {
		if tool.Name == ToolBash && !strings.HasSuffix(tool.Description, "<pwd>"+dir+"</pwd>") {
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
		{map[string]any{"command": "ls", "mode": "turbo"}, engine.StatusError, `[error: bad input: field "mode" must be one of`},
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
	cmd.Env = append(os.Environ(), "BASHVISOR_MCP_TOKEN=tok-123")
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
	re := regexp.MustCompile(`listening on (http://\S+/mcp) \(bearer token required\)`)
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
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{"tok-123", tr}}}, nil)
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
	for _, c := range []struct {
		name    string
		handler func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)
		status  engine.Status
	}{
		{"accept", (&elicitor{action: "accept"}).handle, engine.StatusFailed}, // it ran: not a git repository
		{"decline", (&elicitor{action: "decline"}).handle, engine.StatusDenied},
		{"no elicitation", nil, engine.StatusNeedsApproval},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(demoBin, "mcp", "-C", t.TempDir(), "-profile", "standard")
			stderr := &lockedBuffer{}
			cmd.Stderr = stderr
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, &mcp.ClientOptions{ElicitationHandler: c.handler}).
				Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			r := bash(t, context.Background(), cs, map[string]any{"command": "git push origin main"})
			if r.Status != c.status {
				t.Errorf("got %s %q, want %s\n%s", r.Status, r.Output, c.status, stderr)
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
	cs, _, _ := stdioServer(t, "-C", t.TempDir())
	parallelSleeps(t, cs, 50)
}
