package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/bashvisor/bashvisor/cluster/clusterpb"
	"github.com/bashvisor/bashvisor/engine"
)

// --- calls ---

// Run implements engine.Runner: it runs the call on the conversation's
// executor and returns its result exactly as that executor's engine
// produced it, or a "lost" result when the executor stopped answering.
func (c *Client) Run(ctx context.Context, tc engine.ToolContext, in engine.Input) engine.Result {
	c.calls.Add(1)
	defer c.calls.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.runCtx, cancel)
	defer stop()
	callID := tc.CallID
	if callID == "" {
		callID = newCallID()
	}
	for attempt := 0; ; attempt++ {
		st, a, placing, err := c.place(ctx, tc.ConversationID)
		if err != nil {
			return engine.Result{Command: in.Command, Display: in.Command, Status: engine.StatusError, Err: err, Output: engine.ErrorText(err)}
		}
		res, notHeld := c.runOn(ctx, st, a, placing, tc, in, callID)
		if !notHeld {
			return res
		}
		// Another front ended the conversation there (it may run
		// elsewhere now): the call did not run; look again, once.
		c.forget(tc.ConversationID, st.id)
		if attempt > 0 {
			err := fmt.Errorf("%w: conversation %q moved between executors while this call looked for it; it was not run", ErrNoExecutor, tc.ConversationID)
			return engine.Result{Command: in.Command, Display: in.Command, Status: engine.StatusError, Err: err, Output: engine.ErrorText(err)}
		}
	}
}

// runOn runs the call on st; notHeld reports that st refused it because
// it does not hold the conversation (nothing ran).
func (c *Client) runOn(ctx context.Context, st *execState, a assignment, placing bool, tc engine.ToolContext, in engine.Input, callID string) (res engine.Result, notHeld bool) {
	res = engine.Result{Command: in.Command, Display: in.Command}
	msg := &clusterpb.RunCall{ExecutorId: st.id, Tc: encodeTC(tc, callID), Command: in.Command, Mode: string(in.Mode),
		Stdin: in.Stdin, Tty: in.TTY, YieldMs: in.YieldMS, Network: in.Network}
	if placing {
		msg.Place = a.pb()
	}
	start := time.Now()
	ev, pid := c.spawnCall(st, msg)
	defer c.stopActor(pid)

	accept := time.NewTimer(c.o.AcceptTimeout)
	defer accept.Stop()
	var backstop <-chan time.Time
	done := ctx.Done()
	lostC := st.lost
	lost := func(why string, at time.Time) (engine.Result, bool) {
		res.Status, res.PID = engine.StatusLost, 0
		res.Err = fmt.Errorf("%w: %s: %s", ErrExecutorLost, st.name(), why)
		res.Output = lostText(st.name(), at.Sub(start))
		res.DurationMS = time.Since(start).Milliseconds()
		return res, false
	}
	for {
		select {
		case e := <-ev:
			switch m := e.(type) {
			case *clusterpb.Accepted:
				accept.Stop()
				if placing {
					c.settle(tc.ConversationID, st, a)
				}
				t := time.NewTimer(time.Duration(m.BackstopMs) * time.Millisecond)
				defer t.Stop()
				backstop = t.C
			case *clusterpb.Progress:
				if tc.Progress != nil {
					tc.Progress(engine.Progress{Elapsed: time.Duration(m.ElapsedNs), Bytes: m.Bytes, LastLine: m.LastLine, Output: m.Output, Skipped: m.Skipped})
				}
			case *clusterpb.RunResult:
				r := decodeResult(m.Result)
				if r.Status == engine.StatusStarted && r.JobID != "" {
					id := c.recordJob(tc.ConversationID, a, st, r)
					if id != r.JobID { // a yielded call's text names the job too
						r.Output = strings.Replace(r.Output, "moved to background as "+r.JobID+";", "moved to background as "+id+";", 1)
					}
					r.JobID = id
				}
				return r, false
			case *clusterpb.Refused:
				switch m.Kind {
				case "not_held":
					return res, true
				case "conflict":
					err := fmt.Errorf("%w: %s", engine.ErrBadInput, m.Reason)
					res.Status, res.Err, res.Output = engine.StatusError, err, engine.ErrorText(err)
					return res, false
				case "shutdown":
					err := fmt.Errorf("%w: executor %s: %s", engine.ErrShutdown, st.name(), m.Reason)
					res.Status, res.Err, res.Output = engine.StatusError, err, engine.ErrorText(err)
					return res, false
				}
				c.markLost(st, m.Reason)
				return lost(m.Reason, st.lostAt)
			case *actor.Terminated:
				why := terminatedWhy(m)
				c.markLost(st, why)
				return lost(why, st.lostAt)
			case callFlush:
				return lost(st.lostWhy, st.lostAt)
			}
		case <-lostC:
			// Whatever the executor sent before it was lost may still be
			// in the call actor's mailbox: the call is lost only if none
			// of it is its answer (see callFlush).
			lostC = nil
			c.node.sys.Root.Send(pid, callFlush{})
		case <-done:
			done = nil
			c.node.sys.Root.Send(st.pid, &clusterpb.Cancel{CallId: callID})
		case <-accept.C:
			return lost(fmt.Sprintf("it did not acknowledge the call within %s", c.o.AcceptTimeout), time.Now())
		case <-backstop:
			return lost("it did not answer within its own time bound", time.Now())
		}
	}
}

// spawnCall starts the call actor that sends msg to st's executor and
// watches it; it forwards every answer to the returned channel.
func (c *Client) spawnCall(st *execState, msg proto.Message) (<-chan any, *actor.PID) {
	ev := make(chan any, 16)
	pid := c.node.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &callActor{target: st.pid, first: msg, ev: ev}
	}))
	return ev, pid
}

// callActor is one call (or query) on the front: it sends its request,
// watches the executor, and forwards what comes back, in the order it
// came: the executor's end (Terminated, a system message, which
// protoactor hands an actor before the user messages already in its
// mailbox) goes on after the answers that arrived before it
// (targetGone).
type callActor struct {
	target *actor.PID
	first  proto.Message
	ev     chan<- any
}

// targetGone is the call's executor's end, sent by the call actor to
// itself to be handled after what is already in its mailbox.
type targetGone struct{ t *actor.Terminated }

// callFlush, sent to a call actor, comes back on its channel once what
// was in its mailbox before it has been forwarded: a call whose executor
// was lost waits for it before it calls itself lost, in case its answer
// was already there.
type callFlush struct{}

func (a *callActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		ctx.Watch(a.target)
		ctx.Request(a.target, a.first)
	case *actor.Stopping:
		ctx.Unwatch(a.target)
	case *actor.Terminated:
		if m.Who.Equal(a.target) {
			ctx.Send(ctx.Self(), targetGone{m})
		}
	case targetGone:
		a.ev <- m.t
	case *clusterpb.Progress:
		select { // keep only what fits: progress is a snapshot
		case a.ev <- m:
		default:
		}
	case callFlush, *clusterpb.Accepted, *clusterpb.RunResult, *clusterpb.Refused, *clusterpb.QueryReply:
		a.ev <- m // at most four of these per call, the executor's end one: the buffer holds them
	}
}

// stopActor stops a call or watcher actor; Shutdown waits until all have
// stopped, so that their Unwatch reached the executor's endpoint before it
// ends the endpoints. The caller does not wait.
func (c *Client) stopActor(pid *actor.PID) {
	c.actors.Add(1)
	go func() {
		defer c.actors.Done()
		_ = c.node.sys.Root.StopFuture(pid).Wait()
	}()
}

func newCallID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "bv-" + hex.EncodeToString(b)
}

// lostText is the result text of a call whose executor machine stopped
// answering `after` into the command (status "lost", an error for the
// model): "[command lost: executor exec-2 stopped answering 12.3s into the
// command; it may have finished or may still be running; it was not
// re-run]".
func lostText(executor string, after time.Duration) string {
	return fmt.Sprintf("[command lost: executor %s stopped answering %.1fs into the command; "+
		"it may have finished or may still be running; it was not re-run]", executor, max(after, 0).Seconds())
}
