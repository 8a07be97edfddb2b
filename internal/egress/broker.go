package egress

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Broker holds the secrets the proxy puts into requests to named hosts,
// so that a sandbox needs only placeholders, and the per-conversation
// certificate authority the sandbox trusts for those hosts alone.
//
// For a broker host (Policy.Broker) the proxy terminates TLS with a
// certificate of that CA (through CONNECT or carried), and replaces the
// host's placeholders with their secrets only in the request headers
// that carry credentials: Authorization (any scheme: "Bearer", "token",
// and inside a "Basic" credential, base64 "user:token" as git sends a
// token), and the headers a grant names (",header=X-Api-Key"). It then
// sends the request on over TLS it verifies against the system's roots.
// The boundary: the secret goes only to its host and only in those
// headers (not in other headers, URLs or bodies, nor over plain HTTP).
// Whatever the host sends back has every secret (and the base64 of a
// Basic credential it was put in) turned back into its placeholder:
// response headers, 1xx responses' headers, trailers and the body,
// streamed (the placeholder has the secret's length, so Content-Length
// holds), and so is the secret transformed as a host may send it back:
// JSON- and URL-escaped, and in base64 (see secretForms for the forms
// caught). To read
// bodies as sent, the proxy asks the host for gzip or nothing (the
// client's Accept-Encoding is dropped; gzip is decoded) and answers 502
// to a response in another encoding, and to a protocol upgrade
// (WebSocket), whose stream it cannot read. Decisions and the [Report]
// never hold header values.
type Broker struct {
	grants  []Grant
	secrets map[flowKey][]swap
	forms   map[flowKey]*matcher // of the secrets' forms to scrub (secretForms)
	caKey   *ecdsa.PrivateKey
	ca      *x509.Certificate
	caPEM   []byte
	roots   *x509.CertPool // upstream roots; nil: the system's (tests set it)

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// Grant is one secret a [Broker] holds.
type Grant struct {
	// Host is the host (lower case) whose requests get the secret, and
	// Port its port (443 unless the grant named one).
	Host string
	Port int
	// Ref is where the secret came from: "env:NAME" (the engine's
	// environment variable NAME; the sandbox should get the placeholder
	// under the same name), "file:PATH", or a reference the lookup
	// callback resolved.
	Ref string
	// Placeholder stands in for the secret inside the sandbox.
	Placeholder string
}

// swap is one secret of a host: its placeholder, and the headers besides
// Authorization it is put into (canonical names).
type swap struct {
	placeholder, secret string
	headers             []string
}

// NewBroker reads the secrets named by grants, each "host=ref" or
// "host:port=ref" ("github.com=env:GITHUB_TOKEN"): ref "env:NAME" is the
// environment variable NAME, "file:PATH" the file's content (surrounding
// white space trimmed; a relative PATH is made absolute against the
// current directory, and Grant.Ref holds it so), and any other ref is
// passed to lookup (the embedding program's callback; nil refuses such
// refs). A ref may end with ",header=NAME" (repeatable): the secret also
// goes into request header NAME, besides Authorization. Secrets are read
// once, here. A secret must be printable ASCII with at least 8 letters or
// digits after a known token prefix; grants of the same secret share its
// placeholder. It makes a fresh CA whose name constraints permit only the
// grants' hosts.
func NewBroker(grants []string, lookup func(ref string) (string, error)) (*Broker, error) {
	b := &Broker{secrets: map[flowKey][]swap{}, leaves: map[string]*tls.Certificate{}}
	phs := map[string]string{} // secret -> placeholder
	for _, g := range grants {
		hostport, ref, ok := strings.Cut(strings.TrimSpace(g), "=")
		if !ok || ref == "" {
			return nil, fmt.Errorf("broker grant %q: want host=env:NAME, host=file:PATH or host=REF", g)
		}
		host, port, err := splitHostPort(strings.ToLower(hostport), 443)
		if err != nil || host == "" || strings.ContainsAny(host, "/ *@=") {
			return nil, fmt.Errorf("broker grant %q: bad host", g)
		}
		ref, headers, err := cutHeaders(ref)
		if err != nil {
			return nil, fmt.Errorf("broker grant %q: %w", g, err)
		}
		if path, ok := strings.CutPrefix(ref, "file:"); ok {
			if path, err = filepath.Abs(path); err != nil {
				return nil, fmt.Errorf("broker grant %q: %w", g, err)
			}
			ref = "file:" + path
		}
		secret, err := readSecret(ref, lookup)
		if err != nil {
			return nil, fmt.Errorf("broker grant %q: %w", g, err)
		}
		if err := checkSecret(secret); err != nil {
			return nil, fmt.Errorf("broker grant %q: %w", g, err)
		}
		ph, ok := phs[secret]
		if !ok {
			ph = Placeholder(secret)
			phs[secret] = ph
		}
		b.grants = append(b.grants, Grant{Host: host, Port: port, Ref: ref, Placeholder: ph})
		k := flowKey{host, port}
		b.secrets[k] = append(b.secrets[k], swap{ph, secret, headers})
	}
	if err := b.makeCA(); err != nil {
		return nil, err
	}
	b.makeForms()
	return b, nil
}

// makeForms lists the forms of each host's secrets.
func (b *Broker) makeForms() {
	b.forms = map[flowKey]*matcher{}
	for k, ss := range b.secrets {
		var fs []form
		for _, s := range ss {
			fs = append(fs, secretForms(s.secret, s.placeholder)...)
		}
		b.forms[k] = newMatcher(fs)
	}
}

// cutHeaders splits the ",header=NAME" suffixes off ref.
func cutHeaders(ref string) (string, []string, error) {
	var headers []string
	for {
		i := strings.LastIndex(ref, ",header=")
		if i < 0 {
			return ref, headers, nil
		}
		name := ref[i+len(",header="):]
		if name == "" || strings.IndexFunc(name, func(r rune) bool { return !isTokenChar(r) }) >= 0 {
			return "", nil, fmt.Errorf("bad header name %q", name)
		}
		headers = append(headers, http.CanonicalHeaderKey(name))
		ref = ref[:i]
	}
}

// isTokenChar reports whether r may appear in a header name (RFC 9110
// token).
func isTokenChar(r rune) bool {
	return r < 0x7f && r > 0x20 && !strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r)
}

func readSecret(ref string, lookup func(string) (string, error)) (string, error) {
	switch scheme, rest, _ := strings.Cut(ref, ":"); scheme {
	case "env":
		v, ok := os.LookupEnv(rest)
		if !ok || v == "" {
			return "", fmt.Errorf("environment variable %s is not set", rest)
		}
		return v, nil
	case "file":
		data, err := os.ReadFile(rest)
		if err != nil {
			return "", err
		}
		return strings.TrimSpace(string(data)), nil
	}
	if lookup == nil {
		return "", errors.New("no lookup for this reference (want env:NAME or file:PATH)")
	}
	v, err := lookup(ref)
	if err != nil {
		return "", fmt.Errorf("lookup: %w", err)
	}
	return v, nil
}

func checkSecret(s string) error {
	alnum := 0
	for i := len(tokenPrefix(s)); i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e {
			return errors.New("the secret holds a character other than printable ASCII")
		}
		if class(c) != nil {
			alnum++
		}
	}
	if alnum < 8 {
		return errors.New("the secret is too short for a placeholder to stand in for it")
	}
	return nil
}

// ForConversation returns a broker with b's secrets (not read again), its
// own CA and its own placeholders, and b's roots: one per conversation,
// so that no two conversations share a CA or a placeholder.
func (b *Broker) ForConversation() (*Broker, error) {
	c := &Broker{secrets: map[flowKey][]swap{}, leaves: map[string]*tls.Certificate{}, roots: b.roots}
	phs := map[string]string{} // old placeholder -> new
	for k, ss := range b.secrets {
		for _, s := range ss {
			ph, ok := phs[s.placeholder]
			if !ok {
				ph = Placeholder(s.secret)
				phs[s.placeholder] = ph
			}
			c.secrets[k] = append(c.secrets[k], swap{ph, s.secret, s.headers})
		}
	}
	for _, g := range b.grants {
		g.Placeholder = phs[g.Placeholder]
		c.grants = append(c.grants, g)
	}
	if err := c.makeCA(); err != nil {
		return nil, err
	}
	c.makeForms()
	return c, nil
}

// VerifyWith makes the broker verify its hosts' certificates against
// roots instead of the system's (a private CA of the hosts); call it
// before the broker is used.
func (b *Broker) VerifyWith(roots *x509.CertPool) { b.roots = roots }

// Env is the placeholders of the secrets read from environment
// variables, as "NAME=placeholder" entries for the sandbox's environment.
func (b *Broker) Env() []string {
	var env []string
	for _, g := range b.grants {
		if name, ok := strings.CutPrefix(g.Ref, "env:"); ok {
			env = append(env, name+"="+g.Placeholder)
		}
	}
	return env
}

// Hide returns s with every secret the broker holds replaced by its
// placeholder, wherever it appears (for a sandbox's environment:
// "URL=https://x:SECRET@host/" gets the placeholder too).
func (b *Broker) Hide(s string) string {
	for _, ss := range b.secrets {
		for _, sw := range ss {
			s = strings.ReplaceAll(s, sw.secret, sw.placeholder)
		}
	}
	return s
}

// Grants lists the secrets held, without them.
func (b *Broker) Grants() []Grant { return append([]Grant(nil), b.grants...) }

// CA is the PEM certificate of the broker's CA, for the sandbox to trust
// (it signs certificates only for the grants' hosts).
func (b *Broker) CA() []byte { return append([]byte(nil), b.caPEM...) }

// brokers reports whether the broker holds a secret for host:port.
func (b *Broker) brokers(host string, port int) bool {
	_, ok := b.secrets[flowKey{strings.ToLower(strings.TrimSuffix(host, ".")), port}]
	return ok
}

// tokenPrefixes are the well-known token prefixes a placeholder keeps.
var tokenPrefixes = []string{
	"github_pat_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "glpat-", "npm_", "pypi-",
	"sk-ant-", "sk-proj-", "sk-", "xoxb-", "xoxp-", "hf_", "AKIA",
}

func tokenPrefix(s string) string {
	for _, p := range tokenPrefixes {
		if strings.HasPrefix(s, p) {
			return p
		}
	}
	return ""
}

const (
	lower  = "abcdefghijklmnopqrstuvwxyz"
	upper  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	digits = "0123456789"
)

func class(c byte) []byte {
	switch {
	case 'a' <= c && c <= 'z':
		return []byte(lower)
	case 'A' <= c && c <= 'Z':
		return []byte(upper)
	case '0' <= c && c <= '9':
		return []byte(digits)
	}
	return nil
}

// Placeholder returns a random stand-in of the same shape as secret: the
// same length, a well-known token prefix ("ghp_", "github_pat_", "sk-",
// ...) kept, every other letter or digit replaced by a random one of its
// class, anything else kept in place. It says nothing of the secret
// beyond its shape.
func Placeholder(secret string) string {
	out := []byte(secret)
	random := make([]byte, len(out))
	for {
		_, _ = rand.Read(random)
		for i := len(tokenPrefix(secret)); i < len(out); i++ {
			if cl := class(secret[i]); cl != nil {
				out[i] = cl[int(random[i])%len(cl)]
			}
		}
		if string(out) != secret || class0(secret) {
			return string(out)
		}
	}
}

// class0 reports whether s has nothing to replace (its placeholder is
// itself).
func class0(s string) bool {
	for i := len(tokenPrefix(s)); i < len(s); i++ {
		if class(s[i]) != nil {
			return false
		}
	}
	return true
}

func (b *Broker) makeCA() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:                serial(),
		Subject:                     pkix.Name{CommonName: "bashvisor egress broker CA", Organization: []string{"bashvisor"}},
		NotBefore:                   time.Now().Add(-time.Hour),
		NotAfter:                    time.Now().Add(30 * 24 * time.Hour),
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid:       true,
		IsCA:                        true,
		MaxPathLenZero:              true,
		PermittedDNSDomainsCritical: true,
	}
	for _, g := range b.grants {
		if a, err := netip.ParseAddr(g.Host); err == nil {
			bits := a.BitLen()
			tmpl.PermittedIPRanges = append(tmpl.PermittedIPRanges, &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(bits, bits)})
		} else {
			tmpl.PermittedDNSDomains = append(tmpl.PermittedDNSDomains, g.Host)
		}
	}
	// An empty list would permit everything of its kind.
	if len(tmpl.PermittedDNSDomains) == 0 {
		tmpl.PermittedDNSDomains = []string{"invalid"}
	}
	if len(tmpl.PermittedIPRanges) == 0 {
		tmpl.PermittedIPRanges = []*net.IPNet{{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(32, 32)}}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("broker CA: %w", err)
	}
	b.ca, err = x509.ParseCertificate(der)
	if err != nil {
		return err
	}
	b.caKey = key
	b.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// leaf is the certificate the proxy shows a sandbox for host.
func (b *Broker) leaf(host string) (*tls.Certificate, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c, ok := b.leaves[host]; ok {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     b.ca.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if a, err := netip.ParseAddr(host); err == nil {
		tmpl.IPAddresses = []net.IP{a.AsSlice()}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, b.ca, &key.PublicKey, b.caKey)
	if err != nil {
		return nil, fmt.Errorf("broker certificate for %s: %w", host, err)
	}
	c := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	b.leaves[host] = c
	return c, nil
}

// swapIn puts host:port's secrets in place of their placeholders in h's
// Authorization and the headers their grants name (also inside a Basic
// credential there), and nowhere else. (The secret's base64 forms turn
// such a credential, echoed back, into the placeholder's again.)
func (b *Broker) swapIn(host string, port int, h http.Header) {
	for _, s := range b.secrets[flowKey{host, port}] {
		for _, name := range append([]string{"Authorization"}, s.headers...) {
			vs := h[name]
			for i, v := range vs {
				switch {
				case strings.Contains(v, s.placeholder):
					vs[i] = strings.ReplaceAll(v, s.placeholder, s.secret)
				case len(v) > 6 && strings.EqualFold(v[:6], "basic "):
					in := strings.TrimSpace(v[6:])
					if raw, err := base64.StdEncoding.DecodeString(in); err == nil && strings.Contains(string(raw), s.placeholder) {
						out := base64.StdEncoding.EncodeToString([]byte(strings.ReplaceAll(string(raw), s.placeholder, s.secret)))
						vs[i] = v[:6] + out
					}
				}
			}
		}
	}
}

// brokerServer serves the brokered connections of one proxy: an HTTP/1.1
// server over TLS terminated with the broker's certificates, whose
// handler sends each request on to the connection's host.
type brokerServer struct {
	b    *Broker
	srv  *http.Server
	ln   *chanListener
	tr   *http.Transport
	done chan struct{}
}

type destKey struct{}

// swapsKey holds the matcher of what a brokered response gets scrubbed
// of: its host's secrets' forms.
type swapsKey struct{}

// brokeredConn is a terminated connection and where it goes.
type brokeredConn struct {
	net.Conn
	dest flowKey
}

func newBrokerServer(b *Broker, d *dialer) *brokerServer {
	bs := &brokerServer{b: b, ln: newChanListener(), done: make(chan struct{})}
	bs.tr = &http.Transport{
		Proxy:                 nil,
		DialContext:           d.dialContext,
		TLSClientConfig:       &tls.Config{RootCAs: b.roots, MinVersion: tls.VersionTLS12},
		MaxIdleConns:          16,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: 5 * time.Minute,
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			dest := pr.In.Context().Value(destKey{}).(flowKey)
			pr.Out.URL.Scheme = "https"
			pr.Out.URL.Host = net.JoinHostPort(dest.host, strconv.Itoa(dest.port))
			pr.Out.Host = ""
		},
		ModifyResponse: func(resp *http.Response) error {
			return scrubResponse(resp.Request.Context().Value(swapsKey{}).(*matcher), resp)
		},
		Transport: bs.tr,
		ErrorLog:  log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, "bashvisor egress proxy: "+err.Error(), http.StatusBadGateway)
		},
	}
	bs.srv = &http.Server{
		Handler:           fullDuplex(b.swapping(rp)),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, destKey{}, c.(*brokeredConn).dest)
		},
	}
	go func() {
		defer close(bs.done)
		_ = bs.srv.Serve(bs.ln)
	}()
	return bs
}

// serve terminates client's TLS (prefix: bytes already read from it) and
// hands it to the server.
func (bs *brokerServer) serve(client net.Conn, prefix []byte, host string, port int) {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return bs.b.leaf(host)
		},
	}
	var c net.Conn = client
	if len(prefix) > 0 {
		c = &prefixedConn{Conn: client, prefix: prefix}
	}
	bs.ln.push(&brokeredConn{Conn: tls.Server(c, cfg), dest: flowKey{host, port}})
}

func (bs *brokerServer) close() {
	_ = bs.srv.Close()
	<-bs.done
	bs.tr.CloseIdleConnections()
}

// prefixedConn replays bytes already read before reading on.
type prefixedConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixedConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// chanListener hands the server connections pushed to it.
type chanListener struct {
	ch     chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newChanListener() *chanListener {
	return &chanListener{ch: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *chanListener) push(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.closed:
		c.Close()
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return &net.TCPAddr{} }
