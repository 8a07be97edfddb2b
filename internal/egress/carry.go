package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// peekTimeout bounds how long a carried connection may take to say where
// it goes (its TLS ClientHello or HTTP request header).
const peekTimeout = 10 * time.Second

// peekMax bounds how much of a carried connection is read (and kept for
// the splice) to find where it goes: a ClientHello or a request header
// larger than this is refused.
const peekMax = 64 << 10

// Carry serves, until [Proxy.Close], connections a world captured for
// port and accepted on l: clients that never read the proxy variables
// (their names answered by [Proxy.Resolve] with an address that leads to
// l). A connection that opens with a TLS handshake goes to the server
// name of its ClientHello (SNI), read without terminating TLS; any other
// is read as HTTP/1 and goes to the name in its Host header. The name is
// checked like a CONNECT's (the allowlist, then the addresses it resolves
// to, private ranges refused), reported as a Decision (Method "TLS", or
// the request's method), and the connection is spliced to it, bytes as
// they came; a broker host's TLS is terminated as through CONNECT. Plain
// HTTP is carried request by request instead, each request naming the
// first one's host: one that names another ends the connection (the
// upstream is the first host's server, whose other virtual hosts the
// allowlist never judged), and so do a ws:// upgrade's frames. A
// connection without a name (no SNI, no Host), or that has not said it
// within 64 kB and 10 s, is refused. The port is
// the world's to say because a captured connection's own local port may
// be the capture's, not the one the client dialled.
func (p *Proxy) Carry(l net.Listener, port int) error {
	if port <= 0 || port > 65535 {
		return fmt.Errorf("egress: Carry: bad port %d", port)
	}
	if !p.add(l.Close) {
		l.Close()
		return net.ErrClosed
	}
	tl := &trackingListener{Listener: l, t: p.l.t}
	p.serving.Add(1)
	go func() {
		defer p.serving.Done()
		for {
			c, err := tl.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				time.Sleep(10 * time.Millisecond) // out of descriptors, say
				continue
			}
			p.serving.Add(1)
			go func() {
				defer p.serving.Done()
				p.carry(c, port)
			}()
		}
	}()
	return nil
}

// carry finds where c goes, checks it and splices it there.
func (p *Proxy) carry(c net.Conn, port int) {
	rec := &recorder{r: io.LimitReader(c, peekMax)}
	_ = c.SetReadDeadline(time.Now().Add(peekTimeout))
	host, method, err := destination(rec)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		p.report(Decision{Port: port, Method: method, Reason: err.Error()})
		refuseCarried(c, method, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	defer cancel()
	dec := p.d.decide(ctx, host, port)
	dec.Method = method
	p.report(dec)
	if !dec.Allowed {
		refuseCarried(c, method, dec.Reason)
		return
	}
	if method == "TLS" && p.broker != nil && p.broker.b.brokers(host, port) {
		p.broker.serve(c, rec.buf, host, port)
		return
	}
	up, err := p.d.dialAddr(ctx, host, port, dec.Reason)
	if err != nil {
		refuseCarried(c, method, err.Error())
		return
	}
	if method != "TLS" {
		carryHTTP(c, up, rec.buf, host)
		return
	}
	if _, err := up.Write(rec.buf); err != nil {
		c.Close()
		up.Close()
		return
	}
	splice(c, up)
}

// carryHTTP carries plain HTTP from c (prefix: what was read of it
// already) to up, request by request: each must name host, as the first
// did. A request naming another host (another virtual host of the same
// server, which the allowlist never judged), or bytes that are no
// request (a ws:// upgrade's frames), end the requests: up is told no
// more come, answers what it was sent, and both connections close.
// Requests are written on as net/http reads them (re-framed; no
// User-Agent added).
func carryHTTP(c net.Conn, up *countedConn, prefix []byte, host string) {
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		_, _ = io.Copy(c, up)
		c.Close() // the upstream is done: no later request can be answered
	}()
	br := bufio.NewReaderSize(io.MultiReader(bytes.NewReader(prefix), c), 4096)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				up.Close() // c closed (Proxy.Close) or broken: nothing is waited for
			}
			break
		}
		h, _, err := splitHostPort(req.Host, 80)
		if err != nil || !strings.EqualFold(strings.TrimSuffix(h, "."), host) {
			req.Body.Close()
			break
		}
		if _, ok := req.Header["User-Agent"]; !ok {
			req.Header["User-Agent"] = []string{""} // Write adds Go's otherwise
		}
		if err := req.Write(up); err != nil {
			break
		}
	}
	_ = up.CloseWrite()
	select {
	case <-answered:
	case <-time.After(answerWait):
	}
	c.Close()
	up.Close()
	<-answered
}

// answerWait bounds how long a carried HTTP upstream may take to answer
// once it was sent its last request.
const answerWait = 5 * time.Minute

// destination reads the name a carried connection goes to: the SNI of a
// TLS ClientHello, or the Host of an HTTP request; method is "TLS" or the
// request's method.
//
// The ClientHello is parsed by crypto/tls itself: a server handshake
// over the recorded bytes whose GetConfigForClient keeps the hello and
// aborts (its alert is written nowhere). That takes a hello split over
// records as any TLS server does, at the cost of one tls.Conn per
// connection, and leaves no packet parser of our own to get wrong.
func destination(rec *recorder) (host, method string, err error) {
	r := bufio.NewReader(rec)
	first, err := r.Peek(1)
	if err != nil {
		return "", "", fmt.Errorf("no request: %w", err)
	}
	if first[0] == 0x16 { // a TLS handshake record
		var hello *tls.ClientHelloInfo
		errPeeked := errors.New("peeked")
		err := tls.Server(readOnlyConn{r: r}, &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			hello = h
			return nil, errPeeked
		}}).Handshake()
		switch {
		case hello == nil:
			return "", "TLS", fmt.Errorf("not a TLS ClientHello: %w", err)
		case hello.ServerName == "":
			return "", "TLS", errors.New("no server name (SNI) to check")
		}
		return strings.TrimSuffix(hello.ServerName, "."), "TLS", nil
	}
	req, err := http.ReadRequest(r)
	if err != nil {
		return "", "", fmt.Errorf("neither TLS nor HTTP: %w", err)
	}
	req.Body.Close() // nothing of the body is read: it stays for the splice
	host, _, err = splitHostPort(req.Host, 80)
	if err != nil || host == "" {
		return "", req.Method, errors.New("no Host header to check")
	}
	return host, req.Method, nil
}

// refuseCarried tells an HTTP client why (a TLS client just sees the
// connection close) and closes c.
func refuseCarried(c net.Conn, method, reason string) {
	if method != "TLS" && method != "" {
		body := "bashvisor egress proxy: " + reason + "\n"
		_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	}
	c.Close()
}

// dialAddr connects to addr, an address decide chose for host:port,
// counting the bytes under host:port.
func (d *dialer) dialAddr(ctx context.Context, host string, port int, addr string) (*countedConn, error) {
	if _, err := netip.ParseAddrPort(addr); err != nil {
		return nil, fmt.Errorf("bad address %q: %w", addr, err)
	}
	nd := net.Dialer{Timeout: dialTimeout}
	c, err := nd.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return d.meter.counted(c.(*net.TCPConn), host, port), nil
}

// splice copies both ways until both sides are done, passing on each
// side's end of stream (when a side can half-close; otherwise the first
// end closes both), then closes both.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	one := func(dst, src net.Conn) {
		defer wg.Done()
		hd, dok := dst.(interface{ CloseWrite() error })
		hs, sok := src.(interface{ CloseRead() error })
		if _, err := io.Copy(dst, src); err != nil || !dok || !sok {
			dst.Close()
			src.Close()
			return
		}
		_ = hd.CloseWrite()
		_ = hs.CloseRead()
	}
	go one(a, b)
	one(b, a)
	wg.Wait()
	a.Close()
	b.Close()
}

// recorder keeps what it read, for the splice to replay.
type recorder struct {
	r   io.Reader
	buf []byte
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.buf = append(r.buf, p[:n]...)
	return n, err
}

// readOnlyConn lets crypto/tls read a ClientHello and discards what it
// writes.
type readOnlyConn struct {
	net.Conn // nil: only the methods below are called
	r        io.Reader
}

func (c readOnlyConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c readOnlyConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c readOnlyConn) Close() error                     { return nil }
func (c readOnlyConn) SetDeadline(time.Time) error      { return nil }
func (c readOnlyConn) SetReadDeadline(time.Time) error  { return nil }
func (c readOnlyConn) SetWriteDeadline(time.Time) error { return nil }
func (c readOnlyConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c readOnlyConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
