package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pacluster "github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/proto"

	"github.com/bashvisor/bashvisor/cluster/clusterpb"
	"github.com/bashvisor/bashvisor/engine"
)

// Errors of the Client; test them with errors.Is.
var (
	// ErrExecutorLost: the executor running a call or holding a job
	// stopped answering (status "lost").
	ErrExecutorLost = errors.New("executor lost")
	// ErrConversationLost: the conversation's executor is gone and its
	// working directory with it (Placement.DirSurvives said no).
	ErrConversationLost = errors.New("conversation's executor is gone")
	// ErrNoExecutor: no executor is ready to take a new conversation.
	ErrNoExecutor = errors.New("no executor available")
)

// ClientOptions configure a [Client].
type ClientOptions struct {
	// Membership lists the executors: [Static] addresses or a [Provider].
	// Required.
	Membership Membership
	// Listen is the front's own remote address, where executors send
	// answers (default "127.0.0.1:0"). A non-loopback address needs
	// Token.
	Listen string
	// AdvertisedHost is the "host:port" executors reach the front at, when
	// it differs from Listen.
	AdvertisedHost string
	// Token is the fleet's shared secret (see ExecutorOptions.Token).
	Token string
	// Placement is the conversation table (default NewMemoryPlacement()).
	Placement Placement
	// KeepaliveInterval is how often each executor is pinged for liveness
	// and load (default 500ms); LostAfter declares it lost after this
	// long without an answer (default 3s).
	KeepaliveInterval, LostAfter time.Duration
	// AcceptTimeout bounds the wait for an executor to acknowledge a call
	// (default 10s); past it the call is lost, never re-sent.
	AcceptTimeout time.Duration
	// QueryTimeout bounds a job query, kill or description (default 60s).
	QueryTimeout time.Duration
	// KeepConversations leaves the conversations' jobs running on the
	// executors at Shutdown (another front with the same durable Placement
	// takes over); by default Shutdown ends them.
	KeepConversations bool
	// Logger receives the front's logs (default: discard).
	Logger *slog.Logger
}

// Client is an [engine.Runner] that runs every conversation on one
// executor of a fleet. The first call of a conversation pins it to the
// ready executor with the fewest conversations (ties: the least busy);
// it never moves while that executor lives, so a joining executor takes
// only new conversations. Each call is an actor that watches its executor;
// when the executor dies (its connection closes), leaves the membership or
// misses keepalives for LostAfter, every call on it answers "lost" at once,
// its jobs become "lost", and the conversation's next call fails with
// ErrConversationLost unless the Placement says the directory survives.
// A call is sent once: never again after the executor acknowledged it,
// and not even before (a retry belongs to the caller, with the same
// ToolContext.CallID, which the executor runs at most once).
type Client struct {
	o    ClientOptions
	node *node
	log  *slog.Logger

	runCtx  context.Context // cancelled by Shutdown: cancels calls in flight
	stopRun context.CancelFunc
	calls   sync.WaitGroup
	actors  sync.WaitGroup // actors being stopped
	pingers sync.WaitGroup

	mu      sync.Mutex
	execs   map[string]*execState // by member id, lost ones included
	byAddr  map[string]*execState // static: the current incarnation at each address
	pinned  map[string]int        // conversations per executor id
	convs   map[string]*convState
	changed chan struct{}   // closed and replaced on every membership change
	members map[string]bool // provider membership: the member ids of the latest topology
	stopped bool
}

type execState struct {
	id, addr  string
	nameV     atomic.Value // string: the address until it answers with its name
	pid       *actor.PID
	watcher   *actor.PID
	ready     bool
	load      *clusterpb.Pong
	lastHeard time.Time
	lost      chan struct{}
	lostAt    time.Time
	lostWhy   string
}

func (s *execState) name() string {
	n, _ := s.nameV.Load().(string)
	return n
}

func (s *execState) isLost() bool {
	select {
	case <-s.lost:
		return true
	default:
		return false
	}
}

// convState is what the front remembers of a conversation: the
// background jobs it started, to report them lost.
type convState struct {
	jobs []recordedJob
}

type recordedJob struct {
	gen  int
	exec string // executor id
	info engine.JobInfo
}

const maxRecordedJobs = 1000

// fenceWindow is how long a lost cluster member is still pinged, to fence
// it should it answer again.
const fenceWindow = 2 * time.Minute

var _ engine.Runner = (*Client)(nil)

// NewClient starts a front. Call [Client.WaitExecutors] before serving
// when calls must not fail with ErrNoExecutor right after start.
func NewClient(o ClientOptions) (*Client, error) {
	if o.Membership == nil {
		return nil, errors.New("cluster: ClientOptions.Membership is required")
	}
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	if o.Placement == nil {
		o.Placement = NewMemoryPlacement()
	}
	if o.KeepaliveInterval <= 0 {
		o.KeepaliveInterval = 500 * time.Millisecond
	}
	if o.LostAfter <= 0 {
		o.LostAfter = 3 * time.Second
	}
	if o.AcceptTimeout <= 0 {
		o.AcceptTimeout = 10 * time.Second
	}
	if o.QueryTimeout <= 0 {
		o.QueryTimeout = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Client{
		o: o, log: o.Logger,
		execs: map[string]*execState{}, byAddr: map[string]*execState{}, pinned: map[string]int{},
		convs: map[string]*convState{}, changed: make(chan struct{}),
	}
	c.runCtx, c.stopRun = context.WithCancel(context.Background())
	var topo chan *pacluster.ClusterTopology
	nopts := nodeOptions{listen: o.Listen, advertised: o.AdvertisedHost, token: o.Token, membership: o.Membership, log: o.Logger}
	if _, ok := o.Membership.(providerMembership); ok {
		// Topology events arrive on the provider's goroutine, under the
		// member list's lock: hand them to a goroutine of ours.
		topo = make(chan *pacluster.ClusterTopology, 64)
		nopts.onTopology = func(t *pacluster.ClusterTopology) {
			select {
			case topo <- t:
			case <-c.runCtx.Done():
			}
		}
	}
	var err error
	if c.node, err = startNode(nopts); err != nil {
		c.stopRun()
		return nil, err
	}
	switch m := o.Membership.(type) {
	case staticMembership:
		for _, addr := range m {
			c.pingers.Add(1)
			go c.pinger(addr, "")
		}
	case providerMembership:
		c.pingers.Add(1)
		go c.topologyLoop(topo)
	}
	return c, nil
}

// --- membership ---

// topologyLoop turns cluster topology events into executors: members are
// executors (the front is a client, not a member); one that left is lost.
func (c *Client) topologyLoop(topo <-chan *pacluster.ClusterTopology) {
	defer c.pingers.Done()
	for {
		select {
		case <-c.runCtx.Done():
			return
		case t := <-topo:
			live := map[string]bool{}
			for _, m := range t.Members {
				id := memberID(m.Id)
				live[id] = true
				c.mu.Lock()
				_, known := c.execs[id]
				if !known && !c.stopped {
					c.addExec(id, fmt.Sprintf("%s:%d", m.Host, m.Port), "")
					c.pingers.Add(1)
					go c.pinger(fmt.Sprintf("%s:%d", m.Host, m.Port), id)
				}
				c.mu.Unlock()
			}
			c.mu.Lock()
			c.members = live
			var left []*execState
			for id, st := range c.execs {
				if !live[id] && !st.isLost() {
					left = append(left, st)
				}
			}
			c.mu.Unlock()
			for _, st := range left {
				c.markLost(st, "it left the cluster membership")
			}
		}
	}
}

// addExec records an executor; c.mu is held.
func (c *Client) addExec(id, addr, name string) *execState {
	st := &execState{id: id, addr: addr, pid: actor.NewPID(addr, executorActor), lost: make(chan struct{})}
	if name == "" {
		name = addr
	}
	st.nameV.Store(name)
	c.execs[id] = st
	st.watcher = c.node.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &execWatcher{target: st.pid, onLost: func(why string) { go c.markLost(st, why) }}
	}))
	c.notifyLocked()
	return st
}

func (c *Client) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// pinger pings the executor at addr until the client stops (static) or
// the executor with id wantID is lost (provider).
func (c *Client) pinger(addr, wantID string) {
	defer c.pingers.Done()
	pid := actor.NewPID(addr, executorActor)
	t := time.NewTicker(c.o.KeepaliveInterval)
	defer t.Stop()
	for {
		res, err := c.node.sys.Root.RequestFuture(pid, &clusterpb.Ping{}, min(c.o.LostAfter/2, 2*time.Second)).Result()
		pong, _ := res.(*clusterpb.Pong)
		if !c.heard(addr, wantID, pong, err) {
			return
		}
		select {
		case <-c.runCtx.Done():
			return
		case <-t.C:
		}
	}
}

// heard handles one keepalive answer (pong nil: none); false stops the
// pinger.
func (c *Client) heard(addr, wantID string, pong *clusterpb.Pong, err error) bool {
	var lose []*execState
	var why string
	var fence *execState
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return false
	}
	var st *execState
	if wantID != "" {
		st = c.execs[wantID]
	} else {
		st = c.byAddr[addr]
	}
	switch {
	case pong == nil:
		if st != nil && !st.isLost() && st.ready && time.Since(st.lastHeard) > c.o.LostAfter {
			lose, why = append(lose, st), fmt.Sprintf("no answer to keepalives for %.1fs", time.Since(st.lastHeard).Seconds())
		}
	case wantID != "" && pong.ExecutorId != wantID:
		if st != nil && !st.isLost() {
			lose, why = append(lose, st), "its address answers as another process "+pong.ExecutorId+" (it restarted)"
		}
	default:
		if st == nil || st.id != pong.ExecutorId {
			if st != nil && !st.isLost() {
				lose, why = append(lose, st), "its address answers as another process "+pong.ExecutorId+" (it restarted)"
			}
			if old := c.execs[pong.ExecutorId]; old != nil {
				st = old // an incarnation declared lost that answers again
			} else {
				st = c.addExec(pong.ExecutorId, addr, pong.Name)
			}
			c.byAddr[addr] = st
		}
		if pong.Name != "" {
			st.nameV.Store(pong.Name)
		}
		switch {
		case st.isLost():
			fence = st // it must not serve under this id again
		case pong.Fenced:
			lose, why = append(lose, st), "it fenced itself"
		default:
			st.lastHeard, st.load = time.Now(), pong
			if !st.ready {
				st.ready = true
				c.notifyLocked()
			}
		}
	}
	// A lost executor is pinged on for a while: should it come back (a
	// frozen process resumed, a partition healed), its answer gets it
	// fenced. Static addresses are pinged for ever (a restart there is a
	// new executor).
	keep := wantID == "" || (st != nil && (!st.isLost() || time.Since(st.lostAt) < fenceWindow))
	c.mu.Unlock()
	for _, l := range lose {
		c.markLost(l, why)
	}
	if fence != nil {
		c.node.sys.Root.Send(fence.pid, &clusterpb.Fence{ExecutorId: fence.id, Reason: fence.lostWhy})
	}
	_ = err
	return keep
}

// markLost declares an executor lost: every call on it answers "lost" at
// once, its conversations cannot continue there, and it is told to fence
// itself (should it be alive after all).
func (c *Client) markLost(st *execState, why string) {
	c.mu.Lock()
	if st.isLost() || c.stopped {
		c.mu.Unlock()
		return
	}
	st.lostAt, st.lostWhy = time.Now(), why
	close(st.lost)
	c.notifyLocked()
	c.mu.Unlock()
	c.log.Warn("executor lost", "executor", st.name(), "id", st.id, "address", st.addr, "why", why)
	c.node.sys.Root.Send(st.pid, &clusterpb.Fence{ExecutorId: st.id, Reason: why})
	c.node.sys.Root.Stop(st.watcher)
}

// execWatcher watches one executor's actor: its termination (the process
// died, the connection closed) means the executor is lost.
type execWatcher struct {
	target *actor.PID
	onLost func(string)
}

func (w *execWatcher) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		ctx.Watch(w.target)
	case *actor.Stopping:
		ctx.Unwatch(w.target)
	case *actor.Terminated:
		w.onLost(terminatedWhy(m))
	}
}

func terminatedWhy(t *actor.Terminated) string {
	switch t.Why {
	case actor.TerminatedReason_AddressTerminated:
		return "its connection closed"
	case actor.TerminatedReason_NotFound:
		return "it no longer serves at its address"
	}
	return "its executor actor stopped"
}

// ExecutorInfo describes an executor as the front sees it.
type ExecutorInfo struct {
	ID, Name, Address string
	// Ready: it answered a keepalive and takes conversations.
	Ready bool
	// Lost: declared lost (LostReason says why); it never comes back
	// under this id.
	Lost       bool
	LostReason string
	// Conversations pinned to it by this front.
	Conversations int
	// Running, Jobs and Queued are its engine's load at its last answer.
	Running, Jobs, Queued int
}

// Executors lists the executors the front knows, lost ones included,
// sorted by address then id.
func (c *Client) Executors() []ExecutorInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]ExecutorInfo, 0, len(c.execs))
	for _, st := range c.execs {
		i := ExecutorInfo{ID: st.id, Name: st.name(), Address: st.addr, Ready: st.ready && !st.isLost(),
			Lost: st.isLost(), LostReason: st.lostWhy, Conversations: c.pinned[st.id]}
		if st.load != nil {
			i.Running, i.Jobs, i.Queued = int(st.load.Running), int(st.load.Jobs), int(st.load.Queued)
		}
		out = append(out, i)
	}
	slices.SortFunc(out, func(a, b ExecutorInfo) int {
		return cmpOr(strings.Compare(a.Address, b.Address), strings.Compare(a.ID, b.ID))
	})
	return out
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// WaitExecutors waits until at least n executors are ready, or ctx ends.
func (c *Client) WaitExecutors(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		ready := 0
		for _, st := range c.execs {
			if st.ready && !st.isLost() {
				ready++
			}
		}
		ch := c.changed
		c.mu.Unlock()
		if ready >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d executors (%d ready): %w", n, ready, ctx.Err())
		case <-ch:
		}
	}
}

// --- placement ---

// place returns the conversation's executor, pinning it on its first
// call.
func (c *Client) place(conv string) (*execState, Assignment, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil, Assignment{}, engine.ErrShutdown
	}
	a, ok, err := c.o.Placement.Get(conv)
	if err != nil {
		return nil, a, fmt.Errorf("placement of conversation %q: %w", conv, err)
	}
	gen := 1
	if ok {
		st := c.execs[a.ExecutorID]
		if st != nil && !st.isLost() {
			return st, a, nil
		}
		if !c.o.Placement.DirSurvives(conv, a) {
			return nil, a, goneError(a, st)
		}
		gen = a.Generation + 1
		c.pinned[a.ExecutorID]--
	}
	st := c.pickLocked()
	if st == nil {
		return nil, a, fmt.Errorf("%w: none of the %d known executors is ready", ErrNoExecutor, len(c.execs))
	}
	a = Assignment{ExecutorID: st.id, Name: st.name(), Address: st.addr, Generation: gen}
	if err := c.o.Placement.Put(conv, a); err != nil {
		return nil, a, fmt.Errorf("placement of conversation %q: %w", conv, err)
	}
	c.pinned[st.id]++
	return st, a, nil
}

// pickLocked returns the ready executor with the fewest conversations,
// then the least busy, then the lowest id.
func (c *Client) pickLocked() *execState {
	var best *execState
	var bestLoad [2]int64
	for _, st := range c.execs {
		if !st.ready || st.isLost() || st.load == nil || !st.load.Accepting {
			continue
		}
		l := [2]int64{int64(c.pinned[st.id]), st.load.Running + st.load.Queued + st.load.Jobs}
		if best == nil || l[0] < bestLoad[0] || (l[0] == bestLoad[0] && (l[1] < bestLoad[1] || (l[1] == bestLoad[1] && st.id < best.id))) {
			best, bestLoad = st, l
		}
	}
	return best
}

func goneError(a Assignment, st *execState) error {
	if st == nil {
		return fmt.Errorf("%w: this conversation's executor %s is not part of the fleet any more; its working directory was on that machine, so the conversation cannot continue: start a new conversation",
			ErrConversationLost, a.Name)
	}
	return fmt.Errorf("%w: this conversation's executor %s stopped answering %s ago (%s); its working directory was on that machine, so the conversation cannot continue: start a new conversation",
		ErrConversationLost, st.name(), time.Since(st.lostAt).Round(time.Second), st.lostWhy)
}

// --- calls ---

// Run implements engine.Runner: it runs the call on the conversation's
// executor and returns its result exactly as that executor's engine
// produced it, or a "lost" result when the executor stopped answering.
func (c *Client) Run(ctx context.Context, tc engine.ToolContext, in engine.Input) engine.Result {
	res := engine.Result{Command: in.Command, Display: in.Command}
	c.calls.Add(1)
	defer c.calls.Done()
	st, a, err := c.place(tc.ConversationID)
	if err != nil {
		res.Status, res.Err, res.Output = engine.StatusError, err, engine.ErrorText(err)
		return res
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.runCtx, cancel)
	defer stop()
	callID := tc.CallID
	if callID == "" {
		callID = newCallID()
	}
	msg := &clusterpb.RunCall{ExecutorId: st.id, Tc: encodeTC(tc, callID), Command: in.Command, Mode: string(in.Mode),
		Stdin: in.Stdin, Tty: in.TTY, YieldMs: in.YieldMS}
	start := time.Now()
	ev, pid := c.spawnCall(st, msg)
	defer c.stopActor(pid)

	accept := time.NewTimer(c.o.AcceptTimeout)
	defer accept.Stop()
	var backstop <-chan time.Time
	done := ctx.Done()
	lost := func(why string, at time.Time) engine.Result {
		res.Status, res.PID = engine.StatusLost, 0
		res.Err = fmt.Errorf("%w: %s: %s", ErrExecutorLost, st.name(), why)
		res.Output = engine.LostText(st.name(), at.Sub(start))
		res.DurationMS = time.Since(start).Milliseconds()
		return res
	}
	for {
		select {
		case e := <-ev:
			switch m := e.(type) {
			case *clusterpb.Accepted:
				accept.Stop()
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
				return r
			case *clusterpb.Refused:
				switch m.Kind {
				case "conflict":
					err := fmt.Errorf("%w: %s", engine.ErrBadInput, m.Reason)
					res.Status, res.Err, res.Output = engine.StatusError, err, engine.ErrorText(err)
					return res
				case "shutdown":
					err := fmt.Errorf("%w: executor %s: %s", engine.ErrShutdown, st.name(), m.Reason)
					res.Status, res.Err, res.Output = engine.StatusError, err, engine.ErrorText(err)
					return res
				}
				c.markLost(st, m.Reason)
				return lost(m.Reason, st.lostAt)
			case *actor.Terminated:
				why := terminatedWhy(m)
				c.markLost(st, why)
				return lost(why, st.lostAt)
			}
		case <-st.lost:
			return lost(st.lostWhy, st.lostAt)
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
// watches the executor, and forwards what comes back.
type callActor struct {
	target *actor.PID
	first  proto.Message
	ev     chan<- any
}

func (a *callActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		ctx.Watch(a.target)
		ctx.Request(a.target, a.first)
	case *actor.Stopping:
		ctx.Unwatch(a.target)
	case *actor.Terminated:
		if m.Who.Equal(a.target) {
			a.ev <- m
		}
	case *clusterpb.Progress:
		select { // keep only what fits: progress is a snapshot
		case a.ev <- m:
		default:
		}
	case *clusterpb.Accepted, *clusterpb.RunResult, *clusterpb.Refused, *clusterpb.QueryReply:
		a.ev <- m // at most three of these per call: the buffer holds them
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

// --- jobs ---

// jobID is a job's id on the front: the executor's id, prefixed with the
// placement generation from the second executor on.
func jobID(gen int, id string) string {
	if gen <= 1 {
		return id
	}
	return "g" + strconv.Itoa(gen) + "." + id
}

// splitJobID undoes jobID.
func splitJobID(id string) (gen int, execID string) {
	if rest, ok := strings.CutPrefix(id, "g"); ok {
		if n, tail, ok := strings.Cut(rest, "."); ok {
			if g, err := strconv.Atoi(n); err == nil && g > 1 {
				return g, tail
			}
		}
	}
	return 1, id
}

func (c *Client) recordJob(conv string, a Assignment, st *execState, r engine.Result) string {
	id := jobID(a.Generation, r.JobID)
	c.mu.Lock()
	defer c.mu.Unlock()
	cs := c.convs[conv]
	if cs == nil {
		cs = &convState{}
		c.convs[conv] = cs
	}
	cs.jobs = append(cs.jobs, recordedJob{gen: a.Generation, exec: st.id, info: engine.JobInfo{
		JobID: id, PID: r.PID, Command: r.Command, Display: r.Display, ConversationID: conv,
		Status: engine.JobRunning, Started: time.Now().Add(-time.Duration(r.DurationMS) * time.Millisecond), OutputFile: r.OutputFile,
	}})
	if len(cs.jobs) > maxRecordedJobs {
		cs.jobs = cs.jobs[len(cs.jobs)-maxRecordedJobs:]
	}
	return id
}

// lostJobs returns the conversation's recorded jobs whose executor is
// lost, as lost jobs.
func (c *Client) lostJobs(conv string) []engine.JobInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []engine.JobInfo
	if cs := c.convs[conv]; cs != nil {
		for _, rj := range cs.jobs {
			if st := c.execs[rj.exec]; st == nil || st.isLost() {
				j := rj.info
				j.Status, j.Reason = engine.JobLost, "executor "+nameOf(st, rj.exec)+" stopped answering; the job may have finished or may still be running"
				out = append(out, j)
			}
		}
	}
	return out
}

func nameOf(st *execState, id string) string {
	if st == nil {
		return id
	}
	return st.name()
}

// target returns the live executor and generation of tc's conversation
// for a job query, or ok false when it has none.
func (c *Client) target(conv string) (*execState, Assignment, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok, err := c.o.Placement.Get(conv)
	if err != nil || !ok {
		return nil, a, false
	}
	st := c.execs[a.ExecutorID]
	if st == nil || st.isLost() {
		return nil, a, false
	}
	return st, a, true
}

// query asks st one question and waits for the answer.
func (c *Client) query(ctx context.Context, st *execState, q *clusterpb.Query) (*clusterpb.QueryReply, error) {
	q.ExecutorId = st.id
	ctx, cancel := context.WithTimeout(ctx, c.o.QueryTimeout)
	defer cancel()
	ev, pid := c.spawnCall(st, q)
	defer c.stopActor(pid)
	for {
		select {
		case e := <-ev:
			switch m := e.(type) {
			case *clusterpb.QueryReply:
				return m, decodeErr(m.ErrKind, m.Err)
			case *clusterpb.Refused:
				if m.Kind == "shutdown" {
					return nil, fmt.Errorf("%w: executor %s: %s", engine.ErrShutdown, st.name(), m.Reason)
				}
				c.markLost(st, m.Reason)
				return nil, fmt.Errorf("%w: %s: %s", ErrExecutorLost, st.name(), m.Reason)
			case *actor.Terminated:
				c.markLost(st, terminatedWhy(m))
				return nil, fmt.Errorf("%w: %s: %s", ErrExecutorLost, st.name(), terminatedWhy(m))
			}
		case <-st.lost:
			return nil, fmt.Errorf("%w: %s: %s", ErrExecutorLost, st.name(), st.lostWhy)
		case <-ctx.Done():
			return nil, fmt.Errorf("executor %s: %w", st.name(), ctx.Err())
		}
	}
}

// Jobs implements engine.Runner: the conversation's jobs on its executor,
// after those of lost executors (status "lost").
func (c *Client) Jobs(tc engine.ToolContext) []engine.JobInfo {
	out := c.lostJobs(tc.ConversationID)
	st, a, ok := c.target(tc.ConversationID)
	if !ok {
		return out
	}
	r, err := c.query(context.Background(), st, &clusterpb.Query{Op: "jobs", Tc: encodeTC(tc, "")})
	if err != nil {
		c.log.Warn("jobs query failed", "executor", st.name(), "err", err)
		return c.lostJobs(tc.ConversationID)
	}
	for _, p := range r.Jobs {
		j := decodeJob(p)
		j.JobID = jobID(a.Generation, j.JobID)
		out = append(out, j)
	}
	return out
}

// Job implements engine.Runner.
func (c *Client) Job(tc engine.ToolContext, id string) (engine.JobInfo, error) {
	if j, ok := c.lostJob(tc.ConversationID, id); ok {
		return j, nil
	}
	st, a, rid, err := c.jobTarget(tc.ConversationID, id)
	if err != nil {
		return engine.JobInfo{}, err
	}
	r, err := c.query(context.Background(), st, &clusterpb.Query{Op: "job", Tc: encodeTC(tc, ""), JobId: rid})
	if err != nil {
		if j, ok := c.lostJob(tc.ConversationID, id); ok {
			return j, nil
		}
		return engine.JobInfo{}, err
	}
	return c.firstJob(r, a), nil
}

func (c *Client) firstJob(r *clusterpb.QueryReply, a Assignment) engine.JobInfo {
	if len(r.Jobs) == 0 {
		return engine.JobInfo{}
	}
	j := decodeJob(r.Jobs[0])
	j.JobID = jobID(a.Generation, j.JobID)
	return j
}

func (c *Client) lostJob(conv, id string) (engine.JobInfo, bool) {
	for _, j := range c.lostJobs(conv) {
		if j.JobID == id {
			return j, true
		}
	}
	return engine.JobInfo{}, false
}

// jobTarget finds the executor that holds job id of conv: the
// conversation's current executor when the id is of its generation.
func (c *Client) jobTarget(conv, id string) (*execState, Assignment, string, error) {
	st, a, ok := c.target(conv)
	gen, rid := splitJobID(id)
	if !ok || gen != a.Generation {
		return nil, a, "", fmt.Errorf("%w: %q", engine.ErrNoSuchJob, id)
	}
	return st, a, rid, nil
}

// JobOutput implements engine.Runner. The output of a lost job was on its
// executor: the error says so.
func (c *Client) JobOutput(tc engine.ToolContext, id string, tail, offset, limit int64) (engine.JobOutput, error) {
	if j, ok := c.lostJob(tc.ConversationID, id); ok {
		return engine.JobOutput{Job: j}, fmt.Errorf("%w: job %s: its output was on executor %s, which stopped answering", ErrExecutorLost, id, j.Reason)
	}
	st, a, rid, err := c.jobTarget(tc.ConversationID, id)
	if err != nil {
		return engine.JobOutput{}, err
	}
	r, err := c.query(context.Background(), st, &clusterpb.Query{Op: "output", Tc: encodeTC(tc, ""), JobId: rid, Tail: tail, Offset: offset, Limit: limit})
	if err != nil {
		return engine.JobOutput{}, err
	}
	return engine.JobOutput{Job: c.firstJob(r, a), Offset: r.Offset, Data: r.Data, Size: r.Size, EOF: r.Eof}, nil
}

// Kill implements engine.Runner. A lost job cannot be killed from here:
// the error says so.
func (c *Client) Kill(ctx context.Context, tc engine.ToolContext, id string) (engine.JobInfo, error) {
	if j, ok := c.lostJob(tc.ConversationID, id); ok {
		return j, fmt.Errorf("%w: job %s cannot be killed: %s", ErrExecutorLost, id, j.Reason)
	}
	st, a, rid, err := c.jobTarget(tc.ConversationID, id)
	if err != nil {
		return engine.JobInfo{}, err
	}
	r, err := c.query(ctx, st, &clusterpb.Query{Op: "kill", Tc: encodeTC(tc, ""), JobId: rid})
	if err != nil {
		return engine.JobInfo{}, err
	}
	return c.firstJob(r, a), nil
}

// Write implements engine.Runner: the bytes go to the job's executor.
func (c *Client) Write(ctx context.Context, tc engine.ToolContext, id string, data []byte, close bool) error {
	if j, ok := c.lostJob(tc.ConversationID, id); ok {
		return fmt.Errorf("%w: job %s takes no input: %s", ErrExecutorLost, id, j.Reason)
	}
	st, _, rid, err := c.jobTarget(tc.ConversationID, id)
	if err != nil {
		return err
	}
	_, err = c.query(ctx, st, &clusterpb.Query{Op: "write", Tc: encodeTC(tc, ""), JobId: rid, Data: data, Close: close})
	return err
}

// WaitOutput implements engine.Runner: the job's executor waits.
func (c *Client) WaitOutput(ctx context.Context, tc engine.ToolContext, id string, offset int64, d time.Duration) (engine.JobInfo, error) {
	if j, ok := c.lostJob(tc.ConversationID, id); ok {
		return j, nil // ended, as far as anyone can tell
	}
	st, a, rid, err := c.jobTarget(tc.ConversationID, id)
	if err != nil {
		return engine.JobInfo{}, err
	}
	r, err := c.query(ctx, st, &clusterpb.Query{Op: "wait", Tc: encodeTC(tc, ""), JobId: rid, Offset: offset, WaitMs: d.Milliseconds()})
	if err != nil {
		return engine.JobInfo{}, err
	}
	return c.firstJob(r, a), nil
}

// EndConversation implements engine.Runner: the executor ends the
// conversation's commands and jobs, and the front forgets it.
func (c *Client) EndConversation(ctx context.Context, conv string) error {
	var err error
	if st, _, ok := c.target(conv); ok {
		_, err = c.query(ctx, st, &clusterpb.Query{Op: "end", Tc: &clusterpb.ToolContext{ConversationId: conv}})
	}
	c.mu.Lock()
	if a, ok, _ := c.o.Placement.Get(conv); ok {
		c.pinned[a.ExecutorID]--
	}
	delete(c.convs, conv)
	derr := c.o.Placement.Delete(conv)
	c.mu.Unlock()
	return errors.Join(err, derr)
}

// Description implements engine.Runner: the conversation's executor's
// description (any ready executor's before its first call).
func (c *Client) Description(tc engine.ToolContext) string {
	st, _, ok := c.target(tc.ConversationID)
	if !ok {
		c.mu.Lock()
		st = c.pickLocked()
		c.mu.Unlock()
	}
	if st != nil {
		r, err := c.query(context.Background(), st, &clusterpb.Query{Op: "describe", Tc: encodeTC(tc, "")})
		if err == nil {
			return r.Text
		}
		c.log.Warn("description query failed", "executor", st.name(), "err", err)
	}
	return "Executes shell commands via bash -c on an executor machine, returning combined stdout/stderr. " +
		"No executor is available right now.\n\n<pwd>" + tc.WorkingDir + "</pwd>"
}

// RedactCommand implements engine.Runner with the credential patterns
// only: the secrets stripped from commands' environments are the
// executors' (their logs redact those).
func (c *Client) RedactCommand(command string) string {
	return (*engine.Engine)(nil).RedactCommand(command)
}

// Shutdown implements engine.Runner: calls in flight are cancelled (their
// commands get the grace sequence), the front's conversations are ended on
// their executors unless KeepConversations, then the front stops. The
// executors keep running.
func (c *Client) Shutdown(ctx context.Context) error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	var convs []string
	if !c.o.KeepConversations {
		for conv := range c.pinnedConvsLocked() {
			convs = append(convs, conv)
		}
	}
	c.mu.Unlock()
	c.stopRun()
	done := make(chan struct{})
	go func() { c.calls.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("waiting for calls in flight: %w", ctx.Err())
	}
	var wg sync.WaitGroup
	var emu sync.Mutex
	for _, conv := range convs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if st, _, ok := c.target(conv); ok {
				if _, e := c.query(ctx, st, &clusterpb.Query{Op: "end", Tc: &clusterpb.ToolContext{ConversationId: conv}}); e != nil {
					emu.Lock()
					err = errors.Join(err, e)
					emu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	c.pingers.Wait()
	c.mu.Lock()
	var peers []string
	for _, st := range c.execs {
		c.stopActor(st.watcher)
		if !slices.Contains(peers, st.addr) {
			peers = append(peers, st.addr)
		}
	}
	c.mu.Unlock()
	c.actors.Wait()
	c.node.stop(peers)
	return err
}

// pinnedConvsLocked lists the conversations this front placed.
func (c *Client) pinnedConvsLocked() map[string]bool {
	out := map[string]bool{}
	if mp, ok := c.o.Placement.(*MemoryPlacement); ok {
		mp.mu.Lock()
		for conv := range mp.m {
			out[conv] = true
		}
		mp.mu.Unlock()
	}
	for conv := range c.convs {
		out[conv] = true
	}
	return out
}
