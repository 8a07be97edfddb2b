package egress

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
)

// benchGet makes one request per iteration on a fresh connection (TLS
// handshake included), so that a connection's set-up is what is measured.
func benchGet(b *testing.B, tr *http.Transport, u string) {
	b.Helper()
	tr.DisableKeepAlives = true
	c := &http.Client{Transport: tr}
	for b.Loop() {
		resp, err := c.Get(u)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || n != 2 {
			b.Fatalf("%d, %d bytes", resp.StatusCode, n)
		}
	}
}

func okHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
}

// BenchmarkCarried: an HTTPS request on a new connection directly, through
// a CONNECT tunnel (a proxy-aware client), and through the carried
// listener (a client that never reads the proxy variables), side by side.
func BenchmarkCarried(b *testing.B) {
	up := newUpstream(b, true, okHandler())
	p, addr := startProxy(b, Policy{Allow: allow(b, up.hostport())})
	carried := carrier(b, p, up.port)
	cfg := &tls.Config{RootCAs: pkiOnce().pool}
	u := "https://" + up.hostport() + "/"
	b.Run("direct", func(b *testing.B) { benchGet(b, &http.Transport{TLSClientConfig: cfg}, u) })
	b.Run("connect", func(b *testing.B) {
		benchGet(b, &http.Transport{TLSClientConfig: cfg, Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: addr})}, u)
	})
	b.Run("carried", func(b *testing.B) {
		benchGet(b, &http.Transport{DialTLS: func(_, _ string) (net.Conn, error) {
			return tls.Dial("tcp", carried, &tls.Config{ServerName: "localhost", RootCAs: pkiOnce().pool})
		}}, u)
	})
}

// BenchmarkBroker: an HTTPS request on a new client connection through
// CONNECT to a host spliced end to end, and to a broker host whose TLS the
// proxy terminates (its own connection to the host is kept alive, as it
// is in use), side by side.
func BenchmarkBroker(b *testing.B) {
	spliced, brokeredUp := newUpstream(b, true, okHandler()), newUpstream(b, true, okHandler())
	b.Setenv("BASHVISOR_TEST_TOKEN", testSecret)
	bk, err := NewBroker([]string{brokeredUp.hostport() + "=env:BASHVISOR_TEST_TOKEN"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	bk.roots = pkiOnce().pool
	_, addr := startProxy(b, Policy{Allow: allow(b, spliced.hostport(), brokeredUp.hostport()), Broker: bk})
	pool := pkiOnce().pool.Clone()
	pool.AppendCertsFromPEM(bk.CA())
	proxy := http.ProxyURL(&url.URL{Scheme: "http", Host: addr})
	b.Run("spliced", func(b *testing.B) {
		benchGet(b, &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, Proxy: proxy}, "https://"+spliced.hostport()+"/")
	})
	b.Run("brokered", func(b *testing.B) {
		benchGet(b, &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, Proxy: proxy}, "https://"+brokeredUp.hostport()+"/")
	})
}
