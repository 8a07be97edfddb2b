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
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// proxyFor serves a proxy with the allowlist on loopback and returns its
// URL and the decisions it made.
func proxyFor(t testing.TB, entries ...string) (*url.URL, *decisions) {
	t.Helper()
	allow, err := ParseAllowlist(entries)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ds := &decisions{}
	p := Start(l, Policy{Allow: allow, Log: ds.add})
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return &url.URL{Scheme: "http", Host: l.Addr().String()}, ds
}

type decisions struct {
	mu sync.Mutex
	ds []Decision
}

func (d *decisions) add(x Decision) { d.mu.Lock(); d.ds = append(d.ds, x); d.mu.Unlock() }
func (d *decisions) all() []Decision {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Decision(nil), d.ds...)
}

func client(t testing.TB, proxy *url.URL) *http.Client {
	tr := &http.Transport{Proxy: http.ProxyURL(proxy), TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func port(t *testing.T, u string) int {
	pu, _ := url.Parse(u)
	p, _ := strconv.Atoi(pu.Port())
	return p
}

// TestAllowedLoopbackOnlyExactly: a local server named by its exact
// host:port is reached over plain HTTP and through a CONNECT tunnel; the
// same host on another port is refused, and every decision is reported.
func TestAllowedLoopbackOnlyExactly(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "registry") }))
	defer srv.Close()
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tls registry") }))
	defer tlsSrv.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("the refused server was reached") }))
	defer other.Close()

	p, ds := proxyFor(t, strings.TrimPrefix(srv.URL, "http://"), strings.TrimPrefix(tlsSrv.URL, "https://"))
	c := client(t, p)
	if code, body := get(t, c, srv.URL); code != 200 || body != "registry" {
		t.Errorf("plain HTTP: %d %q", code, body)
	}
	if code, body := get(t, c, tlsSrv.URL); code != 200 || body != "tls registry" {
		t.Errorf("CONNECT: %d %q", code, body)
	}
	if code, body := get(t, c, other.URL); code != http.StatusForbidden || !strings.Contains(body, "not in the allowlist") {
		t.Errorf("another port: %d %q", code, body)
	}
	otherTLS := strings.Replace(other.URL, "http://", "https://", 1)
	if code, body := get(t, c, otherTLS); code != 0 || !strings.Contains(body, "Forbidden") {
		t.Errorf("CONNECT to another port: %d %q", code, body)
	}
	got := ds.all()
	var allowed, refused int
	for _, d := range got {
		if d.Allowed {
			allowed++
		} else {
			refused++
		}
	}
	if allowed < 2 || refused < 2 {
		t.Errorf("decisions %+v", got)
	}
}

// TestSpecialAddressesRefused: names and addresses that lead to loopback,
// private, link-local or metadata addresses are refused unless allowed as
// an exact host:port, and the reason names the kind of address.
func TestSpecialAddressesRefused(t *testing.T) {
	p, _ := proxyFor(t, "localhost", "169.254.169.254", "10.1.2.3", "[::1]")
	c := client(t, p)
	for _, u := range []string{"http://localhost/", "http://169.254.169.254/latest/meta-data/", "http://10.1.2.3/"} {
		code, body := get(t, c, u)
		if code != http.StatusForbidden || !strings.Contains(body, "may not reach") {
			t.Errorf("%s: %d %q", u, code, body)
		}
	}
	if code, body := get(t, c, "http://[::1]:80/"); code != http.StatusForbidden || !strings.Contains(body, "loopback") {
		t.Errorf("::1: %d %q", code, body)
	}
}

func TestAllowlistMatching(t *testing.T) {
	a, err := ParseAllowlist([]string{"Registry.NPMjs.org", "*.example.com", "git.example.org:8443", "pypi"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		host string
		port int
		want bool
	}{
		{"registry.npmjs.org", 443, true},
		{"REGISTRY.npmjs.org.", 80, true},
		{"registry.npmjs.org", 8080, false},
		{"evil-registry.npmjs.org", 443, false},
		{"a.example.com", 443, true},
		{"a.b.example.com", 80, true},
		{"example.com", 443, false},
		{"notexample.com", 443, false},
		{"git.example.org", 8443, true},
		{"git.example.org", 443, false},
		{"files.pythonhosted.org", 443, true},
	}
	for _, c := range cases {
		if got := a.allowsName(c.host, c.port); got != c.want {
			t.Errorf("%s:%d: %v", c.host, c.port, got)
		}
	}
	for _, bad := range []string{"http://x.com", "x.com:0", "x.com:99999", "*", "a b"} {
		if _, err := ParseAllowlist([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if got := a.Ports(); !slices.Equal(got, []int{80, 443, 8443}) {
		t.Errorf("ports %v", got)
	}
	if (*Allowlist)(nil).allowsName("x.com", 443) || !(*Allowlist)(nil).Empty() || (*Allowlist)(nil).Ports() != nil {
		t.Error("a nil allowlist allows something")
	}
}

// BenchmarkThroughput downloads 100 MB from a loopback server directly and
// through the proxy (plain HTTP and a CONNECT tunnel), side by side.
func BenchmarkThroughput(b *testing.B) {
	const size = 100 << 20
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		for i := 0; i < size/len(chunk); i++ {
			w.Write(chunk)
		}
	})
	srv := httptest.NewServer(handler)
	defer srv.Close()
	tlsSrv := httptest.NewTLSServer(handler)
	defer tlsSrv.Close()
	p, _ := proxyFor(b, strings.TrimPrefix(srv.URL, "http://"), strings.TrimPrefix(tlsSrv.URL, "https://"))
	direct := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	proxied := client(b, p)
	for _, v := range []struct {
		name string
		c    *http.Client
		u    string
	}{{"direct-http", direct, srv.URL}, {"proxy-http", proxied, srv.URL}, {"direct-https", direct, tlsSrv.URL}, {"proxy-connect-https", proxied, tlsSrv.URL}} {
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				resp, err := v.c.Get(v.u)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if n != size {
					b.Fatal(fmt.Sprint("short read ", n))
				}
			}
		})
	}
	direct.CloseIdleConnections()
}

// Close ends open tunnels: a command's proxy must not outlive it with a
// tunnel to an idle server (goleak checks the goroutines are gone).
func TestCloseEndsTunnels(t *testing.T) {
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
	allow, err := ParseAllowlist([]string{idle.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := Start(l, Policy{Allow: allow})
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", idle.Addr(), idle.Addr())
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.Contains(line, "200") {
		t.Fatalf("CONNECT: %q %v", line, err)
	}
	server := <-accepted
	defer server.Close()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the tunnel is still open after Close: %v", err)
	}
	_ = server.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := server.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the server side of the tunnel is still open after Close: %v", err)
	}
}

// The presets name the hosts their tools download from, not only their
// indexes: PyPI's file host, GitHub's object storage and archives, the
// crates' static host and index, Go's checksum database and Playwright's
// browser CDNs; each allows HTTP and HTTPS only.
func TestPresetsNameTheirFileHosts(t *testing.T) {
	for preset, hosts := range map[string][]string{
		"pypi":       {"pypi.org", "files.pythonhosted.org"},
		"github":     {"github.com", "objects.githubusercontent.com", "codeload.github.com"},
		"playwright": {"playwright.azureedge.net", "cdn.playwright.dev"},
		"crates":     {"static.crates.io", "index.crates.io"},
		"go":         {"proxy.golang.org", "sum.golang.org"},
	} {
		a, err := ParseAllowlist([]string{preset})
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hosts {
			if !a.allowsName(h, 443) || !a.allowsName(h, 80) || a.allowsName(h, 22) {
				t.Errorf("preset %s: %s not allowed on 80 and 443 alone", preset, h)
			}
		}
		if a.allowsName("example.com", 443) {
			t.Errorf("preset %s allows example.com", preset)
		}
	}
}

// Covers says whether an entry would add nothing to an allowlist: a
// call asking for a covered host needs no approval.
func TestAllowlistCovers(t *testing.T) {
	a, err := ParseAllowlist([]string{"pypi", "*.example.com", "git.example.org:8443", "api.github.com"})
	if err != nil {
		t.Fatal(err)
	}
	for entry, want := range map[string]bool{
		"pypi": true, "files.pythonhosted.org": true, "files.pythonhosted.org:443": true,
		"a.example.com": true, "*.b.example.com": true, "*.example.com": true,
		"git.example.org:8443": true, "api.github.com": true, "API.GitHub.com:80": true,
		"github": false, "example.com": false, "*.org": false, "git.example.org": false,
		"git.example.org:22": false, "npm": false, "bad host": false,
	} {
		if got := a.Covers(entry); got != want {
			t.Errorf("Covers(%q) = %v, want %v", entry, got, want)
		}
	}
	if (*Allowlist)(nil).Covers("pypi") {
		t.Error("a nil allowlist covers pypi")
	}
}
