package egress

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/testenv"
	"pgregory.net/rapid"
)

// TestCarryTLSBySNI: a TLS client that knows nothing of proxies reaches an
// allowed host through the carried listener, end to end (it sees the
// upstream's own certificate); a name not allowed, a name that resolves
// to loopback without an exact entry, and a hello without SNI are
// refused, and every decision is reported with Method "TLS".
func TestCarryTLSBySNI(t *testing.T) {
	up := newUpstream(t, true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello "+r.Host) }))
	ds := &decisions{}
	p, _ := startProxy(t, Policy{Allow: allow(t, up.hostport(), "localhost"), Log: ds.add})
	addr := carrier(t, p, up.port)

	conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "localhost", RootCAs: pkiOnce().pool})
	if err != nil {
		t.Fatal(err)
	}
	if got := conn.ConnectionState().PeerCertificates[0].Raw; !bytes.Equal(got, pkiOnce().cert.Certificate[0]) {
		t.Error("the carried connection did not see the upstream's own certificate")
	}
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if code, body := readAll(t, resp, err); code != 200 || body != "hello localhost" {
		t.Errorf("carried: %d %q", code, body)
	}
	conn.Close()

	// The same listener carrying for 443: "localhost" is allowed by name
	// on 443 but resolves to loopback, which only an exact entry lets by.
	l443, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Carry(l443, 443); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ addr, name, why string }{
		{addr, "evil.example", "not in the allowlist"},
		{l443.Addr().String(), "localhost", "loopback address"},
		{addr, "", "no server name"},
	} {
		conn, err := tls.Dial("tcp", c.addr, &tls.Config{ServerName: c.name, InsecureSkipVerify: true})
		if err == nil {
			conn.Close()
			t.Errorf("%q: the handshake succeeded", c.name)
		}
		found := false
		for _, d := range ds.all() {
			found = found || !d.Allowed && d.Host == c.name && d.Method == "TLS" && strings.Contains(d.Reason, c.why)
		}
		if !found {
			t.Errorf("%q: no refusal %q in %+v", c.name, c.why, ds.all())
		}
	}
}

// TestCarryHTTPByHost: plain HTTP is carried by its Host header, a
// refused one gets a 403 with the reason, and a request whose header
// passes the 64 kB the listener reads, or that is neither HTTP nor TLS,
// is refused.
func TestCarryHTTPByHost(t *testing.T) {
	up := newUpstream(t, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.Host, b)
	}))
	ds := &decisions{}
	p, _ := startProxy(t, Policy{Allow: allow(t, up.hostport()), Log: ds.add})
	addr := carrier(t, p, up.port)
	send := func(raw string) string {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
		io.WriteString(conn, raw)
		b, _ := io.ReadAll(conn)
		return string(b)
	}
	if got := send("POST /x HTTP/1.1\r\nHost: " + up.hostport() + "\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbody"); !strings.HasSuffix(got, "POST "+up.hostport()+" body") {
		t.Errorf("carried: %q", got)
	}
	if got := send("GET / HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n"); !strings.Contains(got, "403") || !strings.Contains(got, "not in the allowlist") {
		t.Errorf("refused: %q", got)
	}
	if got := send("GET / HTTP/1.1\r\nHost: " + up.hostport() + "\r\nX-Big: " + strings.Repeat("x", 70<<10) + "\r\n\r\n"); got != "" {
		t.Errorf("a header past the limit was answered: %.200q", got)
	}
	if got := send("SSH-2.0-OpenSSH\r\n\r\n"); got != "" {
		t.Errorf("neither HTTP nor TLS: %q", got)
	}
	var allowed, refused int
	for _, d := range ds.all() {
		if d.Allowed && d.Method == "POST" && d.Host == "localhost" {
			allowed++
		} else if !d.Allowed {
			refused++
		}
	}
	if allowed != 1 || refused != 3 {
		t.Errorf("decisions %+v", ds.all())
	}
}

// TestCloseEndsCarried: Close ends a carried connection held open to an
// idle server, both sides (goleak checks the goroutines are gone), and
// refuses a listener added after it.
func TestCloseEndsCarried(t *testing.T) {
	idle, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := idle.Accept(); err == nil {
			accepted <- c
		}
	}()
	port := idle.Addr().(*net.TCPAddr).Port
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := Start(l, Policy{Allow: allow(t, fmt.Sprintf("localhost:%d", port))})
	cl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Carry(cl, port); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", cl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
	server := <-accepted
	defer server.Close()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for name, conn := range map[string]net.Conn{"client": c, "server": server} {
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			_, err := conn.Read(make([]byte, 512))
			if err == nil {
				continue // the request the server was sent
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("the %s side of the carried connection is still open after Close", name)
			}
			break
		}
	}
	if err := p.Carry(cl, port); err == nil {
		t.Error("Carry after Close")
	}
}

// TestCarryOracle: over generated server names, a carried connection
// reaches the upstream exactly when the allowlist allows the name (the
// upstream counting the connections it accepts is the oracle).
func TestCarryOracle(t *testing.T) {
	up := newUpstream(t, true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	accepted := &up.accepted
	p, _ := startProxy(t, Policy{Allow: allow(t, up.hostport())})
	addr := carrier(t, p, up.port)
	rapid.Check(t, func(rt *rapid.T) {
		name := rapid.OneOf(
			rapid.SampledFrom([]string{"localhost", "LocalHost", "localhost.", "evil.localhost", "localhost.evil", "127.0.0.1", "::1", "example.com"}),
			rapid.StringMatching(`[a-z0-9.-]{1,30}`),
		).Draw(rt, "name")
		before := accepted.Load()
		conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: name, InsecureSkipVerify: true})
		if err == nil {
			conn.Close()
		}
		want := strings.TrimSuffix(strings.ToLower(name), ".") == "localhost"
		reached := func() bool { return accepted.Load() > before }
		if want {
			testenv.Eventually(rt, 20*time.Second, reached, "%q did not reach the upstream: %v", name, err)
		} else if err == nil || reached() {
			rt.Fatalf("%q reached the upstream", name)
		}
	})
}

// TestCarryHTTPOneHost: a carried plain HTTP connection carries requests
// for the host its first request named only: a later request on it that
// names another host (for another virtual host of the same server) never
// reaches the upstream, and the connection ends.
func TestCarryHTTPOneHost(t *testing.T) {
	hosts := make(chan string, 8)
	up := newUpstream(t, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hosts <- r.Host
		io.WriteString(w, "hello "+r.Host)
	}))
	p, _ := startProxy(t, Policy{Allow: allow(t, up.hostport())})
	addr := carrier(t, p, up.port)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(conn, "GET /1 HTTP/1.1\r\nHost: %s\r\n\r\nGET /2 HTTP/1.1\r\nHost: %s\r\n\r\nGET /3 HTTP/1.1\r\nHost: evil.example\r\n\r\n", up.hostport(), up.hostport())
	got, _ := io.ReadAll(conn)
	close(hosts)
	var seen []string
	for h := range hosts {
		seen = append(seen, h)
	}
	if len(seen) != 2 || seen[0] != up.hostport() || seen[1] != up.hostport() {
		t.Errorf("the upstream saw requests for %q, want two for %s", seen, up.hostport())
	}
	if n := strings.Count(string(got), "hello "+up.hostport()); n != 2 {
		t.Errorf("%d answers, want 2: %q", n, got)
	}
}
