package cluster_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/cluster"
	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestForwardThroughFront: Client.Forward carries a connection to a
// server a conversation runs on its sandboxed loopback, on its executor,
// over the cluster transport: an HTTP request and a 3 MiB answer arrive
// whole and in order, both ways' ends are passed on, a port nothing
// listens on and a conversation that runs nowhere are errors, and the
// front's Shutdown ends a connection left open.
func TestForwardThroughFront(t *testing.T) {
	testenv.Needf(t, testenv.Namespaces, sandbox.Probe().Namespaces, "no private namespaces: %s", sandbox.Probe())
	testenv.NeedsTool(t, "python3")
	if inFreshProcess(t) {
		return
	}
	_, c, dir := oneExecutor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tc := engine.ToolContext{WorkingDir: dir, ConversationID: "fw", Sandbox: engine.Sandbox{Profile: engine.ReadOnly}}
	serve := "mkdir -p /tmp/site && head -c 3145728 /dev/urandom > /tmp/site/big && cd /tmp/site && exec python3 -m http.server 3000"
	if r := c.Run(ctx, tc, engine.Input{Command: serve, Mode: engine.ModeBackground}); r.Status != engine.StatusStarted {
		t.Fatalf("server: %s %q", r.Status, r.Output)
	}
	wait := "for i in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/3000) 2>/dev/null && exec sha256sum /tmp/site/big; sleep 0.1; done; exit 7"
	r := c.Run(ctx, tc, engine.Input{Command: wait, Mode: engine.ModeSlow})
	if r.Status != engine.StatusOK {
		t.Fatalf("the server did not start: %s %q", r.Status, r.Output)
	}
	want, _, _ := strings.Cut(r.Output, " ")
	conn, err := c.Forward(ctx, "fw", 3000)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(50 * time.Second))
	fmt.Fprint(conn, "GET /big HTTP/1.0\r\nHost: localhost\r\n\r\n")
	got, err := io.ReadAll(conn) // HTTP/1.0: the server closes, the end comes through
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := bytes.Cut(got, []byte("\r\n\r\n"))
	if sum := fmt.Sprintf("%x", sha256.Sum256(body)); !ok || len(body) != 3<<20 || sum != want {
		t.Errorf("the body through the front: %d bytes, sha256 %s, want %d bytes %s (head %.80q)", len(body), sum, 3<<20, want, got)
	}
	if _, err := c.Forward(ctx, "fw", 3001); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("a port nothing listens on: %v", err)
	}
	if _, err := c.Forward(ctx, "nowhere", 3000); !errors.Is(err, engine.ErrBadInput) {
		t.Errorf("a conversation that runs nowhere: %v", err)
	}
	// A connection left open does not hold up the front's Shutdown,
	// which ends it.
	idle, err := c.Forward(ctx, "fw", 3000)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(idle, "GET /big HTTP/1.0\r\n") // and nothing more
	start := time.Now()
	shutdown(t, c)
	_ = idle.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadAll(idle); err != nil || time.Since(start) > 20*time.Second {
		t.Errorf("an open connection at Shutdown: %v after %v", err, time.Since(start))
	}
}

// TestForwardManyAtOnce: forty forwarded connections download 4 MiB
// each from one executor at once, each reader waiting before it reads so
// that every stream's window fills, while another conversation's call
// runs there: every download arrives whole and the call answers ok.
// Before the streams of a front and an executor shared one credit
// (linkWindow), their queued data made a transport batch over gRPC's
// 4 MiB, which failed the connection: the downloads were cut short and
// the executor, with the call, was lost.
func TestForwardManyAtOnce(t *testing.T) {
	testenv.Needf(t, testenv.Namespaces, sandbox.Probe().Namespaces, "no private namespaces: %s", sandbox.Probe())
	testenv.NeedsTool(t, "python3")
	if inFreshProcess(t) {
		return
	}
	_, c, dir := oneExecutor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tc := engine.ToolContext{WorkingDir: dir, ConversationID: "fw", Sandbox: engine.Sandbox{Profile: engine.ReadOnly}}
	serveBig(ctx, t, c, tc)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	wg.Add(1)
	go func() {
		defer wg.Done()
		other := engine.ToolContext{WorkingDir: dir, ConversationID: "other"}
		if r := c.Run(ctx, other, engine.Input{Command: "sleep 5; echo done", Mode: engine.ModeSlow}); r.Status != engine.StatusOK {
			errs <- fmt.Errorf("a call meanwhile: %s %q", r.Status, r.Output)
		}
	}()
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := c.Forward(ctx, "fw", 3000)
			if err != nil {
				errs <- fmt.Errorf("connection %d: %w", i, err)
				return
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(150 * time.Second))
			fmt.Fprint(conn, "GET /big HTTP/1.0\r\nHost: localhost\r\n\r\n")
			time.Sleep(2 * time.Second) // the windows fill
			got, err := io.ReadAll(conn)
			_, body, _ := bytes.Cut(got, []byte("\r\n\r\n"))
			if err != nil || len(body) != 4<<20 {
				errs <- fmt.Errorf("connection %d: %d bytes of 4 MiB, %v", i, len(body), err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestForwardStalledReaders: twelve forwarded connections whose readers
// never read (each has more than its window waiting) leave the other
// forwards between the front and that executor their speed: a 4 MiB
// download beside them arrives whole within 40 s (it stalled until the
// stalled ones' writes timed out, a minute).
// The streams share the link's credit (linkWindow) only for what is in
// the transport: a peer says Received as soon as data leaves it.
func TestForwardStalledReaders(t *testing.T) {
	testenv.Needf(t, testenv.Namespaces, sandbox.Probe().Namespaces, "no private namespaces: %s", sandbox.Probe())
	testenv.NeedsTool(t, "python3")
	if inFreshProcess(t) {
		return
	}
	_, c, dir := oneExecutor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tc := engine.ToolContext{WorkingDir: dir, ConversationID: "fw", Sandbox: engine.Sandbox{Profile: engine.ReadOnly}}
	serveBig(ctx, t, c, tc)
	for i := range 12 {
		conn, err := c.Forward(ctx, "fw", 3000)
		if err != nil {
			t.Fatalf("stalled %d: %v", i, err)
		}
		defer conn.Close()
		fmt.Fprint(conn, "GET /big HTTP/1.0\r\nHost: localhost\r\n\r\n") // and never read
	}
	time.Sleep(3 * time.Second) // their windows fill
	conn, err := c.Forward(ctx, "fw", 3000)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Within 40 s: a sink gives up on a connection that reads nothing
	// for a minute, which would free the link anyway.
	start := time.Now()
	_ = conn.SetDeadline(start.Add(40 * time.Second))
	fmt.Fprint(conn, "GET /big HTTP/1.0\r\nHost: localhost\r\n\r\n")
	got, err := io.ReadAll(conn)
	if _, body, _ := bytes.Cut(got, []byte("\r\n\r\n")); err != nil || len(body) != 4<<20 {
		t.Errorf("the download beside them: %d bytes of 4 MiB after %v, %v", len(body), time.Since(start), err)
	}
}

// serveBig starts, in tc's conversation, a background HTTP server of a
// 4 MiB file /big on port 3000, and waits until it listens.
func serveBig(ctx context.Context, t *testing.T, c *cluster.Client, tc engine.ToolContext) {
	t.Helper()
	serve := "mkdir -p /tmp/site && head -c 4194304 /dev/urandom > /tmp/site/big && cd /tmp/site && exec python3 -m http.server 3000"
	if r := c.Run(ctx, tc, engine.Input{Command: serve, Mode: engine.ModeBackground}); r.Status != engine.StatusStarted {
		t.Fatalf("server: %s %q", r.Status, r.Output)
	}
	wait := "for i in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/3000) 2>/dev/null && exit 0; sleep 0.1; done; exit 7"
	if r := c.Run(ctx, tc, engine.Input{Command: wait, Mode: engine.ModeSlow}); r.Status != engine.StatusOK {
		t.Fatalf("the server did not start: %s %q", r.Status, r.Output)
	}
}
