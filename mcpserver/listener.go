package mcpserver

import (
	"bytes"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// LimitListener returns a listener that keeps at most n of l's connections
// open at once, for the http.Server serving [Handler]. A connection
// accepted over the cap is answered "503 Service Unavailable" with a reason
// and "Retry-After: 1", then closed, so a flood of connections can neither
// exhaust the process's file descriptors nor go unanswered. The answer is
// plain HTTP/1.1: put LimitListener beneath a TLS listener and an
// over-the-cap client sees a failed handshake instead. n <= 0 returns l.
//
// Idle keep-alive connections count until http.Server.IdleTimeout closes
// them, and an MCP client holds one connection per call in flight plus one
// for its event stream, so n should leave room for MaxSessions clients.
func LimitListener(l net.Listener, n int) net.Listener {
	if n <= 0 {
		return l
	}
	return &limitListener{Listener: l, max: int64(n)}
}

// maxRefusing bounds the connections being answered 503 at once; beyond
// it, connections over the cap are closed without an answer.
const maxRefusing = 64

// refuseWait bounds the reading of a refused connection's request and the
// writing of the answer.
const refuseWait = time.Second

// refusal is the answer to a connection over the cap.
var refusal = func() []byte {
	const body = "Service Unavailable: too many open connections; retry in a moment\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n" +
		"Retry-After: 1\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}()

type limitListener struct {
	net.Listener
	max      int64
	open     atomic.Int64
	refusing atomic.Int64
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &limitConn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		if l.refusing.Add(1) > maxRefusing {
			l.refusing.Add(-1)
			c.Close()
			continue
		}
		go func() {
			defer l.refusing.Add(-1)
			refuse(c)
		}()
	}
}

// refuse answers a connection over the cap and closes it. It reads the
// request's head first: closing a connection with unread data resets it,
// and the client might lose the answer.
func refuse(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(refuseWait))
	buf := make([]byte, 0, 4096)
	for len(buf) < cap(buf) && !bytes.Contains(buf, []byte("\r\n\r\n")) {
		n, err := c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			break
		}
	}
	if _, err := c.Write(refusal); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// limitConn frees its slot when closed.
type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
