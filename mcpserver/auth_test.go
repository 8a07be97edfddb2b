package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/bashvisor/bashvisor/mcpserver/bearer"
	"github.com/bashvisor/bashvisor/mcpserver/internal/authtest"
)

// Refusals: 401 with a Bearer challenge and Connection: close, for
// missing, malformed and unknown tokens; a Handler without any
// authentication configured panics.
func TestAuthRefusals(t *testing.T) {
	s := tenantServer(t, nil, Options{})
	for name, hdr := range map[string]string{"none": "", "unknown": "Bearer nope-0123456789abcdef", "basic": "Basic YWxpY2U6eA==", "bare": aliceToken, "prefix": "Bearer " + aliceToken[:len(aliceToken)-1]} {
		h := map[string]string{}
		if hdr != "" {
			h["Authorization"] = hdr
		}
		resp, _ := s.post(t, context.Background(), initializeBody, h)
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") || !resp.Close {
			t.Errorf("%s: %d %q close=%v", name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), resp.Close)
		}
	}
	resp, _ := s.post(t, context.Background(), initializeBody, map[string]string{"Authorization": "Bearer " + aliceToken})
	if resp.StatusCode != http.StatusOK || resp.Close || resp.Header.Get("WWW-Authenticate") != "" {
		t.Errorf("alice: %d close=%v %q", resp.StatusCode, resp.Close, resp.Header.Get("WWW-Authenticate"))
	}
	defer func() {
		if recover() == nil {
			t.Error("Handler without authentication did not panic")
		}
	}()
	Handler(New(s.e, Options{}), HTTPOptions{})
}

// OAuth 2.1 access tokens of a local issuer, next to a token file, through
// Handler: a verified token is served as principal "oauth:SUB" (a token
// the verifier refuses gets 401, one without the required scope 403, both
// naming the protected resource metadata, which names the issuer), and
// oauth:alice and the token file's alice are two principals.
func TestOAuth(t *testing.T) {
	is := authtest.NewIssuer(t)
	ctx := context.Background()
	// The server's URL must be known before the tokens: a listener first.
	e := newEngine(t, nil)
	mux := http.NewServeMux()
	ts := httptest.NewServer(mux)
	tr := &http.Transport{}
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close(); tr.CloseIdleConnections() })
	resource := ts.URL + "/mcp"
	cfg := bearer.OAuthConfig{Issuer: is.URL, Resource: resource, Scopes: []string{"bash"}}
	v, err := bearer.NewOAuthVerifier(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tf, err := bearer.OpenTokenFile(authtest.WriteTokens(t, "alice "+aliceToken+"\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	both := func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		ti, err := tf.Verify(ctx, token, r)
		if err == nil {
			return &auth.TokenInfo{UserID: ti.UserID, Expiration: ti.Expiration, Scopes: []string{"bash"}}, nil
		}
		return v.Verify(ctx, token, r)
	}
	prm := bearer.ProtectedResourceMetadataPath(resource)
	mux.Handle(prm, auth.ProtectedResourceMetadataHandler(bearer.ProtectedResourceMetadata(cfg)))
	srv := New(e, Options{WorkingDir: t.TempDir(), Structured: true})
	closeSessionsAtCleanup(t, srv)
	mux.Handle("/mcp", Handler(srv, HTTPOptions{Verifier: both, Scopes: cfg.Scopes, ResourceMetadataURL: ts.URL + prm}))
	h := &httpSetup{ts: ts, tr: tr, url: resource, res: newResults()}

	good := is.Token(t, "k1", nil, authtest.NewClaims(is.URL, resource, "alice", time.Hour, "openid bash"))
	for name, c := range map[string]struct {
		tok  string
		code int
	}{
		"good":           {good, 200},
		"other audience": {is.Token(t, "k1", nil, authtest.NewClaims(is.URL, "https://elsewhere/mcp", "alice", time.Hour, "bash")), 401},
		"no scope":       {is.Token(t, "k1", nil, authtest.NewClaims(is.URL, resource, "alice", time.Hour, "openid")), 403},
		"not a jwt":      {"0123456789abcdefghij", 401},
	} {
		resp, body := h.post(t, ctx, initializeBody, map[string]string{"Authorization": "Bearer " + c.tok})
		if resp.StatusCode != c.code {
			t.Errorf("%s: %d %s", name, resp.StatusCode, body)
		}
		if c.code != 200 && !strings.Contains(resp.Header.Get("WWW-Authenticate"), `resource_metadata="`+ts.URL+prm+`"`) {
			t.Errorf("%s: WWW-Authenticate %q", name, resp.Header.Get("WWW-Authenticate"))
		}
	}
	// The metadata names the issuer, so a client can find it.
	resp, err := tr.RoundTrip(must(http.NewRequest(http.MethodGet, ts.URL+prm, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Resource string   `json:"resource"`
		AS       []string `json:"authorization_servers"`
	}
	json.NewDecoder(resp.Body).Decode(&meta)
	resp.Body.Close()
	if meta.Resource != resource || len(meta.AS) != 1 || meta.AS[0] != is.URL {
		t.Errorf("protected resource metadata %+v", meta)
	}

	// oauth:alice and the token file's alice are two principals.
	oa := h.connectAs(t, good, "2026-07-28", "")
	fa := h.connectAs(t, aliceToken, "2026-07-28", "")
	_, pid := bgJob(t, oa)
	if got := jobIDs(t, fa); len(got) != 0 {
		t.Errorf("the token file's alice sees oauth:alice's jobs: %v", got)
	}
	if got := jobIDs(t, oa); len(got) != 1 {
		t.Errorf("oauth:alice lists %v", got)
	}
	for _, j := range e.AllJobs() {
		if j.PID == pid && j.ConversationID != "oauth:alice/mcp" {
			t.Errorf("conversation %q", j.ConversationID)
		}
	}
}

// A verifier's principal must follow the rule for principals: one of 256
// bytes is served (its conversation id path-escapes a "/"); an empty one,
// one of 257 bytes, or one with a space gets 500, and the log says why.
func TestVerifierPrincipalRule(t *testing.T) {
	long := "a/" + strings.Repeat("b", 254)
	principals := map[string]string{
		"tok-ok-0123456789abcdef":    long,
		"tok-empty-0123456789abcdef": "",
		"tok-long-0123456789abcdef":  long + "c",
		"tok-space-0123456789abcdef": "al ice",
		"tok-ctrl-0123456789abcdef":  "al\x00ice",
	}
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		p, ok := principals[token]
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: p, Expiration: time.Now().Add(time.Hour)}, nil
	}
	s := newSessServer(t, nil, Options{}, HTTPOptions{Verifier: verify})
	for tok, p := range principals {
		resp, body := s.post(t, context.Background(), initializeBody, map[string]string{"Authorization": "Bearer " + tok})
		if want := map[bool]int{true: 200, false: 500}[p == long]; resp.StatusCode != want {
			t.Errorf("principal %.20q (%d bytes): %d %s, want %d", p, len(p), resp.StatusCode, body, want)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
