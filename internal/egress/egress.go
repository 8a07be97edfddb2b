// Package egress is a sandboxed command's only way to the network: an HTTP
// proxy (CONNECT tunnels and plain HTTP, on github.com/elazarl/goproxy)
// that lets a request through only when an [Allowlist] names its host,
// resolves names itself, and refuses private, loopback, link-local and
// metadata addresses unless the allowlist names that loopback host and
// port exactly. It reports every decision.
//
// A world whose clients do not all read the proxy variables adds to the
// same [Proxy], under the same policy: [Proxy.Resolve], a DNS server that
// answers only allowed names, with an address the world routes to
// [Proxy.Carry], listeners that take captured TCP connections to the
// name in their TLS ClientHello (SNI) or HTTP Host header without
// terminating TLS. A [Broker] (Policy.Broker) holds secrets for named
// hosts: the sandbox sees placeholders, and the proxy terminates TLS for
// those hosts only, with a per-conversation CA, to put the secrets in the
// request headers. [Proxy.Report] counts the bytes and refusals per
// destination across all of these.
package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/elazarl/goproxy"
)

// Decision is what the proxy did with one connection attempt.
type Decision struct {
	// Host and Port are where the command asked to go.
	Host string
	Port int
	// Allowed reports whether it went through.
	Allowed bool
	// Reason says why not ("not in the allowlist", "resolves to a private
	// address", ...), or the address it went to.
	Reason string
	// Method is CONNECT for a tunnel, TLS for a carried TLS connection
	// ([Proxy.Carry]), DNS for a name the resolver refused
	// ([Proxy.Resolve]; Port is then 0), or the HTTP method of a plain
	// request, carried or not.
	Method string
}

// Policy is what one listener's connections may reach, and who hears the
// decisions.
type Policy struct {
	// Allow is the allowlist.
	Allow *Allowlist
	// Log, when set, is told every decision (from the proxy's goroutines;
	// it must be safe for concurrent use and must not block long).
	Log func(Decision)
	// Broker, when set, names the hosts whose TLS the proxy terminates to
	// put their secrets in place of placeholders (see [Broker]); a broker
	// host must also be allowed by Allow. Other hosts stay end-to-end.
	Broker *Broker
}

// Proxy is the proxy serving one listener, and the resolver and carried
// listeners a world adds to it (see [Proxy.Resolve], [Proxy.Carry]).
type Proxy struct {
	srv    *http.Server
	l      *trackingListener
	done   chan error
	d      *dialer
	meter  *meter
	report func(Decision)
	broker *brokerServer // nil without a Policy.Broker

	mu      sync.Mutex
	closed  bool
	extra   []func() error // stops resolvers and carried listeners
	serving sync.WaitGroup // their goroutines
}

// Start serves the proxy on l, in a goroutine of its own, letting through
// what policy allows, until [Proxy.Close].
func Start(l net.Listener, policy Policy) *Proxy {
	tl := &trackingListener{Listener: l, t: &tracker{conns: map[net.Conn]struct{}{}}}
	m := &meter{}
	hear := policy.Log
	p := &Proxy{
		l:     tl,
		done:  make(chan error, 1),
		d:     &dialer{allow: policy.Allow, meter: m},
		meter: m,
		report: func(d Decision) {
			m.decided(d)
			if hear != nil {
				hear(d)
			}
		},
	}
	if policy.Broker != nil {
		p.broker = newBrokerServer(policy.Broker, p.d)
	}
	p.srv = &http.Server{
		Handler:           fullDuplex(newProxy(p)),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() {
		err := p.srv.Serve(tl)
		if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
			err = nil
		}
		p.done <- err
	}()
	return p
}

// Report is a snapshot of the flows so far: per destination the bytes
// moved and the attempts refused, over CONNECT tunnels, plain HTTP,
// carried and brokered connections and the resolver's refusals.
func (p *Proxy) Report() Report { return p.meter.report() }

// Close stops the proxy: it closes the listener and every connection it
// accepted, tunnels included (their copying goroutines end on the closed
// connection), stops the resolver and carried listeners added to it, and
// waits for the serving goroutines. It returns the error that ended
// serving early, if any. Call it once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	extra := p.extra
	p.mu.Unlock()
	_ = p.l.Close()
	var errs []error
	for _, stop := range extra {
		if err := stop(); !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	p.l.t.closeAll()
	if p.broker != nil {
		p.broker.close()
	}
	p.serving.Wait()
	errs = append(errs, <-p.done)
	return errors.Join(errs...)
}

// fullDuplex lets h read a request's body after it began the response: a
// proxy's transport may still be reading the body (to find its end) when
// the destination has answered, and by default the server would close it
// under the transport, which then drops the connection mid-response.
func fullDuplex(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		h.ServeHTTP(w, r)
	})
}

// add registers a stop function for Close; false if Close has begun.
func (p *Proxy) add(stop func() error) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.extra = append(p.extra, stop)
	return true
}

// trackingListener remembers the connections it accepted until they are
// closed, so that Close can end tunnels the HTTP server no longer tracks
// (hijacked for CONNECT) and carried connections. The listeners of one
// proxy share a tracker.
type trackingListener struct {
	net.Listener
	t *tracker
}

type tracker struct {
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	conn := &trackedConn{TCPConn: tc, t: l.t}
	l.t.mu.Lock()
	defer l.t.mu.Unlock()
	if l.t.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	l.t.conns[conn] = struct{}{}
	return conn, nil
}

func (t *tracker) closeAll() {
	t.mu.Lock()
	t.closed = true
	conns := t.conns
	t.conns = nil
	t.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

// trackedConn is a *net.TCPConn (so the proxy can half-close tunnels)
// that leaves its tracker's set when closed.
type trackedConn struct {
	*net.TCPConn
	t    *tracker
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.t.mu.Lock()
		delete(c.t.conns, c)
		c.t.mu.Unlock()
	})
	return c.TCPConn.Close()
}

// dialTimeout bounds a connection to a destination.
const dialTimeout = 30 * time.Second

func newProxy(px *Proxy) *goproxy.ProxyHttpServer {
	p := goproxy.NewProxyHttpServer()
	p.Logger = discard{}
	report, d := px.report, px.d
	p.Tr = &http.Transport{
		Proxy:                 nil, // never another proxy from the environment
		DialContext:           d.dialContext,
		ForceAttemptHTTP2:     false,
		MaxIdleConns:          16,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: 5 * time.Minute,
	}
	p.ConnectDialWithReq = func(req *http.Request, network, addr string) (net.Conn, error) {
		return d.dialContext(req.Context(), network, addr)
	}
	p.OnRequest().HandleConnectFunc(func(hostport string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
		host, port, err := splitHostPort(hostport, 443)
		if err != nil {
			report(Decision{Host: hostport, Method: http.MethodConnect, Reason: err.Error()})
			return rejectConnect(err.Error()), hostport
		}
		dec := d.decide(ctx.Req.Context(), host, port)
		dec.Method = http.MethodConnect
		report(dec)
		if !dec.Allowed {
			return rejectConnect(dec.Reason), hostport
		}
		if px.broker != nil && px.broker.b.brokers(host, port) {
			return &goproxy.ConnectAction{Action: goproxy.ConnectHijack, Hijack: func(req *http.Request, client net.Conn, ctx *goproxy.ProxyCtx) {
				if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
					client.Close()
					return
				}
				px.broker.serve(client, nil, host, port)
			}}, hostport
		}
		ctx.UserData = dec
		return goproxy.OkConnect, hostport
	})
	p.OnRequest().DoFunc(func(r *http.Request, ctx *goproxy.ProxyCtx) (*http.Request, *http.Response) {
		port := 80
		if r.URL.Scheme == "https" {
			port = 443
		}
		host, port, err := splitHostPort(r.URL.Host, port)
		if err != nil {
			report(Decision{Host: r.URL.Host, Method: r.Method, Reason: err.Error()})
			return r, refusal(r, err.Error())
		}
		dec := d.decide(r.Context(), host, port)
		dec.Method = r.Method
		report(dec)
		if !dec.Allowed {
			return r, refusal(r, dec.Reason)
		}
		return r, nil
	})
	return p
}

// rejectConnect answers a refused CONNECT with 403 and the reason.
func rejectConnect(reason string) *goproxy.ConnectAction {
	return &goproxy.ConnectAction{Action: goproxy.ConnectHijack, Hijack: func(req *http.Request, client net.Conn, ctx *goproxy.ProxyCtx) {
		defer client.Close()
		body := "bashvisor egress proxy: " + reason + "\n"
		fmt.Fprintf(client, "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	}}
}

// refusal is the 403 response to a refused plain HTTP request.
// It reads (up to 256 kB of) the request's body first, as net/http would
// without full duplex, so that closing the connection does not reset it
// under a client still sending.
func refusal(r *http.Request, reason string) *http.Response {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 256<<10))
	}
	return goproxy.NewResponse(r, goproxy.ContentTypeText, http.StatusForbidden, "bashvisor egress proxy: "+reason+"\n")
}

// dialer resolves and dials destinations the allowlist allows, only to
// addresses it allows.
type dialer struct {
	allow *Allowlist
	meter *meter // counts the bytes of every connection dialed
}

// decide resolves host and says whether host:port may be reached; when it
// may, Reason holds the address the connection will go to.
func (d *dialer) decide(ctx context.Context, host string, port int) Decision {
	dec := Decision{Host: host, Port: port}
	if !d.allow.allowsName(host, port) {
		dec.Reason = "not in the allowlist"
		return dec
	}
	addr, err := d.resolve(ctx, host, port)
	if err != nil {
		dec.Reason = err.Error()
		return dec
	}
	dec.Allowed, dec.Reason = true, addr.String()
	return dec
}

// resolve finds an address of host it may connect to.
func (d *dialer) resolve(ctx context.Context, host string, port int) (netip.AddrPort, error) {
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("cannot resolve %s: %w", host, err)
		}
		addrs = ips
	}
	var refused netip.Addr
	for _, a := range addrs {
		a = a.Unmap()
		if special(a) && !d.allow.allowsLoopback(host, a, port) {
			refused = a
			continue
		}
		return netip.AddrPortFrom(a, uint16(port)), nil
	}
	return netip.AddrPort{}, fmt.Errorf("%s resolves to %s, a %s address the sandbox may not reach (allow it as an exact host:port to reach it)",
		host, refused, kind(refused))
}

// dialContext connects to addr ("host:port") if the allowlist allows it,
// to the address resolve chose (never resolving twice: no DNS rebinding).
func (d *dialer) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := splitHostPort(addr, 0)
	if err != nil {
		return nil, err
	}
	dec := d.decide(ctx, host, port)
	if !dec.Allowed {
		return nil, errors.New(dec.Reason)
	}
	c, err := d.dialAddr(ctx, host, port, dec.Reason)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// special reports addresses a sandbox must not reach unless allowed
// exactly: loopback, private, link-local (the cloud metadata endpoints
// 169.254.169.254 and fd00:ec2::254 among them), carrier-grade NAT,
// unspecified and multicast.
func special(a netip.Addr) bool {
	return a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsUnspecified() || a.IsMulticast() || a.IsInterfaceLocalMulticast() ||
		cgnat.Contains(a) || thisNet.Contains(a) || a == metadataV6
}

var (
	cgnat      = netip.MustParsePrefix("100.64.0.0/10")
	thisNet    = netip.MustParsePrefix("0.0.0.0/8")
	metadataV6 = netip.MustParseAddr("fd00:ec2::254")
)

func kind(a netip.Addr) string {
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsLinkLocalUnicast() || a == metadataV6:
		return "link-local or metadata"
	case a.IsPrivate() || cgnat.Contains(a):
		return "private"
	}
	return "special"
}

// splitHostPort splits "host:port" (port defaults to def when absent).
// A name's trailing dot (an absolute name, "localhost.") is dropped, as
// the world's resolver drops it when it answers the name: the allowlist
// judges, the report names and the host's resolver looks up the name
// without it (which resolves "localhost." from /etc/hosts).
func splitHostPort(hostport string, def int) (string, int, error) {
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		if def == 0 || strings.Contains(strings.Trim(hostport, "[]"), ":") && !strings.HasPrefix(hostport, "[") {
			return "", 0, fmt.Errorf("bad destination %q", hostport)
		}
		return strings.TrimSuffix(strings.Trim(hostport, "[]"), "."), def, nil
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port in %q", hostport)
	}
	return strings.TrimSuffix(host, "."), port, nil
}

type discard struct{}

func (discard) Printf(string, ...any) {}
