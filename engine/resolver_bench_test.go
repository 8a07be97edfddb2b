package engine_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// carryScript connects to the upstream n times each way, alternated, from
// one Python process in the sandbox: through the proxy (an absolute-URI
// request to HTTP_PROXY, what a proxy-aware client sends) and carried (to
// the capture address the resolver gives, Host header only, what a client
// that ignores the proxy variables sends), each connection reading the
// whole answer, and prints the median microseconds of each; the carried
// one includes its name lookup (gethostbyname over TCP to the world's
// resolver).
const carryScript = `
import os, socket, statistics, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
proxy = os.environ["HTTP_PROXY"].rsplit(":", 1)
def get(addr, req):
    t = time.perf_counter()
    s = socket.create_connection(addr)
    s.sendall(req)
    b = b""
    while True:
        d = s.recv(65536)
        if not d: break
        b += d
    s.close()
    assert b"200 OK" in b, b
    return (time.perf_counter() - t) * 1e6
def resolved():
    # the lookup a client that ignores the proxy makes first, over TCP to
    # the resolver of the world (an allowed name not in /etc/hosts)
    t = time.perf_counter()
    a = socket.gethostbyname("registry.npmjs.org")
    return a, (time.perf_counter() - t) * 1e6
via, carried = [], []
for i in range(n):
    via.append(get((proxy[0].split("//")[1], int(proxy[1])), b"GET http://localhost:%d/ HTTP/1.1\r\nHost: localhost:%d\r\nConnection: close\r\n\r\n" % (port, port)))
    a, dt = resolved()
    carried.append(dt + get((a, port), b"GET / HTTP/1.1\r\nHost: localhost:%d\r\nConnection: close\r\n\r\n" % port))
print(int(statistics.median(via)), int(statistics.median(carried)))
`

// BenchmarkCarried compares a connection through the proxy (a client that
// reads HTTP_PROXY) with one carried from the capture address (a client
// that does not), side by side in one sandboxed process, and reports the
// medians and their difference per connection.
func BenchmarkCarried(b *testing.B) {
	needNamespaces(b)
	testenv.NeedsTool(b, "python3")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok\n") })}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	e := newEngine(b)
	tc := engine.ToolContext{WorkingDir: b.TempDir(), ConversationID: "bench",
		Sandbox: engine.Sandbox{Profile: engine.ReadOnly, Network: []string{"localhost:" + port, "registry.npmjs.org"}}}
	cmd := `python3 -c '` + carryScript + `' ` + port + ` 50`
	var via, carried []float64
	for b.Loop() {
		r := e.Run(context.Background(), tc, engine.Input{Command: cmd, Mode: engine.ModeSlow})
		f := strings.Fields(r.Output)
		if r.Status != engine.StatusOK || len(f) < 2 {
			b.Fatalf("%s %q", r.Status, r.Output)
		}
		v, _ := strconv.ParseFloat(f[0], 64)
		c, _ := strconv.ParseFloat(f[1], 64)
		via, carried = append(via, v), append(carried, c)
	}
	med := func(d []float64) float64 { slices.Sort(d); return d[len(d)/2] / 1000 }
	v, c := med(via), med(carried)
	b.ReportMetric(v, "proxy-ms")
	b.ReportMetric(c, "carried-ms")
	b.ReportMetric(c-v, "carried-over-proxy-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkSandboxNoNetwork is a sandboxed command without network (read
// only, in the conversation's world): the resolver and carried listeners
// are made only for commands with network, so this costs what it did.
func BenchmarkSandboxNoNetwork(b *testing.B) { benchSandboxTrue(b, nil) }

// BenchmarkSandboxWithNetwork is the same command with an allowlist: its
// start now makes the resolver, the carried listeners (80, 443) and the
// resolv.conf mount besides the proxy.
func BenchmarkSandboxWithNetwork(b *testing.B) { benchSandboxTrue(b, []string{"registry.npmjs.org"}) }

func benchSandboxTrue(b *testing.B, network []string, mod ...func(*engine.Config)) {
	needNamespaces(b)
	e := newEngine(b, mod...)
	tc := engine.ToolContext{WorkingDir: b.TempDir(), ConversationID: "bench", Sandbox: engine.Sandbox{Profile: engine.ReadOnly, Network: network}}
	var d []time.Duration
	for b.Loop() {
		start := time.Now()
		if r := e.Run(context.Background(), tc, engine.Input{Command: "true"}); r.Status != engine.StatusOK {
			b.Fatalf("%s %q", r.Status, r.Output)
		}
		d = append(d, time.Since(start))
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, "median-ms")
	b.ReportMetric(0, "ns/op")
}
