package egress

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestReportMatchesUpstream: the bytes the report counts per destination
// are the bytes each local upstream read and wrote, over a CONNECT
// tunnel, plain HTTP, a carried connection and a brokered one; refusals
// are counted and summarised.
func TestReportMatchesUpstream(t *testing.T) {
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, strings.Repeat(string(b), 3))
	})
	tunnel, plain, carried, broker := newUpstream(t, true, echo), newUpstream(t, false, echo), newUpstream(t, true, echo), newUpstream(t, true, echo)
	t.Setenv("BASHVISOR_TEST_TOKEN", testSecret)
	b, err := NewBroker([]string{broker.hostport() + "=env:BASHVISOR_TEST_TOKEN"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.roots = pkiOnce().pool
	p, addr := startProxy(t, Policy{Allow: allow(t, tunnel.hostport(), plain.hostport(), carried.hostport(), broker.hostport()), Broker: b})
	carrierAddr := carrier(t, p, carried.port)
	pool := pkiOnce().pool.Clone()
	pool.AppendCertsFromPEM(b.CA())
	viaProxy := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: addr}), TLSClientConfig: &tls.Config{RootCAs: pool}}
	viaCarry := &http.Transport{DialTLS: func(_, _ string) (net.Conn, error) {
		return tls.Dial("tcp", carrierAddr, &tls.Config{ServerName: "localhost", RootCAs: pool})
	}}
	body := strings.Repeat("0123456789", 5000)
	for _, c := range []struct {
		tr *http.Transport
		u  string
	}{
		{viaProxy, "https://" + tunnel.hostport()}, {viaProxy, "http://" + plain.hostport()},
		{viaCarry, "https://" + carried.hostport()}, {viaProxy, "https://" + broker.hostport()},
		{viaProxy, "http://evil.example/"},
	} {
		for range 2 {
			resp, err := (&http.Client{Transport: c.tr}).Post(c.u, "text/plain", strings.NewReader(body))
			code, got := readAll(t, resp, err)
			if strings.Contains(c.u, "evil") {
				if code != http.StatusForbidden {
					t.Errorf("%s: %d %s", c.u, code, got)
				}
			} else if code != 200 || len(got) != 3*len(body) {
				t.Errorf("%s: %d, %d bytes", c.u, code, len(got))
			}
		}
	}
	defer viaProxy.CloseIdleConnections()
	defer viaCarry.CloseIdleConnections()
	// Compared while the connections are open: closing one sends a last
	// TLS alert that may cross a close from the other side, unread.
	for _, up := range []*upstream{tunnel, plain, carried, broker} {
		var f Flow
		testenv.Eventually(t, 20*time.Second, func() bool {
			for _, x := range p.Report() {
				if x.Host == "localhost" && x.Port == up.port {
					f = x
				}
			}
			return f.BytesOut == up.read.Load() && f.BytesIn == up.written.Load()
		}, "port %d: report %+v (all %+v), upstream read %d wrote %d", up.port, testenv.Last(&f), []Flow(p.Report()), up.read.Load(), up.written.Load())
		if f.BytesIn < 6*int64(len(body)) {
			t.Errorf("port %d: only %d bytes in", up.port, f.BytesIn)
		}
	}
	// Closed by the upstream, a connection's count is final and the same.
	plain.CloseClientConnections()
	tunnel.CloseClientConnections()
	live := func() int { p.meter.mu.Lock(); defer p.meter.mu.Unlock(); return len(p.meter.live) }
	testenv.Eventually(t, 20*time.Second, func() bool { return live() <= 2 }, "%d connections open", live())
	for _, x := range p.Report() {
		if x.Port == plain.port && (x.BytesOut != plain.read.Load() || x.BytesIn != plain.written.Load()) {
			t.Errorf("closed: %+v, upstream read %d wrote %d", x, plain.read.Load(), plain.written.Load())
		}
	}
	var evil Flow
	for _, x := range p.Report() {
		if x.Host == "evil.example" {
			evil = x
		}
	}
	if evil.Denied != 2 || evil.BytesIn+evil.BytesOut != 0 {
		t.Errorf("refused flow %+v", evil)
	}
	if s := p.Report().String(); !strings.HasPrefix(s, "[network: localhost ") || !strings.HasSuffix(s, "; refused: evil.example]") {
		t.Errorf("summary %q", s)
	}
}

// TestReportString: sizes, ports of refusals, and the cap.
func TestReportString(t *testing.T) {
	r := Report{
		{Host: "registry.npmjs.org", Port: 443, BytesIn: 2_000_000, BytesOut: 100_000},
		{Host: "registry.npmjs.org", Port: 80, BytesIn: 512},
		{Host: "example.com", Denied: 1},
		{Host: "example.com", Port: 443, Denied: 2},
		{Host: "10.0.0.1", Port: 8080, Denied: 1},
	}
	if got, want := r.String(), "[network: registry.npmjs.org 2.1 MB; refused: 10.0.0.1:8080, example.com]"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if (Report{}).String() != "" {
		t.Error("an empty report says something")
	}
	var many Report
	for i := range 100 {
		many = append(many, Flow{Host: fmt.Sprintf("host-%03d.example.com", i), Port: 443, BytesIn: int64(1000 * (100 - i))},
			Flow{Host: fmt.Sprintf("refused-%03d.example.com", i), Denied: 1})
	}
	s := many.String()
	if len(s) > summaryMax+12 || !strings.Contains(s, "host-000.example.com 100.0 kB") || !strings.Contains(s, " more") {
		t.Errorf("%d bytes: %q", len(s), s)
	}
	for n, want := range map[int64]string{0: "0 B", 999: "999 B", 1000: "1.0 kB", 2_100_000: "2.1 MB", 3_500_000_000: "3.5 GB"} {
		if got := size(n); got != want {
			t.Errorf("size(%d) = %q, want %q", n, got, want)
		}
	}
}
