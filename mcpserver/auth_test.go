package mcpserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/auth"
)

func TestTokenFileParse(t *testing.T) {
	for content, want := range map[string]string{
		"":                                       "no tokens",
		"# only a comment\n":                     "no tokens",
		"alice\n":                                "line 1: want \"PRINCIPAL TOKEN\", got 1 fields",
		"alice a b\n":                            "got 3 fields",
		"al/ice 0123456789abcdef\n":              "principal \"al/ice\"",
		"oauth:x 0123456789abcdef\n":             "principal \"oauth:x\"",
		"alice short\n":                          "the token of alice is shorter than 16 bytes",
		"a 0123456789abcdef\nb 0123456789abcdef": "line 2: the token of b appears twice",
	} {
		_, err := parseTokens([]byte(content))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "0123456789abcdef") {
			t.Errorf("%q: %v, want %q (and no token quoted)", content, err, want)
		}
	}
	set, err := parseTokens([]byte("# team\n\nalice 0123456789abcdef\n  alice   fedcba9876543210  \nbob bbbbbbbbbbbbbbbbbbbb\n"))
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]string{"0123456789abcdef": "alice", "fedcba9876543210": "alice", "bbbbbbbbbbbbbbbbbbbb": "bob", "0123456789abcde": "", "": ""} {
		if p, _ := set.lookup(tok); p != want {
			t.Errorf("lookup %q = %q, want %q", tok, p, want)
		}
	}
}

// The token file is read again when it changes: added tokens work,
// removed ones are refused, and a broken version keeps the previous
// tokens.
func TestTokenFileReload(t *testing.T) {
	path := writeTokens(t, "alice "+aliceToken+"\nbob "+bobToken+"\n")
	tf, err := OpenTokenFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := newSessServer(t, nil, Options{}, HTTPOptions{Verifier: tf.Verify})
	status := func(token string) int {
		t.Helper()
		tf.checked.Store(0) // look at the file now, not within a second
		resp, _ := s.post(t, context.Background(), initializeBody, map[string]string{"Authorization": "Bearer " + token})
		return resp.StatusCode
	}
	if status(aliceToken) != 200 || status(bobToken) != 200 || status("carol-0123456789abcdef") != 401 {
		t.Fatal("initial tokens")
	}
	if err := os.WriteFile(path, []byte("alice "+aliceToken+"\ncarol carol-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if status(bobToken) != 401 || status("carol-0123456789abcdef") != 200 || status(aliceToken) != 200 {
		t.Error("after the edit: bob should be refused, carol served")
	}
	if got := tf.Principals(); strings.Join(got, ",") != "alice,carol" {
		t.Errorf("principals %v", got)
	}
	if err := os.WriteFile(path, []byte("alice short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if status("carol-0123456789abcdef") != 200 {
		t.Error("a broken file dropped the previous tokens")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if status(aliceToken) != 200 {
		t.Error("a removed file dropped the previous tokens")
	}
	if _, err := OpenTokenFile(path, nil); err == nil {
		t.Error("opened a missing file")
	}
}

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

// issuer is a small OAuth authorization server on loopback: metadata
// (RFC 8414) and a JWKS, and it mints ES256 access tokens.
type issuer struct {
	ts   *httptest.Server
	keys map[string]*ecdsa.PrivateKey
	pub  jose.JSONWebKeySet
}

func newIssuer(t testing.TB) *issuer {
	t.Helper()
	is := &issuer{keys: map[string]*ecdsa.PrivateKey{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"issuer": is.ts.URL, "authorization_endpoint": is.ts.URL + "/authorize", "token_endpoint": is.ts.URL + "/token",
			"jwks_uri": is.ts.URL + "/jwks", "response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"},
		})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(is.pub)
	})
	is.ts = httptest.NewServer(mux)
	t.Cleanup(is.ts.Close)
	is.addKey(t, "k1")
	return is
}

func (is *issuer) addKey(t testing.TB, kid string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is.keys[kid] = k
	is.pub.Keys = append(is.pub.Keys, jose.JSONWebKey{Key: &k.PublicKey, KeyID: kid, Algorithm: string(jose.ES256), Use: "sig"})
}

// token mints a token signed with key kid (of keys, which may hold keys
// the JWKS does not list).
func (is *issuer) token(t testing.TB, kid string, key *ecdsa.PrivateKey, c oauthClaims) string {
	t.Helper()
	if key == nil {
		key = is.keys[kid]
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(sig).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func claims(iss, aud, sub string, exp time.Duration, scope string) oauthClaims {
	c := oauthClaims{Claims: jwt.Claims{Issuer: iss, Subject: sub, Audience: jwt.Audience{aud}, IssuedAt: jwt.NewNumericDate(time.Now())}, Scope: scope}
	if exp != 0 {
		c.Expiry = jwt.NewNumericDate(time.Now().Add(exp))
	}
	return c
}

// OAuth 2.1 access tokens of a local issuer, next to a token file: only
// tokens signed by the issuer's keys, for this resource, unexpired, with a
// subject and the required scope, are served, as principal "oauth:SUB";
// 401 answers name the protected resource metadata, which names the
// issuer.
func TestOAuth(t *testing.T) {
	is := newIssuer(t)
	ctx := context.Background()
	// The server's URL must be known before the tokens: a listener first.
	e := newEngine(t, nil)
	mux := http.NewServeMux()
	ts := httptest.NewServer(mux)
	tr := &http.Transport{}
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close(); tr.CloseIdleConnections() })
	resource := ts.URL + "/mcp"
	cfg := OAuthConfig{Issuer: is.ts.URL, Resource: resource, Scopes: []string{"bash"}}
	v, err := NewOAuthVerifier(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tf, err := OpenTokenFile(writeTokens(t, "alice "+aliceToken+"\n"), nil)
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
	prm := ProtectedResourceMetadataPath(resource)
	mux.Handle(prm, auth.ProtectedResourceMetadataHandler(ProtectedResourceMetadata(cfg)))
	mux.Handle("/mcp", Handler(New(e, Options{WorkingDir: t.TempDir()}), HTTPOptions{Verifier: both, Scopes: cfg.Scopes, ResourceMetadataURL: ts.URL + prm}))
	h := &httpSetup{ts: ts, tr: tr, url: resource, res: newResults()}

	good := is.token(t, "k1", nil, claims(is.ts.URL, resource, "alice", time.Hour, "openid bash"))
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for name, c := range map[string]struct {
		tok  string
		code int
	}{
		"good":           {good, 200},
		"other audience": {is.token(t, "k1", nil, claims(is.ts.URL, "https://elsewhere/mcp", "alice", time.Hour, "bash")), 401},
		"other issuer":   {is.token(t, "k1", nil, claims("https://evil.example", resource, "alice", time.Hour, "bash")), 401},
		"expired":        {is.token(t, "k1", nil, claims(is.ts.URL, resource, "alice", -2*time.Minute, "bash")), 401},
		"no expiry":      {is.token(t, "k1", nil, claims(is.ts.URL, resource, "alice", 0, "bash")), 401},
		"no subject":     {is.token(t, "k1", nil, claims(is.ts.URL, resource, "", time.Hour, "bash")), 401},
		"foreign key":    {is.token(t, "k1", other, claims(is.ts.URL, resource, "alice", time.Hour, "bash")), 401},
		"unknown kid":    {is.token(t, "k9", other, claims(is.ts.URL, resource, "alice", time.Hour, "bash")), 401},
		"no scope":       {is.token(t, "k1", nil, claims(is.ts.URL, resource, "alice", time.Hour, "openid")), 403},
		"not a jwt":      {"0123456789abcdefghij", 401},
		"alg none":       {"eyJhbGciOiJub25lIn0." + strings.Split(good, ".")[1] + ".", 401},
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
	if meta.Resource != resource || len(meta.AS) != 1 || meta.AS[0] != is.ts.URL {
		t.Errorf("protected resource metadata %+v", meta)
	}

	// A rotated key is fetched when a token names it (at most once a minute).
	is.addKey(t, "k2")
	rotated := is.token(t, "k2", nil, claims(is.ts.URL, resource, "alice", time.Hour, "bash"))
	if _, err := v.Verify(ctx, rotated, nil); err == nil {
		t.Error("a key fetched less than a minute ago was refetched")
	}
	v.mu.Lock()
	v.fetched = time.Now().Add(-2 * jwksRefetchAfter)
	v.mu.Unlock()
	if ti, err := v.Verify(ctx, rotated, nil); err != nil || ti.UserID != "oauth:alice" {
		t.Errorf("rotated key: %v %v", ti, err)
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
	if _, err := v.Verify(ctx, "x", nil); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("garbage: %v", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
