package cluster

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pacluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/bashvisor/bashvisor/cluster/clusterpb"
	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/truncate"
)

// ExecutorOptions configure an [Executor].
type ExecutorOptions struct {
	// Listen is the remote address to serve on, "host:port" (port 0 picks
	// one). A non-loopback address needs Token.
	Listen string
	// AdvertisedHost is the "host:port" others reach this executor at
	// when it differs from Listen (a pod IP behind 0.0.0.0).
	AdvertisedHost string
	// Token is the shared secret every node of the fleet presents on its
	// gRPC streams; connections without it are refused. A stream's
	// header list may be 4 KiB plus the token's length (the nodes' own
	// take under 0.5 KiB plus the token's): a peer that sends more is cut
	// off (its connection closed) before the rest is read.
	Token string
	// Name is shown to the model in lost texts (default: the advertised
	// address).
	Name string
	// Membership is how fronts find this executor: nil or [Static] joins
	// no cluster (the fronts list its address); [Provider] starts it as a
	// cluster member.
	Membership Membership
	// FenceAfter is how long the executor may go without running (frozen
	// by SIGSTOP, a stalled VM) before it assumes the fronts declared it
	// lost and fences itself (default 2s). Keep it at or below the fronts'
	// ClientOptions.LostAfter.
	FenceAfter time.Duration
	// MaxCalls bounds the remembered call ids (running and finished,
	// default 4096); the oldest finished are forgotten first. CallTTL
	// forgets finished ones after this long (default 1h).
	MaxCalls int
	CallTTL  time.Duration
	// Logger receives the executor's logs (default: discard).
	Logger *slog.Logger
}

// Executor serves one local engine to fronts over protoactor remote. It
// runs each call id at most once: a repeated id attaches to the running
// call or gets its recorded result. Once fenced — a front declared it
// lost, it was frozen longer than FenceAfter, or its cluster membership
// dropped it — it kills every command and job and refuses everything; a
// process must be restarted (a new member id) to serve again.
type Executor struct {
	eng  *engine.Engine
	cfg  engine.Config
	o    ExecutorOptions
	node *node
	pid  *actor.PID
	log  *slog.Logger
	name atomic.Value // string: set before serving, then to the address if empty

	runCtx     context.Context // parent of every call; cancelled by Fence and Stop
	cancelRuns context.CancelFunc
	start      time.Time
	lastBeat   atomic.Int64 // nanoseconds since start of the watchdog's last tick

	fenceOnce sync.Once
	fenced    chan struct{}
	fenceWhy  atomic.Value // string
	fenceDone chan struct{}
	stopOnce  sync.Once
	stopped   chan struct{}
	seenSelf  atomic.Bool
	selfID    string             // the actor system's id, set before the node starts
	sys       *actor.ActorSystem // set before the node starts

	convMu sync.Mutex
	convs  map[string]*convRecord // by conversation id: held here, or a front's record of its holder
}

// NewExecutor starts an engine with cfg and serves it. Stop it with
// [Executor.Stop].
func NewExecutor(cfg engine.Config, o ExecutorOptions) (*Executor, error) {
	if o.FenceAfter <= 0 {
		o.FenceAfter = 2 * time.Second
	}
	if o.MaxCalls <= 0 {
		o.MaxCalls = 4096
	}
	if o.CallTTL <= 0 {
		o.CallTTL = time.Hour
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Membership == nil {
		o.Membership = Static()
	}
	if cfg.Logger == nil {
		cfg.Logger = o.Logger
	}
	eng, err := engine.New(cfg)
	if err != nil {
		return nil, err
	}
	x := &Executor{
		eng: eng, cfg: engineDefaults(cfg), o: o, log: o.Logger,
		start: time.Now(), fenced: make(chan struct{}), convs: map[string]*convRecord{}, fenceDone: make(chan struct{}), stopped: make(chan struct{}),
	}
	x.runCtx, x.cancelRuns = context.WithCancel(context.Background())
	x.node, err = startNode(nodeOptions{
		listen: o.Listen, advertised: o.AdvertisedHost, token: o.Token, membership: o.Membership, member: true, log: o.Logger,
		beforeStart: func(sys *actor.ActorSystem) {
			x.selfID, x.sys = sys.ID, sys
			x.name.Store(o.Name)
			x.pid, _ = sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return newExecActor(x) }), executorActor)
		},
		onTopology: x.topology,
		streams:    x.serveForward,
	})
	if err != nil {
		x.cancelRuns()
		_ = eng.Shutdown(context.Background())
		return nil, err
	}
	if o.Name == "" {
		x.name.Store(x.node.address())
	}
	go x.watchdog()
	x.log.Info("executor serving", "id", x.ID(), "address", x.Addr(), "name", x.nameOf(), "membership", o.Membership.describe())
	return x, nil
}

// engineDefaults fills in the defaults the engine would use, for the
// backstop the executor tells fronts.
func engineDefaults(c engine.Config) engine.Config {
	d := engine.DefaultConfig()
	for _, p := range []struct{ v, d *time.Duration }{
		{&c.Timeout, &d.Timeout}, {&c.SlowTimeout, &d.SlowTimeout}, {&c.Lifecycle.Grace, &d.Lifecycle.Grace}, {&c.Lifecycle.CleanupWait, &d.Lifecycle.CleanupWait},
	} {
		if *p.v <= 0 {
			*p.v = *p.d
		}
	}
	if c.Admission.QueueWait <= 0 {
		c.Admission.QueueWait = 30 * time.Second
	}
	return c
}

// ID is the executor's member id, new on every start.
func (x *Executor) ID() string { return x.selfID }

// Addr is the address fronts reach it at.
func (x *Executor) Addr() string { return x.node.address() }

func (x *Executor) nameOf() string {
	s, _ := x.name.Load().(string)
	return s
}

// FenceDone is closed once the executor fenced itself and ended its
// commands and jobs. It fences itself when its process did not run for
// longer than ExecutorOptions.FenceAfter, when the membership no longer
// lists it or blocked it, and when a front declared it lost: from then
// on it refuses every request, its running calls are cancelled and its
// background jobs killed (the grace sequence).
func (x *Executor) FenceDone() <-chan struct{} { return x.fenceDone }

// FenceReason says why it fenced ("" when it did not).
func (x *Executor) FenceReason() string {
	s, _ := x.fenceWhy.Load().(string)
	return s
}

// fence makes the executor refuse every request from now on, cancels its
// running calls and kills its background jobs (the grace sequence).
func (x *Executor) fence(reason string) {
	x.fenceOnce.Do(func() {
		x.fenceWhy.Store(reason)
		close(x.fenced)
		x.log.Warn("executor fenced: ending every command and job, refusing every request", "id", x.ID(), "reason", reason)
		x.sys.Root.Send(x.pid, fenceNow{})
		x.cancelRuns()
		go func() {
			defer close(x.fenceDone)
			var wg sync.WaitGroup
			for _, j := range x.eng.AllJobs() {
				if j.Status != engine.JobRunning {
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), x.cfg.Lifecycle.Grace+x.cfg.Lifecycle.CleanupWait+5*time.Second)
					defer cancel()
					_, _ = x.eng.Kill(ctx, engine.ToolContext{ConversationID: j.ConversationID}, j.JobID)
				}()
			}
			wg.Wait()
		}()
	})
}

func (x *Executor) isFenced() bool {
	select {
	case <-x.fenced:
		return true
	default:
		return false
	}
}

// watchdog ticks; a tick that finds the previous one longer ago than
// FenceAfter means the process did not run meanwhile (SIGSTOP, a frozen
// VM): the fronts may have declared it lost, so it fences.
func (x *Executor) watchdog() {
	t := time.NewTicker(x.o.FenceAfter / 8)
	defer t.Stop()
	x.beat()
	for {
		select {
		case <-x.stopped:
			return
		case <-t.C:
			x.checkFrozen()
			x.beat()
		}
	}
}

func (x *Executor) beat() { x.lastBeat.Store(int64(time.Since(x.start))) }

// checkFrozen fences when the watchdog has not run for FenceAfter. The
// actor calls it before serving anything, so that a request that was
// queued while the process was frozen is refused even if the watchdog
// has not run yet.
func (x *Executor) checkFrozen() {
	if gap := time.Since(x.start) - time.Duration(x.lastBeat.Load()); gap > x.o.FenceAfter {
		x.fence(fmt.Sprintf("the process did not run for %.1fs (frozen?), longer than the fence bound %s", gap.Seconds(), x.o.FenceAfter))
	}
}

// topology fences the executor when the cluster no longer lists it.
func (x *Executor) topology(t *pacluster.ClusterTopology) {
	self := x.selfID
	for _, id := range t.Blocked {
		if memberID(id) == self {
			x.fence("the cluster blocked this member")
			return
		}
	}
	for _, m := range t.Members {
		if memberID(m.Id) == self {
			x.seenSelf.Store(true)
			return
		}
	}
	if x.seenSelf.Load() {
		x.fence("the cluster membership no longer lists this member")
	}
}

// Stop stops serving: running calls are cancelled, background jobs ended
// (engine shutdown), then the node stops. It waits for ctx at most.
func (x *Executor) Stop(ctx context.Context) error {
	var err error
	x.stopOnce.Do(func() {
		close(x.stopped)
		x.cancelRuns()
		err = x.eng.Shutdown(ctx)
		x.node.stop(nil)
	})
	return err
}

// --- the executor actor ---

type fenceNow struct{}

// callDone and callProgress come from a call's goroutine.
type callDone struct {
	id  string
	res engine.Result
}

type callProgress struct {
	id string
	p  engine.Progress
}

type callRecord struct {
	command, mode, conversation string
	waiters                     []*actor.PID
	cancel                      context.CancelFunc
	done                        bool
	result                      *clusterpb.Result
	ended                       time.Time
}

type execActor struct {
	x     *Executor
	calls map[string]*callRecord
	order []string // finished call ids, oldest first
	// byWaiter maps a waiter (a front's call actor, which the executor
	// watches) to the running calls it waits for.
	byWaiter map[string][]string
}

func newExecActor(x *Executor) *execActor {
	return &execActor{x: x, calls: map[string]*callRecord{}, byWaiter: map[string][]string{}}
}

// wait adds w as a waiter of call id and watches it: when the front that
// sent the call dies or its connection to this executor breaks (a
// Terminated for its actor), a call nobody waits for any more is
// cancelled (see orphaned).
func (a *execActor) wait(ctx actor.Context, c *callRecord, id string, w *actor.PID) {
	c.waiters = append(c.waiters, w)
	k := w.String()
	if _, watched := a.byWaiter[k]; !watched {
		ctx.Watch(w)
	}
	a.byWaiter[k] = append(a.byWaiter[k], id)
}

// orphaned handles the end of a waiter: the front's call actor stopped
// (its call returned: lost, or the front gave up), or its address
// terminated (the front died or the connection to it broke). Its running
// calls that nobody else waits for are cancelled: their results could
// reach no one, and a front that died must not keep slots busy until the
// calls' timeouts (15 minutes in slow mode).
func (a *execActor) orphaned(m *actor.Terminated) {
	k := m.Who.String()
	ids := a.byWaiter[k]
	delete(a.byWaiter, k)
	for _, id := range ids {
		c := a.calls[id]
		if c == nil || c.done {
			continue
		}
		c.waiters = slices.DeleteFunc(c.waiters, func(w *actor.PID) bool { return w.Equal(m.Who) })
		if len(c.waiters) == 0 {
			a.x.log.Warn("cancelling a call its front no longer waits for", "call", id, "front", m.Who.Address, "why", terminatedWhy(m))
			c.cancel()
		}
	}
}

// unwait forgets the waiters of a finished call.
func (a *execActor) unwait(c *callRecord, id string) {
	for _, w := range c.waiters {
		k := w.String()
		a.byWaiter[k] = slices.DeleteFunc(a.byWaiter[k], func(s string) bool { return s == id })
		if len(a.byWaiter[k]) == 0 {
			delete(a.byWaiter, k)
		}
	}
}

func (a *execActor) Receive(ctx actor.Context) {
	x := a.x
	switch m := ctx.Message().(type) {
	case *clusterpb.Ping:
		x.checkFrozen()
		st := x.eng.Load()
		ctx.Respond(&clusterpb.Pong{
			ExecutorId: x.ID(), Name: x.nameOf(), Accepting: !x.isFenced(), Fenced: x.isFenced(),
			Running: int64(st.Running), Jobs: int64(st.Jobs), Queued: int64(st.Queued),
		})
	case *clusterpb.Fence:
		if m.ExecutorId == x.ID() {
			x.fence("a front declared this executor lost: " + m.Reason)
		}
	case *clusterpb.RunCall:
		a.run(ctx, m)
	case *clusterpb.Cancel:
		if c := a.calls[m.CallId]; c != nil && !c.done {
			c.cancel()
		}
	case *clusterpb.Query:
		a.query(ctx, m)
	case callProgress:
		if c := a.calls[m.id]; c != nil && !c.done && !x.isFenced() {
			p := &clusterpb.Progress{CallId: m.id, ElapsedNs: int64(m.p.Elapsed), Bytes: m.p.Bytes, LastLine: m.p.LastLine, Output: m.p.Output, Skipped: m.p.Skipped}
			for _, w := range c.waiters {
				ctx.Send(w, p)
			}
		}
	case callDone:
		a.finish(ctx, m)
	case *actor.Terminated:
		a.orphaned(m)
	case fenceNow:
		for id, c := range a.calls {
			if !c.done {
				for _, w := range c.waiters {
					ctx.Send(w, &clusterpb.Refused{CallId: id, Kind: "fenced", Reason: x.FenceReason(), ExecutorId: x.ID()})
				}
				a.unwait(c, id)
				c.waiters = nil
			}
		}
	}
}

// refuse answers a request the executor will not serve.
func (a *execActor) refuse(ctx actor.Context, callID, executorID string) bool {
	if r := a.x.refusal(callID, executorID); r != nil {
		ctx.Respond(r)
		return true
	}
	return false
}

// refusal is why the executor refuses a request for executorID (nil: it
// does not).
func (x *Executor) refusal(callID, executorID string) *clusterpb.Refused {
	x.checkFrozen()
	switch {
	case x.isFenced():
		return &clusterpb.Refused{CallId: callID, Kind: "fenced", Reason: x.FenceReason(), ExecutorId: x.ID()}
	case executorID != "" && executorID != x.ID():
		return &clusterpb.Refused{CallId: callID, Kind: "wrong_executor", ExecutorId: x.ID(),
			Reason: fmt.Sprintf("this is executor %s, not %s (the process restarted)", x.ID(), executorID)}
	}
	select {
	case <-x.stopped:
		return &clusterpb.Refused{CallId: callID, Kind: "shutdown", Reason: "executor is shutting down", ExecutorId: x.ID()}
	default:
		return nil
	}
}

func (a *execActor) run(ctx actor.Context, m *clusterpb.RunCall) {
	x := a.x
	tc, tcErr := decodeTC(m.Tc)
	if a.refuse(ctx, tc.CallID, m.ExecutorId) {
		return
	}
	if m.Place != nil {
		x.hold(tc.ConversationID, m.Place, senderAddr(ctx))
	} else if !x.touch(tc.ConversationID, senderAddr(ctx)) {
		ctx.Respond(&clusterpb.Refused{CallId: tc.CallID, Kind: "not_held", ExecutorId: x.ID(),
			Reason: fmt.Sprintf("this executor does not hold conversation %q", tc.ConversationID)})
		return
	}
	in := engine.Input{Command: m.Command, Mode: engine.Mode(m.Mode), Stdin: m.Stdin, TTY: m.Tty, YieldMS: m.YieldMs, Network: m.Network}
	backstop := a.backstop(in.Mode)
	if c := a.calls[tc.CallID]; c != nil {
		if c.command != m.Command || c.mode != m.Mode || c.conversation != tc.ConversationID {
			ctx.Respond(&clusterpb.Refused{CallId: tc.CallID, Kind: "conflict", ExecutorId: x.ID(),
				Reason: fmt.Sprintf("call id %q was already used for another command", tc.CallID)})
			return
		}
		ctx.Respond(&clusterpb.Accepted{CallId: tc.CallID, ExecutorId: x.ID(), Duplicate: true, BackstopMs: backstop.Milliseconds()})
		if c.done {
			ctx.Respond(&clusterpb.RunResult{CallId: tc.CallID, Result: c.result})
		} else if ctx.Sender() != nil {
			a.wait(ctx, c, tc.CallID, ctx.Sender())
		}
		return
	}
	cctx, cancel := context.WithCancel(x.runCtx)
	c := &callRecord{command: m.Command, mode: m.Mode, conversation: tc.ConversationID, cancel: cancel}
	a.calls[tc.CallID] = c
	if ctx.Sender() != nil {
		a.wait(ctx, c, tc.CallID, ctx.Sender())
	}
	ctx.Respond(&clusterpb.Accepted{CallId: tc.CallID, ExecutorId: x.ID(), BackstopMs: backstop.Milliseconds()})
	self, root, id := ctx.Self(), ctx.ActorSystem().Root, tc.CallID
	if m.Tc.GetProgress() {
		tc.Progress = func(p engine.Progress) { root.Send(self, callProgress{id, p}) }
	}
	go func() {
		defer cancel()
		var r engine.Result
		if tcErr != nil {
			r = engine.Result{Status: engine.StatusError, Command: in.Command, Display: in.Command, Output: engine.ErrorText(tcErr), Err: tcErr}
		} else {
			r = x.eng.Run(cctx, tc, in)
		}
		root.Send(self, callDone{id, r})
	}()
}

// backstop bounds how long a call can take here: its queue wait, its
// timeout, the grace sequence and the cleanup bound, plus a margin.
func (a *execActor) backstop(mode engine.Mode) time.Duration {
	c := a.x.cfg
	d := c.Admission.QueueWait + c.Lifecycle.Grace + c.Lifecycle.CleanupWait + 10*time.Second
	switch mode {
	case engine.ModeSlow:
		d += c.SlowTimeout
	case engine.ModeBackground:
	default:
		d += c.Timeout
	}
	return d
}

func (a *execActor) finish(ctx actor.Context, m callDone) {
	c := a.calls[m.id]
	if c == nil {
		return
	}
	c.done, c.ended, c.result = true, time.Now(), encodeResult(m.res)
	if m.res.Truncated && m.res.FullOutputFile != "" {
		a.x.keepOutput(c.conversation, m.res.FullOutputFile)
	}
	if !a.x.isFenced() { // a fenced executor answers nothing: its callers were told
		for _, w := range c.waiters {
			ctx.Send(w, &clusterpb.RunResult{CallId: m.id, Result: c.result})
		}
	}
	a.unwait(c, m.id)
	c.waiters = nil
	a.order = append(a.order, m.id)
	// Forget the oldest finished calls beyond MaxCalls or CallTTL.
	for len(a.order) > 0 {
		old := a.calls[a.order[0]]
		if len(a.calls) <= a.x.o.MaxCalls && (old == nil || time.Since(old.ended) < a.x.o.CallTTL) {
			break
		}
		delete(a.calls, a.order[0])
		a.order = a.order[1:]
	}
}

func (a *execActor) query(ctx actor.Context, m *clusterpb.Query) {
	x, sender, root := a.x, ctx.Sender(), ctx.ActorSystem().Root
	if a.refuse(ctx, "", m.ExecutorId) || sender == nil {
		return
	}
	if m.Op == "record" { // answered once kept: see Client.broadcastRecord
		x.record(m.Tc.GetConversationId(), m.Placement)
		ctx.Respond(&clusterpb.QueryReply{})
		return
	}
	go func() {
		reply := &clusterpb.QueryReply{}
		tc, err := decodeTC(m.Tc)
		switch {
		case err != nil:
		case m.Op == "describe":
			reply.Text = x.eng.Description(tc)
		case m.Op == "holds":
			reply.Placement = x.holderOf(tc.ConversationID)
		case m.Op == "end":
			var held bool
			if held, reply.Kept = x.release(tc.ConversationID, sender.Address); !held {
				reply.NotHeld = true
			} else if !reply.Kept {
				err = a.answer(x, tc, m, reply)
			}
		case !x.touch(tc.ConversationID, sender.Address):
			reply.NotHeld = true
		default:
			err = a.answer(x, tc, m, reply)
		}
		encodeReplyErr(reply, err)
		root.Send(sender, reply)
	}()
}

// answer runs query m for tc into reply.
func (a *execActor) answer(x *Executor, tc engine.ToolContext, m *clusterpb.Query, reply *clusterpb.QueryReply) error {
	var err error
	switch m.Op {
	case "jobs":
		for _, j := range x.eng.Jobs(tc) {
			reply.Jobs = append(reply.Jobs, encodeJob(j))
		}
	case "job":
		var j engine.JobInfo
		if j, err = x.eng.Job(tc, m.JobId); err == nil {
			reply.Jobs = []*clusterpb.JobInfo{encodeJob(j)}
		}
	case "output":
		var o engine.JobOutput
		if o, err = x.eng.JobOutput(tc, m.JobId, m.Tail, m.Offset, m.Limit); err == nil {
			reply.Jobs = []*clusterpb.JobInfo{encodeJob(o.Job)}
			reply.Offset, reply.End, reply.Data, reply.Size, reply.Eof, reply.Skipped = o.Offset, o.End, o.Data, o.Size, o.EOF, o.Skipped
		}
	case "kill":
		kctx, cancel := context.WithTimeout(x.runCtx, x.cfg.Lifecycle.Grace+x.cfg.Lifecycle.CleanupWait+5*time.Second)
		var j engine.JobInfo
		if j, err = x.eng.Kill(kctx, tc, m.JobId); err == nil {
			reply.Jobs = []*clusterpb.JobInfo{encodeJob(j)}
		}
		cancel()
	case "write":
		wctx, cancel := context.WithTimeout(x.runCtx, time.Minute)
		err = x.eng.Write(wctx, tc, m.JobId, m.Data, m.Close)
		cancel()
	case "wait":
		var j engine.JobInfo
		if j, err = x.eng.WaitOutput(x.runCtx, tc, m.JobId, m.Offset, time.Duration(m.WaitMs)*time.Millisecond); err == nil {
			reply.Jobs = []*clusterpb.JobInfo{encodeJob(j)}
		}
	case "full":
		path, ok := x.outputPath(tc.ConversationID, m.OutputId)
		if !ok {
			return fmt.Errorf("%w: no full output %q in this conversation", fs.ErrNotExist, m.OutputId)
		}
		reply.Data, reply.End, reply.Size, err = truncate.ReadSpool(path, m.Offset, m.Limit)
	case "undo":
		var u engine.UndoResult
		if u, err = x.eng.Undo(x.runCtx, tc, int(m.Steps)); err == nil {
			encodeUndo(reply, u)
		}
	case "held", "review":
		err = x.answerReview(tc, m, reply)
	case "end":
		ectx, cancel := context.WithTimeout(context.Background(), x.cfg.Lifecycle.Grace+x.cfg.Lifecycle.CleanupWait+5*time.Second)
		err = x.eng.EndConversation(ectx, tc.ConversationID)
		cancel()
	default:
		err = fmt.Errorf("%w: unknown query %q", engine.ErrBadInput, m.Op)
	}
	return err
}

// senderAddr is the address of the front a request came from.
func senderAddr(ctx actor.Context) string {
	if s := ctx.Sender(); s != nil {
		return s.Address
	}
	return ""
}
