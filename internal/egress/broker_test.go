package egress

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

const testSecret = "ghp_R3alS3cretT0kenValue0123456789abcd"

// brokered is a proxy brokering testSecret for a local TLS upstream that
// records the headers it got and echoes Authorization in a response
// header.
type brokered struct {
	up      *upstream
	plain   *upstream // allowed, not brokered
	p       *Proxy
	proxy   *url.URL
	b       *Broker
	ph      string
	mu      sync.Mutex
	got     []http.Header
	clientT *http.Transport
}

func newBrokered(t *testing.T) *brokered {
	t.Helper()
	bk := &brokered{}
	h := func(w http.ResponseWriter, r *http.Request) {
		bk.mu.Lock()
		bk.got = append(bk.got, r.Header.Clone())
		bk.mu.Unlock()
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
		w.Header().Add("Set-Cookie", "session=abc; Secure")
		io.WriteString(w, "ok")
	}
	bk.up = newUpstream(t, true, http.HandlerFunc(h))
	bk.plain = newUpstream(t, true, http.HandlerFunc(h))
	t.Setenv("BASHVISOR_TEST_TOKEN", testSecret)
	b, err := NewBroker([]string{bk.up.hostport() + "=env:BASHVISOR_TEST_TOKEN"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.roots = pkiOnce().pool
	bk.b, bk.ph = b, b.Grants()[0].Placeholder
	p, addr := startProxy(t, Policy{Allow: allow(t, bk.up.hostport(), bk.plain.hostport()), Broker: b})
	bk.p, bk.proxy = p, &url.URL{Scheme: "http", Host: addr}
	bk.clientT = &http.Transport{Proxy: http.ProxyURL(bk.proxy), TLSClientConfig: &tls.Config{RootCAs: bk.pool()}}
	t.Cleanup(bk.clientT.CloseIdleConnections)
	return bk
}

// pool trusts the broker's CA and the upstreams' root.
func (bk *brokered) pool() *x509.CertPool {
	pool := pkiOnce().pool.Clone()
	if !pool.AppendCertsFromPEM(bk.b.CA()) {
		panic("bad CA PEM")
	}
	return pool
}

func (bk *brokered) request(t *testing.T, c *http.Client, u, auth string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("Authorization", auth)
	req.Header.Set("X-Token", "token="+bk.ph+";")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	dump, err := httputil.DumpResponse(resp, true)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp, dump
}

// TestBrokerSwapsPlaceholders: through CONNECT and through the carried
// listener, a client trusting the broker's CA sends the placeholder; the
// upstream sees the real secret in Authorization (as a Bearer token and
// inside Basic credentials) and the placeholder in any other header; the
// client never receives the secret, and gets Set-Cookie as sent. A host
// not brokered is spliced: the client sees the upstream's own certificate
// and the upstream sees the placeholder.
func TestBrokerSwapsPlaceholders(t *testing.T) {
	bk := newBrokered(t)
	if len(bk.ph) != len(testSecret) || !strings.HasPrefix(bk.ph, "ghp_") || bk.ph == testSecret {
		t.Fatalf("placeholder %q", bk.ph)
	}
	viaConnect := &http.Client{Transport: bk.clientT}
	carried := carrier(t, bk.p, bk.up.port)
	viaCarry := &http.Client{Transport: &http.Transport{
		DialTLS: func(_, _ string) (net.Conn, error) {
			return tls.Dial("tcp", carried, &tls.Config{ServerName: "localhost", RootCAs: bk.pool()})
		},
	}}
	defer viaCarry.CloseIdleConnections()
	basic := func(user string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+bk.ph)) }
	for name, c := range map[string]*http.Client{"CONNECT": viaConnect, "carried": viaCarry} {
		for _, auth := range []string{"Bearer " + bk.ph, basic("x-access-token")} {
			resp, dump := bk.request(t, c, "https://"+bk.up.hostport()+"/", auth)
			if resp.TLS == nil || resp.TLS.PeerCertificates[0].Issuer.CommonName != "bashvisor egress broker CA" {
				t.Errorf("%s: not terminated by the broker", name)
			}
			bk.mu.Lock()
			got := bk.got[len(bk.got)-1]
			bk.mu.Unlock()
			want := strings.ReplaceAll(auth, bk.ph, testSecret)
			if raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(auth, "Basic ")); err == nil {
				want = "Basic " + base64.StdEncoding.EncodeToString([]byte(strings.ReplaceAll(string(raw), bk.ph, testSecret)))
			}
			if got.Get("Authorization") != want || got.Get("X-Token") != "token="+bk.ph+";" {
				t.Errorf("%s: upstream got %v", name, got)
			}
			if bytes.Contains(dump, []byte(testSecret)) {
				t.Errorf("%s: the client received the secret:\n%s", name, dump)
			}
			if resp.Header.Get("X-Echo") != auth || resp.Header.Get("Set-Cookie") != "session=abc; Secure" {
				t.Errorf("%s: response headers %v", name, resp.Header)
			}
		}
	}

	resp, _ := bk.request(t, viaConnect, "https://"+bk.plain.hostport()+"/", "Bearer "+bk.ph)
	if !bytes.Equal(resp.TLS.PeerCertificates[0].Raw, pkiOnce().cert.Certificate[0]) {
		t.Error("a host not brokered was intercepted")
	}
	bk.mu.Lock()
	got := bk.got[len(bk.got)-1]
	bk.mu.Unlock()
	if got.Get("Authorization") != "Bearer "+bk.ph {
		t.Errorf("a host not brokered got %q", got.Get("Authorization"))
	}
}

// TestBrokerCAOnlyForGrantedHosts: the oracle for a leaked CA key's
// reach: whatever host the broker is asked to sign for, the certificate
// verifies against its CA only for a granted host.
func TestBrokerCAOnlyForGrantedHosts(t *testing.T) {
	t.Setenv("BASHVISOR_TEST_TOKEN", testSecret)
	b, err := NewBroker([]string{"github.com=env:BASHVISOR_TEST_TOKEN", "127.0.0.1:8443=env:BASHVISOR_TEST_TOKEN"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.CA())
	rapid.Check(t, func(t *rapid.T) {
		host := rapid.SampledFrom([]string{"github.com", "127.0.0.1", "api.github.com", "evil.com", "github.com.evil.com", "10.0.0.1", "::1", "example.org"}).Draw(t, "host")
		c, err := b.leaf(host)
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := x509.ParseCertificate(c.Certificate[0])
		_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host})
		granted := host == "github.com" || host == "127.0.0.1" || host == "api.github.com"
		if (err == nil) != granted {
			t.Fatalf("%s: verify %v", host, err)
		}
	})
}

// TestPlaceholderShape: over generated secrets, the placeholder has the
// same length, keeps a known prefix and every non-alphanumeric byte, puts
// a letter or digit of the same class at every other position, and
// differs from the secret.
func TestPlaceholderShape(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		prefix := rapid.SampledFrom(append([]string{""}, tokenPrefixes...)).Draw(t, "prefix")
		body := rapid.StringMatching(`[A-Za-z0-9_.\-]{8,80}`).Draw(t, "body")
		secret := prefix + body
		if checkSecret(secret) != nil {
			t.Skip("too few letters and digits")
		}
		ph := Placeholder(secret)
		if len(ph) != len(secret) || ph == secret || !strings.HasPrefix(ph, tokenPrefix(secret)) {
			t.Fatalf("%q for %q", ph, secret)
		}
		for i := len(tokenPrefix(secret)); i < len(secret); i++ {
			a, b := class(secret[i]), class(ph[i])
			if !bytes.Equal(a, b) || a == nil && secret[i] != ph[i] {
				t.Fatalf("position %d: %q for %q", i, ph, secret)
			}
		}
	})
}

// TestNewBrokerSources: env, file and the callback, and the refusals.
func TestNewBrokerSources(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(testSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BASHVISOR_TEST_TOKEN", testSecret)
	lookup := func(ref string) (string, error) {
		if ref == "vault:gh" {
			return testSecret, nil
		}
		return "", fmt.Errorf("no %s", ref)
	}
	b, err := NewBroker([]string{"GitHub.com=env:BASHVISOR_TEST_TOKEN", "api.github.com=file:" + file, "example.com:8443=vault:gh"}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range b.Grants() {
		if !b.brokers(g.Host, g.Port) || len(b.secrets[flowKey{g.Host, g.Port}]) != 1 || b.secrets[flowKey{g.Host, g.Port}][0].secret != testSecret {
			t.Errorf("grant %+v", g)
		}
	}
	if b.brokers("github.com", 8443) || !b.brokers("example.com", 8443) {
		t.Error("ports")
	}
	for _, bad := range []string{"github.com", "github.com=env:BASHVISOR_UNSET_VAR", "x.com=file:/nonexistent", "x.com=vault:other", "*.x.com=env:BASHVISOR_TEST_TOKEN"} {
		if _, err := NewBroker([]string{bad}, lookup); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, secret := range []string{"short", "ghp_abc", "token with space 123456789", "tok\r\nX-Evil: 1 12345678"} {
		if _, err := NewBroker([]string{"x.com=vault:s"}, func(string) (string, error) { return secret, nil }); err == nil {
			t.Errorf("secret %q accepted", secret)
		}
	}
}
