package egress

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"
)

// variant is one way to make a request.
type variant struct {
	name string
	tr   *http.Transport
	u    string
}

// interleave makes one request per variant per iteration, each on a new
// connection (TLS handshake included), so that the variants share
// whatever load the machine is under; it reports each variant's median
// in ms (a loaded machine's outliers leave the median be).
func interleave(b *testing.B, vs ...variant) {
	b.Helper()
	samples := make([][]float64, len(vs))
	clients := make([]*http.Client, len(vs))
	for i, v := range vs {
		v.tr.DisableKeepAlives = true
		clients[i] = &http.Client{Transport: v.tr}
	}
	for b.Loop() {
		for i, v := range vs {
			start := time.Now()
			resp, err := clients[i].Get(v.u)
			if err != nil {
				b.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || n != 2 {
				b.Fatalf("%s: %d, %d bytes", v.name, resp.StatusCode, n)
			}
			samples[i] = append(samples[i], float64(time.Since(start).Nanoseconds())/1e6)
		}
	}
	for i, v := range vs {
		slices.Sort(samples[i])
		b.ReportMetric(samples[i][len(samples[i])/2], v.name+"-ms")
	}
}

func okHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
}

// BenchmarkCarried: an HTTPS request on a new connection directly, through
// a CONNECT tunnel (a proxy-aware client), and through the carried
// listener (a client that never reads the proxy variables), interleaved.
func BenchmarkCarried(b *testing.B) {
	up := newUpstream(b, true, okHandler())
	p, addr := startProxy(b, Policy{Allow: allow(b, up.hostport())})
	carried := carrier(b, p, up.port)
	cfg := &tls.Config{RootCAs: pkiOnce().pool}
	u := "https://" + up.hostport() + "/"
	interleave(b,
		variant{"direct", &http.Transport{TLSClientConfig: cfg}, u},
		variant{"connect", &http.Transport{TLSClientConfig: cfg, Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: addr})}, u},
		variant{"carried", &http.Transport{DialTLS: func(_, _ string) (net.Conn, error) {
			return tls.Dial("tcp", carried, &tls.Config{ServerName: "localhost", RootCAs: pkiOnce().pool})
		}}, u})
}

// BenchmarkBroker: an HTTPS request on a new client connection through
// CONNECT to a host spliced end to end, and to a broker host whose TLS the
// proxy terminates (its own connection to the host is kept alive, as it
// is in use; "brokered-cold" makes a new one per request), and the same
// two carried (a client that ignores the proxy variables: "carried" is
// spliced, "carried-brokered" terminated), interleaved.
func BenchmarkBroker(b *testing.B) {
	spliced, brokeredUp := newUpstream(b, true, okHandler()), newUpstream(b, true, okHandler())
	b.Setenv("BASHVISOR_TEST_TOKEN", testSecret)
	bk, err := NewBroker([]string{brokeredUp.hostport() + "=env:BASHVISOR_TEST_TOKEN"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	bk.roots = pkiOnce().pool
	p, addr := startProxy(b, Policy{Allow: allow(b, spliced.hostport(), brokeredUp.hostport()), Broker: bk})
	carriedSpliced, carriedBrokered := carrier(b, p, spliced.port), carrier(b, p, brokeredUp.port)
	cold, coldAddr := startProxy(b, Policy{Allow: allow(b, brokeredUp.hostport()), Broker: bk})
	cold.broker.tr.DisableKeepAlives = true // a new connection to the host per request too
	pool := pkiOnce().pool.Clone()
	pool.AppendCertsFromPEM(bk.CA())
	proxy := http.ProxyURL(&url.URL{Scheme: "http", Host: addr})
	interleave(b,
		variant{"spliced", &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, Proxy: proxy}, "https://" + spliced.hostport() + "/"},
		variant{"brokered", &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, Proxy: proxy}, "https://" + brokeredUp.hostport() + "/"},
		variant{"brokered-cold", &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: coldAddr})},
			"https://" + brokeredUp.hostport() + "/"},
		variant{"carried", &http.Transport{DialTLS: func(_, _ string) (net.Conn, error) {
			return tls.Dial("tcp", carriedSpliced, &tls.Config{ServerName: "localhost", RootCAs: pool})
		}}, "https://" + spliced.hostport() + "/"},
		variant{"carried-brokered", &http.Transport{DialTLS: func(_, _ string) (net.Conn, error) {
			c, err := tls.Dial("tcp", carriedBrokered, &tls.Config{ServerName: "localhost", RootCAs: pool})
			if err == nil && c.ConnectionState().PeerCertificates[0].Issuer.CommonName != bk.ca.Subject.CommonName {
				b.Fatal("carried-brokered: the proxy did not terminate TLS")
			}
			return c, err
		}}, "https://" + brokeredUp.hostport() + "/"})
}
