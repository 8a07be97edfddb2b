package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/mcpserver"
)

// forwardUsage is the -forward flag's usage line.
const forwardUsage = "with -sandbox: offer the tool bash_forward, which gives the user a URL " +
	"(http://fw-LABEL.localhost:PORT/forward/CONVERSATION/PORT/?bashvisor_code=…, an origin of its own under -forward-addr's port, with a one-time code for a browser; " +
	"programs send the -http token to http://FORWARD-ADDR/forward/CONVERSATION/PORT/; over stdio, the code only) " +
	"for a server a conversation runs on its sandbox's localhost"

// defineForward defines -forward and -forward-addr.
func (f *mcpFlags) defineForward(fs *flag.FlagSet) {
	fs.BoolVar(&f.forward, "forward", false, forwardUsage)
	fs.StringVar(&f.forwardAddr, "forward-addr", "127.0.0.1:0", "-forward: serve the forwards at http://`addr`/forward/, "+
		"an origin apart from -http's so that forwarded pages cannot call /mcp (default: a free loopback port, printed at start; :PORT means 127.0.0.1:PORT)")
}

// checkForward validates -forward: it needs the sandbox (without it,
// servers listen on the host's own localhost). Over stdio the forwards
// are served on -forward-addr alone, a browser let in by a link's
// one-time code only (stdio has no token); on a fleet front
// (-executors, -cluster) each connection is carried to the executor
// that holds the conversation (cluster.Client.Forward).
func (f *mcpFlags) checkForward() error {
	if f.forward && !f.sbx.On() {
		return errors.New("-forward needs -sandbox: without it the commands' servers are on this host's localhost already")
	}
	return nil
}

// listenForward opens -forward-addr's listener, with -forward, and
// returns the forward origin's URL for mcpserver.Options.Forward ("" without
// -forward). serveForward serves it.
func (f *mcpFlags) listenForward() (string, error) {
	if !f.forward {
		return "", nil
	}
	ln, err := net.Listen("tcp", listenAddr(f.forwardAddr))
	if err != nil {
		return "", fmt.Errorf("-forward-addr: %w", err)
	}
	if ip := ln.Addr().(*net.TCPAddr).IP; ip.IsUnspecified() {
		ln.Close()
		return "", fmt.Errorf("-forward-addr %s: name the address browsers reach (127.0.0.1:8766, 192.0.2.7:8766), not every interface: it is the forward URLs' origin", f.forwardAddr)
	}
	f.forwardLn = ln
	return "http://" + ln.Addr().String(), nil
}

// serveStdioForward serves srv's forwards on -forward-addr's listener
// for a stdio server, until stop is called: mcpserver.Handler without
// authentication, so that only a link's one-time code (then its cookie)
// lets a browser in.
func (f *mcpFlags) serveStdioForward(srv *mcp.Server, log *slog.Logger, stderr io.Writer) (stop func()) {
	if f.forwardLn == nil {
		return func() {}
	}
	return f.serveForward(mcpserver.Handler(srv, mcpserver.HTTPOptions{NoAuth: true, Logger: log}), log, stderr)
}

// serveForward serves h (mcpserver.Handler) at /forward/ of the forward
// origin's listener, and nothing else, until stop is called.
func (f *mcpFlags) serveForward(h http.Handler, log *slog.Logger, stderr io.Writer) (stop func()) {
	if f.forwardLn == nil {
		return func() {}
	}
	mux := http.NewServeMux()
	mux.Handle("/forward/", h)
	hs := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       f.connIdle,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if !isLoopback(f.forwardLn.Addr().String()) {
		fmt.Fprintf(stderr, "warning: -forward-addr %s is reachable from other hosts, and its grants travel in clear over plain HTTP: bind 127.0.0.1, or put TLS in front\n", f.forwardAddr)
	}
	fmt.Fprintf(stderr, "forwards (bash_forward) at http://%s/forward/\n", f.forwardLn.Addr())
	go func() {
		if err := hs.Serve(f.forwardLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("forward server", "err", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := hs.Shutdown(ctx); err != nil {
			hs.Close() // an upgraded connection never goes idle
		}
	}
}
