package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/engine"
)

// A person opens a server that a conversation's command runs on the
// conversation's sandboxed loopback (a dev server on :3000) through the
// MCP server's own HTTP port: Handler, mounted at forwardPrefix too,
// serves forwardPrefix + NAME/PORT/PATH as a reverse proxy to
// localhost:PORT/PATH in conversation NAME of the request's principal
// (the name bash_forward's URL gives: the conversation's name within the
// principal, as in resource URIs), behind the same authentication as
// /mcp. Two conversations that both listen on :3000 are two URLs. The
// forwarded request loses its Authorization header (the sandbox never
// sees the token) and gains X-Forwarded-For, -Host, -Proto and
// X-Forwarded-Prefix (forwardPrefix + NAME/PORT); its Host is
// localhost:PORT, which dev servers' host checks accept. The response's
// redirects to absolute paths and its cookies' paths are moved below
// the prefix (see underPrefix).
const (
	toolForward   = "bash_forward"
	forwardPrefix = "/forward/"
	// baseHeader carries, from Handler to bash_forward, the URL of the
	// request's own origin ("http://127.0.0.1:8765"): Handler sets it on
	// every request it serves (deleting one a client sent).
	baseHeader = "Bashvisor-Http-Base"
	// A browser cannot send the Authorization header: a forward path's
	// request without one may carry the token in the query parameter
	// forwardTokenParam, once, and is then redirected to the same URL
	// without it, with the token in the cookie forwardCookie (HttpOnly,
	// SameSite=Lax, Path the forward path's prefix), which later requests
	// of that prefix carry instead. Neither reaches the conversation's
	// server.
	forwardTokenParam = "bashvisor_token"
	forwardCookie     = "bashvisor_forward"
)

// forwarder is a Runner that connects into its conversations' sandboxed
// networks: Engine's Forward method.
type forwarder interface {
	Forward(ctx context.Context, conversationID string, port int) (net.Conn, error)
}

// servers maps each *mcp.Server that build made with Options.Forward to
// its *server, for Handler's forward paths. It keeps them (a program
// makes a few: one per working directory, say).
var servers sync.Map

// forwardInputSchema is bash_forward's input schema.
const forwardInputSchema = `{
  "type": "object",
  "properties": {
    "port": {"type": "integer", "minimum": 1, "maximum": 65535, "description": "The port a server of this conversation listens on (a result's [listening: …] note names them)."}
  },
  "required": ["port"],
  "additionalProperties": false
}`

// forwardOutputSchema is bash_forward's output schema.
const forwardOutputSchema = `{
  "type": "object",
  "properties": {
    "url": {"type": "string", "description": "The URL that serves the port to the user."},
    "port": {"type": "integer"}
  },
  "required": ["url", "port"]
}`

// forwardReply is bash_forward's structured content.
type forwardReply struct {
	URL  string `json:"url"`
	Port int    `json:"port"`
}

// addForward registers bash_forward when opts.Forward asks for it and r
// has Engine's Forward method.
func (s *server) addForward(ms *mcp.Server, r engine.Runner) {
	f, ok := r.(forwarder)
	if !ok || !s.o.Forward {
		return
	}
	servers.Store(ms, s)
	s.addTool(ms, toolForward, "Show a port to the user",
		"Give the user a URL for a server this conversation runs in its sandbox (its commands' localhost is private to the "+
			"conversation: the user cannot open localhost:PORT). Start the server first (mode \"background\"); the URL "+
			"forwards to localhost:PORT of this conversation only, for the user's browser or tools, with the MCP server's "+
			"authentication. An app that links to absolute paths (\"/assets/…\") needs its base path set to the URL's path.",
		forwardInputSchema, forwardOutputSchema, mcp.ToolAnnotations{},
		handle(s, parseForwardArgs, func(c *toolCall, port int) (*mcp.CallToolResult, error) {
			return s.forward(c, f, port)
		}))
}

// parseForwardArgs decodes bash_forward's arguments.
func parseForwardArgs(raw json.RawMessage) (int, error) {
	m, err := decodeObject(raw, "port")
	if err != nil {
		return 0, err
	}
	port, present, err := intField(m, "port")
	switch {
	case err != nil:
		return 0, err
	case !present:
		return 0, errors.New(`missing required field "port"`)
	case port < 1 || port > 65535:
		return 0, fmt.Errorf(`field "port" is %d: want 1 to 65535`, port)
	}
	return int(port), nil
}

// forward is bash_forward: it checks that something listens on the port,
// and returns the URL of its forward path.
func (s *server) forward(c *toolCall, f forwarder, port int) (*mcp.CallToolResult, error) {
	var base string
	if extra := c.req.GetExtra(); extra != nil && extra.Header != nil {
		base = extra.Header.Get(baseHeader)
	}
	if base == "" {
		return nil, fmt.Errorf("%w: bash_forward needs the MCP server served over HTTP (its URLs are paths of the server's HTTP port)", engine.ErrBadInput)
	}
	conn, err := f.Forward(c.ctx, c.tc.ConversationID, port)
	if err != nil {
		return nil, forwardError(port, err)
	}
	conn.Close()
	u := base + forwardPrefix + url.PathEscape(c.sc.name) + "/" + strconv.Itoa(port) + "/"
	text := u + "\nserves localhost:" + strconv.Itoa(port) + " of this conversation to the user, with the MCP server's credentials " +
		"(Authorization: Bearer …; in a browser, open it once with ?" + forwardTokenParam + "=TOKEN appended), while the server runs."
	return s.reply(c, text, forwardReply{URL: u, Port: port}), nil
}

// requestBase is the URL of r's own origin.
func requestBase(r *http.Request) string {
	if r.TLS != nil {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

// forwardError says why port of a conversation cannot be reached.
func forwardError(port int, err error) error {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%w: nothing listens on port %d in this conversation's sandbox (start the server first; a result's [listening: …] note names the ports)",
			engine.ErrBadInput, port)
	}
	return err
}

// forwardCredentials gives a request for a forward path without an
// Authorization header the bearer token of its forwardTokenParam or its
// forwardCookie as one (before authentication).
func forwardCredentials(r *http.Request) {
	if r.Header.Get("Authorization") != "" {
		return
	}
	if t := r.URL.Query().Get(forwardTokenParam); t != "" {
		r.Header.Set("Authorization", "Bearer "+t)
		return
	}
	if c, err := r.Cookie(forwardCookie); err == nil {
		if t, err := base64.RawURLEncoding.DecodeString(c.Value); err == nil && len(t) > 0 {
			r.Header.Set("Authorization", "Bearer "+string(t))
		}
	}
}

// setForwardCookie answers an authenticated request that carried its
// token in the query: the cookie, and a redirect to the URL without it.
func setForwardCookie(w http.ResponseWriter, r *http.Request, prefix string) {
	q := r.URL.Query()
	tok := q.Get(forwardTokenParam)
	q.Del(forwardTokenParam)
	http.SetCookie(w, &http.Cookie{Name: forwardCookie, Value: base64.RawURLEncoding.EncodeToString([]byte(tok)),
		Path: prefix + "/", HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil})
	u := *r.URL
	u.RawQuery = q.Encode()
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
}

// dropForwardCookie removes forwardCookie from a forwarded request.
func dropForwardCookie(h http.Header) {
	cs := (&http.Request{Header: h}).Cookies()
	h.Del("Cookie")
	var keep []string
	for _, c := range cs {
		if c.Name != forwardCookie {
			keep = append(keep, c.String())
		}
	}
	if len(keep) > 0 {
		h.Set("Cookie", strings.Join(keep, "; "))
	}
}

// serveForward serves a request for forwardPrefix + NAME/PORT/PATH of
// principal: see forwardPrefix.
func (h *httpHandler) serveForward(w http.ResponseWriter, r *http.Request, principal string) {
	// A forwarded response may stream for as long as the server sends.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	rest := strings.TrimPrefix(r.URL.EscapedPath(), forwardPrefix)
	escName, rest, _ := strings.Cut(rest, "/")
	portText, path, slash := strings.Cut(rest, "/")
	name, err := url.PathUnescape(escName)
	port, perr := strconv.Atoi(portText)
	if err != nil || perr != nil || port < 1 || port > 65535 || !validName(name) {
		http.Error(w, "Not Found: want "+forwardPrefix+"CONVERSATION/PORT/", http.StatusNotFound)
		return
	}
	prefix := forwardPrefix + escName + "/" + portText
	if !slash {
		u := *r.URL
		u.Path, u.RawPath = "", ""
		http.Redirect(w, r, prefix+"/"+u.String(), http.StatusPermanentRedirect)
		return
	}
	if r.URL.Query().Has(forwardTokenParam) {
		setForwardCookie(w, r, prefix)
		return
	}
	v, ok := servers.Load(h.server(r))
	if !ok {
		http.Error(w, "Not Found: this server does not forward ports", http.StatusNotFound)
		return
	}
	sv := v.(*server)
	f := sv.e.(forwarder) // addForward checked
	conv := sv.conversationID(principal, true, name)
	target := "localhost:" + portText
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", target
			pr.Out.URL.RawPath = "/" + path
			pr.Out.URL.Path, _ = url.PathUnescape(pr.Out.URL.RawPath)
			pr.Out.Host = target
			pr.Out.Header.Del("Authorization")
			dropForwardCookie(pr.Out.Header)
			pr.SetXForwarded()
			pr.Out.Header.Set("X-Forwarded-Prefix", prefix)
		},
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return f.Forward(ctx, conv, port)
			},
			DisableKeepAlives: true, // one transport per request
		},
		ModifyResponse: func(resp *http.Response) error {
			underPrefix(resp.Header, prefix)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			code := http.StatusBadGateway
			if errors.Is(err, engine.ErrBadInput) && !errors.Is(err, syscall.ECONNREFUSED) {
				code = http.StatusNotFound // no such conversation (or it has no sandbox)
			}
			http.Error(w, http.StatusText(code)+": "+forwardError(port, err).Error(), code)
		},
	}
	rp.ServeHTTP(w, r)
}

// underPrefix keeps a forwarded response within its forward path: a
// redirect to an absolute path of the server (Location: /login) goes to
// that path below prefix, and a cookie the server sets for a path (Path=/
// by default in effect) is set for that path below prefix, so that it
// never reaches another conversation's server, nor another port's.
func underPrefix(h http.Header, prefix string) {
	if loc := h.Get("Location"); strings.HasPrefix(loc, "/") && !strings.HasPrefix(loc, "//") {
		h.Set("Location", prefix+loc)
	}
	cookies := (&http.Response{Header: h}).Cookies()
	if len(cookies) == 0 {
		return
	}
	h.Del("Set-Cookie")
	for _, c := range cookies {
		if c.Name == forwardCookie {
			continue // the server cannot replace the credentials' cookie
		}
		p := c.Path
		if !strings.HasPrefix(p, "/") {
			p = "/"
		}
		c.Path = prefix + p
		h.Add("Set-Cookie", c.String())
	}
}

// validName reports whether name can name a conversation within a
// principal: a client's name, or a session's.
func validName(name string) bool {
	if s, ok := strings.CutPrefix(name, sessionMark); ok {
		_, err := strconv.ParseUint(s, 16, 64)
		return len(s) == 16 && err == nil
	}
	return conversationRE.MatchString(name)
}
