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
        s.send_response(200); s.send_header("Content-Length", str(len(b))); s.end_headers(); s.wfile.write(b)
    def log_message(s, *a): pass
http.server.HTTPServer(("127.0.0.1", 3000), H).serve_forever()
EOF
exec python3 /tmp/echo.py `

// newForwardSetup serves a read-only sandboxed server with Forward on
// /mcp and /forward/ of a test HTTP server, for the principals alice
// (token tok-alice-0123456789) and bob (tok-bob-0123456789ab).
func newForwardSetup(t *testing.T) (*httptest.Server, *http.Transport, *httpSetup) {
	t.Helper()
	needLandlock(t)
	testenv.Needf(t, testenv.Namespaces, sandbox.Probe().Namespaces, "no private namespaces: %s", sandbox.Probe())
	testenv.NeedsTool(t, "python3", "curl")
	e := newEngine(t, nil)
	tokens := map[string]string{"tok-alice-0123456789": "alice", "tok-bob-0123456789ab": "bob"}
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		if p, ok := tokens[token]; ok {
			return &auth.TokenInfo{UserID: p, Expiration: time.Now().Add(time.Hour)}, nil
		}
		return nil, auth.ErrInvalidToken
	}
	srv := New(e, Options{WorkingDir: t.TempDir(), Sandbox: engine.Sandbox{Profile: engine.ReadOnly}, Forward: true})
	h := Handler(srv, HTTPOptions{Verifier: verify})
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle(forwardPrefix, h)
	ts := httptest.NewServer(mux)
	tr := &http.Transport{}
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
		tr.CloseIdleConnections()
	})
	hs := &httpSetup{ts: ts, tr: tr, url: ts.URL + "/mcp"}
	return ts, tr, hs
}

// startServing runs command in the background in a new session of alice
// and waits until the conversation's port 3000 answers; it returns the
// session.
func startServing(t *testing.T, hs *httpSetup, command string) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	cs := hs.client(t, "tok-alice-0123456789")
	if r := bash(t, ctx, cs, map[string]any{"command": command, "mode": "background"}); r.Status != engine.StatusStarted {
		t.Fatalf("server: %+v", r)
	}
	r := bash(t, ctx, cs, map[string]any{"command": "for i in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/3000) 2>/dev/null && exit 0; sleep 0.1; done; exit 7"})
	if r.Status != engine.StatusOK || len(r.Listening) != 1 || r.Listening[0].Port != 3000 || !strings.Contains(r.Output, "[listening: 3000 (job-1)]") {
		t.Fatalf("the conversation's server: %+v", r)
	}
	return cs
}

// TestForwardHTTP: two sessions (two conversations) of alice each serve
// on port 3000 of their sandbox; bash_forward gives each a URL of the
// MCP server's HTTP port that reaches its own server, with alice's token
// only: without it the answer is 401, bob's token finds no such
// conversation, and the forwarded request carries no Authorization
// header. A port nothing listens on is an error result of bash_forward
// and 502 on the path. The server's redirects and cookies stay below its
// forward path.
func TestForwardHTTP(t *testing.T) {
	ts, tr, hs := newForwardSetup(t)
	do := func(u, token, cookie string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	get := func(u, token string) (int, string) {
		t.Helper()
		resp, body := do(u, token, "")
		return resp.StatusCode, body
	}
	ctx := context.Background()
	urls := map[string]string{}
	for _, word := range []string{"first", "second"} {
		cs := startServing(t, hs, echoServer+word)
		var fr forwardReply
		res, text := call(t, ctx, cs, toolForward, map[string]any{"port": 3000}, &fr)
		if res.IsError || !strings.HasPrefix(fr.URL, ts.URL+"/forward/~") || !strings.HasSuffix(fr.URL, "/3000/") || !strings.HasPrefix(text, fr.URL+"\n") {
			t.Fatalf("bash_forward: %v %q %+v", res.IsError, text, fr)
		}
		urls[word] = fr.URL
		res, text = call(t, ctx, cs, toolForward, map[string]any{"port": 3001}, nil)
		if !res.IsError || !strings.Contains(text, "nothing listens on port 3001") {
			t.Errorf("bash_forward to a port nothing listens on: %v %q", res.IsError, text)
		}
	}
	if urls["first"] == urls["second"] {
		t.Fatalf("two conversations got one URL: %s", urls["first"])
	}
	for word, u := range urls {
		prefix := strings.TrimSuffix(strings.TrimPrefix(u, ts.URL), "/")
		want := word + " /a/b%20c?q=1 auth=None host=localhost:3000 prefix=" + prefix + " cookie=None\n"
		if code, body := get(u+"a/b%20c?q=1", "tok-alice-0123456789"); code != 200 || body != want {
			t.Errorf("GET %s: %d %q, want %q", u, code, body, want)
		}
		if resp, _ := do(u+"login", "tok-alice-0123456789", ""); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != prefix+"/home" ||
			len(resp.Cookies()) != 1 || resp.Cookies()[0].Name != "sid" || resp.Cookies()[0].Path != prefix+"/" {
			t.Errorf("a redirect and a cookie of the server: %d %q %v", resp.StatusCode, resp.Header.Get("Location"), resp.Header["Set-Cookie"])
		}
		if code, body := get(u+"a", ""); code != http.StatusUnauthorized {
			t.Errorf("without a token: %d %q", code, body)
		}
		// A browser: the token once in the query, then the cookie.
		resp, _ := do(u+"a?x=1&"+forwardTokenParam+"=tok-alice-0123456789", "", "")
		var cookie *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Name == forwardCookie {
				cookie = c
			}
		}
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != prefix+"/a?x=1" || cookie == nil ||
			!cookie.HttpOnly || cookie.Path != prefix+"/" || strings.Contains(cookie.Value, "tok-alice") {
			t.Errorf("the token in the query: %d %q %+v", resp.StatusCode, loc, cookie)
		} else {
			want := word + " /a?x=1 auth=None host=localhost:3000 prefix=" + prefix + " cookie=theme=dark\n"
			if resp, body := do(ts.URL+prefix+"/a?x=1", "", "theme=dark; "+cookie.Name+"="+cookie.Value); resp.StatusCode != 200 || body != want {
				t.Errorf("with the cookie: %d %q, want %q", resp.StatusCode, body, want)
			}
		}
		if resp, _ := do(u+"a", "", forwardCookie+"=bm90LWEtdG9rZW4"); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("with a cookie of another token: %d", resp.StatusCode)
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
	if code, _ := get(ts.URL+"/forward/nope/3000/", "tok-alice-0123456789"); code != http.StatusNotFound {
		t.Errorf("a conversation that does not exist: %d", code)
	}
	if code, _ := get(ts.URL+"/forward/..%2f/3000/", "tok-alice-0123456789"); code != http.StatusNotFound {
		t.Errorf("a malformed conversation name: %d", code)
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
	s = newSetup(t, nil, Options{Forward: true})
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
	ts, _, hs := newForwardSetup(t)
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
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer tok-alice-0123456789\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n",
		strings.TrimPrefix(fr.URL, ts.URL)+"hmr", ts.Listener.Addr())
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
