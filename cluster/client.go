package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	pacluster "github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/grpc"

	"github.com/bashvisor/bashvisor/cluster/clusterpb"
	"github.com/bashvisor/bashvisor/engine"
)

// Errors of the Client; test them with errors.Is.
var (
	// ErrExecutorLost: the executor running a call or holding a job
	// stopped answering (status "lost").
	ErrExecutorLost = errors.New("executor lost")
	// ErrConversationLost: the conversation's executor is gone and its
	// working directory with it (ClientOptions.SharedDirs is false).
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
	// SharedDirs says that working directories survive the loss of an
	// executor (every executor mounts the same storage): a conversation
	// whose executor was lost then moves to another one, where its job
	// ids are prefixed "gN." (N: how many executors it has had). Every
	// front of a fleet must say the same.
	SharedDirs bool
	// KeepaliveInterval is how often each executor is pinged for liveness
	// and load (default 500ms); LostAfter declares it lost this long after
	// its latest answer (default 2.5s, so that the calls of an executor
	// that froze answer lost within 3 s of the freeze: its latest answer
	// is at most one interval and a round trip older than the freeze).
	// Keep it above the longest stall a healthy, loaded executor may have.
	KeepaliveInterval, LostAfter time.Duration
	// AcceptTimeout bounds the wait for an executor to acknowledge a call
	// (default 10s); past it the call is lost, never re-sent.
	AcceptTimeout time.Duration
	// QueryTimeout bounds a job query, kill or description (default 60s),
	// and how long the first call of a conversation waits, once accepted,
	// for another executor to keep the record of where it runs (an
	// executor that is lost meanwhile is not waited for).
	QueryTimeout time.Duration
	// KeepConversations leaves the conversations' jobs running on the
	// executors at Shutdown, for fronts that share their conversations
	// (behind a load balancer, or a front that restarts): any front
	// serves them on. By default Shutdown ends the conversations this
	// front used, except those another front used since (see
	// [Client.EndConversation]).
	KeepConversations bool
	// Logger receives the front's logs (default: discard).
	Logger *slog.Logger
}

// Client is an [engine.Runner] that runs every conversation on one
// executor of a fleet. The first call of a conversation places it on the
// ready executor with the highest rendezvous score for its id; it never
// moves while that executor lives, so a joining executor takes only new
// conversations. Any front of the fleet serves any conversation: a front
// finds a conversation's executor by asking the executors, which know
// (see the package documentation). Each call is an actor that watches its executor;
// when the executor dies (its connection closes), leaves the membership or
// misses keepalives for LostAfter, every call on it answers "lost" at once,
// its jobs become "lost", and the conversation's next call fails with
// ErrConversationLost unless working directories survive (SharedDirs).
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

	forwards sync.WaitGroup              // the goroutines of forwarded connections
	fwdMu    sync.Mutex                  // guards fwdConns
	fwdConns map[string]*grpc.ClientConn // by executor address: see forwardConn

	mu      sync.Mutex
	execs   map[string]*execState // by member id, lost ones included
	byAddr  map[string]*execState // static: the current incarnation at each address
	placed  map[string]assignment // conversations by id: where they ran when this front last looked
	start   time.Time             // when the front started (see awaitView)
	convs   map[string]*convState
	changed chan struct{}   // closed and replaced on every membership change
	members map[string]bool // provider membership: the member ids of the latest topology
	stopped bool
}

// convState is what the front remembers of a conversation: the
// background jobs it started, to report them lost.
type convState struct {
	jobs []recordedJob
}

// fenceWindow is how long a lost cluster member is still pinged, to fence
// it should it answer again.
const fenceWindow = 2 * time.Minute

var (
	_ engine.Runner = (*Client)(nil)
	_ interface {   // mcpserver's bash_undo
		Undo(context.Context, engine.ToolContext, int) (engine.UndoResult, error)
	} = (*Client)(nil)
)

// NewClient starts a front. Call [Client.WaitExecutors] before serving
// when calls must not fail with ErrNoExecutor right after start.
func NewClient(o ClientOptions) (*Client, error) {
	if o.Membership == nil {
		return nil, errors.New("cluster: ClientOptions.Membership is required")
	}
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	if o.KeepaliveInterval <= 0 {
		o.KeepaliveInterval = 500 * time.Millisecond
	}
	if o.LostAfter <= 0 {
		o.LostAfter = 2500 * time.Millisecond
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
		execs: map[string]*execState{}, byAddr: map[string]*execState{}, placed: map[string]assignment{},
		convs: map[string]*convState{}, changed: make(chan struct{}),
	}
	c.runCtx, c.stopRun = context.WithCancel(context.Background())
	c.start = time.Now()
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

// EndConversation implements engine.Runner: the executor ends the
// conversation's commands and jobs, and the front forgets it. When
// another front used the conversation since this one last did (fronts
// behind a load balancer), the conversation is not ended: one front's
// idle bound or shutdown does not end a conversation that another
// serves. It is then only forgotten here, and the error is nil.
func (c *Client) EndConversation(ctx context.Context, conv string) error {
	var err error
	if st, a, ok := c.target(ctx, conv, true); ok {
		var r *clusterpb.QueryReply
		r, err = c.query(ctx, st, &clusterpb.Query{Op: "end", Tc: &clusterpb.ToolContext{ConversationId: conv}})
		switch {
		case err != nil:
		case r.GetKept():
			c.log.Info("conversation not ended: another front used it since", "conversation", conv, "executor", st.name())
		case !r.GetNotHeld():
			c.broadcastRecord(conv, a.execID, nil)
		}
	}
	c.mu.Lock()
	delete(c.placed, conv)
	delete(c.convs, conv)
	c.mu.Unlock()
	return err
}

// Description implements engine.Runner: the conversation's executor's
// description (any ready executor's when this front does not know it).
func (c *Client) Description(tc engine.ToolContext) string {
	st, _, ok := c.cached(tc.ConversationID)
	if !ok {
		c.mu.Lock()
		st = c.pickLocked(tc.ConversationID)
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
		for conv := range c.placed {
			convs = append(convs, conv)
		}
		for conv := range c.convs {
			if _, ok := c.placed[conv]; !ok {
				convs = append(convs, conv)
			}
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
			if st, _, ok := c.cached(conv); ok {
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
		if st.deadline != nil {
			st.deadline.Stop()
		}
		c.stopActor(st.watcher)
		if !slices.Contains(peers, st.addr) {
			peers = append(peers, st.addr)
		}
	}
	c.mu.Unlock()
	c.actors.Wait()
	c.endForwards()
	c.node.stop(peers)
	return err
}
