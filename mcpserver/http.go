package mcpserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPOptions configures [Handler].
type HTTPOptions struct {
	// Token, when set, is the bearer token every request must carry
	// ("Authorization: Bearer TOKEN"); others get 401. Compared in
	// constant time.
	Token string
	// AllowedOrigins lists browser origins ("https://app.example.com")
	// allowed besides the server's own. A request with any other Origin
	// header gets 403. Requests without Origin (non-browser clients) pass.
	AllowedOrigins []string
	// GetServer, when set, picks the MCP server for each new session
	// instead of the server given to Handler: for example one server per
	// conversation, each with its own working directory. Returning nil
	// answers 400.
	GetServer func(*http.Request) *mcp.Server
	// SessionTimeout closes sessions idle (no request in flight) this long
	// (default 30m; negative: never).
	SessionTimeout time.Duration
	// Logger receives the transport's logs (default: discard).
	Logger *slog.Logger
}

// Handler serves s over MCP's streamable HTTP transport, for mounting on
// any mux (conventionally at "/mcp"). On top of the go-sdk's handler, which
// keeps its DNS-rebinding protection on (a request reaching a loopback
// address with a non-loopback Host header gets 403), it checks the Origin
// header (403 unless same-origin or listed in AllowedOrigins), the bearer
// token (401), and cancels a tool call whose HTTP request went away: the
// server keeps no event store, so a dropped response stream can never be
// resumed and the command is terminated instead of left running.
func Handler(s *mcp.Server, opts HTTPOptions) http.Handler {
	getServer := opts.GetServer
	if getServer == nil {
		getServer = func(*http.Request) *mcp.Server { return s }
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	timeout := opts.SessionTimeout
	switch {
	case timeout == 0:
		timeout = 30 * time.Minute
	case timeout < 0:
		timeout = 0
	}
	sdk := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Logger:         log,
		SessionTimeout: timeout,
	})
	var want [sha256.Size]byte
	if opts.Token != "" {
		want = sha256.Sum256([]byte(opts.Token))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !originAllowed(r, opts.AllowedOrigins) {
			log.Warn("rejected request from foreign origin", "origin", r.Header.Get("Origin"), "host", r.Host)
			http.Error(w, "Forbidden: origin not allowed", http.StatusForbidden)
			return
		}
		if opts.Token != "" && !tokenOK(r, &want) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="bashvisor"`)
			http.Error(w, "Unauthorized: missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		r.Header.Del(callHeader) // only this handler sets it
		if r.Method == http.MethodPost {
			id := rand.Text()
			r.Header.Set(callHeader, id)
			httpCalls.Store(id, r.Context())
			defer httpCalls.Delete(id)
		}
		sdk.ServeHTTP(w, r)
	})
}

// tokenOK compares the bearer token in constant time (over SHA-256 digests,
// so the length does not leak either).
func tokenOK(r *http.Request, want *[sha256.Size]byte) bool {
	auth := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(auth) <= len(prefix) || !strings.EqualFold(auth[:len(prefix)], prefix) {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(auth[len(prefix):])))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// originAllowed implements the Origin check: no Origin header passes (not a
// browser, or a same-origin navigation) unless Sec-Fetch-Site says
// cross-site; otherwise the origin must be listed or match the Host.
func originAllowed(r *http.Request, allowed []string) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		site := r.Header.Get("Sec-Fetch-Site")
		return site == "" || site == "same-origin" || site == "none"
	}
	if slices.Contains(allowed, origin) {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return strings.EqualFold(u.Host, r.Host)
}

// callHeader carries, from Handler to the tool handlers (which see the HTTP
// header as RequestExtra.Header), the key of the HTTP request's context in
// httpCalls.
const callHeader = "Bashvisor-Http-Call"

var httpCalls sync.Map // string → context.Context

// httpRequestContext returns the context of the HTTP request that carried
// a call, or nil.
func httpRequestContext(extra *mcp.RequestExtra) context.Context {
	if extra == nil || extra.Header == nil {
		return nil
	}
	id := extra.Header.Get(callHeader)
	if id == "" {
		return nil
	}
	if ctx, ok := httpCalls.Load(id); ok {
		return ctx.(context.Context)
	}
	return nil
}

// IsLoopback reports whether a listen address ("127.0.0.1:8080",
// "localhost:0", "[::1]:9000") binds only loopback interfaces. An empty host
// (":8080") binds all interfaces and is not loopback.
func IsLoopback(addr string) bool {
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
