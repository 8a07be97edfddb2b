package engine_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// tlsScript makes n HTTPS requests each way, alternated, from one Python
// process in the sandbox, each on a new carried connection to the
// capture address (TLS handshake included, the certificate verified):
// to a host spliced end to end (trusting its CA from a file) and to a
// broker host (trusting the system bundle, which holds the
// conversation's CA), with the placeholder in its Authorization header;
// it prints the median microseconds of each.
const tlsScript = `
import os, socket, ssl, statistics, sys, time
addr, spliced, brokered, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
plain = ssl.create_default_context(cafile=sys.argv[5])
system = ssl.create_default_context()
token = os.environ["BVBENCH_TOKEN"]
def get(port, ctx):
    t = time.perf_counter()
    c = socket.create_connection((addr, port))
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as Go and curl do
    s = ctx.wrap_socket(c, server_hostname="localhost")
    s.sendall(b"GET / HTTP/1.1\r\nHost: localhost:%d\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n" % (port, token.encode()))
    b = b""
    while True:
        d = s.recv(65536)
        if not d: break
        b += d
    s.close()
    assert b"200 OK" in b, b
    return (time.perf_counter() - t) * 1e6
a, b = [], []
for i in range(n):
    a.append(get(spliced, plain))
    b.append(get(brokered, system))
print(int(statistics.median(a)), int(statistics.median(b)))
`

// BenchmarkBrokeredTLS compares, in one sandboxed process, a carried TLS
// connection spliced end to end with one to a broker host, whose TLS the
// proxy terminates to put the secret in its header, and reports the
// medians and their difference per connection.
func BenchmarkBrokeredTLS(b *testing.B) {
	needNamespaces(b)
	testenv.NeedsTool(b, "python3")
	testenv.NeedsTool(b, "getent")
	const secret = "ghp_BenchS3cretT0kenNotInTheSandbox01234"
	b.Setenv("BVBENCH_TOKEN", secret)
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	_, splicedCA, spliced := upstreamPKI(b, ok)
	roots, _, brokered := upstreamPKI(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secret {
			http.Error(w, "no secret", http.StatusUnauthorized)
			return
		}
		w.Write([]byte("ok\n"))
	}))
	wd := b.TempDir()
	if err := os.WriteFile(filepath.Join(wd, "ca.pem"), splicedCA, 0o644); err != nil {
		b.Fatal(err)
	}
	e := newEngine(b, func(c *engine.Config) {
		c.Broker = []string{"localhost:" + brokered + "=env:BVBENCH_TOKEN"}
		c.BrokerRoots = roots
	})
	tc := engine.ToolContext{WorkingDir: wd, ConversationID: "bench",
		Sandbox: engine.Sandbox{Profile: engine.ReadOnly, Network: []string{"localhost:" + spliced, "localhost:" + brokered}}}
	cmd := `python3 -c '` + tlsScript + `' "$(getent -s dns hosts localhost | cut -d' ' -f1)" ` + spliced + " " + brokered + " 50 " + filepath.Join(wd, "ca.pem")
	var plain, broker []float64
	for b.Loop() {
		r := e.Run(context.Background(), tc, engine.Input{Command: cmd, Mode: engine.ModeSlow})
		f := strings.Fields(r.Output)
		if r.Status != engine.StatusOK || len(f) < 2 {
			b.Fatalf("%s %q", r.Status, r.Output)
		}
		p, _ := strconv.ParseFloat(f[0], 64)
		k, _ := strconv.ParseFloat(f[1], 64)
		plain, broker = append(plain, p), append(broker, k)
	}
	med := func(d []float64) float64 { slices.Sort(d); return d[len(d)/2] / 1000 }
	p, k := med(plain), med(broker)
	b.ReportMetric(p, "carried-ms")
	b.ReportMetric(k, "brokered-ms")
	b.ReportMetric(k-p, "brokered-over-carried-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkSandboxWithBroker is BenchmarkSandboxWithNetwork's command in
// an engine that brokers a secret: its start also mounts the CA bundle
// over the system's (and the conversation's broker is made once).
func BenchmarkSandboxWithBroker(b *testing.B) {
	b.Setenv("BVBENCH_TOKEN", "ghp_BenchS3cretT0kenNotInTheSandbox01234")
	benchSandboxTrue(b, []string{"registry.npmjs.org"}, func(c *engine.Config) { c.Broker = []string{"registry.npmjs.org=env:BVBENCH_TOKEN"} })
}
