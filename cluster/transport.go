package cluster

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pacluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// executorActor is the well-known name of the actor an executor serves
// at its remote address.
const executorActor = "bashvisor-executor"

// providerStopWait bounds how long a stopping node waits to leave its
// cluster membership (see node.stop).
const providerStopWait = 2 * time.Second

// errNoToken: a node was asked to listen on a non-loopback address
// without a shared token.
var errNoToken = errors.New("refusing to listen off loopback without a shared token")

// Membership says which executors exist. [Static] lists their addresses;
// [Provider] takes them from a protoactor cluster provider (automanaged,
// etcd, Kubernetes). Executors and the front must use the same kind.
type Membership interface {
	describe() string
}

// Static is membership by a fixed list of executor addresses
// ("host:port"). The front pings every address; an executor is known by
// the member id its answer carries (new on every start), so a restarted
// process at a listed address is a new executor and never answers for
// the old one. Executors started with Static (or nil) join no cluster.
func Static(addrs ...string) Membership { return staticMembership(addrs) }

type staticMembership []string

func (s staticMembership) describe() string { return "static " + strings.Join(s, ",") }

// Provider is membership from a protoactor cluster provider: executors
// start as cluster members (StartMember), the front as a cluster client
// (StartClient) that reads ClusterTopology events only. name is the
// cluster name, the same on every node. newProvider makes the provider
// when the node starts, after its remote: a provider that dials at
// construction (etcd's) would otherwise race with Remote.Start, which
// rewrites grpc's global logger. A member that left is blocked for ever by
// its id (protoactor's rule), and an executor that finds itself out of the
// topology fences itself.
//
// For Kubernetes use the k8s provider with [ExecutorOptions.AdvertisedHost]
// set to the pod IP; its service account needs get, list, watch, update
// and patch on pods in the namespace.
func Provider(name string, newProvider func() (pacluster.ClusterProvider, error)) Membership {
	return providerMembership{name: name, new: newProvider}
}

type providerMembership struct {
	name string
	new  func() (pacluster.ClusterProvider, error)
}

func (p providerMembership) describe() string { return fmt.Sprintf("protoactor cluster %q", p.name) }

// lazyProvider makes the real provider when the cluster starts it.
type lazyProvider struct {
	new func() (pacluster.ClusterProvider, error)
	p   pacluster.ClusterProvider
}

func (l *lazyProvider) make() error {
	if l.p != nil {
		return nil
	}
	p, err := l.new()
	if err != nil {
		return fmt.Errorf("cluster provider: %w", err)
	}
	l.p = p
	return nil
}

func (l *lazyProvider) StartMember(c *pacluster.Cluster) error {
	if err := l.make(); err != nil {
		return err
	}
	return l.p.StartMember(c)
}

func (l *lazyProvider) StartClient(c *pacluster.Cluster) error {
	if err := l.make(); err != nil {
		return err
	}
	return l.p.StartClient(c)
}

func (l *lazyProvider) Shutdown(graceful bool) error {
	if l.p == nil {
		return nil
	}
	return l.p.Shutdown(graceful)
}

// node is one process's actor system and remote (plus the cluster for
// Provider membership).
type node struct {
	sys       *actor.ActorSystem
	remote    *remote.Remote
	pc        *pacluster.Cluster // nil for Static membership
	provider  *lazyProvider
	log       *slog.Logger
	stopping  atomic.Bool // set by stop
	connected sync.Map    // addresses of the endpoints this node connected to -> true
}

// nodeOptions configure startNode.
type nodeOptions struct {
	listen, advertised, token string
	membership                Membership
	member                    bool // an executor: a cluster member, not a client
	log                       *slog.Logger
	beforeStart               func(sys *actor.ActorSystem) // spawn well-known actors before the node is visible
	onTopology                func(*pacluster.ClusterTopology)
	streams                   grpc.StreamHandler // serves the streams of methods other than protoactor's (nil: refused)
}

// startNode starts an actor system with remote on opts.listen. It refuses
// a non-loopback address without a token; protoactor's panics at start (a
// taken port, a provider error) become errors.
func startNode(opts nodeOptions) (n *node, err error) {
	host, portStr, err := net.SplitHostPort(opts.listen)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: %w", opts.listen, err)
	}
	var port int
	if _, err := fmt.Sscan(portStr, &port); err != nil {
		return nil, fmt.Errorf("listen address %q: bad port: %w", opts.listen, err)
	}
	if opts.token == "" && !isLoopback(host) {
		return nil, fmt.Errorf("%w: %s (set a token, or bind 127.0.0.1)", errNoToken, opts.listen)
	}
	// Remote.Start panics on a taken port, after which nothing is running:
	// probe the port first for a clear error.
	if port != 0 {
		ln, err := net.Listen("tcp", opts.listen)
		if err != nil {
			return nil, fmt.Errorf("listen: %w", err)
		}
		ln.Close()
	}
	log := opts.log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	paLevel := slog.LevelWarn
	if os.Getenv("BV_PA_DEBUG") != "" {
		paLevel = slog.LevelDebug
	}
	paLog := slog.New(levelHandler{paLevel, log.Handler()})
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return paLog }))
	n = &node{sys: sys, log: log}
	// An endpoint that connects after stop (a late reply or dead letter
	// that had to go out) is ended at once, so that no connection outlives
	// the node. Ended from another goroutine, after this event's other
	// handlers ran: protoactor's endpoint manager, which Remote.Shutdown(false)
	// leaves subscribed, answers a connected event by making the address's
	// endpoint if it has none, so ending it within the event made a new one
	// that connected and was ended again, in a loop (thousands of
	// reconnections a second, and a front's goroutines alive minutes after
	// Shutdown).
	sys.EventStream.Subscribe(func(evt any) {
		e, ok := evt.(*remote.EndpointConnectedEvent)
		if !ok {
			return
		}
		n.connected.Store(e.Address, true)
		if n.stopping.Load() {
			go sys.EventStream.Publish(&remote.EndpointTerminatedEvent{Address: e.Address})
		}
	})
	rc := remote.Configure(host, port, remoteOptions(opts.token, opts.advertised, opts.streams)...)
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("starting protoactor remote on %s: %v", opts.listen, p)
			// A provider that fails to start (no etcd, not in a pod)
			// panics after the remote and gossip started: stop them, so
			// that the port is free and no goroutine outlives the error.
			if n.remote == nil && n.pc != nil {
				n.remote = n.pc.Remote
			}
			if n.remote != nil {
				n.stop(nil)
			} else {
				sys.Shutdown()
			}
		}
	}()
	if opts.beforeStart != nil {
		opts.beforeStart(sys)
	}
	pm, ok := opts.membership.(providerMembership)
	if !ok {
		n.remote = remote.NewRemote(sys, rc)
		n.remote.Start()
		return n, nil
	}
	n.provider = &lazyProvider{new: pm.new}
	n.pc = pacluster.New(sys, pacluster.Configure(pm.name, n.provider, disthash.New(), rc))
	if opts.onTopology != nil {
		sys.EventStream.Subscribe(func(evt any) {
			if t, ok := evt.(*pacluster.ClusterTopology); ok {
				opts.onTopology(t)
			}
		})
	}
	if opts.member {
		n.pc.StartMember() // ends with a fixed 1 s sleep (protoactor)
	} else {
		n.pc.StartClient()
	}
	n.remote = n.pc.Remote
	return n, nil
}

// stop stops the node without protoactor's fixed sleeps; Cluster.Shutdown
// is not used because it panics on a client (its gossiper never started),
// nor Remote.Shutdown(true), which races with the endpoint reader and
// waits up to 10 s for peers' streams. peers are the addresses the node
// talked to (with every address an endpoint connected to): their
// endpoints are ended as if the connections had dropped,
// which closes the outgoing connections; an endpoint that connects later
// is ended as it connects.
func (n *node) stop(peers []string) {
	n.stopping.Store(true)
	if n.provider != nil && n.provider.p != nil {
		// Leaving the membership is a courtesy (a lease or a watch
		// notices a member that left without a word): it gets
		// providerStopWait, so that a node stops whatever its membership
		// store does (etcd down: the etcd provider's delete never
		// returns). Closing the provider's client then ends the call.
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer func() { _ = recover() }() // automanaged's Shutdown on a client dereferences nil
			_ = n.provider.p.Shutdown(true)
		}()
		select {
		case <-done:
		case <-time.After(providerStopWait):
			n.log.Warn("leaving the cluster membership takes too long; stopping without it", "after", providerStopWait)
		}
		closeProviderClient(n.provider.p)
	}
	n.remote.Shutdown(false) // no peer can connect back from now on
	for _, addr := range peers {
		n.connected.Store(addr, true)
	}
	n.connected.Range(func(addr, _ any) bool {
		n.sys.EventStream.Publish(&remote.EndpointTerminatedEvent{Address: addr.(string)})
		return true
	})
	n.sys.Shutdown()
}

// closeProviderClient closes the API client of a provider that has one
// to close (package etcd's provider: its etcd client's goroutines would
// otherwise outlive the node).
func closeProviderClient(p pacluster.ClusterProvider) {
	if c, ok := p.(io.Closer); ok {
		_ = c.Close()
	}
}

// memberID is the process's id in a cluster member id: the etcd provider
// registers "CLUSTER@ID", the others ID.
func memberID(id string) string {
	if i := strings.LastIndexByte(id, '@'); i >= 0 {
		return id[i+1:]
	}
	return id
}

// address is the node's remote address as others see it.
func (n *node) address() string { return n.sys.Address() }

// id is the node's member id: new on every start of a process.
func (n *node) id() string { return n.sys.ID }

// Protoactor's remote sends the messages queued for a node in batches,
// one gRPC message each, and a node's gRPC server that refuses one (over
// its receive limit: 4 MiB by default) fails the connection, losing every
// message it carried and every call waiting on that node. writerBatch
// bounds a batch's messages (protoactor's default is 1,000: a thousand
// 1 MiB results would be one 1 GiB message to build and to take in), and
// wireMessageMax is what a node's server takes in one message and its
// client sends: gRPC's own bound on a client's message (2 GiB − 1), so
// that no batch the writer can send is refused. A batch is built in full
// before it is sent and taken in full before it is read, so a node may
// hold writerBatch of its largest messages twice; and a peer may make a
// node allocate up to wireMessageMax for one message: the peers are
// trusted alike (the token, or loopback, admits them to run commands).
const (
	writerBatch    = 64
	wireMessageMax = math.MaxInt32
)

// headerListMax bounds the header list (RFC 9113's size: each field's
// name and value plus 32 bytes) a node's server takes on a stream and its
// client takes in an answer: the token's length plus headerListBase. A
// node's streams send 422 bytes of headers besides the token's field
// (52 bytes and the token: TestHeaderListBound); gRPC's default bound,
// 16 MiB, would let a peer without the token make a node decode and hold
// that much before tapAuth refuses the stream. A peer that sends more is
// cut off: the connection is closed as soon as the list passes the bound,
// before the rest of it is read.
func headerListMax(token string) uint32 { return headerListBase + uint32(len(token)) }

// headerListBase is headerListMax without the token: a few KiB over what
// the nodes send, for a long :authority (a DNS name) and gRPC's own
// headers.
const headerListBase = 4 << 10

// remoteOptions are the remote's gRPC settings: the shared token on every
// stream both ways, header lists up to headerListMax, keepalive so a
// half-open connection is noticed, one
// connection attempt per endpoint (protoactor sleeps 2 s after each failed
// one, blocking the endpoint), batches no receiver refuses
// (writerBatch, wireMessageMax), and streams (when not nil) serving the
// methods protoactor's service does not know.
func remoteOptions(token, advertised string, streams grpc.StreamHandler) []remote.ConfigOption {
	server := []grpc.ServerOption{
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 5 * time.Second, Timeout: 5 * time.Second}),
		grpc.MaxRecvMsgSize(wireMessageMax),
		grpc.MaxHeaderListSize(headerListMax(token)),
	}
	if token != "" {
		// The tap refuses a stream without the token before gRPC reads a
		// message of it: a unary request is read whole (up to
		// wireMessageMax) before any interceptor runs.
		server = append(server, grpc.InTapHandle(tapAuth(token)),
			grpc.StreamInterceptor(streamAuth(token)), grpc.UnaryInterceptor(unaryAuth(token)))
	}
	if streams != nil {
		server = append(server, grpc.UnknownServiceHandler(streams))
	}
	opts := []remote.ConfigOption{remote.WithDialOptions(dialOptions(token)...), remote.WithServerOptions(server...), withMaxRetry(1),
		remote.WithEndpointWriterBatchSize(writerBatch)}
	if advertised != "" {
		opts = append(opts, remote.WithAdvertisedHost(advertised))
	}
	return opts
}

// dialOptions are the gRPC settings of a node's connections to others
// (protoactor's, and a front's forwards): the shared token, keepalive,
// messages up to wireMessageMax and answers' header lists up to
// headerListMax.
func dialOptions(token string) []grpc.DialOption {
	ka := keepalive.ClientParameters{Time: 5 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}
	dial := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithKeepaliveParams(ka),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(wireMessageMax)), grpc.WithMaxHeaderListSize(headerListMax(token))}
	if token != "" {
		dial = append(dial, grpc.WithPerRPCCredentials(tokenCreds(token)))
	}
	return dial
}

func withMaxRetry(n int) remote.ConfigOption {
	return func(c *remote.Config) { c.MaxRetryCount = n }
}

// tokenCreds sends the shared token with every gRPC stream. It works
// without TLS: the token guards against other programs reaching the port,
// not against someone who can read the traffic (use a private network or a
// service mesh's mTLS for that).
type tokenCreds string

func (t tokenCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}

func (tokenCreds) RequireTransportSecurity() bool { return false }

func checkToken(ctx context.Context, token string) error {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if subtle.ConstantTimeCompare([]byte(v), []byte("Bearer "+token)) == 1 {
			return nil
		}
	}
	return status.Error(codes.Unauthenticated, "bashvisor cluster: missing or wrong token")
}

// tapAuth checks the token in a new stream's headers, before any of its
// messages is read.
func tapAuth(token string) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if err := checkToken(metadata.NewIncomingContext(ctx, info.Header), token); err != nil {
			return nil, err
		}
		return ctx, nil
	}
}

func streamAuth(token string) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if err := checkToken(ss.Context(), token); err != nil {
			return err
		}
		return h(srv, ss)
	}
}

func unaryAuth(token string) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if err := checkToken(ctx, token); err != nil {
			return nil, err
		}
		return h(ctx, req)
	}
}

// isLoopback reports whether host is a loopback name or address.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// levelHandler passes only records at level or above (protoactor logs a
// lot at Info).
type levelHandler struct {
	level slog.Level
	slog.Handler
}

func (h levelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level && h.Handler.Enabled(ctx, l)
}

func (h levelHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return levelHandler{h.level, h.Handler.WithAttrs(a)}
}

func (h levelHandler) WithGroup(g string) slog.Handler {
	return levelHandler{h.level, h.Handler.WithGroup(g)}
}
