package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// testPKI is a CA standing in for the public roots, and a certificate it
// signed for localhost and 127.0.0.1: what a local upstream shows.
type testPKI struct {
	pool *x509.CertPool
	cert tls.Certificate
}

var pkiOnce = sync.OnceValue(func() *testPKI {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test root"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		panic(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		panic(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &testPKI{pool: pool, cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}}
})

// upstream is a local server standing in for a host of the internet, on
// 127.0.0.1, counting the bytes it read and wrote on every connection.
type upstream struct {
	*httptest.Server
	port     int
	read     atomic.Int64
	written  atomic.Int64
	accepted atomic.Int64 // connections
}

func newUpstream(t testing.TB, tlsOn bool, h http.Handler) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewUnstartedServer(h)
	u.Listener = &countingListener{Listener: u.Listener, u: u}
	if tlsOn {
		u.TLS = &tls.Config{Certificates: []tls.Certificate{pkiOnce().cert}}
		u.StartTLS()
	} else {
		u.Start()
	}
	t.Cleanup(u.Close)
	u.port = u.Listener.Addr().(*net.TCPAddr).Port
	return u
}

func (u *upstream) hostport() string { return "localhost:" + strconv.Itoa(u.port) }

type countingListener struct {
	net.Listener
	u *upstream
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.u.accepted.Add(1)
	return &upstreamConn{Conn: c, u: l.u}, nil
}

type upstreamConn struct {
	net.Conn
	u *upstream
}

func (c *upstreamConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.u.read.Add(int64(n))
	return n, err
}

func (c *upstreamConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.u.written.Add(int64(n))
	return n, err
}

// startProxy serves a proxy with policy on loopback.
func startProxy(t testing.TB, policy Policy) (*Proxy, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := Start(l, policy)
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p, l.Addr().String()
}

func allow(t testing.TB, entries ...string) *Allowlist {
	t.Helper()
	a, err := ParseAllowlist(entries)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// carrier listens on 127.0.0.2 at port, as a world's capture address
// would listen on each granted port while the upstream holds the same
// port on 127.0.0.1, and carries its connections for port.
func carrier(t testing.TB, p *Proxy, port int) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(port)))
	if errors.Is(err, syscall.EADDRINUSE) {
		l, err = net.Listen("tcp", "127.0.0.3:"+strconv.Itoa(port))
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Carry(l, port); err != nil {
		t.Fatal(err)
	}
	return l.Addr().String()
}

func readAll(t testing.TB, resp *http.Response, err error) (int, string) {
	t.Helper()
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
