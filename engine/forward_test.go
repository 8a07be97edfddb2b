package engine_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// serveIn starts `python3 -m http.server PORT` as a background job of
// conversation tc, serving an index.html that reads body, and waits
// until the conversation's next command reaches it; it returns that
// command's result.
func serveIn(t *testing.T, e *engine.Engine, tc engine.ToolContext, port, body string) engine.Result {
	t.Helper()
	if err := os.WriteFile(filepath.Join(tc.WorkingDir, "index.html"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.Run(context.Background(), tc, engine.Input{Mode: engine.ModeBackground, Command: "exec python3 -m http.server " + port})
	if r.Status != engine.StatusStarted {
		t.Fatalf("server: %s %q", r.Status, r.Output)
	}
	get := `for i in $(seq 200); do curl -sf http://localhost:` + port + `/index.html && exit 0; sleep 0.1; done; exit 7`
	got := e.Run(context.Background(), tc, engine.Input{Command: get})
	if got.Status != engine.StatusOK || !strings.HasPrefix(got.Output, body) {
		t.Fatalf("the conversation's server: %s %q", got.Status, got.Output)
	}
	return got
}

// forwardGet fetches path from port of conversation conv through
// Engine.Forward.
func forwardGet(e *engine.Engine, conv string, port int, path string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := e.Forward(ctx, conv, port)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestForwardAndListening: two conversations both serve on port 3000 of
// their own loopback; each result lists the conversation's listening
// port and the job holding it, and Engine.Forward reaches the right
// conversation's server from the host. A port nothing listens on is
// refused, a conversation without a sandboxed network is bad input, and
// a conversation whose commands ended lists nothing.
func TestForwardAndListening(t *testing.T) {
	needNamespaces(t)
	testenv.NeedsTool(t, "python3", "curl")
	e := newEngine(t)
	a := conversation("fwd-a", t.TempDir(), engine.WorkspaceWrite)
	b := conversation("fwd-b", t.TempDir(), engine.WorkspaceWrite)
	t.Cleanup(func() {
		for _, c := range []string{a.ConversationID, b.ConversationID} {
			_ = e.EndConversation(context.Background(), c)
		}
	})
	ra := serveIn(t, e, a, "3000", "from a\n")
	rb := serveIn(t, e, b, "3000", "from b\n")
	for _, r := range []engine.Result{ra, rb} {
		if len(r.Listening) != 1 || r.Listening[0].Port != 3000 || r.Listening[0].Job != "job-1" || r.Listening[0].PID <= 0 {
			t.Errorf("listening: %+v, want port 3000 of job-1", r.Listening)
		}
		if !strings.HasSuffix(r.Output, "\n[listening: 3000 (job-1)]") {
			t.Errorf("the result's text does not end with the listening note: %q", r.Output)
		}
	}
	for conv, want := range map[string]string{a.ConversationID: "from a\n", b.ConversationID: "from b\n"} {
		if got, err := forwardGet(e, conv, 3000, "/index.html"); err != nil || got != want {
			t.Errorf("Forward(%s, 3000): %q, %v; want %q", conv, got, err, want)
		}
	}
	if _, err := e.Forward(context.Background(), a.ConversationID, 3001); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("Forward to a port nothing listens on: %v, want ECONNREFUSED", err)
	}
	for _, port := range []int{0, 70000} {
		if _, err := e.Forward(context.Background(), a.ConversationID, port); !errors.Is(err, engine.ErrBadInput) {
			t.Errorf("Forward to port %d: %v, want ErrBadInput", port, err)
		}
	}
	if _, err := e.Forward(context.Background(), "fwd-none", 3000); !errors.Is(err, engine.ErrBadInput) {
		t.Errorf("Forward into a conversation without a world: %v, want ErrBadInput", err)
	}
	// A server that is not a job's (it left the job's process group) is
	// listed with its pid.
	r := e.Run(context.Background(), a, engine.Input{Mode: engine.ModeBackground,
		Command: "setsid python3 -m http.server 3002 >/dev/null 2>&1 & sleep 600"})
	if r.Status != engine.StatusStarted {
		t.Fatalf("%s %q", r.Status, r.Output)
	}
	var last engine.Result
	testenv.Eventually(t, 30*time.Second, func() bool {
		last = e.Run(context.Background(), a, engine.Input{Command: "true"})
		return len(last.Listening) == 2
	}, "listening: %+v", testenv.Last(&last.Listening))
	if l := last.Listening[1]; l.Port != 3002 || l.Job != "" || l.PID <= 0 || !strings.Contains(last.Output, "[listening: 3000 (job-1), 3002 (pid ") {
		t.Errorf("a server outside every job's group: %+v %q", last.Listening, last.Output)
	}
	if _, err := e.Kill(context.Background(), b, "job-1"); err != nil {
		t.Fatal(err)
	}
	if r := e.Run(context.Background(), b, engine.Input{Command: "true"}); r.Listening != nil || r.Output != "" {
		t.Errorf("after its server was killed: %+v %q", r.Listening, r.Output)
	}
}
