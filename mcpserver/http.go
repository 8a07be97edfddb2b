package mcpserver

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPOptions configures [Handler]. One of Token, Verifier and NoAuth
// must be set: Handler panics otherwise.
type HTTPOptions struct {
	// Verifier authenticates requests: it is given the bearer token of
	// "Authorization: Bearer TOKEN" and returns the caller's principal as
	// the TokenInfo's UserID, or an error wrapping auth.ErrInvalidToken
	// (answered 401). bearer.TokenFile.Verify and
	// bearer.OAuthVerifier.Verify are two; combine them in a function of
	// your own. The principal must follow the rule for principals: 1 to
	// 256 bytes of UTF-8 without spaces or control characters (else the
	// request gets 500 and the log says why).
	Verifier auth.TokenVerifier
	// Token, when set, is one bearer token accepted besides Verifier's,
	// for the principal "default". Compared in constant time.
	Token string
	// NoAuth serves every request without authentication, as the one
	// principal "anonymous": any process that can reach the
	// address can run commands. Only for a listener nobody else can
	// reach.
	NoAuth bool
	// Scopes, when set, must all be granted to a token (its TokenInfo's
	// Scopes); others get 403 insufficient_scope.
	Scopes []string
	// ResourceMetadataURL, when set, is named in the WWW-Authenticate
	// header of 401 and 403 answers (RFC 9728), so that an OAuth client
	// finds the authorization server: the URL where
	// auth.ProtectedResourceMetadataHandler serves
	// bearer.ProtectedResourceMetadata.
	ResourceMetadataURL string
	// AllowedOrigins lists browser origins ("https://app.example.com")
	// allowed besides the server's own. A request with any other Origin
	// header gets 403. Requests without Origin (non-browser clients) pass.
	AllowedOrigins []string
	// GetServer, when set, picks the MCP server for each new session
	// and each stateless request instead of the server given to Handler:
	// for example one server per working directory. Returning nil
	// answers 400. Each server it returns must have been made by [New].
	GetServer func(*http.Request) *mcp.Server
	// SessionTimeout closes a session that received no request for this
	// long (a call in flight keeps it open; an open GET event stream does
	// not); its conversation ends with it (see
	// [Options.SharedConversation]). Default 30m: a person may leave an
	// agent alone that long and come back; the idle session costs about
	// 20 KiB meanwhile (10 KiB of heap and stacks; 17–22 KiB of RSS in
	// `bashvisor mcp`, 26 KiB once it ran a command; measured over 1,000 to
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
	// bounds memory and bookkeeping rather than load. Stateless requests
	// (protocol 2026-07-28) open no session; their named conversations
	// are capped by [Options.MaxConversations].
	MaxSessions int
	// MaxSessionsPerPrincipal caps the sessions one principal has open at
	// once (default 64, a quarter of the default MaxSessions; negative: no
	// cap), so that one principal cannot take every session: an initialize
	// request over it gets 429 naming the principal's cap, with
	// "Retry-After: 10", while other principals open sessions as usual.
	MaxSessionsPerPrincipal int
	// SessionRate bounds how fast one principal opens sessions (default
	// 4 a second, in bursts of up to 64; PerSecond negative: no bound). An
	// initialize request beyond it gets 429 with Retry-After: the seconds
	// until the principal may open one again.
	SessionRate Rate
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

// Defaults of HTTPOptions, stated at each field.
const (
	defaultSessionTimeout = 30 * time.Minute
	defaultMaxSessions    = 256
	// defaultMaxSessionsPerPrincipal is HTTPOptions.MaxSessionsPerPrincipal's
	// default.
	defaultMaxSessionsPerPrincipal = 64
	defaultReadTimeout             = 30 * time.Second
	// maxRequestBytes bounds a request's body: a bigger one (a bash_write
	// of more than about 4 MiB of input) gets 413 and the connection is
	// closed; split such input into several writes. It is the go-sdk's
	// own bound (mcp.DefaultMaxRequestBodyBytes; TestMaxRequestBytes).
	maxRequestBytes = 4 << 20
)

// defaultSessionRate is HTTPOptions.SessionRate's default.
var defaultSessionRate = Rate{PerSecond: 4, Burst: 64}

// Handler serves s over MCP's streamable HTTP transport, for mounting on
// any mux (conventionally at "/mcp"), in both of its modes: sessions
// (protocol versions up to 2025-11-25: an initialize request opens a
// session, named by the Mcp-Session-Id header of later requests, and the
// session is a conversation) and stateless (2026-07-28: every request
// stands alone and may name its conversation, see the package
// documentation, "Conversations").
//
// Every request is authenticated first (HTTPOptions.Token, Verifier or
// NoAuth; 401 or 403 otherwise) and made by the principal that its
// credentials name; a session belongs to the principal that opened it,
// and a request of another principal naming it gets 404 as if it did not
// exist. On top of the go-sdk's handler, which keeps its DNS-rebinding
// protection on (a request reaching a loopback address with a
// non-loopback Host header gets 403), it checks the Origin header (403
// unless same-origin or listed in AllowedOrigins), closing the connection
// after a refusal; bounds the reading of bodies (408, 413) and the number
// of sessions (503); and cancels a tool call whose HTTP request went away:
// the server keeps no event store, so a dropped response stream can never
// be resumed and the command is terminated instead of left running. A
// DELETE ending a session cancels the session's calls in flight first
// (closing a session waits for them).
//
// Requests of forward paths ("/forward/", see [Options.Forward]) have
// their own checks and credentials instead.
//
// Handler adds a receiving middleware to s (and to every server GetServer
// returns) that hands each request's principal to the tool handlers.
func Handler(s *mcp.Server, opts HTTPOptions) http.Handler {
	if opts.Token == "" && opts.Verifier == nil && !opts.NoAuth {
		panic("mcpserver.Handler: no authentication configured: set HTTPOptions.Token, Verifier, or NoAuth")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	opts.SessionTimeout = orDefault(opts.SessionTimeout, defaultSessionTimeout)
	opts.ReadTimeout = orDefault(opts.ReadTimeout, defaultReadTimeout)
	opts.MaxSessions = orDefault(opts.MaxSessions, defaultMaxSessions)
	opts.MaxSessionsPerPrincipal = orDefault(opts.MaxSessionsPerPrincipal, defaultMaxSessionsPerPrincipal)
	opts.SessionRate = opts.SessionRate.orDefault(defaultSessionRate)
	h := &httpHandler{opts: opts, sessions: map[string]*httpSession{}, perPrincipal: map[string]int{},
		sessionRate: newRates(opts.SessionRate)}
	getServer := opts.GetServer
	if getServer == nil {
		getServer = func(*http.Request) *mcp.Server { return s }
	}
	h.server = getServer
	if v, ok := servers.Load(s); ok {
		h.forwardHost = v.(*forwarding).host
		v.(*forwarding).served.Store(true)
	}
	h.instrument(s)
	pick := func(r *http.Request) *mcp.Server {
		srv := getServer(r)
		if srv != nil {
			h.instrument(srv)
		}
		if p, ok := r.Context().Value(serverKey{}).(**mcp.Server); ok {
			*p = srv // the server a new session is created on
		}
		return srv
	}
	h.sessionful = mcp.NewStreamableHTTPHandler(pick, &mcp.StreamableHTTPOptions{
		Logger:         opts.Logger,
		SessionTimeout: opts.SessionTimeout,
	})
	h.stateless = mcp.NewStreamableHTTPHandler(pick, &mcp.StreamableHTTPOptions{
		Logger:    opts.Logger,
		Stateless: true,
	})
	h.authn = newAuthenticator(opts, http.HandlerFunc(h.serve))
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

// The streamable transport's session and protocol version headers.
const (
	sessionIDHeader       = "Mcp-Session-Id"
	protocolVersionHeader = "Mcp-Protocol-Version"
)

// httpHandler is [Handler]'s http.Handler.
type httpHandler struct {
	sessionful http.Handler                    // the go-sdk's, for protocol versions with sessions
	stateless  http.Handler                    // the go-sdk's stateless one: 2026-07-28, and requests without a session
	authn      http.Handler                    // authenticates, then serve
	server     func(*http.Request) *mcp.Server // GetServer, or s
	// forwardHost is the Host of s's forward origin (Options.Forward),
	// which serves forward paths only.
	forwardHost string
	opts        HTTPOptions

	// calls holds the requests being served (call id → *httpCall), for
	// the middleware that gives their principal and cancellation to the
	// tool handlers.
	calls sync.Map
	// instrumented holds the servers given the middleware (*mcp.Server → struct{}).
	instrumented sync.Map

	// sessionRate is each principal's session creation rate.
	sessionRate *rates

	mu           sync.Mutex
	opening      int                     // sessions being opened
	sessions     map[string]*httpSession // open sessions by id
	perPrincipal map[string]int          // sessions open or being opened, by principal
}

// httpSession is what Handler keeps of an open session: its principal,
// and the calls in flight, to cancel them when the client ends the
// session.
type httpSession struct {
	principal string
	calls     map[string]context.CancelCauseFunc
}

// httpCall is one request being served.
type httpCall struct {
	ctx       context.Context // ends when the HTTP request goes away
	principal string
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
	if strings.HasPrefix(r.URL.Path, forwardPrefix) {
		h.serveForwardPath(w, r) // checks of its own
		return
	}
	if h.forwardHost != "" && isForwardHost(r.Host, h.forwardHost) {
		// /mcp mounted at the forward origin too: its pages could call it.
		w.Header().Set("Connection", "close")
		http.Error(w, "Forbidden: the forward origin serves forward paths only", http.StatusForbidden)
		return
	}
	if !originAllowed(r, h.opts.AllowedOrigins) {
		h.opts.Logger.Warn("rejected request from foreign origin", "origin", r.Header.Get("Origin"), "host", r.Host)
		w.Header().Set("Connection", "close")
		http.Error(w, "Forbidden: origin not allowed", http.StatusForbidden)
		return
	}
	h.authn.ServeHTTP(w, r)
}

// serve serves an authenticated request.
func (h *httpHandler) serve(w http.ResponseWriter, r *http.Request) {
	principal, err := principalOf(r)
	if err != nil {
		h.opts.Logger.Error("refused a request", "err", err)
		http.Error(w, "Internal Server Error: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if strings.HasPrefix(r.URL.Path, forwardPrefix) {
		h.serveForward(w, r, principal)
		return
	}
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
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
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})

	r.Header.Del(callHeader) // only this handler sets it
	sid := r.Header.Get(sessionIDHeader)
	if sid != "" && !h.owns(sid, principal) {
		// Another principal's session is answered like one that does
		// not exist.
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	switch {
	case r.Method == http.MethodPost && sid == "" && isInitialize(body) && r.Header.Get(protocolVersionHeader) < protocolMRTR:
		// An initialize of a protocol with sessions. (2026-07-28 has no
		// initialize: the stateless handler answers it "method not found".)
		h.open(w, r, principal)
	case r.Method == http.MethodPost && sid != "":
		h.call(w, r, h.sessionful, sid, principal)
	case r.Method == http.MethodPost:
		// Protocol 2026-07-28, server/discover, and calls of older
		// versions without a session: served statelessly.
		h.call(w, r, h.stateless, "", principal)
	case r.Method == http.MethodDelete && sid != "":
		h.end(w, r, sid)
	default:
		// GET event streams, and malformed requests the go-sdk answers.
		h.call(w, r, h.sessionful, sid, principal)
	}
}

// owns reports whether session sid, if Handler knows it, belongs to
// principal. A session Handler does not know is left to the go-sdk (which
// answers 404, or 403 when it knows the session under another user).
func (h *httpHandler) owns(sid, principal string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.sessions[sid]
	return s == nil || s.principal == principal
}

// isInitialize reports whether a POST body holds an initialize request,
// the only request that opens a session outliving it.
func isInitialize(body []byte) bool {
	if !bytes.Contains(body, []byte(`"initialize"`)) {
		return false // the common case, without decoding
	}
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
// MaxSessions. The session is recorded with its principal before the
// client learns its id.
func (h *httpHandler) open(w http.ResponseWriter, r *http.Request, principal string) {
	h.mu.Lock()
	if n := len(h.sessions) + h.opening; h.opts.MaxSessions > 0 && n >= h.opts.MaxSessions {
		h.mu.Unlock()
		h.opts.Logger.Warn("refused a new MCP session: the session cap is reached", "max_sessions", h.opts.MaxSessions, "principal", principal)
		w.Header().Set("Retry-After", "10")
		http.Error(w, fmt.Sprintf("Service Unavailable: %d MCP sessions are open, the most this server allows; retry later, or end an idle session", h.opts.MaxSessions),
			http.StatusServiceUnavailable)
		return
	}
	if n := h.perPrincipal[principal]; h.opts.MaxSessionsPerPrincipal > 0 && n >= h.opts.MaxSessionsPerPrincipal {
		h.mu.Unlock()
		h.opts.Logger.Warn("refused a new MCP session: the principal's session cap is reached", "max_sessions_per_principal", h.opts.MaxSessionsPerPrincipal, "principal", principal)
		w.Header().Set("Retry-After", "10")
		http.Error(w, fmt.Sprintf("Too Many Requests: principal %q has %d MCP sessions open, the most one principal may; end an idle session (DELETE), or retry later", principal, n),
			http.StatusTooManyRequests)
		return
	}
	if ok, retry := h.sessionRate.allow(principal); !ok {
		h.mu.Unlock()
		secs := int(math.Ceil(retry.Seconds()))
		h.opts.Logger.Warn("refused a new MCP session: the principal opens sessions too fast", "principal", principal, "retry_after", secs)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		http.Error(w, fmt.Sprintf("Too Many Requests: principal %q opens MCP sessions faster than this server allows (%g a second, in bursts of %d); retry in %d s, or reuse a session",
			principal, h.opts.SessionRate.PerSecond, h.opts.SessionRate.Burst, secs), http.StatusTooManyRequests)
		return
	}
	h.opening++
	h.perPrincipal[principal]++
	h.mu.Unlock()

	var srv *mcp.Server
	rw := &sessionWriter{ResponseWriter: w, h: h, principal: principal}
	h.call(rw, r.WithContext(context.WithValue(r.Context(), serverKey{}, &srv)), h.sessionful, "", principal)

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
	if ss == nil {
		// Not opened: its place, counted while it was being opened, is
		// free again.
		delete(h.sessions, rw.sid)
		h.release(principal)
	}
	h.mu.Unlock()
	if ss != nil {
		go func() {
			_ = ss.Wait()
			h.mu.Lock()
			h.forget(ss.ID())
			h.mu.Unlock()
		}()
	}
}

// forget drops an open session (when still recorded) and frees its
// principal's place; h.mu is held.
func (h *httpHandler) forget(sid string) {
	if s, ok := h.sessions[sid]; ok {
		delete(h.sessions, sid)
		h.release(s.principal)
	}
}

// release frees one of principal's session places; h.mu is held.
func (h *httpHandler) release(principal string) {
	if h.perPrincipal[principal]--; h.perPrincipal[principal] <= 0 {
		delete(h.perPrincipal, principal)
	}
}

// sessionWriter records a new session with its principal when the
// response that names it is about to be sent.
type sessionWriter struct {
	http.ResponseWriter
	h         *httpHandler
	principal string
	sid       string
	done      bool
}

func (w *sessionWriter) record() {
	if w.done {
		return
	}
	w.done = true
	if sid := w.Header().Get(sessionIDHeader); sid != "" {
		w.sid = sid
		w.h.mu.Lock()
		w.h.sessions[sid] = &httpSession{principal: w.principal, calls: map[string]context.CancelCauseFunc{}}
		w.h.mu.Unlock()
	}
}

func (w *sessionWriter) WriteHeader(code int) {
	w.record()
	w.ResponseWriter.WriteHeader(code)
}

func (w *sessionWriter) Write(b []byte) (int, error) {
	w.record()
	return w.ResponseWriter.Write(b)
}

func (w *sessionWriter) Flush() {
	w.record()
	http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *sessionWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// call serves a request with sdk, registering it so that the tool
// handlers learn its principal and its tool calls end with it (and, for
// session sid, with the session's DELETE).
func (h *httpHandler) call(w http.ResponseWriter, r *http.Request, sdk http.Handler, sid, principal string) {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	id := rand.Text()
	if sid != "" {
		h.mu.Lock()
		if s := h.sessions[sid]; s != nil {
			s.calls[id] = cancel
		}
		h.mu.Unlock()
	}
	r.Header.Set(callHeader, id)
	h.calls.Store(id, &httpCall{ctx: ctx, principal: principal})
	defer func() {
		h.calls.Delete(id)
		if sid != "" {
			h.mu.Lock()
			if s := h.sessions[sid]; s != nil {
				delete(s.calls, id)
			}
			h.mu.Unlock()
		}
	}()
	sdk.ServeHTTP(w, r)
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
	h.sessionful.ServeHTTP(sw, r)
	if sw.code == http.StatusNoContent { // closed: free its place before the client hears of it
		h.mu.Lock()
		h.forget(sid)
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

// callHeader carries, from Handler to its middleware (which sees the HTTP
// header as RequestExtra.Header), the key of the request in
// httpHandler.calls.
const callHeader = "Bashvisor-Http-Call"

// instrument adds the middleware to srv, once.
func (h *httpHandler) instrument(srv *mcp.Server) {
	if _, done := h.instrumented.LoadOrStore(srv, struct{}{}); !done {
		srv.AddReceivingMiddleware(h.middleware)
	}
}

// middleware gives a request served by this handler its principal and
// ends its context with the HTTP request that carried it.
func (h *httpHandler) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		extra := req.GetExtra()
		if extra == nil || extra.Header == nil {
			return next(ctx, method, req)
		}
		v, ok := h.calls.Load(extra.Header.Get(callHeader))
		if !ok {
			return next(ctx, method, req) // another Handler's request
		}
		c := v.(*httpCall)
		ctx, cancel := context.WithCancelCause(withPrincipal(ctx, c.principal))
		stop := context.AfterFunc(c.ctx, func() { cancel(cmp.Or(context.Cause(c.ctx), errDisconnected)) })
		defer func() {
			stop()
			cancel(nil)
		}()
		return next(ctx, method, req)
	}
}

// principalKey carries a request's principal in its context.
type principalKey struct{}

func withPrincipal(ctx context.Context, p string) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// principalFrom returns the principal Handler gave a request, if any.
func principalFrom(ctx context.Context) (string, bool) {
	p, ok := ctx.Value(principalKey{}).(string)
	return p, ok
}
