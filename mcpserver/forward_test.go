package mcpserver

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// echoServer is a command that serves, on localhost:3000 of its
// conversation, a page that names the conversation (word), the path, and
// the headers the forward path sets or must drop.
const echoServer = `cat > /tmp/echo.py <<'EOF'
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(s):
        if s.path == "/login":
            s.send_response(302); s.send_header("Location", "/home"); s.send_header("Set-Cookie", "sid=1; Path=/")
            s.send_header("Set-Cookie", "bashvisor_forward=forged"); s.send_header("Content-Length", "0"); s.end_headers(); return
        b = ("%s %s auth=%s host=%s prefix=%s cookie=%s\n" % (sys.argv[1], s.path, s.headers.get("Authorization"),
             s.headers.get("Host"), s.headers.get("X-Forwarded-Prefix"), s.headers.get("Cookie"))).encode()
        s.send_response(200); s.send_header("Content-Length", str(len(b))); s.send_header("Service-Worker-Allowed", "/")
        s.end_headers(); s.wfile.write(b)
    def log_message(s, *a): pass
http.server.HTTPServer(("127.0.0.1", 3000), H).serve_forever()
EOF
exec python3 /tmp/echo.py `

// newForwardSetup serves a read-only sandboxed server with Forward on
// /mcp of one test HTTP server and /forward/ of another (the forward
// origin), for the principals alice (token tok-alice-0123456789) and bob
// (tok-bob-0123456789ab). The first serves /forward/ too, which must
// refuse: it is not the forward origin.
func newForwardSetup(t *testing.T) (ts, fts *httptest.Server, tr *http.Transport, hs *httpSetup) {
	t.Helper()
	return newForwardSetupTokens(t, new(sync.Map))
}

// newForwardSetupTokens is newForwardSetup with tokens (token → principal,
// alice's and bob's stored in it), which the test may change. Its
// transport dials the forward origin's listener for any *.localhost host.
func newForwardSetupTokens(t *testing.T, tokens *sync.Map) (ts, fts *httptest.Server, tr *http.Transport, hs *httpSetup) {
	t.Helper()
	tokens.Store("tok-alice-0123456789", "alice")
	tokens.Store("tok-bob-0123456789ab", "bob")
	return newForwardSetupVerifier(t, func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		if p, ok := tokens.Load(token); ok {
			return &auth.TokenInfo{UserID: p.(string), Expiration: time.Now().Add(time.Hour)}, nil
		}
		return nil, auth.ErrInvalidToken
	})
}

// newForwardSetupVerifier is newForwardSetup with verify for its
// authentication.
func newForwardSetupVerifier(t testing.TB, verify auth.TokenVerifier) (ts, fts *httptest.Server, tr *http.Transport, hs *httpSetup) {
	t.Helper()
	needLandlock(t)
	testenv.Needf(t, testenv.Namespaces, sandbox.Probe().Namespaces, "no private namespaces: %s", sandbox.Probe())
	testenv.NeedsTool(t, "python3", "curl")
	e := newEngine(t, nil)
	fmux := http.NewServeMux()
	fts = httptest.NewUnstartedServer(fmux)
	srv := New(e, Options{WorkingDir: t.TempDir(), Sandbox: engine.Sandbox{Profile: engine.ReadOnly}, Forward: "http://" + fts.Listener.Addr().String()})
	closeSessionsAtCleanup(t, srv)
	h := Handler(srv, HTTPOptions{Verifier: verify})
	fmux.Handle(forwardPrefix, h)
	fmux.Handle("/mcp", h) // a mistake Handler refuses
	fts.Start()
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle(forwardPrefix, h)
	ts = httptest.NewServer(mux)
	tr = &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, port, _ := net.SplitHostPort(addr); strings.HasSuffix(host, ".localhost") {
			addr = net.JoinHostPort("127.0.0.1", port) // as browsers resolve it
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	t.Cleanup(func() {
		for _, s := range []*httptest.Server{ts, fts} {
			s.CloseClientConnections()
			s.Close()
		}
		tr.CloseIdleConnections()
	})
	hs = &httpSetup{ts: ts, tr: tr, url: ts.URL + "/mcp"}
	return ts, fts, tr, hs
}

// startServing runs command in the background in a new session of alice
// and waits until the conversation's port 3000 answers; it returns the
// session.
func startServing(t testing.TB, hs *httpSetup, command string) *mcp.ClientSession {
	t.Helper()
	return startServingAs(t, hs, "tok-alice-0123456789", command)
}

// startServingAs is startServing in a session of token's principal.
func startServingAs(t testing.TB, hs *httpSetup, token, command string) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	cs := hs.client(t, token)
	if r := bash(t, ctx, cs, map[string]any{"command": command, "mode": "background"}); r.Status != engine.StatusStarted {
		t.Fatalf("server: %+v", r)
	}
	r := bash(t, ctx, cs, map[string]any{"command": "for i in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/3000) 2>/dev/null && exit 0; sleep 0.1; done; exit 7"})
	if r.Status != engine.StatusOK || len(r.Listening) != 1 || r.Listening[0].Port != 3000 || !strings.Contains(r.Output, "[listening: 3000 (job-1)]") {
		t.Fatalf("the conversation's server: %+v", r)
	}
	return cs
}

// forwardClient does requests of the forward tests without following
// redirects.
type forwardClient struct {
	t  testing.TB
	tr *http.Transport
}

// do sends a GET of u with token's Authorization header (none when ""),
// and the headers hdr ("Name: value" each), and returns the response and
// its body.
func (fc forwardClient) do(u, token string, hdr ...string) (*http.Response, string) {
	fc.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for _, h := range hdr {
		k, v, _ := strings.Cut(h, ": ")
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Add(k, v)
		}
	}
	resp, err := (&http.Client{Transport: fc.tr, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		fc.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// forwardURL calls bash_forward for port 3000 in cs and returns its URL
// without the code, and the code.
func forwardURL(t testing.TB, cs *mcp.ClientSession, fts *httptest.Server) (u, code string) {
	t.Helper()
	var fr forwardReply
	res, text := call(t, context.Background(), cs, toolForward, map[string]any{"port": 3000}, &fr)
	u, code, _ = strings.Cut(fr.URL, "?"+forwardCodeParam+"=")
	_, port, _ := net.SplitHostPort(fts.Listener.Addr().String())
	origin, _ := forwardSplit(u)
	if res.IsError || !strings.HasPrefix(origin, "http://fw-") || !strings.HasSuffix(origin, ".localhost:"+port) ||
		!strings.HasPrefix(u, origin+"/forward/~") || !strings.HasSuffix(u, "/3000/") || len(code) < 20 ||
		!strings.HasPrefix(text, fr.URL+"\n") || strings.Contains(text, "tok-alice") {
		t.Fatalf("bash_forward: %v %q %+v", res.IsError, text, fr)
	}
	return u, code
}

// forwardSplit splits a forward URL into its origin and its path's
// prefix (without the trailing slash).
func forwardSplit(u string) (origin, prefix string) {
	i := strings.Index(u, forwardPrefix)
	return u[:i], strings.TrimSuffix(strings.SplitN(u[i:], "?", 2)[0], "/")
}

// grantCookie returns the forwardCookie resp sets, or nil.
func grantCookie(resp *http.Response) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == forwardCookie {
			return c
		}
	}
	return nil
}

// TestForwardHTTP: two sessions (two conversations) of alice each serve
// on port 3000 of their sandbox; bash_forward gives each a URL of the
// forward origin (not /mcp's) that reaches its own server, with alice's
// token only: without it the answer is 401, bob's token finds no such
// conversation, and the forwarded request carries no Authorization
// header. A browser opens the URL's one-time code once and gets a random
// grant's cookie for that path only. A port nothing listens on is an
// error result of bash_forward and 502 on the path. The server's
// redirects and cookies stay below its forward path. /mcp's origin
// serves no forward path.
func TestForwardHTTP(t *testing.T) {
	ts, fts, tr, hs := newForwardSetup(t)
	fc := forwardClient{t, tr}
	get := func(u, token string) (int, string) {
		t.Helper()
		resp, body := fc.do(u, token)
		return resp.StatusCode, body
	}
	ctx := context.Background()
	urls, grants := map[string]string{}, map[string]*http.Cookie{}
	for _, word := range []string{"first", "second"} {
		cs := startServing(t, hs, echoServer+word)
		u, code := forwardURL(t, cs, fts)
		urls[word] = u
		res, text := call(t, ctx, cs, toolForward, map[string]any{"port": 3001}, nil)
		if !res.IsError || !strings.Contains(text, "nothing listens on port 3001") {
			t.Errorf("bash_forward to a port nothing listens on: %v %q", res.IsError, text)
		}
		origin, prefix := forwardSplit(u)
		want := word + " /a/b%20c?q=1 auth=None host=localhost:3000 prefix=" + prefix + " cookie=None\n"
		if code, body := get(u+"a/b%20c?q=1", "tok-alice-0123456789"); code != 200 || body != want {
			t.Errorf("GET %s: %d %q, want %q", u, code, body, want)
		}
		if code, body := get(ts.URL+prefix+"/", "tok-alice-0123456789"); code != http.StatusForbidden {
			t.Errorf("a forward path at /mcp's origin: %d %q", code, body)
		}
		if resp, _ := fc.do(u+"login", "tok-alice-0123456789"); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != prefix+"/home" ||
			len(resp.Cookies()) != 1 || resp.Cookies()[0].Name != "sid" || resp.Cookies()[0].Path != prefix+"/" {
			t.Errorf("a redirect and a cookie of the server: %d %q %v", resp.StatusCode, resp.Header.Get("Location"), resp.Header["Set-Cookie"])
		}
		if code, body := get(u+"a", ""); code != http.StatusUnauthorized {
			t.Errorf("without a token: %d %q", code, body)
		}
		// A browser: the code once, then the cookie.
		resp, _ := fc.do(u+"a?x=1&"+forwardCodeParam+"="+code, "")
		cookie := grantCookie(resp)
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != prefix+"/a?x=1" || cookie == nil ||
			!cookie.HttpOnly || cookie.Path != prefix+"/" || cookie.SameSite != http.SameSiteLaxMode || cookie.Value == code ||
			strings.Contains(cookie.Value, "tok-alice") {
			t.Fatalf("the code: %d %q %+v", resp.StatusCode, loc, cookie)
		}
		grants[word] = cookie
		if resp, _ := fc.do(u+"?"+forwardCodeParam+"="+code, ""); resp.StatusCode != http.StatusUnauthorized || grantCookie(resp) != nil {
			t.Errorf("the code a second time: %d %v", resp.StatusCode, resp.Header["Set-Cookie"])
		}
		want = word + " /a?x=1 auth=None host=localhost:3000 prefix=" + prefix + " cookie=theme=dark\n"
		if resp, body := fc.do(origin+prefix+"/a?x=1", "", "Cookie: theme=dark; "+cookie.Name+"="+cookie.Value); resp.StatusCode != 200 || body != want {
			t.Errorf("with the cookie: %d %q, want %q", resp.StatusCode, body, want)
		}
		if resp, body := fc.do(fts.URL+prefix+"/a", "", "Cookie: "+cookie.Name+"="+cookie.Value); resp.StatusCode != http.StatusForbidden {
			t.Errorf("the cookie at the forward origin's own host: %d %q", resp.StatusCode, body)
		}
		if resp, _ := fc.do(u+"a", "", "Cookie: "+forwardCookie+"=tok-alice-0123456789"); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("with the token as the cookie: %d", resp.StatusCode)
		}
		if code, body := get(u+"a", "tok-bob-0123456789ab"); code != http.StatusNotFound || strings.Contains(body, word) {
			t.Errorf("another principal's token: %d %q", code, body)
		}
		if code, _ := get(strings.TrimSuffix(u, "/"), "tok-alice-0123456789"); code != http.StatusPermanentRedirect {
			t.Errorf("without the trailing slash: %d, want a redirect", code)
		}
		if code, body := get(strings.Replace(u, "/3000/", "/3001/", 1), "tok-alice-0123456789"); code != http.StatusBadGateway || !strings.Contains(body, "nothing listens on port 3001") {
			t.Errorf("a port nothing listens on: %d %q", code, body)
		}
	}
	if urls["first"] == urls["second"] {
		t.Fatalf("two conversations got one URL: %s", urls["first"])
	}
	// A grant opens its own forward only.
	if resp, body := fc.do(urls["second"], "", "Cookie: "+forwardCookie+"="+grants["first"].Value); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the first forward's cookie on the second: %d %q", resp.StatusCode, body)
	}
	if code, _ := get(fts.URL+"/forward/nope/3000/", "tok-alice-0123456789"); code != http.StatusNotFound {
		t.Errorf("a conversation that does not exist: %d", code)
	}
	if code, _ := get(fts.URL+"/forward/..%2f/3000/", "tok-alice-0123456789"); code != http.StatusNotFound {
		t.Errorf("a malformed conversation name: %d", code)
	}
}

// TestForwardBrowserAttacks: what a web page (a forwarded one, or
// another site) may try against a forward: a Host of its own (DNS
// rebinding) is refused 403, as is a service worker's script, and the
// response's Service-Worker-Allowed is dropped; a cross-site fetch is
// refused while a cross-site link (a top-level navigation) with a code
// opens the forward; a code sent beside an Authorization header sets no
// cookie (a cookie is only ever the server's own grant) and never reaches
// the conversation's server; a forwarded page cannot call /mcp (another
// origin), nor /mcp mounted at the forward origin by mistake.
func TestForwardBrowserAttacks(t *testing.T) {
	ts, fts, tr, hs := newForwardSetup(t)
	fc := forwardClient{t, tr}
	cs := startServing(t, hs, echoServer+"page")
	u, code := forwardURL(t, cs, fts)
	const alice = "tok-alice-0123456789"
	host := strings.TrimPrefix(fts.URL, "http://")
	for _, c := range []struct {
		what string
		hdr  []string
	}{
		{"another Host", []string{"Host: evil.example" + host[strings.Index(host, ":"):]}},
		{"a service worker's script", []string{"Service-Worker: script"}},
		{"a cross-site fetch", []string{"Origin: http://evil.example", "Sec-Fetch-Site: cross-site", "Sec-Fetch-Mode: cors", "Sec-Fetch-Dest: empty"}},
		{"a cross-site frame", []string{"Sec-Fetch-Site: cross-site", "Sec-Fetch-Mode: navigate", "Sec-Fetch-Dest: iframe"}},
	} {
		if resp, body := fc.do(u+"sw.js", alice, c.hdr...); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d %q", c.what, resp.StatusCode, body)
		}
	}
	resp, body := fc.do(u+"?"+forwardCodeParam+"=attacker-chosen", alice)
	if resp.StatusCode != 200 || resp.Header.Get("Set-Cookie") != "" || resp.Header.Get("Service-Worker-Allowed") != "" ||
		!strings.HasPrefix(body, "page / auth=None") {
		t.Errorf("a code beside the Authorization header: %d %v %q", resp.StatusCode, resp.Header, body)
	}
	nav := []string{"Sec-Fetch-Site: cross-site", "Sec-Fetch-Mode: navigate", "Sec-Fetch-Dest: document"}
	resp, _ = fc.do(u+"?"+forwardCodeParam+"="+code, "", nav...)
	cookie := grantCookie(resp)
	if resp.StatusCode != http.StatusSeeOther || cookie == nil {
		t.Fatalf("a cross-site link: %d %v", resp.StatusCode, resp.Header)
	}
	if resp, body := fc.do(u, "", append(nav, "Cookie: "+forwardCookie+"="+cookie.Value)...); resp.StatusCode != 200 || !strings.HasPrefix(body, "page / ") {
		t.Errorf("the redirected cross-site navigation: %d %q", resp.StatusCode, body)
	}
	// The forwarded page's script calling /mcp, at /mcp's origin and at
	// its own (where /mcp is mounted by mistake).
	own, _ := forwardSplit(u)
	for _, origin := range []string{ts.URL, fts.URL, own} {
		req, _ := http.NewRequest(http.MethodPost, origin+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Origin", own)
		req.Header.Set("Sec-Fetch-Site", map[bool]string{true: "same-origin", false: "same-site"}[origin == own])
		req.Header.Set("Authorization", "Bearer "+alice) // even with the token
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(protocolVersionHeader, "2025-11-25")
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("a forwarded page calling %s/mcp: %d %.100q", origin, resp.StatusCode, b)
		}
	}
}

// TestForwardGrants: a code is good once, for its conversation and port,
// until forwardCodeTTL; a grant for its own, until forwardGrantTTL or
// revoked; the codes kept are bounded.
func TestForwardGrants(t *testing.T) {
	var f forwardGrants
	now := time.Now()
	g := forwardGrant{principal: "alice", name: "~a", port: 3000}
	withCookie := func(v string) *http.Request {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		r.AddCookie(&http.Cookie{Name: forwardCookie, Value: v})
		return r
	}
	if _, ok := f.exchange(f.code(g, now), "~a", 3001, now); ok {
		t.Error("a code for another port")
	}
	if _, ok := f.exchange(f.code(g, now), "~a", 3000, now.Add(forwardCodeTTL)); ok {
		t.Error("an expired code")
	}
	c := f.code(g, now)
	got, ok := f.exchange(c, "~a", 3000, now)
	if !ok || got.principal != "alice" {
		t.Fatalf("a code: %+v %v", got, ok)
	}
	cookie := f.issue(got, now)
	if cookie == c {
		t.Fatal("the cookie is the code")
	}
	if _, ok := f.exchange(c, "~a", 3000, now); ok {
		t.Error("a code twice")
	}
	if v, g, ok := f.grant(withCookie(cookie), "~a", 3000, now.Add(forwardGrantTTL-time.Second)); !ok || g.principal != "alice" || v != cookie {
		t.Errorf("the grant: %+v %v", g, ok)
	}
	for _, c := range []struct {
		name string
		port int
		at   time.Duration
	}{{"~b", 3000, 0}, {"~a", 3001, 0}, {"~a", 3000, forwardGrantTTL}} {
		if _, _, ok := f.grant(withCookie(cookie), c.name, c.port, now.Add(c.at)); ok {
			t.Errorf("the grant for %s/%d after %v", c.name, c.port, c.at)
		}
	}
	f.revoke(cookie)
	if _, _, ok := f.grant(withCookie(cookie), "~a", 3000, now); ok {
		t.Error("a revoked grant")
	}
	for range maxForwardGrants + 10 {
		f.code(g, now)
	}
	if n := len(f.codes); n != maxForwardGrants {
		t.Errorf("%d codes kept, want %d", n, maxForwardGrants)
	}
}

// TestForwardNeedsHTTP: without Options.Forward there is no bash_forward,
// and Handler serves no forward path; with it, over stdio (no HTTP port
// to forward on), the tool says so.
func TestForwardNeedsHTTP(t *testing.T) {
	s := newSetup(t, nil, Options{})
	lt, err := s.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range lt.Tools {
		if tool.Name == toolForward {
			t.Error("bash_forward offered without Options.Forward")
		}
	}
	mux := http.NewServeMux()
	mux.Handle(forwardPrefix, Handler(s.srv, HTTPOptions{Token: "tok-0123456789abcdef"}))
	ts := httptest.NewServer(mux)
	defer ts.Close()
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/forward/mcp/3000/", nil)
	req.Header.Set("Authorization", "Bearer tok-0123456789abcdef")
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a forward path of a server without Forward: %d, want 404", resp.StatusCode)
	}
	s = newSetup(t, nil, Options{Forward: "http://127.0.0.1:1"})
	res, text := call(t, context.Background(), s.cs, toolForward, map[string]any{"port": 3000}, nil)
	if !res.IsError || !strings.Contains(text, "needs the MCP server served over HTTP") {
		t.Errorf("bash_forward without HTTP: %v %q", res.IsError, text)
	}
}

// upgradeServer answers an Upgrade request on localhost:3000 with 101 and
// then echoes what it reads, upper-cased (a WebSocket's hot reload, in
// its shape).
const upgradeServer = `cat > /tmp/up.py <<'EOF'
import socket
l = socket.create_server(("127.0.0.1", 3000))
while True:
    c, _ = l.accept()
    req = b"x"
    while req and b"\r\n\r\n" not in req:
        d = c.recv(4096)
        req = req + d if d else b""
    if not req:
        c.close()
        continue
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
    while True:
        d = c.recv(4096)
        if not d: break
        c.sendall(d.upper())
    c.close()
EOF
exec python3 /tmp/up.py`

// TestForwardUpgrade: a forward path carries a protocol upgrade (a dev
// server's WebSocket) both ways.
func TestForwardUpgrade(t *testing.T) {
	_, ts, _, hs := newForwardSetup(t)
	cs := startServing(t, hs, upgradeServer)
	var fr forwardReply
	if res, text := call(t, context.Background(), cs, toolForward, map[string]any{"port": 3000}, &fr); res.IsError {
		t.Fatal(text)
	}
	c, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	origin, prefix := forwardSplit(fr.URL)
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer tok-alice-0123456789\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n",
		prefix+"/hmr", strings.TrimPrefix(origin, "http://"))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	fmt.Fprint(c, "reload please")
	got := make([]byte, len("RELOAD PLEASE"))
	if _, err := io.ReadFull(br, got); err != nil || string(got) != "RELOAD PLEASE" {
		t.Errorf("after the upgrade: %q %v", got, err)
	}
}

// TestForwardGrantDiesWithToken: a browser's code and grant live only as
// long as the bearer token of the bash_forward call that made them, as
// checked on each request: once the token names another principal, or
// is removed (from the token file, here the verifier's map), the cookie
// gets 401, and stays refused when the token comes back; a code made
// before is refused too.
func TestForwardGrantDiesWithToken(t *testing.T) {
	tokens := new(sync.Map)
	_, fts, tr, hs := newForwardSetupTokens(t, tokens)
	fc := forwardClient{t, tr}
	cs := startServing(t, hs, echoServer+"page")
	const alice = "tok-alice-0123456789"
	u, code := forwardURL(t, cs, fts)
	_, code2 := forwardURL(t, cs, fts)
	open := func(cookie *http.Cookie) int {
		resp, _ := fc.do(u, "", "Cookie: "+forwardCookie+"="+cookie.Value)
		return resp.StatusCode
	}
	resp, _ := fc.do(u+"?"+forwardCodeParam+"="+code, "")
	cookie := grantCookie(resp)
	if resp.StatusCode != http.StatusSeeOther || cookie == nil || open(cookie) != 200 {
		t.Fatalf("the code: %d %v", resp.StatusCode, cookie)
	}
	tokens.Store(alice, "bob") // the token file now gives it to bob
	if code := open(cookie); code != http.StatusUnauthorized {
		t.Errorf("the token names another principal: %d", code)
	}
	tokens.Store(alice, "alice")
	if code := open(cookie); code != http.StatusUnauthorized {
		t.Errorf("a revoked grant, its token back: %d", code)
	}
	resp, _ = fc.do(u+"?"+forwardCodeParam+"="+code2, "")
	cookie = grantCookie(resp)
	if resp.StatusCode != http.StatusSeeOther || cookie == nil || open(cookie) != 200 {
		t.Fatalf("the second code: %d %v", resp.StatusCode, cookie)
	}
	_, code3 := forwardURL(t, cs, fts)
	tokens.Delete(alice) // removed from -tokens
	if code := open(cookie); code != http.StatusUnauthorized {
		t.Errorf("the token removed: %d", code)
	}
	if resp, _ := fc.do(u+"?"+forwardCodeParam+"="+code3, ""); resp.StatusCode != http.StatusUnauthorized || grantCookie(resp) != nil {
		t.Errorf("a code of a removed token: %d %v", resp.StatusCode, resp.Header["Set-Cookie"])
	}
}

// TestForwardOwnOrigins: two forwards of one principal (two
// conversations' :3000) get two origins (hosts under .localhost), so a
// page of one cannot read the other with the grant the browser holds for
// it: a same-site fetch from the first origin to the second is refused,
// as is the second's cookie at the first's host, while each opens at its
// own; a host under .localhost that is no forward's is refused.
func TestForwardOwnOrigins(t *testing.T) {
	_, fts, tr, hs := newForwardSetup(t)
	fc := forwardClient{t, tr}
	var origins, prefixes []string
	var cookies []*http.Cookie
	for _, word := range []string{"first", "second"} {
		cs := startServing(t, hs, echoServer+word)
		u, code := forwardURL(t, cs, fts)
		origin, prefix := forwardSplit(u)
		resp, _ := fc.do(u+"?"+forwardCodeParam+"="+code, "")
		if grantCookie(resp) == nil {
			t.Fatalf("%s: the code: %d", word, resp.StatusCode)
		}
		origins, prefixes, cookies = append(origins, origin), append(prefixes, prefix), append(cookies, grantCookie(resp))
	}
	if origins[0] == origins[1] {
		t.Fatalf("two forwards share the origin %s", origins[0])
	}
	with := func(i int) string { return "Cookie: " + forwardCookie + "=" + cookies[i].Value }
	for i, word := range []string{"first", "second"} {
		if resp, body := fc.do(origins[i]+prefixes[i]+"/", "", with(i)); resp.StatusCode != 200 || !strings.HasPrefix(body, word+" /") {
			t.Errorf("%s at its origin: %d %q", word, resp.StatusCode, body)
		}
	}
	// The first forward's page fetches the second's URL (the browser
	// sends the second's cookie: same site under .localhost).
	if resp, body := fc.do(origins[1]+prefixes[1]+"/", "", with(1), "Origin: "+origins[0], "Sec-Fetch-Site: same-site",
		"Sec-Fetch-Mode: cors", "Sec-Fetch-Dest: empty"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("the first's page reading the second: %d %q", resp.StatusCode, body)
	}
	if resp, body := fc.do(origins[0]+prefixes[1]+"/", "", with(1)); resp.StatusCode != http.StatusForbidden || strings.Contains(body, "second /") {
		t.Errorf("the second at the first's host: %d %q", resp.StatusCode, body)
	}
	_, port, _ := net.SplitHostPort(fts.Listener.Addr().String())
	if resp, _ := fc.do("http://other.localhost:"+port+prefixes[0]+"/", "", with(0)); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a host under .localhost that is no forward's: %d", resp.StatusCode)
	}
}
