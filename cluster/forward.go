package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/bashvisor/bashvisor/cluster/clusterpb"
	"github.com/bashvisor/bashvisor/engine"
)

// streamChunk is the most bytes one Stream message carries,
// streamWindow the most a side sends on one stream before the other
// wrote them (Stream.Ack), and linkWindow the most it sends on all its
// streams to one node before the other took them from the transport
// (Stream.Received, said on arrival, so that a stream whose reader
// stalls holds only its own window): without it, forty fast downloads
// to slow readers would queue as much in the transport as their
// servers write (a transport batch is taken in whole: see writerBatch),
// ahead of the calls' messages.
const (
	streamChunk  = 32 << 10
	streamWindow = 256 << 10
	linkWindow   = 2 << 20
)

// Forward connects to port on the loopback of conversation conv's
// sandboxed network, on the executor that holds the conversation (as
// Engine.Forward does locally), so that mcpserver's bash_forward works
// on a fleet front. The bytes travel over the cluster transport as Stream
// messages between an actor of the front and one of the executor, in
// order, each way at most streamWindow unwritten, and linkWindow in the
// transport over all the forwards between the front and that executor; the
// connection ends when either side closes it or the front shuts down,
// and fails when the executor is lost. A conversation that runs nowhere, or that has no
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
	ctx, cancel := context.WithTimeout(ctx, c.o.QueryTimeout)
	defer cancel()
	local, remote := net.Pipe()
	opened := make(chan *clusterpb.QueryReply, 1)
	q := &clusterpb.Query{Op: "forward", ExecutorId: st.id, Port: int64(port),
		Tc: encodeTC(engine.ToolContext{ConversationID: conv}, "")}
	if c.runCtx.Err() != nil {
		return nil, false, fmt.Errorf("%w: the front is shutting down", engine.ErrShutdown)
	}
	c.actors.Add(1) // done when the actor has stopped: Shutdown waits for it
	pid := c.node.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &frontStream{c: c, target: st.pid, first: q, conn: remote, opened: opened}
	}))
	fail := func(err error) (net.Conn, bool, error) {
		local.Close()
		c.node.sys.Root.Stop(pid)
		return nil, false, err
	}
	select {
	case r := <-opened:
		switch {
		case r == nil:
			return local, false, nil // the actor stops once the connection ends
		case r.NotHeld:
			local.Close()
			c.node.sys.Root.Stop(pid)
			return nil, true, nil
		}
		return fail(decodeReplyErr(r))
	case <-st.lost:
		return fail(fmt.Errorf("%w: %s: %s", ErrExecutorLost, st.name(), st.lostWhy))
	case <-ctx.Done():
		return fail(fmt.Errorf("executor %s: %w", st.name(), ctx.Err()))
	}
}

// streamGone ends a stream actor whose peer (or executor) ended, once
// the messages that came before the news are handled: Terminated is a
// system message, which an actor handles before the user messages
// already in its mailbox (the peer's last data and its end).
type streamGone struct{ why string }

// frontStream is a forwarded connection on the front: it opens the
// stream, then writes what the executor sends into conn (the pipe's end
// the front keeps) and sends what is read from conn.
type frontStream struct {
	c      *Client
	unhook func() bool // of the Shutdown hook that closes conn
	target *actor.PID  // the executor's actor
	first  *clusterpb.Query
	conn   net.Conn
	opened chan<- *clusterpb.QueryReply // nil once answered
	peer   *actor.PID                   // the executor's stream actor
	win    *window                      // the peer's acknowledgements, for the pump
	out    *sink                        // writes the peer's data into conn
}

func (a *frontStream) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		conn := a.conn
		a.unhook = context.AfterFunc(a.c.runCtx, func() { conn.Close() })
		ctx.Watch(a.target)
		ctx.Request(a.target, a.first)
	case *actor.Stopped:
		a.unhook()
		a.c.actors.Done()
	case *actor.Stopping:
		a.conn.Close() // the pump sends the peer an end
		if a.win != nil {
			a.win.end()
		}
		a.out.stop()
		a.answer(&clusterpb.QueryReply{Err: "the stream ended before it opened"})
	case *actor.Terminated:
		// A system message, handled before the data already queued:
		// end after them.
		ctx.Send(ctx.Self(), streamGone{why: terminatedWhy(m)})
	case streamGone:
		a.answer(&clusterpb.QueryReply{Err: "the executor ended: " + m.why})
		if a.out != nil {
			a.out.finish() // what the executor sent before it ended is written first
		} else {
			a.conn.Close()
		}
	case *clusterpb.QueryReply: // refused, not held, or no such port
		a.answer(m)
		a.conn.Close()
	case *clusterpb.Refused:
		a.answer(&clusterpb.QueryReply{Err: "refused: " + m.Reason})
		a.conn.Close()
	case *clusterpb.Stream:
		a.stream(ctx, m)
	}
}

// answer tells forwardOn how the opening went (nil: opened), once.
func (a *frontStream) answer(r *clusterpb.QueryReply) {
	if a.opened != nil {
		a.opened <- r
		a.opened = nil
	}
}

func (a *frontStream) stream(ctx actor.Context, m *clusterpb.Stream) {
	switch {
	case m.Opened:
		a.peer = ctx.Sender()
		ctx.Watch(a.peer)
		a.win = newWindow(ctx.ActorSystem(), a.peer.Address)
		root, peer, conn, self, win := ctx.ActorSystem().Root, a.peer, a.conn, ctx.Self(), a.win
		a.out = newSink(conn, func(n int64) { root.Send(peer, &clusterpb.Stream{Ack: n}) }, func() { conn.Close() })
		go func() {
			pump(conn, func(msg *clusterpb.Stream) { root.Send(peer, msg) }, win)
			root.Stop(self)
		}()
		a.answer(nil)
	case len(m.Data) > 0 && a.out != nil:
		a.out.put(m.Data)
		ctx.Send(a.peer, &clusterpb.Stream{Received: int64(len(m.Data))})
	case m.Ack > 0 && a.win != nil:
		a.win.ack(m.Ack)
	case m.Received > 0 && a.win != nil:
		a.win.received(m.Received)
	}
	if m.End {
		if a.out != nil {
			a.out.finish()
		} else {
			a.conn.Close()
		}
	}
}

// sink writes one direction of a stream into its connection on a
// goroutine of its own, so that the stream's actor, which also receives
// the acknowledgements of the other direction, never waits for the
// connection's reader: a client that uploads before it reads what the
// server sent first would otherwise stall both directions. It
// acknowledges what it wrote (ack), so what it holds stays within the
// peer's window; a write that fails calls failed. finish ends the
// connection (failed) once what was put is written; stop ends the
// goroutine at once (nil-safe).
type sink struct {
	mu     sync.Mutex
	queue  [][]byte
	ending bool
	more   chan struct{} // a token when queue or ending changed
	done   chan struct{} // closed by stop
	once   sync.Once
}

func newSink(conn net.Conn, ack func(int64), failed func()) *sink {
	s := &sink{more: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		for {
			s.mu.Lock()
			q, ending := s.queue, s.ending
			s.queue = nil
			s.mu.Unlock()
			for _, b := range q {
				_ = conn.SetWriteDeadline(time.Now().Add(time.Minute))
				if _, err := conn.Write(b); err != nil {
					failed()
					return
				}
				ack(int64(len(b)))
			}
			if ending && len(q) == 0 {
				failed()
				return
			}
			if len(q) > 0 {
				continue
			}
			select {
			case <-s.more:
			case <-s.done:
				return
			}
		}
	}()
	return s
}

func (s *sink) signal() {
	select {
	case s.more <- struct{}{}:
	default:
	}
}

// put queues b to be written.
func (s *sink) put(b []byte) {
	s.mu.Lock()
	s.queue = append(s.queue, b)
	s.mu.Unlock()
	s.signal()
}

// finish ends the connection once what was put is written.
func (s *sink) finish() {
	s.mu.Lock()
	s.ending = true
	s.mu.Unlock()
	s.signal()
}

func (s *sink) stop() {
	if s != nil {
		s.once.Do(func() { close(s.done) })
	}
}

// window is a stream's credit: what its pump sent, what the peer wrote
// (acked, within streamWindow of sent) and what it took from the
// transport (within the link's credit).
type window struct {
	link *credit
	more chan struct{} // a token when acked grew
	stop chan struct{} // closed when the actor stops

	mu       sync.Mutex
	sent     int64
	acked    int64 // written by the peer
	said     int64 // the peer's Received, summed
	returned int64 // given back to link: max(said, acked)
	released bool  // the stream ended: its credit went back to link
}

// newWindow returns the window of a stream to a node of sys at addr.
func newWindow(sys *actor.ActorSystem, addr string) *window {
	return &window{link: linkCredit(sys, addr), more: make(chan struct{}, 1), stop: make(chan struct{})}
}

// ack records n more bytes written by the peer (Stream.Ack), and gives
// the link what it had not yet been given of them.
func (w *window) ack(n int64) {
	w.mu.Lock()
	w.acked += n
	w.returnLocked(w.acked)
	w.mu.Unlock()
	select {
	case w.more <- struct{}{}:
	default:
	}
}

// received records n more bytes the peer took from the transport
// (Stream.Received), and gives them back to the link.
func (w *window) received(n int64) {
	w.mu.Lock()
	w.said += n
	w.returnLocked(w.said)
	w.mu.Unlock()
}

// returnLocked gives the link back what it was not given of the first
// upTo bytes sent (never more than were sent: a peer that claims more
// cannot grow the link's credit); w.mu is held.
func (w *window) returnLocked(upTo int64) {
	upTo = min(upTo, w.sent)
	if !w.released && upTo > w.returned {
		w.link.give(upTo - w.returned)
		w.returned = upTo
	}
}

// end stops the pump and gives what the peer did not say it received
// back to the link; call once, when the stream's actor stops. (Those bytes may
// still wait in the transport: for a moment the link may hold linkWindow
// plus what streams that just ended had in flight.)
func (w *window) end() {
	close(w.stop)
	w.mu.Lock()
	w.returnLocked(w.sent)
	w.released = true
	w.mu.Unlock()
}

// take waits until n more bytes fit in the stream's window and in its
// link's credit, and counts them sent; false when the stream ended.
func (w *window) take(n int64) bool {
	for {
		w.mu.Lock()
		fits := w.sent+n-w.acked <= streamWindow
		w.mu.Unlock()
		if fits {
			break
		}
		select {
		case <-w.more:
		case <-w.stop:
			return false
		}
	}
	if !w.link.take(n, w.stop) {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.released {
		w.link.give(n)
		return false
	}
	w.sent += n
	return true
}

// credit is what the streams of a node to another may send
// unacknowledged, together (linkWindow).
type credit struct {
	mu   sync.Mutex
	free int64
	grew chan struct{} // closed and replaced when free grows
}

// take waits until n bytes are free and takes them; false when stop is
// closed first.
func (c *credit) take(n int64, stop <-chan struct{}) bool {
	for {
		c.mu.Lock()
		if c.free >= n {
			c.free -= n
			c.mu.Unlock()
			return true
		}
		grew := c.grew
		c.mu.Unlock()
		select {
		case <-grew:
		case <-stop:
			return false
		}
	}
}

func (c *credit) give(n int64) {
	if n == 0 {
		return
	}
	c.mu.Lock()
	c.free += n
	close(c.grew)
	c.grew = make(chan struct{})
	c.mu.Unlock()
}

// links holds the credit of each pair of nodes (an actor system's ID and
// the other's address); a pair's entry stays (a process talks to few).
var links sync.Map

func linkCredit(sys *actor.ActorSystem, addr string) *credit {
	key := sys.ID + " " + addr
	if c, ok := links.Load(key); ok {
		return c.(*credit)
	}
	c, _ := links.LoadOrStore(key, &credit{free: linkWindow, grew: make(chan struct{})})
	return c.(*credit)
}

// pump sends what is read from conn, in chunks, never more than its
// window allows unacknowledged (credit brings the acknowledgements), then
// an end.
func pump(conn net.Conn, send func(*clusterpb.Stream), w *window) {
	buf := make([]byte, streamChunk)
	for {
		n, err := conn.Read(buf)
		if n > 0 {
			if !w.take(int64(n)) {
				return // the actor stopped
			}
			send(&clusterpb.Stream{Data: append([]byte(nil), buf[:n]...)})
		}
		if err != nil {
			end := &clusterpb.Stream{End: true}
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) && !errors.Is(err, net.ErrClosed) {
				end.Err = err.Error()
			}
			send(end)
			return
		}
	}
}

// openForward answers a forward query: it connects to the port in the
// conversation's network and starts the executor's stream actor, which
// says opened to the front's; or it answers a QueryReply (not held, or
// the error).
func (a *execActor) openForward(ctx actor.Context, m *clusterpb.Query) {
	x, front, root := a.x, ctx.Sender(), ctx.ActorSystem().Root
	go func() {
		reply := &clusterpb.QueryReply{}
		tc, err := decodeTC(m.Tc)
		if err == nil && !x.touch(tc.ConversationID, front.Address) {
			reply.NotHeld = true
			root.Send(front, reply)
			return
		}
		var conn net.Conn
		if err == nil {
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			conn, err = x.eng.Forward(dctx, tc.ConversationID, int(m.Port))
			cancel()
		}
		if err != nil {
			encodeReplyErr(reply, err)
			root.Send(front, reply)
			return
		}
		root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &execStream{front: front, conn: conn} }))
	}()
}

// execStream is a forwarded connection on the executor.
type execStream struct {
	front *actor.PID
	conn  net.Conn
	win   *window // the front's acknowledgements, for the pump
	out   *sink   // writes the front's data into conn
}

func (a *execStream) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		ctx.Watch(a.front)
		ctx.Request(a.front, &clusterpb.Stream{Opened: true})
		a.win = newWindow(ctx.ActorSystem(), a.front.Address)
		root, front, self, conn, win := ctx.ActorSystem().Root, a.front, ctx.Self(), a.conn, a.win
		a.out = newSink(conn, func(n int64) { root.Send(front, &clusterpb.Stream{Ack: n}) }, func() { root.Stop(self) })
		go func() {
			pump(conn, func(msg *clusterpb.Stream) { root.Send(front, msg) }, win)
			root.Stop(self)
		}()
	case *actor.Stopping:
		a.conn.Close()
		a.win.end()
		a.out.stop()
	case *actor.Terminated:
		ctx.Send(ctx.Self(), streamGone{}) // after the front's data already queued
	case streamGone:
		a.out.finish() // what the front sent before it ended is written first
	case *clusterpb.Stream:
		if len(m.Data) > 0 {
			a.out.put(m.Data)
			ctx.Send(a.front, &clusterpb.Stream{Received: int64(len(m.Data))})
		}
		if m.Ack > 0 {
			a.win.ack(m.Ack)
		}
		if m.Received > 0 {
			a.win.received(m.Received)
		}
		if m.End {
			a.out.finish()
		}
	}
}
