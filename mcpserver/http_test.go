package mcpserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/engine"
)

// withToken adds an Authorization header to every request.
type withToken struct {
	token string
	next  http.RoundTripper
}

func (b withToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

type httpSetup struct {
	ts  *httptest.Server
	tr  *http.Transport
	res *results
	url string
}

func newHTTPSetup(t *testing.T, hopts HTTPOptions) *httpSetup {
	t.Helper()
	return newHTTPSetupWith(t, nil, hopts)
}

func newHTTPSetupWith(t *testing.T, mod func(*engine.Config), hopts HTTPOptions) *httpSetup {
	t.Helper()
	e := newEngine(t, mod)
	h := &httpSetup{res: newResults(), tr: &http.Transport{}}
	srv := New(e, Options{WorkingDir: t.TempDir(), OnResult: h.res.add})
	closeSessionsAtCleanup(t, srv)
	mux := http.NewServeMux()
	mux.Handle("/mcp", Handler(srv, hopts))
	h.ts = httptest.NewServer(mux)
	h.url = h.ts.URL + "/mcp"
	t.Cleanup(func() {
		h.ts.CloseClientConnections()
		h.ts.Close()
		h.tr.CloseIdleConnections()
	})
	return h
}

// closeSessionsAtCleanup ends srv's sessions when the test ends: a test
// that opens a session with a raw initialize request never ends it, and
// the server keeps a session until its client ends it or it expires.
func closeSessionsAtCleanup(t testing.TB, srv *mcp.Server) {
	t.Cleanup(func() {
		for ss := range srv.Sessions() {
			ss.Close()
		}
	})
}

func (h *httpSetup) client(t testing.TB, token string) *mcp.ClientSession {
	t.Helper()
	var rt http.RoundTripper = h.tr
	if token != "" {
		rt = withToken{token, h.tr}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: h.url, HTTPClient: &http.Client{Transport: rt}}, legacy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// legacy makes a go-sdk client open a session (protocol 2025-11-25)
// instead of going stateless (2026-07-28, its default).
var legacy = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// post sends one raw MCP POST and returns the response with its body read.
func (h *httpSetup) post(t *testing.T, ctx context.Context, body string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := (&http.Client{Transport: h.tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestHTTPEndToEnd(t *testing.T) {
	h := newHTTPSetup(t, HTTPOptions{Token: "s3cret"})
	cs := h.client(t, "s3cret")
	ctx := context.Background()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil || len(lt.Tools) != 5 { // no bash_undo without workspace-write
		t.Fatalf("tools: %v %v", lt, err)
	}
	if r := bash(t, ctx, cs, map[string]any{"command": "echo over http"}); r.Status != engine.StatusOK || r.Output != "over http\n" {
		t.Fatalf("%+v", r)
	}
	h.res.wait(t, time.Second)
	if r := bash(t, ctx, cs, map[string]any{"command": "exit 4"}); r.Status != engine.StatusFailed {
		t.Fatalf("%+v", r)
	}
	h.res.wait(t, time.Second)

	// Cancellation through notifications/cancelled.
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	pids := startSleeper(t, cctx, cs, errc)
	cancel()
	<-errc
	if r := h.res.wait(t, 10*time.Second); r.Status != engine.StatusCancelled {
		t.Fatalf("after cancel: %+v", r)
	}
	waitDead(t, 5*time.Second, pids...)
}

func TestHTTPToken(t *testing.T) {
	h := newHTTPSetup(t, HTTPOptions{Token: "s3cret"})
	ctx := context.Background()
	for name, auth := range map[string]string{"none": "", "wrong": "Bearer nope", "prefix": "Bearer s3cre", "longer": "Bearer s3cret2", "basic": "Basic czNjcmV0", "bare": "s3cret"} {
		hdr := map[string]string{}
		if auth != "" {
			hdr["Authorization"] = auth
		}
		resp, _ := h.post(t, ctx, initializeBody, hdr)
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: status %d, WWW-Authenticate %q", name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	for _, auth := range []string{"Bearer s3cret", "bearer s3cret"} {
		resp, body := h.post(t, ctx, initializeBody, map[string]string{"Authorization": auth})
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"serverInfo"`) {
			t.Errorf("%q: status %d %s", auth, resp.StatusCode, body)
		}
	}
	// The go-sdk client without the token cannot connect.
	_, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: h.url, HTTPClient: &http.Client{Transport: h.tr}}, nil)
	if err == nil {
		t.Error("connected without the token")
	}
}

func TestHTTPOriginAndHost(t *testing.T) {
	h := newHTTPSetup(t, HTTPOptions{NoAuth: true, AllowedOrigins: []string{"https://app.example.com"}})
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		header map[string]string
		ok     bool
	}{
		{"no origin", nil, true},
		{"same origin", map[string]string{"Origin": h.ts.URL}, true},
		{"allowed origin", map[string]string{"Origin": "https://app.example.com"}, true},
		{"foreign origin", map[string]string{"Origin": "https://evil.example.com"}, false},
		{"null origin", map[string]string{"Origin": "null"}, false},
		{"other port", map[string]string{"Origin": "http://127.0.0.1:1"}, false},
		{"cross-site fetch", map[string]string{"Sec-Fetch-Site": "cross-site"}, false},
		{"DNS rebinding", map[string]string{"Host": "evil.example.com:80"}, false},
		{"rebinding with matching origin", map[string]string{"Host": "evil.example.com", "Origin": "http://evil.example.com"}, false},
	} {
		resp, body := h.post(t, ctx, initializeBody, c.header)
		if ok := resp.StatusCode == http.StatusOK; ok != c.ok {
			t.Errorf("%s: status %d %s", c.name, resp.StatusCode, body)
		} else if !ok && resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403", c.name, resp.StatusCode)
		}
	}
}

// A tool call whose HTTP request goes away (the client process died, the
// network dropped) is cancelled: the response could never be delivered.
func TestHTTPDroppedRequestCancels(t *testing.T) {
	h := newHTTPSetup(t, HTTPOptions{NoAuth: true})
	ctx := context.Background()
	resp, body := h.post(t, ctx, initializeBody, nil)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %q %s", resp.StatusCode, sid, body)
	}
	hdr := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	if resp, body := h.post(t, ctx, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdr); resp.StatusCode/100 != 2 {
		t.Fatalf("initialized: %d %s", resp.StatusCode, body)
	}
	pidfile := filepath.Join(t.TempDir(), "pids")
	call := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"sleep 300 & echo $$ $! > %s; wait","mode":"slow"}}}`, pidfile)
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(cctx, http.MethodPost, h.url, strings.NewReader(call))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		if resp, err := (&http.Client{Transport: h.tr}).Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	pids := readPids(t, pidfile, 2)
	cancel() // drops the connection; no notifications/cancelled is sent
	<-done
	if r := h.res.wait(t, 10*time.Second); r.Status != engine.StatusCancelled {
		t.Fatalf("after the request went away: %s %q", r.Status, r.Output)
	}
	waitDead(t, 5*time.Second, pids...)
}

func TestHTTPConcurrentCalls(t *testing.T) {
	h := newHTTPSetupWith(t, manySlots, HTTPOptions{NoAuth: true})
	parallelSleeps(t, h.client(t, ""), 50)
}

// Progress notifications reach the client in both HTTP modes: on the
// session's call stream, and on the stateless request's response.
func TestHTTPProgress(t *testing.T) {
	h := newHTTPSetup(t, HTTPOptions{NoAuth: true})
	for _, proto := range []string{"2025-11-25", "2026-07-28"} {
		var mu sync.Mutex
		var got []string
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
				mu.Lock()
				got = append(got, req.Params.Message)
				mu.Unlock()
			},
		}).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: h.url, HTTPClient: &http.Client{Transport: h.tr}},
			&mcp.ClientSessionOptions{ProtocolVersion: proto})
		if err != nil {
			t.Fatal(err)
		}
		if v := cs.InitializeResult().ProtocolVersion; v != proto {
			t.Errorf("negotiated %s, want %s", v, proto)
		}
		p := &mcp.CallToolParams{Name: toolBash, Arguments: map[string]any{"command": "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo step$i; sleep 0.2; done"}}
		p.SetProgressToken(7)
		if _, err := cs.CallTool(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		cs.Close()
		mu.Lock()
		// Options.ProgressInterval defaults to 1s: ~2.4 s gives 2 or 3.
		if len(got) < 2 || len(got) > 4 || !strings.Contains(got[len(got)-1], "last: step") {
			t.Errorf("%s: progress over HTTP: %q", proto, got)
		}
		mu.Unlock()
	}
}

// Approval over streamable HTTP: with a session, by elicitation (a
// server-to-client request on the call's stream); stateless, by an
// input-required result the client answers in a second call.
func TestHTTPApproval(t *testing.T) {
	e := newEngine(t, nil)
	srv := newServer(e, Options{WorkingDir: t.TempDir()}, askRunner(e))
	ts := httptest.NewServer(Handler(srv, HTTPOptions{NoAuth: true}))
	tr := &http.Transport{}
	defer func() {
		ts.CloseClientConnections()
		ts.Close()
		tr.CloseIdleConnections()
	}()
	for _, proto := range []string{"2025-11-25", "2026-07-28"} {
		for action, want := range map[string]engine.Status{"accept": engine.StatusOK, "decline": engine.StatusDenied} {
			el := &elicitor{action: action}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, &mcp.ClientOptions{ElicitationHandler: el.handle}).
				Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: ts.URL, HTTPClient: &http.Client{Transport: tr}},
					&mcp.ClientSessionOptions{ProtocolVersion: proto})
			if err != nil {
				t.Fatal(err)
			}
			r := bash(t, context.Background(), cs, map[string]any{"command": "ask:echo yes"})
			if r.Status != want || len(el.asked) != 1 {
				t.Errorf("%s %s: %s %q, asked %d times", proto, action, r.Status, r.Output, len(el.asked))
			}
			cs.Close()
		}
	}
}

// Stateless (2026-07-28): a call whose HTTP request goes away is
// cancelled too, its process group ended.
func TestHTTPStatelessDroppedRequestCancels(t *testing.T) {
	h := newHTTPSetup(t, HTTPOptions{NoAuth: true})
	pidfile := filepath.Join(t.TempDir(), "pids")
	call := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"bash","arguments":{"command":"sleep 300 & echo $$ $! > %s; wait","mode":"slow"}}}`, pidfile)
	cctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(cctx, http.MethodPost, h.url, strings.NewReader(call))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "bash")
		if resp, err := (&http.Client{Transport: h.tr}).Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	pids := readPids(t, pidfile, 2)
	cancel()
	<-done
	if r := h.res.wait(t, 10*time.Second); r.Status != engine.StatusCancelled {
		t.Fatalf("after the request went away: %s %q", r.Status, r.Output)
	}
	waitDead(t, 5*time.Second, pids...)
}

// The body bound is the go-sdk's: a body the SDK would refuse is refused
// here first, with the same status.
func TestMaxRequestBytes(t *testing.T) {
	if maxRequestBytes != mcp.DefaultMaxRequestBodyBytes {
		t.Fatalf("MaxRequestBytes %d, the go-sdk's %d", maxRequestBytes, mcp.DefaultMaxRequestBodyBytes)
	}
}
