package engine_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// countedUpstream is a loopback HTTP server standing in for a host of the
// internet, counting the bytes it read and wrote.
type countedUpstream struct {
	addr          string
	read, written atomic.Int64
	hits          atomic.Int64
}

func startCounted(t *testing.T, body string) *countedUpstream {
	t.Helper()
	u := &countedUpstream{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.addr = l.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		io.WriteString(w, body)
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(&countingListener{Listener: l, u: u}) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return u
}

type countingListener struct {
	net.Listener
	u *countedUpstream
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, u: l.u}, nil
}

type countingConn struct {
	net.Conn
	u *countedUpstream
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.u.read.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.u.written.Add(int64(n))
	return n, err
}

// noProxy runs a command with none of the proxy variables: a client that
// ignores them.
const noProxy = "env -u HTTP_PROXY -u http_proxy -u HTTPS_PROXY -u https_proxy -u ALL_PROXY -u all_proxy "

// A command with network has a resolver in its world: names the allowlist
// allows resolve (getent, Node's dns.lookup) to an address whose listeners
// carry a client that ignores the proxy variables to the allowed server,
// other names get NXDOMAIN; the result's Network and its network line say
// what went where and what was refused, with the bytes the upstream saw.
// A command without network keeps the host's resolv.conf and has no line.
func TestSandboxResolverAndCarry(t *testing.T) { bothLaunchers(t, testSandboxResolverAndCarry) }

func testSandboxResolverAndCarry(t *testing.T, mod func(*engine.Config)) {
	needNamespaces(t)
	testenv.NeedsTool(t, "curl")
	testenv.NeedsTool(t, "getent")
	up := startCounted(t, "package tarball\n")
	_, port, _ := net.SplitHostPort(up.addr)
	e := newEngine(t, mod)
	tc := engine.ToolContext{WorkingDir: t.TempDir(), ConversationID: "resolver",
		Sandbox: engine.Sandbox{Profile: engine.ReadOnly, Network: []string{"localhost:" + port, "registry.npmjs.org"}}}
	run := func(cmd string) engine.Result {
		t.Helper()
		return e.Run(context.Background(), tc, engine.Input{Command: cmd})
	}

	// Names: an allowed one resolves to the capture address, another is
	// refused; resolv.conf names the world's resolver.
	r := run(`cat /etc/resolv.conf; getent hosts registry.npmjs.org; getent hosts denied.example.com; echo "rc=$?"`)
	wantOut := "nameserver 127.0.0.1\noptions use-vc\n127.0.0.2       registry.npmjs.org\nrc=2\n[network: refused: denied.example.com]\n" +
		"[sandbox: the egress proxy refused denied.example.com: not in the network allowlist (setting: allow-net)]"
	if r.Status != engine.StatusOK || r.Output != wantOut {
		t.Fatalf("resolve: %s %q, want %q", r.Status, r.Output, wantOut)
	}
	if len(r.Network) != 1 || r.Network[0].Host != "denied.example.com" || r.Network[0].Port != 0 || r.Network[0].Denied == 0 {
		t.Errorf("Network = %+v, want the refused name", r.Network)
	}
	denied := 0
	for _, f := range r.Network {
		denied += f.Denied
	}

	// A client that ignores the proxy variables reaches the upstream by
	// the name's DNS answer, through the carried listener; the report's
	// bytes are the upstream's.
	before := up.hits.Load()
	r = run(`a=$(getent -s dns hosts localhost | cut -d' ' -f1); echo "$a"; ` + noProxy +
		`curl -sS --max-time 20 --resolve localhost:` + port + `:"$a" http://localhost:` + port + `/pkg.tgz`)
	if r.Status != engine.StatusOK || !strings.HasPrefix(r.Output, "127.0.0.2\npackage tarball\n[network: localhost ") {
		t.Fatalf("carried: %s %q", r.Status, r.Output)
	}
	if up.hits.Load() != before+1 {
		t.Errorf("the upstream saw %d requests, want 1", up.hits.Load()-before)
	}
	if len(r.Network) != 1 || r.Network[0].Host != "localhost" || strconv.Itoa(r.Network[0].Port) != port ||
		r.Network[0].BytesOut != up.read.Load() || r.Network[0].BytesIn != up.written.Load() {
		t.Errorf("Network = %+v, want localhost:%s with %d bytes out and %d in (what the upstream read and wrote)",
			r.Network, port, up.read.Load(), up.written.Load())
	}

	// The metrics count the bytes and the refusals so far.
	want := fmt.Sprintf(`
# HELP bashvisor_network_bytes_total Bytes sandboxed foreground commands moved through their egress proxy, by direction (out: acknowledged by the destination; in: received from it).
# TYPE bashvisor_network_bytes_total counter
bashvisor_network_bytes_total{direction="in"} %d
bashvisor_network_bytes_total{direction="out"} %d
# HELP bashvisor_network_refused_total Egress attempts (connections, requests, name lookups) refused to sandboxed foreground commands.
# TYPE bashvisor_network_refused_total counter
bashvisor_network_refused_total %d
`, up.written.Load(), up.read.Load(), denied)
	if err := testutil.CollectAndCompare(e.Metrics(), strings.NewReader(want), "bashvisor_network_bytes_total", "bashvisor_network_refused_total"); err != nil {
		t.Error(err)
	}

	// A name the allowlist does not name is refused on the carried
	// listener too, even at the capture address.
	r = run(noProxy + `curl -sS --fail --max-time 20 --resolve other.example:` + port + `:127.0.0.2 http://other.example:` + port + `/`)
	if r.Status != engine.StatusFailed || !strings.Contains(r.Output, "refused: other.example:"+port+"]") {
		t.Errorf("refused carried: %s %q", r.Status, r.Output)
	}

	// Node's dns.lookup (getaddrinfo).
	if _, err := exec.LookPath("node"); err == nil {
		r = run(`node -e "require('dns').lookup('registry.npmjs.org', (e, a) => console.log(e ? e.code : a))"`)
		if r.Status != engine.StatusOK || r.Output != "127.0.0.2\n" {
			t.Errorf("node dns.lookup: %s %q", r.Status, r.Output)
		}
	}

	// Without network: the host's resolv.conf, no line, no report.
	host, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	tc.Sandbox.Network = nil
	r = run(`cat /etc/resolv.conf`)
	if r.Status != engine.StatusOK || r.Output != string(host) || r.Network != nil {
		t.Errorf("without network: %s %q %+v, want the host's resolv.conf %q", r.Status, r.Output, r.Network, host)
	}
}

// Two commands with network that run at once in one conversation each
// have a resolver and capture address of their own (the second on
// 127.0.1.x): neither takes the other's ports, and each report is its own.
func TestSandboxResolverSlots(t *testing.T) {
	needNamespaces(t)
	testenv.NeedsTool(t, "getent")
	e := newEngine(t)
	tc := engine.ToolContext{WorkingDir: t.TempDir(), ConversationID: "slots",
		Sandbox: engine.Sandbox{Profile: engine.ReadOnly, Network: []string{"registry.npmjs.org"}}}
	ctx := context.Background()
	job := e.Run(ctx, tc, engine.Input{Mode: engine.ModeBackground, Command: "getent hosts registry.npmjs.org; sleep 600"})
	if job.Status != engine.StatusStarted {
		t.Fatalf("background: %s %q", job.Status, job.Output)
	}
	defer func() { _, _ = e.Kill(ctx, tc, job.JobID) }()
	r := e.Run(ctx, tc, engine.Input{Command: "cat /etc/resolv.conf; getent hosts registry.npmjs.org; getent hosts other.example"})
	want := "nameserver 127.0.1.1\noptions use-vc\n127.0.1.2       registry.npmjs.org\n"
	if r.Status != engine.StatusFailed || !strings.Contains(r.Output, want) || !strings.Contains(r.Output, "[network: refused: other.example]") {
		t.Errorf("second command: %s %q, want %q and the refusal", r.Status, r.Output, want)
	}
}

// A TLS client that ignores the proxy variables is carried by its
// ClientHello's server name, without the proxy terminating TLS: it sees
// the upstream's own certificate (httptest's, self-signed: OpenSSL's
// verify result 18).
func TestSandboxCarriedTLS(t *testing.T) {
	needNamespaces(t)
	testenv.NeedsTool(t, "curl")
	testenv.NeedsTool(t, "getent")
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "over tls\n") }))
	defer up.Close()
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	e := newEngine(t)
	tc := engine.ToolContext{WorkingDir: t.TempDir(), ConversationID: "tls",
		Sandbox: engine.Sandbox{Profile: engine.ReadOnly, Network: []string{"localhost:" + port}}}
	r := e.Run(context.Background(), tc, engine.Input{Command: `a=$(getent -s dns hosts localhost | cut -d' ' -f1); ` + noProxy +
		`curl -sS -k --max-time 20 -w '%{ssl_verify_result} %{remote_ip}\n' --resolve localhost:` + port + `:"$a" https://localhost:` + port + `/`})
	if r.Status != engine.StatusOK || !strings.HasPrefix(r.Output, "over tls\n18 127.0.0.2\n[network: localhost ") {
		t.Fatalf("carried TLS: %s %q", r.Status, r.Output)
	}
}
