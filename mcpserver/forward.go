package mcpserver

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/engine"
)

// A person opens a server that a conversation's command runs on the
// conversation's sandboxed loopback (a dev server on :3000) through a
// forward origin of the MCP server, apart from /mcp's (Options.Forward,
// another port): Handler, mounted at forwardPrefix of that origin's
// listener, serves forwardPrefix + NAME/PORT/PATH as a reverse proxy to
// localhost:PORT/PATH in conversation NAME of the request's principal
// (the name bash_forward's URL gives: the conversation's name within the
// principal, as in resource URIs). A program authenticates as for /mcp
// (Authorization); a browser with the one-time code of bash_forward's
// URL, then a cookie (see forwardCodeParam). Two conversations that both
// listen on :3000 are two URLs. The forwarded request loses its
// Authorization header and the grant's cookie (the sandbox never sees
// either) and gains X-Forwarded-For, -Host, -Proto and
// X-Forwarded-Prefix (forwardPrefix + NAME/PORT); its Host is
// localhost:PORT, which dev servers' host checks accept. The response's
// redirects to absolute paths and its cookies' paths are moved below
// the prefix (see underPrefix), and it loses Service-Worker-Allowed.
//
// Forwarded pages are another origin than /mcp, so that a page cannot
// call /mcp as the person (the Origin check refuses it), and they see no
// bearer token: not in the URL, not in the cookie. Each forward (a
// principal's conversation and port) has an origin of its own, so that
// a page of one cannot read another the browser holds a grant for: the
// forward origin's host with a label in front, "fw-LABEL.localhost:PORT"
// for a loopback forward origin (browsers resolve *.localhost to
// loopback), "fw-LABEL.HOST:PORT" for a named host (which then needs
// wildcard DNS; the label is an HMAC of principal, conversation and port
// under a key of the process, so it says nothing of them). A browser's
// code and cookie work only at their forward's origin; a program with the
// Authorization header (which no browser adds on its own) may use any
// host of the forward origin, its own included. A
// forward origin at a non-loopback IP address cannot have subdomains:
// there all forwards share it (the grants' cookies are HttpOnly and bound
// to one path each, but one forward's page can read another's). No page
// may install a service worker.
const (
	toolForward   = "bash_forward"
	forwardPrefix = "/forward/"
)

// Over stdio (one principal, no token), a program serves the forward
// paths on the forward origin's listener alone with Handler and
// HTTPOptions.NoAuth: a browser then gets in with bash_forward's one-time
// code only (the stdio session's principal is no anonymous request's).
//
// forwarder is a Runner that connects into its conversations' sandboxed
// networks: Engine's Forward method.
type forwarder interface {
	Forward(ctx context.Context, conversationID string, port int) (net.Conn, error)
}

// servers maps each *mcp.Server that build made with Options.Forward to
// its *forwarding, for Handler's forward paths. It keeps them (a program
// makes a few: one per working directory, say).
var servers sync.Map

// forwarding is a server with Options.Forward: its forwarder, host (the
// forward origin's host and port, the only Host its forward paths answer)
// and grants.
type forwarding struct {
	s      *server
	f      forwarder
	base   string // Options.Forward without a trailing slash
	scheme string
	host   string
	domain string // what forwards' own hosts end with ("" : none, they share host)
	port   string // host's port, with its colon, or ""
	key    []byte // of the forwards' labels
	grants forwardGrants
	// served is set once Handler serves s: its forward paths may then be
	// reached (over stdio too, with a Handler on the forward origin's
	// listener only).
	served atomic.Bool
}

// forwardDomain is the domain and port (":8766", or "") that the hosts
// of the forwards of a forward origin at host end with: "localhost" for a
// loopback address, host's name, or "" for another IP address.
func forwardDomain(host string) (domain, port string) {
	name, p, err := net.SplitHostPort(host)
	if err != nil {
		name, p = host, ""
	}
	if p != "" {
		p = ":" + p
	}
	name = strings.ToLower(strings.Trim(name, "[]"))
	if ip, err := netip.ParseAddr(name); err == nil {
		if !ip.IsLoopback() {
			return "", p
		}
		name = "localhost"
	}
	return name, p
}

// isForwardHost reports whether host is forwardHost (a forward origin's
// host) or the host of one of its forwards.
func isForwardHost(host, forwardHost string) bool {
	if strings.EqualFold(host, forwardHost) {
		return true
	}
	domain, port := forwardDomain(forwardHost)
	label, ok := strings.CutSuffix(strings.ToLower(host), "."+domain+port)
	return domain != "" && ok && strings.HasPrefix(label, "fw-") && !strings.Contains(label, ".")
}

// originHost is the host of the origin of principal's forward of port in
// conversation name (see forwardPrefix).
func (fw *forwarding) originHost(principal, name string, port int) string {
	if fw.domain == "" {
		return fw.host
	}
	m := hmac.New(sha256.New, fw.key)
	fmt.Fprintf(m, "%s\x00%s\x00%d", principal, name, port)
	label := strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(m.Sum(nil)[:10]))
	return "fw-" + label + "." + fw.domain + fw.port
}

// atOrigin reports whether host is that of principal's forward of port
// in conversation name.
func (fw *forwarding) atOrigin(host, principal, name string, port int) bool {
	return strings.EqualFold(host, fw.originHost(principal, name, port))
}

// forbiddenHost answers a browser's request of a forward at another
// forward's origin, or at the forward origin's own host.
func forbiddenHost(w http.ResponseWriter, fw *forwarding, principal, name string, port int) {
	http.Error(w, "Forbidden: this forward is served at "+fw.scheme+"://"+fw.originHost(principal, name, port)+" only", http.StatusForbidden)
}

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
	if !ok || s.o.Forward == "" {
		return
	}
	base := strings.TrimSuffix(s.o.Forward, "/")
	u, err := url.Parse(base)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || (u.Path != "" && u.Path != "/") {
		panic(fmt.Sprintf("mcpserver.New: Options.Forward %q is not an origin's URL (http://HOST:PORT)", s.o.Forward))
	}
	fw := &forwarding{s: s, f: f, base: base, scheme: u.Scheme, host: u.Host, key: make([]byte, 32)}
	fw.domain, fw.port = forwardDomain(u.Host)
	_, _ = rand.Read(fw.key)
	servers.Store(ms, fw)
	s.addTool(ms, toolForward, "Show a port to the user",
		"Give the user a URL for a server this conversation runs in its sandbox (its commands' localhost is private to the "+
			"conversation: the user cannot open localhost:PORT). Start the server first (mode \"background\"); the URL "+
			"forwards to localhost:PORT of this conversation only, for the user's browser (the link works once, within 10 minutes: "+
			"call again for a new one) or tools (with the MCP server's Authorization header). An app that links to absolute paths "+
			"(\"/assets/…\") needs its base path set to the URL's path.",
		forwardInputSchema, forwardOutputSchema, mcp.ToolAnnotations{},
		handle(s, parseForwardArgs, func(c *toolCall, port int) (*mcp.CallToolResult, error) {
			return fw.forward(c, port)
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
// and returns the URL of its forward path with a new one-time code.
func (fw *forwarding) forward(c *toolCall, port int) (*mcp.CallToolResult, error) {
	if !fw.served.Load() {
		return nil, fmt.Errorf("%w: bash_forward needs the MCP server served over HTTP, or its forward paths served (by Handler, on the Forward origin's listener)", engine.ErrBadInput)
	}
	var header http.Header
	if extra := c.req.GetExtra(); extra != nil {
		header = extra.Header
	}
	conn, err := fw.f.Forward(c.ctx, c.tc.ConversationID, port)
	if err != nil {
		return nil, forwardError(port, err)
	}
	conn.Close()
	path := forwardPrefix + url.PathEscape(c.sc.name) + "/" + strconv.Itoa(port) + "/"
	u := fw.scheme + "://" + fw.originHost(c.sc.principal, c.sc.name, port) + path
	g := forwardGrant{principal: c.sc.principal, name: c.sc.name, conv: c.tc.ConversationID, port: port, token: bearerToken(header)}
	code := fw.grants.code(g, time.Now())
	u += "?" + forwardCodeParam + "=" + code
	text := u + "\nserves localhost:" + strconv.Itoa(port) + " of this conversation to the user, while the server runs. " +
		"Give the user this link: it opens in a browser once, within " + forwardCodeTTL.String() + " (call bash_forward again for another). " +
		"Programs use " + fw.base + path + " with the MCP server's Authorization header."
	return fw.s.reply(c, text, forwardReply{URL: u, Port: port}), nil
}

// forwardError says why port of a conversation cannot be reached.
func forwardError(port int, err error) error {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%w: nothing listens on port %d in this conversation's sandbox (start the server first; a result's [listening: …] note names the ports)",
			engine.ErrBadInput, port)
	}
	return err
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

// serveForwardPath serves a request of a forward path, before
// authentication: see forwardPrefix. A request with an Authorization
// header is authenticated as for /mcp; one without it needs a one-time
// code or a grant's cookie. Without authentication (NoAuth: the forwards
// of a stdio server) an Authorization header counts for nothing, since
// every such request would be the anonymous principal's.
func (h *httpHandler) serveForwardPath(w http.ResponseWriter, r *http.Request) {
	if why := forwardRefusal(r, h.opts.AllowedOrigins); why != "" {
		h.opts.Logger.Warn("refused a forward request", "why", why, "origin", r.Header.Get("Origin"), "host", r.Host)
		w.Header().Set("Connection", "close")
		http.Error(w, "Forbidden: "+why, http.StatusForbidden)
		return
	}
	if r.Header.Get("Authorization") != "" && !h.opts.NoAuth {
		h.authn.ServeHTTP(w, r) // then serve, then serveForward
		return
	}
	h.serveForward(w, r, "")
}

// serveForward serves a request for forwardPrefix + NAME/PORT/PATH of
// principal, or of a browser's code or grant when principal is "".
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
	v, ok := servers.Load(h.server(r))
	if !ok {
		http.Error(w, "Not Found: this server does not forward ports", http.StatusNotFound)
		return
	}
	fw := v.(*forwarding)
	conv := "" // the grant's, or principal's conversation name
	if !isForwardHost(r.Host, fw.host) {
		// Only at the forward origin: never /mcp's.
		http.Error(w, "Forbidden: forward paths are served at "+fw.base+" only", http.StatusForbidden)
		return
	}
	if principal == "" {
		if r.URL.Query().Has(forwardCodeParam) {
			h.exchangeCode(w, r, fw, prefix, name, port)
			return
		}
		cookie, g, ok := fw.grants.grant(r, name, port, time.Now())
		switch {
		case !ok:
			unauthorized(w, "open the link bash_forward gave (it works once), or send the Authorization header")
			return
		case !fw.atOrigin(r.Host, g.principal, name, port):
			forbiddenHost(w, fw, g.principal, name, port)
			return
		case !h.stillGranted(r, g):
			fw.grants.revoke(cookie) // for good, even if the token comes back
			unauthorized(w, "the credentials this link was made with are no longer valid")
			return
		}
		principal, conv = g.principal, g.conv
	}
	if conv == "" {
		conv = fw.s.conversationID(principal, true, name)
	}
	target := "localhost:" + portText
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", target
			pr.Out.URL.RawPath = "/" + path
			pr.Out.URL.Path, _ = url.PathUnescape(pr.Out.URL.RawPath)
			pr.Out.Host = target
			pr.Out.Header.Del("Authorization")
			if q := pr.Out.URL.Query(); q.Has(forwardCodeParam) {
				q.Del(forwardCodeParam)
				pr.Out.URL.RawQuery = q.Encode()
			}
			dropForwardCookie(pr.Out.Header)
			pr.SetXForwarded()
			pr.Out.Header.Set("X-Forwarded-Prefix", prefix)
		},
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return fw.f.Forward(ctx, conv, port)
			},
			DisableKeepAlives: true, // one transport per request
		},
		ModifyResponse: func(resp *http.Response) error {
			underPrefix(resp.Header, prefix)
			resp.Header.Del("Service-Worker-Allowed")
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
	return validConversationName(name)
}
