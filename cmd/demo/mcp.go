package main

import (
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
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/mcpserver"
	"github.com/bashvisor/bashvisor/safety"
)

// tokenEnv names the environment variable holding the HTTP bearer token.
const tokenEnv = "BASHVISOR_MCP_TOKEN"

// mcpFlags are the flags of `demo mcp`.
type mcpFlags struct {
	dir         string
	timeout     time.Duration
	slowTimeout time.Duration
	grace       time.Duration
	restricted  bool
	coauthor    string
	audit       string
	envPolicy   string
	profile     string
	httpAddr    string
	token       string
	origins     stringList
	verbose     bool
	limits      engine.Limits
	fleet       fleetFlags // -executors, -cluster: see executor.go
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// newMCPFlags defines the flags of `demo mcp`; parse fs, then call check.
func newMCPFlags() (*mcpFlags, *flag.FlagSet) {
	d := engine.DefaultConfig()
	f := &mcpFlags{}
	fs := newFlagSet("mcp")
	fs.StringVar(&f.dir, "C", "", "working `dir`ectory of every command (default: the current directory)")
	fs.DurationVar(&f.timeout, "timeout", d.Timeout, "timeout of default mode")
	fs.DurationVar(&f.slowTimeout, "slow-timeout", d.SlowTimeout, "timeout of slow mode")
	fs.DurationVar(&f.grace, "grace", d.Grace, "time between SIGTERM and SIGKILL")
	fs.BoolVar(&f.restricted, "restricted", false, "run commands in the Landlock sandbox (read-only filesystem, no network)")
	fs.StringVar(&f.coauthor, "coauthor", "", `add "Co-authored-by: Name <email>" to git commits, given as "Name <email>"`)
	fs.StringVar(&f.audit, "audit", "", "append the audit log (JSON lines) to `file`")
	fs.StringVar(&f.envPolicy, "env-policy", string(engine.EnvInheritSafe), "environment `policy`: inherit-safe or allowlist")
	fs.StringVar(&f.profile, "profile", "", "permission `profile`: "+strings.Join(safety.Presets(), ", ")+` (default none); "ask" answers are put to the user when the client supports elicitation`)
	fs.StringVar(&f.httpAddr, "http", "", "serve streamable HTTP at http://`addr`/mcp instead of stdio (127.0.0.1:8765; :8765 means 127.0.0.1:8765)")
	fs.StringVar(&f.token, "token", "", "bearer `token` required by -http (default $"+tokenEnv+"; required off loopback)")
	fs.Var(&f.origins, "allow-origin", "browser `origin` allowed to call -http besides its own (repeatable)")
	fs.BoolVar(&f.verbose, "v", false, "debug logs on stderr")
	fs.IntVar(&f.limits.MaxRunning, "max-running", 0, "foreground commands running at once, engine-wide (default 4 per CPU; a conversation may use half); more wait")
	fs.IntVar(&f.limits.MaxJobsPerConversation, "max-jobs", 0, "background jobs running at once per conversation (default 16); more are refused")
	fs.IntVar(&f.limits.MaxQueue, "max-queue", 0, "calls that may wait for a slot (default 4 * -max-running); more are refused")
	f.fleet.define(fs)
	return f, fs
}

// check validates the parsed flags and fills in the token from the
// environment.
func (f *mcpFlags) check(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	switch engine.EnvPolicy(f.envPolicy) {
	case engine.EnvInheritSafe, engine.EnvAllowlist:
	default:
		return fmt.Errorf("-env-policy must be inherit-safe or allowlist, not %q", f.envPolicy)
	}
	if f.profile != "" {
		if _, err := safety.Preset(f.profile); err != nil {
			return fmt.Errorf("-profile: %w", err)
		}
	}
	if f.coauthor != "" && !coauthorRE.MatchString(f.coauthor) {
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
	if f.token == "" {
		f.token = os.Getenv(tokenEnv)
	}
	if f.httpAddr != "" && f.token == "" && !mcpserver.IsLoopback(listenAddr(f.httpAddr)) {
		return fmt.Errorf("refusing to serve -http %s without a bearer token: the address is not loopback, so anyone who can reach it could run commands; set -token or $%s, or bind 127.0.0.1", f.httpAddr, tokenEnv)
	}
	return nil
}

var coauthorRE = regexp.MustCompile(`^[^<>\n]+ <[^<>\s]+@[^<>\s]+>$`)

// engineConfig maps the flags to the engine's configuration; audit is the
// opened -audit file (or nil).
func (f *mcpFlags) engineConfig(log *slog.Logger, audit io.Writer) engine.Config {
	c := engine.DefaultConfig()
	c.Timeout, c.SlowTimeout, c.Grace = f.timeout, f.slowTimeout, f.grace
	c.EnvPolicy = engine.EnvPolicy(f.envPolicy)
	c.CoAuthor = f.coauthor
	if f.profile != "" {
		c.Permissions, _ = safety.Preset(f.profile) // checked by parseMCPFlags
	}
	if audit != nil {
		c.Audit = audit
	}
	c.Logger = log
	c.Limits = f.limits
	return c
}

// cmdMCP runs `demo mcp`. It exits 0 on stdin EOF (stdio) or SIGINT/SIGTERM
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
		fd, err := unix.Dup(1)
		if err != nil {
			fmt.Fprintln(stderr, "demo mcp:", err)
			return 1
		}
		unix.CloseOnExec(fd)
		if err := unix.Dup2(2, 1); err != nil {
			fmt.Fprintln(stderr, "demo mcp:", err)
			return 1
		}
		protoOut = os.NewFile(uintptr(fd), "mcp-stdout")
	}

	var audit *os.File
	if f.audit != "" {
		var err error
		if audit, err = os.OpenFile(f.audit, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err != nil {
			fmt.Fprintln(stderr, "demo mcp: -audit:", err)
			return 1
		}
		defer audit.Close()
	}

	var auditW io.Writer
	if audit != nil {
		auditW = audit
	}
	e, err := f.fleet.runner(f.engineConfig(log, auditW), log)
	if err != nil {
		fmt.Fprintln(stderr, "demo mcp:", err)
		return 1
	}
	sigCtx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	base, stopCalls := context.WithCancel(context.Background())
	defer stopCalls()
	opts := mcpserver.Options{
		WorkingDir: f.dir,
		Restricted: f.restricted,
		Logger:     sdkLog,
		// Closing a session waits for its calls: cancel them at shutdown.
		BaseContext: base,
	}
	if f.fleet.on() {
		opts.ConversationID = newConversationID() // each MCP session is one conversation
	}
	srv := mcpserver.New(e, opts)
	f.fleet.perSession(e, opts)

	code := 0
	if f.httpAddr == "" {
		code = serveStdio(sigCtx, srv, protoOut, stopCalls, log)
	} else {
		code = serveHTTP(sigCtx, srv, f, stopCalls, log, stderr)
	}
	stopSignals() // a second SIGINT/SIGTERM now ends the process at once
	stopCalls()
	// Grace sequence for every job, then the cleanup bound, plus a margin.
	ctx, cancel := context.WithTimeout(context.Background(), f.grace+engine.DefaultConfig().CleanupWait+5*time.Second)
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

func serveHTTP(ctx context.Context, srv *mcp.Server, f *mcpFlags, stopCalls func(), log *slog.Logger, stderr io.Writer) int {
	ln, err := net.Listen("tcp", listenAddr(f.httpAddr))
	if err != nil {
		fmt.Fprintln(stderr, "demo mcp:", err)
		return 1
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpserver.Handler(srv, mcpserver.HTTPOptions{
		Token:          f.token,
		AllowedOrigins: f.origins,
		GetServer:      f.fleet.getServer,
		Logger:         log,
	}))
	hs := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	auth := "no token"
	if f.token != "" {
		auth = "bearer token required"
	}
	fmt.Fprintf(stderr, "bashvisor MCP server listening on http://%s/mcp (%s)\n", ln.Addr(), auth)
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
