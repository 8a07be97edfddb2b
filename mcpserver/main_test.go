package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// demoBin is the demo binary built by TestMain for the stdio tests.
var demoBin string

func TestMain(m *testing.M) {
	sandbox.Main() // restricted runs re-execute this binary as the sandbox helper
	dir, err := os.MkdirTemp("", "mcpserver-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	demoBin = filepath.Join(dir, "demo")
	out, err := exec.Command("go", "build", "-o", demoBin, "../cmd/demo").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building the demo binary: %v\n%s", err, out)
		demoBin = "" // stdio tests fail with this message; the rest run
	}
	// goleak calls Cleanup instead of os.Exit: exit with its code, or a
	// leak found after passing tests would exit 0.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) { os.RemoveAll(dir); os.Exit(code) }))
}

func needDemo(t testing.TB) {
	t.Helper()
	if demoBin == "" {
		t.Fatal("the demo binary did not build (see TestMain's output)")
	}
}

// needLandlock is the one place this package's tests give up for lack of
// a host feature: without Landlock it skips the test, or fails it when
// REQUIRE_LANDLOCK=1 (CI).
func needLandlock(t testing.TB) {
	t.Helper()
	c := sandbox.Probe()
	testenv.Needf(t, testenv.Landlock, c.Available(), "restricted mode unavailable: %s", c)
}

// testConfig is an engine configuration with short bounds for tests.
func testConfig(t testing.TB) engine.Config {
	c := engine.DefaultConfig()
	c.Timeout = 10 * time.Second
	c.Lifecycle.Grace = 200 * time.Millisecond
	c.Lifecycle.CleanupWait = 3 * time.Second
	c.ProgressInterval = 100 * time.Millisecond
	c.OutputDir = t.TempDir()
	return c
}

func newEngine(t testing.TB, mod func(*engine.Config)) *engine.Engine {
	t.Helper()
	c := testConfig(t)
	if mod != nil {
		mod(&c)
	}
	e, err := engine.New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := e.Shutdown(ctx); err != nil {
			t.Errorf("engine shutdown: %v", err)
		}
	})
	return e
}

// results collects OnResult calls.
type results struct {
	mu  sync.Mutex
	all []engine.Result
	ch  chan engine.Result
}

func newResults() *results { return &results{ch: make(chan engine.Result, 1000)} }

func (r *results) add(_ string, _ engine.Input, res engine.Result) {
	r.mu.Lock()
	r.all = append(r.all, res)
	r.mu.Unlock()
	select {
	case r.ch <- res:
	default: // benchmarks make more results than anyone waits for
	}
}

// wait returns the next result, failing after d.
func (r *results) wait(t testing.TB, d time.Duration) engine.Result {
	t.Helper()
	select {
	case res := <-r.ch:
		return res
	case <-time.After(d):
		t.Fatalf("no result within %v", d)
		return engine.Result{}
	}
}

// connect serves srv over an in-memory connection and returns a client
// session, closed at the end of the test.
func connect(t testing.TB, srv *mcp.Server, copts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	return connectOver(t, srv, st, ct, copts)
}

func connectOver(t testing.TB, srv *mcp.Server, st, ct mcp.Transport, copts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, copts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

// setup is the usual fixture: an engine, a server on dir, a client.
type setup struct {
	e   *engine.Engine
	srv *mcp.Server
	cs  *mcp.ClientSession
	dir string
	res *results
}

func newSetup(t testing.TB, mod func(*engine.Config), opts Options) *setup {
	t.Helper()
	s := &setup{e: newEngine(t, mod), res: newResults()}
	if opts.WorkingDir == "" {
		opts.WorkingDir = t.TempDir()
	}
	s.dir = opts.WorkingDir
	opts.OnResult = s.res.add
	s.srv = New(s.e, opts)
	s.cs = connect(t, s.srv, nil)
	return s
}

// call calls a tool and decodes its structured content into out (when
// non-nil: the call then asks for it with _meta). It returns the text
// content.
func call(t testing.TB, ctx context.Context, cs *mcp.ClientSession, tool string, args any, out any) (*mcp.CallToolResult, string) {
	t.Helper()
	p := &mcp.CallToolParams{Name: tool, Arguments: args}
	if out != nil {
		p.Meta = mcp.Meta{metaStructured: true}
	}
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	return res, decode(t, res, out)
}

// decode checks a tool result's content (the text, then at most one
// resource link to the output, of one of our templates) and decodes its
// structured content into out (when non-nil). It returns the text.
func decode(t testing.TB, res *mcp.CallToolResult, out any) string {
	t.Helper()
	if len(res.Content) != 1 && len(res.Content) != 2 {
		t.Fatalf("want 1 or 2 content blocks, got %d", len(res.Content))
	}
	if len(res.Content) == 2 {
		l, ok := res.Content[1].(*mcp.ResourceLink)
		if !ok || !strings.HasPrefix(l.URI, "bashvisor://conversation/") || l.MIMEType != "text/plain" {
			t.Fatalf("second content block %#v, want a resource link to the output", res.Content[1])
		}
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, not text", res.Content[0])
	}
	if out != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("structured content %s: %v", b, err)
		}
	}
	return text.Text
}

// bash runs one bash call and checks the invariants every result keeps:
// text == structured output, isError == (status not ok or started), structured
// content valid against the output schema.
func bash(t testing.TB, ctx context.Context, cs *mcp.ClientSession, args any) engine.Result {
	t.Helper()
	var r engine.Result
	res, text := call(t, ctx, cs, toolBash, args, &r)
	if text != r.Output {
		t.Errorf("text content %q != structured output %q", text, r.Output)
	}
	if want := r.Status != engine.StatusOK && r.Status != engine.StatusStarted; res.IsError != want {
		t.Errorf("isError %v for status %s", res.IsError, r.Status)
	}
	validate(t, resultOutputSchema, res.StructuredContent)
	return r
}

// validate checks v against a JSON schema.
func validate(t testing.TB, schema string, v any) {
	t.Helper()
	var s jsonschema.Schema
	if err := json.Unmarshal([]byte(schema), &s); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	var inst any
	json.Unmarshal(b, &inst)
	if err := rs.Validate(inst); err != nil {
		t.Errorf("structured content %s does not match its schema: %v", b, err)
	}
}

// alive reports whether pid names a live (not zombie) process.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// state follows "pid (comm) "; comm may contain spaces or parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// waitDead waits until no pid is alive.
func waitDead(t testing.TB, d time.Duration, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(d)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("pid %d still alive after %v", pid, d)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// readPids waits for a file of whitespace-separated pids.
func readPids(t testing.TB, path string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		f := strings.Fields(string(b))
		if len(f) >= n && strings.HasSuffix(string(b), "\n") {
			var pids []int
			for _, s := range f[:n] {
				pid, err := strconv.Atoi(s)
				if err != nil {
					t.Fatal(err)
				}
				pids = append(pids, pid)
			}
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid file %s: %q", path, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pipeTransports is like mcp.NewInMemoryTransports but exposes the client
// end's connection, so a test can drop it.
func pipeTransports() (server, client mcp.Transport, clientConn net.Conn) {
	c1, c2 := net.Pipe()
	return &mcp.IOTransport{Reader: c1, Writer: c1}, &mcp.IOTransport{Reader: c2, Writer: c2}, c2
}
