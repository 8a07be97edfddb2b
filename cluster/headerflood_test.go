package cluster_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/bashvisor/bashvisor/cluster"
)

// TestHeaderFloodCutOff: a peer without the token that opens a stream
// with a 1 MiB header list (one field of 1 MiB, or a thousand of 1 KiB)
// is cut off (the executor closes the connection, the stream unanswered)
// without the executor allocating the list: the executor runs in this
// process, whose allocations during the attack stay under a quarter of
// the list. With gRPC's default bound (16 MiB) the executor decoded the
// whole list (3 to 9 MiB allocated), answered the stream (RST_STREAM)
// and kept the connection until keepalive ended it.
func TestHeaderFloodCutOff(t *testing.T) {
	if inFreshProcess(t) {
		return
	}
	x, err := cluster.NewExecutor(testConfig(), cluster.ExecutorOptions{Listen: "127.0.0.1:0", Token: "s3cret-token", Name: "exec-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := x.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	const list = 1 << 20
	for _, tc := range []struct {
		name   string
		fields []hpack.HeaderField
	}{
		{"one field", []hpack.HeaderField{{Name: "x-pad", Value: strings.Repeat("a", list-len("x-pad")-32)}}},
		{"many fields", func() []hpack.HeaderField {
			var f []hpack.HeaderField
			for i := range list >> 10 {
				name := fmt.Sprintf("x-pad-%04d", i)
				f = append(f, hpack.HeaderField{Name: name, Value: strings.Repeat("a", 1<<10-len(name)-32)})
			}
			return f
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attack := headerFlood(t, x.Addr(), tc.fields)
			conn, err := net.Dial("tcp", x.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			wrote := make(chan error, 1)
			go func() { _, err := conn.Write(attack); wrote <- err }()
			seen, end := readUntilClosed(conn)
			runtime.ReadMemStats(&after)
			werr := <-wrote
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("frames from the executor: %v; then %v (the write: %v); allocated during the attack: %d KiB", seen, end, werr, allocated>>10)
			// Cut off: the connection closed, the stream never answered
			// (with the default bound the executor answers it, refused,
			// and keeps the connection until keepalive ends it).
			if end != io.EOF || slices.ContainsFunc(seen, func(s string) bool { return !strings.HasPrefix(s, "SETTINGS") && s != "GOAWAY" }) {
				t.Errorf("after a %d KiB header list without the token, the executor sent %v, then %v; want the connection closed, the stream unanswered", list>>10, seen, end)
			}
			if allocated > list/4 {
				t.Errorf("the process allocated %d KiB while an unauthenticated peer sent a %d KiB header list", allocated>>10, list>>10)
			}
		})
	}
}

// headerFlood returns the bytes of an HTTP/2 connection that opens a
// gRPC stream to protoactor's service at addr without the token, with
// fields after its own headers, in frames of HTTP/2's default size.
func headerFlood(t *testing.T, addr string, fields []hpack.HeaderField) []byte {
	t.Helper()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range append([]hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: "/remote.Remoting/Receive"},
		{Name: ":authority", Value: addr}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
	}, fields...) {
		if err := enc.WriteField(f); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	out.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&out, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	const frame = 16 << 10
	b := block.Bytes()
	first := b[:min(frame, len(b))]
	b = b[len(first):]
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first, EndHeaders: len(b) == 0}); err != nil {
		t.Fatal(err)
	}
	for len(b) > 0 {
		n := min(frame, len(b))
		if err := fr.WriteContinuation(1, n == len(b), b[:n]); err != nil {
			t.Fatal(err)
		}
		b = b[n:]
	}
	return out.Bytes()
}

// readUntilClosed reads the server's frames until the connection ends
// (or its deadline passes): the frames' types, and the read's error
// (io.EOF or a reset when the server closed the connection).
func readUntilClosed(conn net.Conn) ([]string, error) {
	fr := http2.NewFramer(io.Discard, conn)
	var seen []string
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			if errors.Is(err, syscall.ECONNRESET) {
				err = io.EOF
			}
			return seen, err
		}
		s := f.Header().Type.String()
		if r, ok := f.(*http2.RSTStreamFrame); ok {
			s += " " + r.ErrCode.String()
		}
		seen = append(seen, s)
	}
}
