package cluster_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/cluster"
	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// echoServer serves on port 3000 of its conversation's loopback: it
// sends back what each connection sends, one connection at a time.
const echoServer = `exec python3 -c '
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 3000))
s.listen(16)
while True:
    c, _ = s.accept()
    try:
        while True:
            d = c.recv(262144)
            if not d:
                break
            c.sendall(d)
    except OSError:
        pass
    c.close()
'`

// BenchmarkForwardThroughput: a forwarded connection that sends 4 MiB to
// a conversation's echo server while it reads them back (8 MiB carried
// per operation, MB/s counting both ways), through a fleet front to the
// conversation's executor process (Client.Forward: the cluster transport
// between two processes) and directly on an engine of this process
// (Engine.Forward), in three alternating rounds; each fleet round
// reports its time over the direct round before it (x-direct).
//
//	go test ./cluster -run '^$' -bench ForwardThroughput -benchtime 20x
func BenchmarkForwardThroughput(b *testing.B) {
	testenv.Needf(b, testenv.Namespaces, sandbox.Probe().Namespaces, "no private namespaces: %s", sandbox.Probe())
	testenv.NeedsTool(b, "python3")
	mark := b.Name()
	local, err := engine.New(testConfig())
	if err != nil {
		b.Fatal(err)
	}
	ex := startExecutor(b, execSpec{name: "exec-1", mark: mark})
	c := newClient(b, cluster.ClientOptions{Membership: cluster.Static(ex.addr)})
	defer func() {
		// The local engine's jobs first: the front's goroutines are
		// those started after it.
		_ = local.Shutdown(context.Background())
		shutdown(b, c)
		ex.stop()
	}()
	waitReady(b, c, 1)
	dir := b.TempDir()
	ctx := context.Background()
	type forwarder interface {
		Run(context.Context, engine.ToolContext, engine.Input) engine.Result
		Forward(context.Context, string, int) (net.Conn, error)
	}
	ways := []struct {
		name string
		f    forwarder
	}{{"direct", local}, {"fleet", c}}
	for _, w := range ways {
		tc := engine.ToolContext{WorkingDir: dir, ConversationID: "echo", Sandbox: engine.Sandbox{Profile: engine.ReadOnly}}
		if r := w.f.Run(ctx, tc, engine.Input{Command: echoServer, Mode: engine.ModeBackground}); r.Status != engine.StatusStarted {
			b.Fatalf("%s: the server: %s %q", w.name, r.Status, r.Output)
		}
		wait := "for i in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/3000) 2>/dev/null && exit 0; sleep 0.1; done; exit 7"
		if r := w.f.Run(ctx, tc, engine.Input{Command: wait, Mode: engine.ModeSlow}); r.Status != engine.StatusOK {
			b.Fatalf("%s: the server did not start: %s %q", w.name, r.Status, r.Output)
		}
	}
	data := make([]byte, 4<<20)
	_, _ = rand.Read(data)
	back := make([]byte, len(data))
	echo := func(b *testing.B, f forwarder) {
		conn, err := f.Forward(ctx, "echo", 3000)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(2 * time.Minute))
		sent := make(chan error, 1)
		go func() {
			_, err := conn.Write(data)
			sent <- err
		}()
		if _, err := io.ReadFull(conn, back); err != nil {
			b.Fatal(err)
		}
		if err := <-sent; err != nil {
			b.Fatal(err)
		}
		if !bytes.Equal(back, data) {
			b.Fatal("the echo differs from what was sent")
		}
	}
	for round := range 3 {
		var direct time.Duration
		for _, w := range ways {
			b.Run(fmt.Sprintf("%s/round-%d", w.name, round), func(b *testing.B) {
				b.SetBytes(2 * int64(len(data)))
				for b.Loop() {
					echo(b, w.f)
				}
				per := b.Elapsed() / time.Duration(b.N)
				if w.name == "direct" {
					direct = per
				} else if direct > 0 {
					b.ReportMetric(float64(per)/float64(direct), "x-direct")
				}
			})
		}
	}
}
