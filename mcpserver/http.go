package mcpserver

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
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
	// working directory. Returning nil answers 400.
	GetServer func(*http.Request) *mcp.Server
	// SessionTimeout closes a session that received no request for this
	// long (a call in flight keeps it open; an open GET event stream does
	// not); its conversation ends with it (see
	// [Options.SharedConversation]). Default 30m: a person may leave an
	// agent alone that long and come back; the idle session costs about
	// 20 KiB meanwhile (10 KiB of heap and stacks; 17–22 KiB of RSS in
	// `demo mcp`, 26 KiB once it ran a command; measured over 1,000 to
	// 10,000 sessions). Negative: never. The client
	// learns of it on its next request, which gets 404 "session not
	// found", and starts a new session (its jobs are gone).
	SessionTimeout time.Duration
	// MaxSessions caps the sessions open at once (default 256; negative:
	// no cap). An initialize request that would open one more gets 503
	// with a reason and "Retry-After: 10"; requests of open sessions are
	// served as usual. Initialize requests in flight count; a session's
	// place is free once DELETE answered 204 or the session was closed as
	// idle. Each session may hold up to
	// Config.Limits' per-conversation share of the engine, so the cap
	// bounds memory and bookkeeping rather than load.
	MaxSessions int
	// ReadTimeout bounds the reading of a request's body, from the moment
	// the handler starts (default 30s; negative: no bound): a body that
	// does not arrive in time gets 408 and the connection is closed. Once
	// the body is read the deadline is cleared, so that a long tool call's
	// response stream is never cut. Leave http.Server.ReadTimeout unset:
	// once it passes, net/http cancels the context of the request still
	// being answered, and with it the command; WriteTimeout likewise cuts
	// long responses. Do set http.Server.ReadHeaderTimeout and IdleTimeout,
	// and cap connections with [LimitListener].
	ReadTimeout time.Duration
	// Logger receives the transport's logs (default: discard).
	Logger *slog.Logger
}

// Defaults of [HTTPOptions].
const (
	DefaultSessionTimeout = 30 * time.Minute
	DefaultMaxSessions    = 256
	DefaultReadTimeout    = 30 * time.Second
)

// Handler serves s over MCP's streamable HTTP transport, for mounting on
// any mux (conventionally at "/mcp"). On top of the go-sdk's handler, which
// keeps its DNS-rebinding protection on (a request reaching a loopback
// address with a non-loopback Host header gets 403), it checks the Origin
// header (403 unless same-origin or listed in AllowedOrigins) and the
// bearer token (401), closing the connection after either refusal; bounds
// the reading of bodies (408) and the number of sessions (503); and
// cancels a tool call whose HTTP request went away: the server keeps no
// event store, so a dropped response stream can never be resumed and the
// command is terminated instead of left running. A DELETE ending a session
// cancels the session's calls in flight first (closing a session waits for
// them).
func Handler(s *mcp.Server, opts HTTPOptions) http.Handler {
	getServer := opts.GetServer
	if getServer == nil {
		getServer = func(*http.Request) *mcp.Server { return s }
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	opts.SessionTimeout = orDefault(opts.SessionTimeout, DefaultSessionTimeout)
	opts.ReadTimeout = orDefault(opts.ReadTimeout, DefaultReadTimeout)
	opts.MaxSessions = orDefault(opts.MaxSessions, DefaultMaxSessions)
	h := &httpHandler{opts: opts, guard: newGuard(opts), sessions: map[string]*httpSession{}}
	h.sdk = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		srv := getServer(r)
		if p, ok := r.Context().Value(serverKey{}).(**mcp.Server); ok {
			*p = srv // the server a new session is created on
		}
		return srv
	}, &mcp.StreamableHTTPOptions{
		Logger:         opts.Logger,
		SessionTimeout: opts.SessionTimeout,
	})
	return h
}

// orDefault maps 0 to def and a negative value to 0 (no bound).
func orDefault[T int | time.Duration](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// sessionIDHeader is the streamable transport's session header.
const sessionIDHeader = "Mcp-Session-Id"

// httpHandler is [Handler]'s http.Handler.
type httpHandler struct {
	sdk   *mcp.StreamableHTTPHandler
	opts  HTTPOptions
	guard *guard

	mu       sync.Mutex
	opening  int                     // sessions being opened
	sessions map[string]*httpSession // open sessions by id
}

// httpSession is what Handler keeps of an open session: the calls in
// flight, to cancel them when the client ends the session.
type httpSession struct {
	calls map[string]context.CancelCauseFunc
}

// serverKey carries, in a new session's request context, where the
// go-sdk's GetServer call records the server it picked.
type serverKey struct{}

// errSessionDeleted cancels the calls of a session the client ended.
var errSessionDeleted = errors.New("session ended by the client")

func (h *httpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	if h.opts.ReadTimeout > 0 {
		// Also bounds net/http's discarding of a body left unread.
		_ = rc.SetReadDeadline(time.Now().Add(h.opts.ReadTimeout))
	}
	if !h.guard.allow(w, r) {
		return
	}
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		var err error
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, mcp.DefaultMaxRequestBodyBytes))
		if err != nil {
			w.Header().Set("Connection", "close")
			var tooBig *http.MaxBytesError
			switch {
			case errors.As(err, &tooBig):
				http.Error(w, fmt.Sprintf("Request Entity Too Large: the body exceeds %d bytes", tooBig.Limit), http.StatusRequestEntityTooLarge)
			case errors.Is(err, os.ErrDeadlineExceeded):
				http.Error(w, fmt.Sprintf("Request Timeout: the body did not arrive within %v", h.opts.ReadTimeout), http.StatusRequestTimeout)
			default:
				http.Error(w, "Bad Request: reading the body: "+err.Error(), http.StatusBadRequest)
			}
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	// No deadline while the request is answered: a passing read deadline
	// would cancel its context (net/http's background read fails).
	_ = rc.SetReadDeadline(time.Time{})

	r.Header.Del(callHeader) // only this handler sets it
	sid := r.Header.Get(sessionIDHeader)
	switch {
	case r.Method == http.MethodPost && sid == "" && isInitialize(body):
		h.open(w, r)
	case r.Method == http.MethodPost && sid != "":
		h.call(w, r, sid)
	case r.Method == http.MethodDelete && sid != "":
		h.end(w, r, sid)
	default:
		// Other requests without a session (server/discover, a stray
		// call) get a session that the go-sdk closes when they end.
		h.sdk.ServeHTTP(w, r)
	}
}

// isInitialize reports whether a POST body holds an initialize request,
// the only request that opens a session outliving it.
func isInitialize(body []byte) bool {
	type message struct {
		Method string `json:"method"`
	}
	var m message
	if json.Unmarshal(body, &m) == nil {
		return m.Method == "initialize"
	}
	var batch []message
	_ = json.Unmarshal(body, &batch)
	return slices.ContainsFunc(batch, func(m message) bool { return m.Method == "initialize" })
}

// open serves a request that opens a session (initialize), within
// MaxSessions.
func (h *httpHandler) open(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	if n := len(h.sessions) + h.opening; h.opts.MaxSessions > 0 && n >= h.opts.MaxSessions {
		h.mu.Unlock()
		h.opts.Logger.Warn("refused a new MCP session: the session cap is reached", "max_sessions", h.opts.MaxSessions)
		w.Header().Set("Retry-After", "10")
		http.Error(w, fmt.Sprintf("Service Unavailable: %d MCP sessions are open, the most this server allows; retry later, or end an idle session", h.opts.MaxSessions),
			http.StatusServiceUnavailable)
		return
	}
	h.opening++
	h.mu.Unlock()

	var srv *mcp.Server
	h.sdk.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), serverKey{}, &srv)))

	// The session lives on if the request initialized it.
	var ss *mcp.ServerSession
	if sid := w.Header().Get(sessionIDHeader); sid != "" && srv != nil {
		for s := range srv.Sessions() {
			if s.ID() == sid {
				ss = s
				break
			}
		}
	}
	h.mu.Lock()
	h.opening--
	if ss != nil {
		h.sessions[ss.ID()] = &httpSession{calls: map[string]context.CancelCauseFunc{}}
	}
	h.mu.Unlock()
	if ss != nil {
		go func() {
			_ = ss.Wait()
			h.mu.Lock()
			delete(h.sessions, ss.ID())
			h.mu.Unlock()
		}()
	}
}

// call serves a request of an open session, registering its context so
// that its tool calls end with it.
func (h *httpHandler) call(w http.ResponseWriter, r *http.Request, sid string) {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	id := rand.Text()
	h.mu.Lock()
	if s := h.sessions[sid]; s != nil {
		s.calls[id] = cancel
	}
	h.mu.Unlock()
	r.Header.Set(callHeader, id)
	httpCalls.Store(id, ctx)
	defer func() {
		httpCalls.Delete(id)
		h.mu.Lock()
		if s := h.sessions[sid]; s != nil {
			delete(s.calls, id)
		}
		h.mu.Unlock()
	}()
	h.sdk.ServeHTTP(w, r)
}

// end serves a DELETE, which ends session sid: its calls in flight are
// cancelled first, since closing a session waits for them; once the
// session is closed its place is free for the next one.
func (h *httpHandler) end(w http.ResponseWriter, r *http.Request, sid string) {
	h.mu.Lock()
	if s := h.sessions[sid]; s != nil {
		for _, cancel := range s.calls {
			cancel(errSessionDeleted)
		}
	}
	h.mu.Unlock()
	sw := &statusWriter{ResponseWriter: w}
	h.sdk.ServeHTTP(sw, r)
	if sw.code == http.StatusNoContent { // closed: free its place before the client hears of it
		h.mu.Lock()
		delete(h.sessions, sid)
		h.mu.Unlock()
	}
	sw.flush()
}

// statusWriter holds back the status of a response until its body is
// written or flush is called.
type statusWriter struct {
	http.ResponseWriter
	code    int
	flushed bool
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.flush()
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) flush() {
	if !w.flushed {
		w.flushed = true
		w.ResponseWriter.WriteHeader(cmp.Or(w.code, http.StatusOK))
	}
}

// guard implements the origin and token checks.
type guard struct {
	allowed []string
	token   bool
	want    [sha256.Size]byte
	log     *slog.Logger
}

func newGuard(opts HTTPOptions) *guard {
	g := &guard{allowed: opts.AllowedOrigins, token: opts.Token != "", log: opts.Logger}
	if g.token {
		g.want = sha256.Sum256([]byte(opts.Token))
	}
	return g
}

// allow checks a request's origin and token and answers 403 or 401 when
// they fail, closing the connection: a client without the token has no
// use for it.
func (g *guard) allow(w http.ResponseWriter, r *http.Request) bool {
	if !originAllowed(r, g.allowed) {
		g.log.Warn("rejected request from foreign origin", "origin", r.Header.Get("Origin"), "host", r.Host)
		w.Header().Set("Connection", "close")
		http.Error(w, "Forbidden: origin not allowed", http.StatusForbidden)
		return false
	}
	if g.token && !tokenOK(r, &g.want) {
		w.Header().Set("Connection", "close")
		w.Header().Set("WWW-Authenticate", `Bearer realm="bashvisor"`)
		http.Error(w, "Unauthorized: missing or wrong bearer token", http.StatusUnauthorized)
		return false
	}
	return true
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
