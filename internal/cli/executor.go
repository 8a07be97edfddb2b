package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	pacluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/k8s"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/bashvisor/bashvisor/cluster"
	"github.com/bashvisor/bashvisor/engine"
)

// clusterTokenEnv names the environment variable holding the fleet's
// shared token.
const clusterTokenEnv = "BASHVISOR_CLUSTER_TOKEN"

// clusterName is the protoactor cluster name of `demo executor` and `demo
// mcp -cluster`.
const clusterName = "bashvisor"

// exitFenced is `demo executor`'s status after it fenced itself: restart
// it (a new process joins under a new id).
const exitFenced = 75

// parseCluster turns -cluster into a membership: "automanaged:HOST:PORT,…"
// (the health endpoints of every executor, listed in advance),
// "etcd:URL,…" or "k8s". healthPort is an automanaged executor's own
// health port (0 on the front).
func parseCluster(spec string, healthPort int) (cluster.Membership, error) {
	kind, arg, _ := strings.Cut(spec, ":")
	switch kind {
	case "automanaged":
		hosts := strings.Split(arg, ",")
		if arg == "" {
			return nil, fmt.Errorf("-cluster automanaged:HOST:PORT,… needs the health endpoints")
		}
		return cluster.Provider(clusterName, func() (pacluster.ClusterProvider, error) {
			return automanaged.NewWithConfig(500*time.Millisecond, healthPort, hosts...), nil
		}), nil
	case "etcd":
		if arg == "" {
			return nil, fmt.Errorf("-cluster etcd:URL,… needs the etcd endpoints")
		}
		eps := strings.Split(arg, ",")
		return cluster.Provider(clusterName, func() (pacluster.ClusterProvider, error) {
			return etcd.NewWithConfig("/bashvisor", clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
		}), nil
	case "k8s":
		return cluster.Provider(clusterName, func() (pacluster.ClusterProvider, error) { return k8s.New() }), nil
	}
	return nil, fmt.Errorf("-cluster must be automanaged:HOSTS, etcd:ENDPOINTS or k8s, not %q", spec)
}

// cmdExecutor runs `demo executor`: an engine served to fronts (demo mcp
// -executors or -cluster). It exits 0 after SIGINT/SIGTERM (its commands
// and jobs ended), 75 once it fenced itself (restart it), 1 when it cannot
// serve, 64 on bad flags.
func cmdExecutor(args []string, stdout, stderr io.Writer) int {
	d := engine.DefaultConfig()
	fs := newFlagSet("executor")
	listen := fs.String("listen", "127.0.0.1:7001", "serve fronts at `host:port`; a non-loopback address needs -token")
	advertise := fs.String("advertise", "", "`host:port` fronts reach this executor at, when it differs from -listen (a pod IP)")
	name := fs.String("name", "", "name shown to the model when this executor is lost (default: its address)")
	token := fs.String("token", "", "the fleet's shared `secret` (default $"+clusterTokenEnv+")")
	spec := fs.String("cluster", "", "membership: automanaged:HOST:PORT,… (health endpoints), etcd:URL,… or k8s (default: none, fronts list this address with -executors)")
	healthPort := fs.Int("health-port", 6330, "automanaged: the `port` of this executor's health endpoint (binds 0.0.0.0)")
	fenceAfter := fs.Duration("fence-after", 2*time.Second, "fence (kill every job, refuse everything, exit 75) after the process did not run this long")
	timeout := fs.Duration("timeout", d.Timeout, "timeout of default mode")
	slow := fs.Duration("slow-timeout", d.SlowTimeout, "timeout of slow mode")
	grace := fs.Duration("grace", d.Lifecycle.Grace, "time between SIGTERM and SIGKILL")
	maxRunning := fs.Int("max-running", 0, "foreground commands running at once (default 4 per CPU)")
	verbose := fs.Bool("v", false, "debug logs on stderr")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected arguments: %q", fs.Args())
	}
	if *token == "" {
		*token = os.Getenv(clusterTokenEnv)
	}
	var membership cluster.Membership
	if *spec != "" {
		var err error
		if membership, err = parseCluster(*spec, *healthPort); err != nil {
			return usageError(fs, stderr, "%v", err)
		}
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg := d
	cfg.Timeout, cfg.SlowTimeout, cfg.Lifecycle.Grace, cfg.Admission.MaxRunning, cfg.Logger = *timeout, *slow, *grace, *maxRunning, log
	x, err := cluster.NewExecutor(cfg, cluster.ExecutorOptions{
		Listen: *listen, AdvertisedHost: *advertise, Token: *token, Name: *name,
		Membership: membership, FenceAfter: *fenceAfter, Logger: log,
	})
	if err != nil {
		fmt.Fprintln(stderr, "demo executor:", err)
		return 1
	}
	fmt.Fprintf(stderr, "bashvisor executor %s serving at %s (id %s)\n", x.Name(), x.Addr(), x.ID())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	code := 0
	select {
	case <-sig:
	case <-x.FenceDone():
		fmt.Fprintln(stderr, "demo executor: fenced:", x.FenceReason(), "- exiting; restart to serve under a new id")
		code = exitFenced
	}
	ctx, cancel := context.WithTimeout(context.Background(), *grace+d.Lifecycle.CleanupWait+5*time.Second)
	defer cancel()
	if err := x.Stop(ctx); err != nil {
		fmt.Fprintln(stderr, "demo executor: stop:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// fleetFlags are `demo mcp`'s flags for running commands on executors.
type fleetFlags struct {
	executors, spec, token string
	listen, advertise      string
	wait                   time.Duration
}

func (ff *fleetFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&ff.executors, "executors", "", "run commands on these executors (`host:port,…`, see demo executor) instead of here; each MCP session is one conversation")
	fs.StringVar(&ff.spec, "cluster", "", "find the executors by membership instead: automanaged:HOST:PORT,…, etcd:URL,… or k8s")
	fs.StringVar(&ff.token, "cluster-token", "", "the fleet's shared `secret` (default $"+clusterTokenEnv+")")
	fs.DurationVar(&ff.wait, "executors-wait", 30*time.Second, "wait this long for the first executor before serving")
	fs.StringVar(&ff.listen, "cluster-listen", "127.0.0.1:0", "the front's own remote `host:port`, where executors answer (off loopback needs -cluster-token)")
	fs.StringVar(&ff.advertise, "cluster-advertise", "", "`host:port` executors reach the front at, when it differs from -cluster-listen (a pod IP)")
}

func (ff *fleetFlags) on() bool { return ff.executors != "" || ff.spec != "" }

// runner returns a local engine, or a cluster.Client when a fleet was
// given. The engine flags then configure nothing here: each executor has
// its own.
func (ff *fleetFlags) runner(cfg engine.Config, log *slog.Logger) (engine.Runner, error) {
	if !ff.on() {
		return engine.New(cfg)
	}
	if ff.token == "" {
		ff.token = os.Getenv(clusterTokenEnv)
	}
	var m cluster.Membership
	switch {
	case ff.executors != "" && ff.spec != "":
		return nil, fmt.Errorf("-executors and -cluster exclude each other")
	case ff.executors != "":
		m = cluster.Static(strings.Split(ff.executors, ",")...)
	default:
		var err error
		if m, err = parseCluster(ff.spec, 0); err != nil {
			return nil, err
		}
	}
	c, err := cluster.NewClient(cluster.ClientOptions{Membership: m, Token: ff.token, Listen: ff.listen, AdvertisedHost: ff.advertise, Logger: log})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), ff.wait)
	defer cancel()
	if err := c.WaitExecutors(ctx, 1); err != nil {
		_ = c.Shutdown(context.Background())
		return nil, err
	}
	return c, nil
}

// newConversationID names a front's conversation: unique per front, so
// that the conversations of two fronts on the same executors never meet
// (an HTTP session's conversation is this plus a hash of its session id,
// see mcpserver.Options.ConversationID).
func newConversationID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "mcp-" + hex.EncodeToString(b)
}

// fleetStress runs `demo stress -executors`: n calls of cmd at
// concurrency c, one conversation per concurrent worker, through a
// cluster.Client on the given executors ("local": the same load through a
// local engine, for comparison). It prints throughput and latency and
// returns false when any call did not answer ok with the expected output.
func fleetStress(executors string, n, c int, command, token string, stdout, stderr io.Writer) (bool, error) {
	var r engine.Runner
	if executors == "local" {
		cfg := engine.DefaultConfig()
		cfg.Admission.MaxRunning = c // every call runs at once, as on executors started with -max-running >= c
		e, err := engine.New(cfg)
		if err != nil {
			return false, err
		}
		r = e
	} else {
		if token == "" {
			token = os.Getenv(clusterTokenEnv)
		}
		cl, err := cluster.NewClient(cluster.ClientOptions{Membership: cluster.Static(strings.Split(executors, ",")...), Token: token})
		if err != nil {
			return false, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = cl.WaitExecutors(ctx, len(strings.Split(executors, ",")))
		cancel()
		if err != nil {
			_ = cl.Shutdown(context.Background())
			return false, err
		}
		r = cl
	}
	defer r.Shutdown(context.Background())
	dir, err := os.MkdirTemp("", "bashvisor-fleet-stress-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	want := r.Run(context.Background(), engine.ToolContext{WorkingDir: dir, ConversationID: "warm"}, engine.Input{Command: command})
	if want.Status != engine.StatusOK {
		return false, fmt.Errorf("%q: %s %q", command, want.Status, want.Output)
	}
	lat := make([]time.Duration, n)
	statuses := make([]engine.Status, n)
	var bad atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range c {
		wg.Go(func() {
			tc := engine.ToolContext{WorkingDir: dir, ConversationID: fmt.Sprintf("stress-%d", w)}
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				res := r.Run(context.Background(), tc, engine.Input{Command: command})
				lat[i], statuses[i] = time.Since(t0), res.Status
				if res.Status != engine.StatusOK || res.Output != want.Output {
					if bad.Add(1) <= 3 {
						fmt.Fprintf(stderr, "call %d: %s %q, want ok %q\n", i, res.Status, res.Output, want.Output)
					}
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(lat)
	counts := map[engine.Status]int{}
	for _, s := range statuses {
		counts[s]++
	}
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(float64(len(lat))*p))] }
	fmt.Fprintf(stdout, "fleet stress (%s): %d calls of %q at concurrency %d in %s: %.0f calls/s; latency p50 %s p90 %s p99 %s; statuses %v; %d wrong\n",
		executors, n, command, c, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(),
		pct(0.50).Round(10*time.Microsecond), pct(0.90).Round(10*time.Microsecond), pct(0.99).Round(10*time.Microsecond), counts, bad.Load())
	return bad.Load() == 0, nil
}
