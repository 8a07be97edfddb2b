// Package egress is a sandboxed command's only way to the network: an HTTP
// proxy (CONNECT tunnels and plain HTTP, on github.com/elazarl/goproxy)
// that lets a request through only when an [Allowlist] names its host,
// resolves names itself, and refuses private, loopback, link-local and
// metadata addresses unless the allowlist names that loopback host and
// port exactly. It reports every decision.
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
	// Method is CONNECT for a tunnel, or the HTTP method of a plain
	// request.
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
}

// Proxy is the proxy serving one listener.
type Proxy struct {
	srv  *http.Server
	l    *trackingListener
	done chan error
}

// Start serves the proxy on l, in a goroutine of its own, letting through
// what policy allows, until [Proxy.Close].
func Start(l net.Listener, policy Policy) *Proxy {
	tl := &trackingListener{Listener: l, conns: map[net.Conn]struct{}{}}
	p := &Proxy{
		srv: &http.Server{
			Handler:           newProxy(policy),
			ReadHeaderTimeout: 30 * time.Second,
			ErrorLog:          log.New(io.Discard, "", 0),
		},
		l:    tl,
		done: make(chan error, 1),
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

// Close stops the proxy: it closes the listener and every connection it
// accepted, tunnels included (their copying goroutines end on the closed
// connection), and waits for the serving goroutine. It returns the error
// that ended serving early, if any. Call it once.
func (p *Proxy) Close() error {
	_ = p.l.Close()
	p.l.closeAll()
	return <-p.done
}

// trackingListener remembers the connections it accepted until they are
// closed, so that Close can end tunnels the HTTP server no longer tracks
// (hijacked for CONNECT).
type trackingListener struct {
	net.Listener
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
	conn := &trackedConn{TCPConn: tc, l: l}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	l.conns[conn] = struct{}{}
	return conn, nil
}

func (l *trackingListener) closeAll() {
	l.mu.Lock()
	l.closed = true
	conns := l.conns
	l.conns = nil
	l.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

// trackedConn is a *net.TCPConn (so the proxy can half-close tunnels)
// that leaves its listener's set when closed.
type trackedConn struct {
	*net.TCPConn
	l    *trackingListener
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.TCPConn.Close()
}

// dialTimeout bounds a connection to a destination.
const dialTimeout = 30 * time.Second

func newProxy(policy Policy) *goproxy.ProxyHttpServer {
	p := goproxy.NewProxyHttpServer()
	p.Logger = discard{}
	report := policy.Log
	if report == nil {
		report = func(Decision) {}
	}
	d := &dialer{allow: policy.Allow}
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
func refusal(r *http.Request, reason string) *http.Response {
	return goproxy.NewResponse(r, goproxy.ContentTypeText, http.StatusForbidden, "bashvisor egress proxy: "+reason+"\n")
}

// dialer resolves and dials destinations the allowlist allows, only to
// addresses it allows.
type dialer struct {
	allow *Allowlist
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
	nd := net.Dialer{Timeout: dialTimeout}
	return nd.DialContext(ctx, "tcp", dec.Reason)
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
func splitHostPort(hostport string, def int) (string, int, error) {
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		if def == 0 || strings.Contains(strings.Trim(hostport, "[]"), ":") && !strings.HasPrefix(hostport, "[") {
			return "", 0, fmt.Errorf("bad destination %q", hostport)
		}
		return strings.Trim(hostport, "[]"), def, nil
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port in %q", hostport)
	}
	return host, port, nil
}

type discard struct{}

func (discard) Printf(string, ...any) {}
