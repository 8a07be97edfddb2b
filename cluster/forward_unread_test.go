package cluster_test

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestForwardUploadWhileReplyUnread: a server greets with one byte, then
// reads everything; the client uploads 1 MiB before it reads the greeting,
// as over TCP. Each direction is written by a goroutine of its own (sink),
// so the unread greeting does not stall the upload (review5: 294,912 of
// 1,048,576 bytes, then a timeout, when the stream actor wrote itself).
func TestForwardUploadWhileReplyUnread(t *testing.T) {
	testenv.Needf(t, testenv.Namespaces, sandbox.Probe().Namespaces, "no private namespaces: %s", sandbox.Probe())
	testenv.NeedsTool(t, "python3")
	if inFreshProcess(t) {
		return
	}
	_, c, dir := oneExecutor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	tc := engine.ToolContext{WorkingDir: dir, ConversationID: "fw5", Sandbox: engine.Sandbox{Profile: engine.ReadOnly}}
	serve := `exec python3 -c '
import socket
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR,1); s.bind(("127.0.0.1",3005)); s.listen(1)
while True:
    c,_=s.accept()
    try:
        c.sendall(b"G")
        while c.recv(65536): pass
    except OSError: pass
    c.close()
'`
	if r := c.Run(ctx, tc, engine.Input{Command: serve, Mode: engine.ModeBackground}); r.Status != engine.StatusStarted {
		t.Fatalf("server: %s %q", r.Status, r.Output)
	}
	wait := "for i in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/3005) 2>/dev/null && exit 0; sleep 0.1; done; exit 7"
	if r := c.Run(ctx, tc, engine.Input{Command: wait, Mode: engine.ModeSlow}); r.Status != engine.StatusOK {
		t.Fatalf("the server did not start: %s %q", r.Status, r.Output)
	}
	conn, err := c.Forward(ctx, "fw5", 3005)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	time.Sleep(2 * time.Second) // the greeting reaches the front
	_ = conn.SetWriteDeadline(time.Now().Add(20 * time.Second))
	start := time.Now()
	n, err := conn.Write(make([]byte, 1<<20))
	t.Logf("wrote %d of %d bytes in %v: %v", n, 1<<20, time.Since(start), err)
	if err != nil {
		t.Errorf("upload stalled: %s", fmt.Sprint(err))
	}
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	greeting := make([]byte, 1)
	if _, err := io.ReadFull(conn, greeting); err != nil || greeting[0] != 'G' {
		t.Errorf("the greeting: %q, %v", greeting, err)
	}
	shutdown(t, c)
}
