package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/mcpserver"
	"github.com/bashvisor/bashvisor/mcpserver/bearer"
	"github.com/bashvisor/bashvisor/safety"
)

// tokenEnv names the environment variable holding the HTTP bearer token.
const tokenEnv = "BASHVISOR_MCP_TOKEN"

// mcpFlags are the flags of `bashvisor mcp`.
type mcpFlags struct {
	dir         string
	timeout     time.Duration
	slowTimeout time.Duration
	grace       time.Duration
	sandbox     sandboxFlags
	sbx         engine.Sandbox
	coauthor    string
	audit       string
	envPolicy   string
	profile     string
	httpAddr    string
	token       string
	tokens      string // -tokens FILE
	noAuth      bool
	oauthIssuer string
	oauthRes    string
	oauthScopes stringList
	origins     stringList
	verbose     bool
	admission   config.Admission
	shared      bool
	maxSessions int
	sessionIdle time.Duration
	maxConns    int
	connIdle    time.Duration
	metrics     bool
	onTimeout   string
	rawOutput   bool
	structured  bool
	outputMax   int
	fleet       fleetFlags // -executors, -cluster: see executor.go
	forward     bool       // see forward.go
	forwardAddr string
	forwardLn   net.Listener // -forward-addr's, once listenForward opened it
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// newMCPFlags defines the flags of `bashvisor mcp`; parse fs, then call check.
func newMCPFlags() (*mcpFlags, *flag.FlagSet) {
	d := engine.DefaultConfig()
	f := &mcpFlags{}
	fs := newFlagSet("mcp")
	fs.StringVar(&f.dir, "C", "", "working `dir`ectory of every command (default: the current directory)")
	fs.DurationVar(&f.timeout, "timeout", d.Timeout, "timeout of default mode")
	fs.DurationVar(&f.slowTimeout, "slow-timeout", d.SlowTimeout, "timeout of slow mode")
	fs.DurationVar(&f.grace, "grace", d.Lifecycle.Grace, "time between SIGTERM and SIGKILL")
	f.sandbox.register(fs)
	fs.StringVar(&f.coauthor, "coauthor", "", `add "Co-authored-by: Name <email>" to git commits, given as "Name <email>"`)
	fs.StringVar(&f.audit, "audit", "", "append the audit log (JSON lines) to `file`")
	fs.StringVar(&f.envPolicy, "env-policy", string(config.InheritSafe), "environment `policy`: inherit-safe or allowlist")
	fs.StringVar(&f.profile, "profile", "", "permission `profile`: "+strings.Join(safety.Presets(), ", ")+` (default none); "ask" answers are put to the user when the client supports elicitation`)
	fs.StringVar(&f.httpAddr, "http", "", "serve streamable HTTP at http://`addr`/mcp instead of stdio (127.0.0.1:8765; :8765 means 127.0.0.1:8765)")
	fs.StringVar(&f.token, "token", "", "-http: one bearer `token` (principal \"default\"; default $"+tokenEnv+", which a stdio server ignores)")
	fs.StringVar(&f.tokens, "tokens", "", "-http: bearer tokens from `file`, one \"PRINCIPAL TOKEN\" pair a line, read again when it changes")
	fs.StringVar(&f.oauthIssuer, "oauth-issuer", "", "-http: accept OAuth 2.1 access tokens (JWTs) of the authorization server at `URL` (principal \"oauth:SUBJECT\")")
	fs.StringVar(&f.oauthRes, "oauth-resource", "", "-oauth-issuer: this server's URL as clients reach it, the tokens' audience (default http://ADDR/mcp)")
	fs.Var(&f.oauthScopes, "oauth-scope", "-oauth-issuer: a `scope` every token must grant (repeatable)")
	fs.BoolVar(&f.noAuth, "no-auth", false, "-http: no authentication at all (loopback only): any local process can run commands. Without -token, -tokens, -oauth-issuer or -no-auth, -http generates a token (see docs/mcp.md)")
	fs.Var(&f.origins, "allow-origin", "browser `origin` allowed to call -http besides its own (repeatable)")
	fs.BoolVar(&f.verbose, "v", false, "debug logs on stderr")
	fs.BoolVar(&f.rawOutput, "raw-output", false, "give the model output as written (escape sequences, control bytes, a terminal's byte stream); by default it is rendered as a terminal shows it")
	fs.IntVar(&f.admission.MaxBusy, "max-busy", 0, "CPUs' worth of busy commands (measured) before new ones wait (default 4 per CPU); idle ones (sleeping, waiting) do not count")
	fs.IntVar(&f.admission.MaxRunning, "max-running", 0, "backstop: foreground commands running at once, however idle (default 1024 per CPU, at most 1 per 8 open files, at least 256; a principal may use three quarters); more wait")
	fs.IntVar(&f.admission.MaxJobsPerConversation, "max-jobs", 0, "background jobs running at once per conversation (default 16); more are refused")
	fs.IntVar(&f.admission.MaxQueue, "max-queue", 0, "calls that may wait to run (default 4 * -max-running; a principal may use three quarters); more are refused")
	fs.BoolVar(&f.shared, "shared-conversation", false, "-http: all sessions share one conversation (every client sees and can kill every job); by default each session is its own, ended with the session")
	fs.IntVar(&f.maxSessions, "max-sessions", 256, "-http: sessions open at once; more get 503 (0: no cap)")
	fs.DurationVar(&f.sessionIdle, "session-idle", 30*time.Minute, "close a session or a named conversation (and end its jobs) after this long without a request (0: never)")
	fs.IntVar(&f.maxConns, "max-conns", 1024, "-http: connections open at once; more get 503 (0: no cap)")
	fs.DurationVar(&f.connIdle, "conn-idle", 30*time.Second, "-http: close keep-alive connections idle this long")
	fs.StringVar(&f.onTimeout, "on-timeout", string(engine.OnTimeoutKill), "what happens to a default or slow command at its timeout: kill, or background (it keeps running as a background job; the result has the output so far and the job id)")
	fs.BoolVar(&f.structured, "structured", false, "give every tool result its fields (status, exit code, command, usage, …) as structuredContent, with output schemas, for programs; off by default because Claude Code and Codex then hand the model that JSON instead of the text (one call gets them with _meta \"bashvisor/structured\": true)")
	fs.IntVar(&f.outputMax, "output-max", 0, "the most bytes of output a result shows (never beyond the engine's 128 KiB); 0 fits it to the client: Codex 10000, Claude Code 40000 (what they pass on to the model whole), others 128 KiB; negative: 128 KiB for all")
	fs.BoolVar(&f.metrics, "metrics", false, "-http: serve Prometheus metrics at /metrics (behind the same token)")
	f.fleet.define(fs)
	f.defineForward(fs)
	return f, fs
}

// check validates the parsed flags and fills in the token from the
// environment.
func (f *mcpFlags) check(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	switch config.EnvPolicy(f.envPolicy) {
	case config.InheritSafe, config.Allowlist:
	default:
		return fmt.Errorf("-env-policy must be inherit-safe or allowlist, not %q", f.envPolicy)
	}
	if f.profile != "" {
		if _, err := safety.Preset(f.profile); err != nil {
			return fmt.Errorf("-profile: %w", err)
		}
	}
	var err error
	if f.sbx, err = f.sandbox.sandbox(); err != nil {
		return err
	}
	if f.coauthor != "" && !coauthorRE().MatchString(f.coauthor) {
		return fmt.Errorf(`-coauthor must look like "Name <email>", not %q`, f.coauthor)
	}
	if f.dir != "" {
		st, err := os.Stat(f.dir)
		if err != nil {
			return fmt.Errorf("-C: %w", err)
		}
		if !st.IsDir() {
			return fmt.Errorf("-C: %s is not a directory", f.dir)
		}
	}
	switch engine.OnTimeout(f.onTimeout) {
	case engine.OnTimeoutKill, engine.OnTimeoutBackground:
	default:
		return fmt.Errorf("-on-timeout must be kill or background, not %q", f.onTimeout)
	}
	if f.metrics && f.httpAddr == "" {
		return errors.New("-metrics needs -http")
	}
	if err := f.checkForward(); err != nil {
		return err
	}
	if f.maxSessions < 0 || f.maxConns < 0 || f.sessionIdle < 0 || f.connIdle <= 0 {
		return errors.New("-max-sessions, -max-conns and -session-idle must not be negative, -conn-idle must be positive")
	}
	if f.token == "" && f.httpAddr != "" {
		// Only -http reads it: a stdio server started from a shell that
		// exported it for HTTP clients still serves (cmdMCP names it).
		f.token = os.Getenv(tokenEnv)
	}
	return f.checkAuth()
}

// checkAuth validates the authentication flags.
func (f *mcpFlags) checkAuth() error {
	configured := f.token != "" || f.tokens != "" || f.oauthIssuer != ""
	switch {
	case f.httpAddr == "" && (configured || f.noAuth):
		return errors.New("-token, -tokens, -oauth-issuer and -no-auth need -http (stdio has one principal and no authentication)")
	case f.noAuth && configured:
		return errors.New("-no-auth contradicts -token, -tokens and -oauth-issuer (or $" + tokenEnv + ")")
	case f.noAuth && !isLoopback(listenAddr(f.httpAddr)):
		return fmt.Errorf("refusing to serve -http %s with -no-auth: the address is not loopback, so anyone who can reach it could run commands; drop -no-auth (a token is then generated) or bind 127.0.0.1", f.httpAddr)
	case (f.oauthRes != "" || len(f.oauthScopes) > 0) && f.oauthIssuer == "":
		return errors.New("-oauth-resource and -oauth-scope need -oauth-issuer")
	case f.oauthIssuer != "" && f.oauthRes == "" && !isLoopback(listenAddr(f.httpAddr)):
		return errors.New("-oauth-issuer off loopback needs -oauth-resource: the URL clients reach this server at (the tokens' audience)")
	case f.token != "" && len(f.token) < bearer.MinTokenLength:
		return fmt.Errorf("-token (or $%s) must be at least %d bytes long", tokenEnv, bearer.MinTokenLength)
	}
	return nil
}

// coauthorRE is compiled on first use (-coauthor), not at every start.
var coauthorRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[^<>\n]+ <[^<>\s]+@[^<>\s]+>$`) })

// engineConfig maps the flags to the engine's configuration; audit is the
// opened -audit file (or nil).
func (f *mcpFlags) engineConfig(log *slog.Logger, audit io.Writer) engine.Config {
	c := engine.DefaultConfig()
	c.Timeout, c.SlowTimeout, c.Lifecycle.Grace = f.timeout, f.slowTimeout, f.grace
	c.Env.Policy = config.EnvPolicy(f.envPolicy)
	c.CoAuthor = f.coauthor
	c.Output.Raw = f.rawOutput
	if f.profile != "" {
		c.Permissions, _ = safety.Preset(f.profile) // checked by parseMCPFlags
	}
	if audit != nil {
		c.Audit = audit
	}
	c.Logger = log
	c.Admission = f.admission
	c.OnTimeout = engine.OnTimeout(f.onTimeout)
	_ = f.sandbox.apply(&c) // -cache-dir: checked by check
	return c
}

// cmdMCP runs `bashvisor mcp`. It exits 0 on stdin EOF (stdio) or SIGINT/SIGTERM
// after stopping every command and job; 64 on bad flags; 1 when it cannot
// serve (the address is taken, stdin or stdout fail, ...). In stdio mode
// the protocol owns the process's stdout: stdout is used only for -h.
func cmdMCP(args []string, stdout, stderr io.Writer) int {
	f, fs := newMCPFlags()
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if err := f.check(fs); err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	if f.httpAddr == "" && os.Getenv(tokenEnv) != "" {
		fmt.Fprintf(stderr, "%s ignoring $%s: it is for -http (a stdio server has one principal and no authentication)\n", errPrefix("mcp"), tokenEnv)
	}
	serverRuntimeFor(os.Getenv, runtime.NumCPU()).apply()
	level := slog.LevelInfo
	sdkLevel := slog.LevelWarn
	if f.verbose {
		level, sdkLevel = slog.LevelDebug, slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	sdkLog := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: sdkLevel}))

	// In stdio mode the protocol owns stdout: keep a private copy of it for
	// the transport and point fd 1 at stderr, so that nothing else (a
	// library's stray print, a panic in a goroutine writing to os.Stdout)
	// can corrupt the stream.
	var protoOut *os.File
	if f.httpAddr == "" {
		fd, err := unix.FcntlInt(1, unix.F_DUPFD_CLOEXEC, 0) // close-on-exec as it is made
		if err != nil {
			fmt.Fprintln(stderr, errPrefix("mcp"), err)
			return 1
		}
		if err := unix.Dup2(2, 1); err != nil {
			fmt.Fprintln(stderr, errPrefix("mcp"), err)
			return 1
		}
		protoOut = os.NewFile(uintptr(fd), "mcp-stdout")
	}

	var audit *os.File
	if f.audit != "" {
		var err error
		if audit, err = os.OpenFile(f.audit, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err != nil {
			fmt.Fprintln(stderr, errPrefix("mcp"), "-audit:", err)
			return 1
		}
		defer audit.Close()
	}

	var auditW io.Writer
	if audit != nil {
		auditW = audit
	}
	forwardBase, err := f.listenForward()
	if err != nil {
		fmt.Fprintln(stderr, errPrefix("mcp"), err)
		return 1
	}
	if f.forwardLn != nil {
		defer f.forwardLn.Close()
	}
	e, err := f.fleet.runner(f.engineConfig(log, auditW), log, f.httpAddr != "")
	if err != nil {
		fmt.Fprintln(stderr, errPrefix("mcp"), err)
		return 1
	}
	sigCtx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	base, stopCalls := context.WithCancel(context.Background())
	defer stopCalls()
	opts := mcpserver.Options{
		WorkingDir: f.dir,
		Sandbox:    f.sbx,
		Logger:     sdkLog,
		// Closing a session waits for its calls: cancel them at shutdown.
		BaseContext:        base,
		SharedConversation: f.shared,
		Structured:         f.structured,
		OutputMax:          f.outputMax,
		Version:            moduleVersion(),
		// One idle bound for sessions and named conversations.
		ConversationIdle: cmp.Or(f.sessionIdle, -1),
		Forward:          forwardBase,
	}
	if f.fleet.on() && f.httpAddr == "" {
		opts.ConversationID = newConversationID() // a stdio front's own
	}
	srv := mcpserver.New(e, opts)

	code := 0
	if f.httpAddr == "" {
		stopForward := f.serveStdioForward(srv, log, stderr)
		code = serveStdio(sigCtx, srv, protoOut, stopCalls, log)
		stopForward()
	} else {
		code = serveHTTP(sigCtx, srv, e, f, stopCalls, log, stderr)
	}
	stopSignals() // a second SIGINT/SIGTERM now ends the process at once
	stopCalls()
	// Grace sequence for every job, then the cleanup bound, plus a margin.
	ctx, cancel := context.WithTimeout(context.Background(), f.grace+engine.DefaultConfig().Lifecycle.CleanupWait+5*time.Second)
	defer cancel()
	if err := e.Shutdown(ctx); err != nil {
		log.Error("engine shutdown", "err", err)
	}
	return code
}

func serveStdio(ctx context.Context, srv *mcp.Server, out *os.File, stopCalls func(), log *slog.Logger) int {
	// mcpserver.StdioTransport answers a malformed line with a JSON-RPC
	// error; the go-sdk's own stdio transport would end the session.
	ss, err := srv.Connect(context.Background(), &mcpserver.StdioTransport{Reader: os.Stdin, Writer: out, Logger: log}, nil)
	if err != nil {
		log.Error("mcp stdio", "err", err)
		return 1
	}
	// On a signal: cancel the calls in flight, then close the session
	// (which waits for them). On stdin EOF the go-sdk cancels them itself.
	stop := context.AfterFunc(ctx, func() {
		stopCalls()
		ss.Close()
	})
	defer stop()
	err = ss.Wait()
	if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) && !errors.Is(err, mcp.ErrConnectionClosed) {
		log.Error("mcp stdio session ended", "err", err)
		return 1
	}
	return 0
}

func serveHTTP(ctx context.Context, srv *mcp.Server, e engine.Runner, f *mcpFlags, stopCalls func(), log *slog.Logger, stderr io.Writer) int {
	ln, err := net.Listen("tcp", listenAddr(f.httpAddr))
	if err != nil {
		fmt.Fprintln(stderr, errPrefix("mcp"), err)
		return 1
	}
	a, err := f.httpAuth(ctx, ln.Addr().String(), log)
	if err != nil {
		ln.Close()
		fmt.Fprintln(stderr, errPrefix("mcp"), err)
		return 1
	}
	ln = mcpserver.LimitListener(ln, f.maxConns)
	hopts := a.opts
	hopts.AllowedOrigins = f.origins
	hopts.Logger = log
	hopts.MaxSessions = cmp.Or(f.maxSessions, -1)
	hopts.SessionTimeout = cmp.Or(f.sessionIdle, -1)
	mux := http.NewServeMux()
	mh := mcpserver.Handler(srv, hopts)
	mux.Handle("/mcp", mh)
	defer f.serveForward(mh, log, stderr)()
	if a.prm != nil {
		mux.Handle(a.prmPath, a.prm)
	}
	if f.metrics {
		cs := []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
		if eng, ok := e.(*engine.Engine); ok { // a fleet front has no engine of its own
			cs = append(cs, eng.Metrics())
		}
		mux.Handle("/metrics", mcpserver.MetricsHandler(hopts, cs...))
	}
	// No ReadTimeout or WriteTimeout: they would cut long tool calls (see
	// mcpserver.HTTPOptions.ReadTimeout, which bounds bodies instead).
	hs := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       f.connIdle,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if a.generated != "" && !isLoopback(ln.Addr().String()) {
		fmt.Fprintf(stderr, "warning: -http %s is reachable from other hosts and guarded only by the generated token in %s, sent in clear over plain HTTP: bind 127.0.0.1, or put TLS in front and give each client its own token (-tokens FILE)\n", f.httpAddr, a.generated)
	}
	fmt.Fprintf(stderr, "bashvisor MCP server listening on http://%s/mcp (%s)\n", ln.Addr(), a.describe)
	if f.metrics {
		fmt.Fprintf(stderr, "metrics at http://%s/metrics\n", ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	code := 0
	select {
	case <-ctx.Done():
	case err := <-errc:
		log.Error("http server", "err", err)
		code = 1
	}
	stopCalls()
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close() // open SSE streams never go idle
	}
	return code
}

// listenAddr binds loopback when the address names no host (":8765"):
// listening on every interface must be asked for (0.0.0.0:8765, [::]:8765).
func listenAddr(addr string) string {
	if host, port, err := net.SplitHostPort(addr); err == nil && host == "" {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}

// isLoopback reports whether a listen address ("127.0.0.1:8080",
// "localhost:0", "[::1]:9000") binds only loopback interfaces. An empty host
// (":8080") binds all interfaces and is not loopback.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// serverRuntime is how `bashvisor mcp` tunes the Go runtime; zero fields are
// left alone.
type serverRuntime struct {
	maxProcs  int   // GOMAXPROCS
	gcPercent int   // GOGC
	memLimit  int64 // GOMEMLIMIT, bytes
}

// Tuning of the server, measured with `demo bench -only mcp -mcp-variants
// '...'`: the Go SDK client, 64 calls of `true` in flight, 3-5 rounds of
// 3,000 calls per variant rotated with raw os/exec rounds, 2 vCPUs shared
// with other work (load 3-25), so ratios to raw move by +-0.1 from round
// to round; server CPU and GCs per call are steadier.
//
// GC: the go-sdk (v1.8.0) allocates ~190 KiB per request, mostly the 32 KiB
// buffers of five JSON decoders, so with GOGC=100 and a live heap of a few
// MiB the server collected every ~20 calls. At 64 in flight a collection
// costs ~1 ms of stop-the-world, because a goroutine inside fork (vfork
// until the child execs) can be neither preempted nor scanned. With
// GOMAXPROCS=4, per variant: server CPU per call, GCs per 1000 calls, peak
// RSS, throughput / raw:
//
//	GOGC=100 (as before)       951-1014 µs   41-44    43-45 MiB  0.50-0.64
//	GOGC=400                    560-670 µs    9-10    77-91 MiB  0.70-0.84
//	GOGC=off, limit 96 MiB          529 µs     4.4      104 MiB  0.84
//	GOGC=1000, limit 64 MiB         538 µs     8.4       74 MiB  0.73
//	GOGC=1000, limit 96 MiB     388-574 µs 4.6-4.8  102-104 MiB  0.81-1.00
//	GOGC=1000, limit 128 MiB    453-573 µs 3.5-3.8  129-134 MiB  0.77-0.88
//
// Chosen: GOGC=1000 with a soft memory limit of 96 MiB. The limit is what
// normally triggers a collection (every ~200 calls at c=64); it keeps the
// peak RSS near 100 MiB, well under 256 MiB, with room for a live heap of
// tens of MiB (64 calls in flight returning 128 KiB each, many jobs).
// GOGC=1000 rather than off keeps collections paced by the live heap
// while the limit does not bind. A lower limit collects twice as often;
// GOGC=400 alone collects twice as often, costs more CPU, and its heap
// grows with the live heap without a bound.
//
// GOMAXPROCS: each fork in flight pins a P until the child execs, so with
// GOMAXPROCS=2 (the cores here) two forks stop everything else in the
// server: reading requests, the actors, writing responses. With the GC
// above, throughput / raw was 0.58-0.64 with GOMAXPROCS=2, 0.77-1.00 with
// 4, and 2-3 points more (within the noise) with 8 or 16.
//
// Both together, in three runs of `demo bench -only mcp -mcp-variants
// 'GOGC=100 GOMAXPROCS=2'`: throughput / raw 0.47-0.74 -> 0.85-0.90,
// server CPU per call 603-796 -> 388-499 µs, GCs per 1000 calls 56-58 ->
// 4.6-4.8, peak RSS 34-37 -> 103 MiB; serial latency unchanged (GC rarely
// runs between serial calls).
const (
	serverGCPercent = 1000
	serverMemLimit  = 96 << 20
)

// serverRuntimeFor returns the tuning of `bashvisor mcp`: GOMAXPROCS at least
// max(4, NumCPU+2) unless $GOMAXPROCS is set, and the GC above unless
// $GOGC or $GOMEMLIMIT is set (then the environment decides).
func serverRuntimeFor(getenv func(string) string, numCPU int) serverRuntime {
	var r serverRuntime
	if getenv("GOMAXPROCS") == "" {
		r.maxProcs = max(4, numCPU+2)
	}
	if getenv("GOGC") == "" && getenv("GOMEMLIMIT") == "" {
		r.gcPercent, r.memLimit = serverGCPercent, serverMemLimit
	}
	return r
}

func (r serverRuntime) apply() {
	if r.maxProcs > 0 && runtime.GOMAXPROCS(0) < r.maxProcs {
		runtime.GOMAXPROCS(r.maxProcs)
	}
	if r.gcPercent > 0 {
		debug.SetGCPercent(r.gcPercent)
	}
	if r.memLimit > 0 {
		debug.SetMemoryLimit(r.memLimit)
	}
}
