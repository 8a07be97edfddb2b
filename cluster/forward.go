package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bashvisor/bashvisor/cluster/clusterpb"
	"github.com/bashvisor/bashvisor/engine"
)

// forwardMethod is the gRPC method of a forwarded connection. A front
// opens a stream of its own to the executor's port, beside protoactor's
// Remoting service (the executor serves it as grpc.UnknownServiceHandler,
// behind the same token), sends the forward Query, receives a QueryReply
// (empty: opened), then Stream messages carry the bytes both ways.
// HTTP/2's flow control of each stream is the window: a reader that
// stalls holds only its own stream's, and the protoactor stream that
// carries the calls carries none of the bytes.
const forwardMethod = "/bashvisor.cluster.Forward/Open"

// streamChunk is the most bytes one Stream message carries.
const streamChunk = 64 << 10

// sinkIdle is how long a side waits for its connection to take data
// before it ends the forwarded connection (a client that reads nothing
// for that long).
const sinkIdle = time.Minute

// Forward connects to port on the loopback of conversation conv's
// sandboxed network, on the executor that holds the conversation (as
// Engine.Forward does locally), so that mcpserver's bash_forward works
// on a fleet front. The bytes travel in order on a gRPC stream of their
// own between the front and the executor (on the executor's port, with
// the fleet's token), flow-controlled per connection; the connection
// ends when either side closes it, when a side's reader takes nothing
// for a minute, or when the front shuts down, and fails when the
// executor is lost. A conversation that runs nowhere, or that has no
// sandboxed network there, is engine.ErrBadInput; nothing listening is
// syscall.ECONNREFUSED (errors.Is, across the wire). Deadlines of
// the returned net.Conn are those of net.Pipe.
func (c *Client) Forward(ctx context.Context, conv string, port int) (net.Conn, error) {
	for attempt := 0; ; attempt++ {
		st, _, ok := c.target(ctx, conv, true)
		if !ok {
			return nil, fmt.Errorf("%w: conversation %q runs on no executor", engine.ErrBadInput, conv)
		}
		conn, notHeld, err := c.forwardOn(ctx, st, conv, port)
		if !notHeld {
			return conn, err
		}
		c.forget(conv, st.id)
		if attempt > 0 {
			return nil, fmt.Errorf("%w: conversation %q runs on no executor", engine.ErrBadInput, conv)
		}
	}
}

// forwardOn opens the stream on st; notHeld when st no longer holds conv.
func (c *Client) forwardOn(ctx context.Context, st *execState, conv string, port int) (net.Conn, bool, error) {
	cc, err := c.forwardConn(st.pid.Address)
	if err != nil {
		return nil, false, err
	}
	// The stream lives until the front shuts down, the executor is
	// lost, or either side ends it (cancel).
	sctx, cancel := context.WithCancel(c.runCtx)
	c.forwards.Add(1)
	go func() {
		defer c.forwards.Done()
		select {
		case <-st.lost:
			cancel()
		case <-sctx.Done():
		}
	}()
	octx, ocancel := context.WithTimeout(ctx, c.o.QueryTimeout)
	defer ocancel()
	stopOpening := context.AfterFunc(octx, cancel) // until the answer
	fail := func(err error) (net.Conn, bool, error) {
		cancel()
		switch {
		case st.isLost():
			return nil, false, fmt.Errorf("%w: %s: %s", ErrExecutorLost, st.name(), st.lostWhy)
		case c.runCtx.Err() != nil:
			return nil, false, fmt.Errorf("%w: the front is shutting down", engine.ErrShutdown)
		case octx.Err() != nil:
			return nil, false, fmt.Errorf("executor %s: %w", st.name(), octx.Err())
		}
		return nil, false, fmt.Errorf("executor %s: forward: %w", st.name(), err)
	}
	s, err := cc.NewStream(sctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, forwardMethod)
	if err != nil {
		return fail(err)
	}
	q := &clusterpb.Query{Op: "forward", ExecutorId: st.id, Port: int64(port), Front: c.node.address(),
		Tc: encodeTC(engine.ToolContext{ConversationID: conv}, "")}
	r := new(clusterpb.QueryReply)
	if err := s.SendMsg(q); err != nil && !errors.Is(err, io.EOF) { // io.EOF: ended by the executor, RecvMsg says why
		return fail(err)
	}
	if err := s.RecvMsg(r); err != nil {
		return fail(err)
	}
	if !stopOpening() {
		return fail(octx.Err())
	}
	switch {
	case r.NotHeld:
		cancel()
		return nil, true, nil
	case r.Err != "" || r.ErrKind != "":
		cancel()
		return nil, false, decodeReplyErr(r)
	}
	local, remote := net.Pipe()
	c.forwards.Add(2)
	go func() { // what the executor sends, into the connection
		defer c.forwards.Done()
		defer cancel()
		defer remote.Close()
		for {
			m := new(clusterpb.Stream)
			if s.RecvMsg(m) != nil {
				return // io.EOF: the executor's side ended, after its bytes
			}
			_ = remote.SetWriteDeadline(time.Now().Add(sinkIdle))
			if _, err := remote.Write(m.Data); err != nil {
				return
			}
		}
	}()
	go func() { // what is written into the connection, to the executor
		defer c.forwards.Done()
		pumpTo(remote, s.SendMsg)
		_ = s.CloseSend()
	}()
	return local, false, nil
}

// pumpTo sends what is read from conn, in chunks, until conn or send
// fails (conn's end: closed or read to its end).
func pumpTo(conn net.Conn, send func(any) error) {
	buf := make([]byte, streamChunk)
	for {
		n, err := conn.Read(buf)
		if n > 0 && send(&clusterpb.Stream{Data: buf[:n]}) != nil { // sent: encoded before it returns
			conn.Close()
			return
		}
		if err != nil {
			return
		}
	}
}

// forwardConn returns the front's gRPC connection to the executor at
// addr for forwarded connections (one per address, until Shutdown).
func (c *Client) forwardConn(addr string) (*grpc.ClientConn, error) {
	c.fwdMu.Lock()
	defer c.fwdMu.Unlock()
	if c.runCtx.Err() != nil {
		return nil, fmt.Errorf("%w: the front is shutting down", engine.ErrShutdown)
	}
	if cc := c.fwdConns[addr]; cc != nil {
		return cc, nil
	}
	cc, err := grpc.Dial(addr, dialOptions(c.o.Token)...)
	if err != nil {
		return nil, fmt.Errorf("forward connection to %s: %w", addr, err)
	}
	if c.fwdConns == nil {
		c.fwdConns = map[string]*grpc.ClientConn{}
	}
	c.fwdConns[addr] = cc
	return cc, nil
}

// endForwards waits until the forwarded connections have ended (Shutdown
// cancelled them) and closes the front's connections for them.
func (c *Client) endForwards() {
	c.forwards.Wait()
	c.fwdMu.Lock()
	defer c.fwdMu.Unlock()
	for addr, cc := range c.fwdConns {
		_ = cc.Close()
		delete(c.fwdConns, addr)
	}
}

// serveForward serves a front's forwarded connection (forwardMethod;
// any other method the protoactor server does not know is refused).
func (x *Executor) serveForward(_ any, ss grpc.ServerStream) error {
	if m, _ := grpc.MethodFromServerStream(ss); m != forwardMethod {
		return status.Errorf(codes.Unimplemented, "bashvisor executor: no method %s", m)
	}
	q := new(clusterpb.Query)
	if err := ss.RecvMsg(q); err != nil {
		return err
	}
	conn, reply := x.openForward(q)
	if err := ss.SendMsg(reply); err != nil || conn == nil {
		if conn != nil {
			conn.Close()
		}
		return err
	}
	defer context.AfterFunc(ss.Context(), func() { conn.Close() })()
	go func() { // what the front sends, into the connection
		defer conn.Close() // the front's side ended: so does the connection, once its bytes are written
		for {
			m := new(clusterpb.Stream)
			if ss.RecvMsg(m) != nil {
				return
			}
			_ = conn.SetWriteDeadline(time.Now().Add(sinkIdle))
			if _, err := conn.Write(m.Data); err != nil {
				return
			}
		}
	}()
	pumpTo(conn, ss.SendMsg)
	conn.Close()
	return nil // which ends the stream, and a RecvMsg still waiting

}

// openForward checks a forward query and connects to the port in the
// conversation's network; without a connection, reply says why (not
// held, refused, or the error).
func (x *Executor) openForward(m *clusterpb.Query) (net.Conn, *clusterpb.QueryReply) {
	reply := &clusterpb.QueryReply{}
	if r := x.refusal("", m.ExecutorId); r != nil {
		reply.Err = "refused: " + r.Reason
		return nil, reply
	}
	tc, err := decodeTC(m.Tc)
	if err == nil && !x.touch(tc.ConversationID, m.Front) {
		reply.NotHeld = true
		return nil, reply
	}
	var conn net.Conn
	if err == nil {
		dctx, cancel := context.WithTimeout(x.runCtx, 30*time.Second)
		conn, err = x.eng.Forward(dctx, tc.ConversationID, int(m.Port))
		cancel()
	}
	if err != nil {
		encodeReplyErr(reply, err)
		return nil, reply
	}
	return conn, reply
}
