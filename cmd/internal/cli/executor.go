package cli

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	pacluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"

	"github.com/bashvisor/bashvisor/cluster"
	"github.com/bashvisor/bashvisor/engine"
)

// ClusterTokenEnv names the environment variable holding the fleet's
// shared token.
const ClusterTokenEnv = "BASHVISOR_CLUSTER_TOKEN"

// ClusterName is the protoactor cluster name of `executor` and `mcp
// -cluster`: the etcd key prefix, the Kubernetes pod label's value.
const ClusterName = "bashvisor"

// exitFenced is `executor`'s status after it fenced itself: restart
// it (a new process joins under a new id).
const exitFenced = 75

// parseCluster turns -cluster KIND:ARG into a membership:
// "automanaged:HOST:PORT,…" (the health endpoints of every executor,
// listed in advance; every program has it) or a kind of
// Program.Memberships ("etcd:URL,…" and "k8s" in bashvisor-fleet).
// healthPort is an automanaged executor's own health port (0 on the
// front).
func parseCluster(spec string, healthPort int) (cluster.Membership, error) {
	kind, arg, _ := strings.Cut(spec, ":")
	if kind == "automanaged" {
		hosts := strings.Split(arg, ",")
		if arg == "" {
			return nil, fmt.Errorf("-cluster automanaged:HOST:PORT,… needs the health endpoints")
		}
		return cluster.Provider(ClusterName, func() (pacluster.ClusterProvider, error) {
			return automanaged.NewWithConfig(500*time.Millisecond, healthPort, hosts...), nil
		}), nil
	}
	if m, ok := prog.Memberships[kind]; ok {
		return m(arg, healthPort)
	}
	kinds := []string{"automanaged:HOSTS"}
	for k := range prog.Memberships {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	if (kind == "etcd" || kind == "k8s") && prog.Missing != "" {
		return nil, fmt.Errorf("-cluster %s: %s has no %s membership (its client would double the binary); use %s", kind, prog.Name, kind, prog.Missing)
	}
	return nil, fmt.Errorf("-cluster must be one of %s, not %q", strings.Join(kinds, ", "), spec)
}

// executorArgs are `executor`'s parsed flags.
type executorArgs struct {
	listen, advertise, name, token string
	membership                     cluster.Membership
	fenceAfter, timeout, slow      time.Duration
	grace                          time.Duration
	maxRunning                     int
	verbose                        bool
}

// parseExecutor parses and checks `executor`'s flags; when ok is false
// the command returns code at once (after -h, or a usage error).
func parseExecutor(args []string, stdout, stderr io.Writer) (ea *executorArgs, code int, ok bool) {
	d := engine.DefaultConfig()
	ea = &executorArgs{}
	fs := newFlagSet("executor")
	fs.StringVar(&ea.listen, "listen", "127.0.0.1:7001", "serve fronts at `host:port`; a non-loopback address needs -token")
	fs.StringVar(&ea.advertise, "advertise", "", "`host:port` fronts reach this executor at, when it differs from -listen (a pod IP)")
	fs.StringVar(&ea.name, "name", "", "name shown to the model when this executor is lost (default: its address)")
	fs.StringVar(&ea.token, "token", "", "the fleet's shared `secret` (default $"+ClusterTokenEnv+")")
	spec := fs.String("cluster", "", "membership: "+clusterKinds()+" (default: none, fronts list this address with -executors)")
	healthPort := fs.Int("health-port", 6330, "automanaged: the `port` of this executor's health endpoint (binds 0.0.0.0)")
	fs.DurationVar(&ea.fenceAfter, "fence-after", 2*time.Second, "fence (kill every job, refuse everything, exit 75) after the process did not run this long")
	fs.DurationVar(&ea.timeout, "timeout", d.Timeout, "timeout of default mode")
	fs.DurationVar(&ea.slow, "slow-timeout", d.SlowTimeout, "timeout of slow mode")
	fs.DurationVar(&ea.grace, "grace", d.Lifecycle.Grace, "time between SIGTERM and SIGKILL")
	fs.IntVar(&ea.maxRunning, "max-running", 0, "backstop: foreground commands running at once, however idle (default 1024 per CPU, at most 1 per 8 open files, at least 256; see docs/limits.md)")
	fs.BoolVar(&ea.verbose, "v", false, "debug logs on stderr")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return nil, code, false
	}
	if fs.NArg() > 0 {
		return nil, usageError(fs, stderr, "unexpected arguments: %q", fs.Args()), false
	}
	if ea.token == "" {
		ea.token = os.Getenv(ClusterTokenEnv)
	}
	if *spec != "" {
		var err error
		if ea.membership, err = parseCluster(*spec, *healthPort); err != nil {
			return nil, usageError(fs, stderr, "%v", err), false
		}
	}
	return ea, 0, true
}

// CheckArgs parses and checks the arguments of p's subcommand executor
// or mcp (args[0]) as the command would, without running it: for
// deployment files that name them. A non-loopback listen address without
// a token is an error, as at run time.
func (p *Program) CheckArgs(args []string) error {
	prog = p
	if len(args) == 0 {
		return errors.New("no command")
	}
	var out, errb strings.Builder
	switch args[0] {
	case "executor":
		ea, code, ok := parseExecutor(args[1:], &out, &errb)
		if !ok {
			return fmt.Errorf("exit %d: %s", code, errb.String())
		}
		return checkListen(ea.listen, ea.token)
	case "mcp":
		f, fs := newMCPFlags()
		if code, ok := parseFlags(fs, args[1:], &out, &errb); !ok {
			return fmt.Errorf("exit %d: %s", code, errb.String())
		}
		if err := f.check(fs); err != nil {
			return err
		}
		if f.fleet.spec != "" {
			if _, err := parseCluster(f.fleet.spec, 0); err != nil {
				return err
			}
		}
		token := cmp.Or(f.fleet.token, os.Getenv(ClusterTokenEnv))
		return checkListen(f.fleet.listen, token)
	}
	return fmt.Errorf("%s: not a command CheckArgs knows", args[0])
}

// checkListen refuses a non-loopback cluster address without a token.
func checkListen(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); token == "" && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("refusing to listen off loopback without a shared token: %s", addr)
	}
	return nil
}

// cmdExecutor runs `executor`: an engine served to fronts (mcp -executors
// or -cluster). It exits 0 after SIGINT/SIGTERM (its commands
// and jobs ended), 75 once it fenced itself (restart it), 1 when it cannot
// serve, 64 on bad flags.
func cmdExecutor(args []string, stdout, stderr io.Writer) int {
	d := engine.DefaultConfig()
	ea, code, ok := parseExecutor(args, stdout, stderr)
	if !ok {
		return code
	}
	level := slog.LevelInfo
	if ea.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg := d
	cfg.Timeout, cfg.SlowTimeout, cfg.Lifecycle.Grace, cfg.Admission.MaxRunning, cfg.Logger = ea.timeout, ea.slow, ea.grace, ea.maxRunning, log
	x, err := cluster.NewExecutor(cfg, cluster.ExecutorOptions{
		Listen: ea.listen, AdvertisedHost: ea.advertise, Token: ea.token, Name: ea.name,
		Membership: ea.membership, FenceAfter: ea.fenceAfter, Logger: log,
	})
	if err != nil {
		fmt.Fprintln(stderr, errPrefix("executor"), err)
		return 1
	}
	name := ea.name
	if name == "" {
		name = x.Addr()
	}
	// Signals are caught before the line that says the executor serves:
	// whoever waits for it may stop the executor at once, and must get a
	// clean stop, not the default action (CI: "did not stop cleanly:
	// signal: terminated").
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	fmt.Fprintf(stderr, "bashvisor executor %s serving at %s (id %s)\n", name, x.Addr(), x.ID())
	select {
	case <-sig:
	case <-x.FenceDone():
		fmt.Fprintln(stderr, errPrefix("executor"), "fenced:", x.FenceReason(), "- exiting; restart to serve under a new id")
		code = exitFenced
	}
	ctx, cancel := context.WithTimeout(context.Background(), ea.grace+d.Lifecycle.CleanupWait+5*time.Second)
	defer cancel()
	if err := x.Stop(ctx); err != nil {
		fmt.Fprintln(stderr, errPrefix("executor"), "stop:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// fleetFlags are `mcp`'s flags for running commands on executors.
type fleetFlags struct {
	executors, spec, token string
	listen, advertise      string
	wait                   time.Duration
}

func (ff *fleetFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&ff.executors, "executors", "", "run commands on these executors (`host:port,…`, see executor) instead of here; over HTTP, any front of the fleet serves any conversation")
	fs.StringVar(&ff.spec, "cluster", "", "find the executors by membership instead: "+clusterKinds())
	fs.StringVar(&ff.token, "cluster-token", "", "the fleet's shared `secret` (default $"+ClusterTokenEnv+")")
	fs.DurationVar(&ff.wait, "executors-wait", 30*time.Second, "wait this long for the first executor before serving")
	fs.StringVar(&ff.listen, "cluster-listen", "127.0.0.1:0", "the front's own remote `host:port`, where executors answer (off loopback needs -cluster-token)")
	fs.StringVar(&ff.advertise, "cluster-advertise", "", "`host:port` executors reach the front at, when it differs from -cluster-listen (a pod IP)")
}

func (ff *fleetFlags) on() bool { return ff.executors != "" || ff.spec != "" }

// runner returns a local engine, or a cluster.Client when a fleet was
// given. The engine flags then configure nothing here: each executor has
// its own. A front that shares its conversations (over HTTP: any front
// of the fleet serves them) leaves them running when it stops.
func (ff *fleetFlags) runner(cfg engine.Config, log *slog.Logger, shared bool) (engine.Runner, error) {
	if !ff.on() {
		return engine.New(cfg)
	}
	if ff.token == "" {
		ff.token = os.Getenv(ClusterTokenEnv)
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
	c, err := cluster.NewClient(cluster.ClientOptions{Membership: m, Token: ff.token, Listen: ff.listen, AdvertisedHost: ff.advertise,
		KeepConversations: shared, Logger: log})
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

// newConversationID names a stdio front's conversation: unique per
// front, so that the conversations of two stdio fronts on the same
// executors (one principal, "local") never meet. Over HTTP conversations
// are named by principal (see mcpserver.Options.ConversationID): every
// front of a fleet serves the same ones.
func newConversationID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "mcp-" + hex.EncodeToString(b)
}

// clusterKinds describes the -cluster values the program takes.
func clusterKinds() string {
	kinds := []string{"automanaged:HOST:PORT,… (health endpoints)"}
	if _, ok := prog.Memberships["etcd"]; ok {
		kinds = append(kinds, "etcd:URL,…")
	}
	if _, ok := prog.Memberships["k8s"]; ok {
		kinds = append(kinds, "k8s")
	}
	s := strings.Join(kinds, ", ")
	if prog.Missing != "" && len(kinds) == 1 {
		s += "; etcd and k8s are in " + prog.Missing
	}
	return s
}
