package bearer

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/bashvisor/bashvisor/mcpserver/internal/authtest"
)

// OAuth 2.1 access tokens of a local issuer: only tokens signed by the
// issuer's keys, for this resource, unexpired, with a subject that makes a
// principal, are verified, as principal "oauth:SUB" with their scopes;
// a rotated key is fetched when a token names it, at most once a minute.
func TestOAuthVerifier(t *testing.T) {
	is := authtest.NewIssuer(t)
	ctx := context.Background()
	const resource = "http://mcp.test/mcp"
	v, err := NewOAuthVerifier(ctx, OAuthConfig{Issuer: is.URL, Resource: resource, Scopes: []string{"bash"}})
	if err != nil {
		t.Fatal(err)
	}
	claims := func(iss, aud, sub string, exp time.Duration) authtest.Claims {
		return authtest.NewClaims(iss, aud, sub, exp, "openid bash")
	}
	good := is.Token(t, "k1", nil, claims(is.URL, resource, "alice", time.Hour))
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for name, c := range map[string]struct {
		tok, principal string
	}{
		"good":             {good, "oauth:alice"},
		"longest subject":  {is.Token(t, "k1", nil, claims(is.URL, resource, strings.Repeat("s", 250), time.Hour)), "oauth:" + strings.Repeat("s", 250)},
		"subject too long": {is.Token(t, "k1", nil, claims(is.URL, resource, strings.Repeat("s", 251), time.Hour)), ""},
		"subject, a space": {is.Token(t, "k1", nil, claims(is.URL, resource, "al ice", time.Hour)), ""},
		"other audience":   {is.Token(t, "k1", nil, claims(is.URL, "https://elsewhere/mcp", "alice", time.Hour)), ""},
		"other issuer":     {is.Token(t, "k1", nil, claims("https://evil.example", resource, "alice", time.Hour)), ""},
		"expired":          {is.Token(t, "k1", nil, claims(is.URL, resource, "alice", -2*time.Minute)), ""},
		"no expiry":        {is.Token(t, "k1", nil, claims(is.URL, resource, "alice", 0)), ""},
		"no subject":       {is.Token(t, "k1", nil, claims(is.URL, resource, "", time.Hour)), ""},
		"foreign key":      {is.Token(t, "k1", other, claims(is.URL, resource, "alice", time.Hour)), ""},
		"unknown kid":      {is.Token(t, "k9", other, claims(is.URL, resource, "alice", time.Hour)), ""},
		"not a jwt":        {"0123456789abcdefghij", ""},
		"alg none":         {"eyJhbGciOiJub25lIn0." + strings.Split(good, ".")[1] + ".", ""},
	} {
		ti, err := v.Verify(ctx, c.tok, nil)
		switch {
		case c.principal == "" && !errors.Is(err, auth.ErrInvalidToken):
			t.Errorf("%s: %+v %v, want auth.ErrInvalidToken", name, ti, err)
		case c.principal != "" && (err != nil || ti.UserID != c.principal || !slices.Equal(ti.Scopes, []string{"openid", "bash"})):
			t.Errorf("%s: %+v %v, want %s", name, ti, err, c.principal)
		}
	}

	// A rotated key is fetched when a token names it (at most once a minute).
	is.AddKey(t, "k2")
	rotated := is.Token(t, "k2", nil, claims(is.URL, resource, "alice", time.Hour))
	if _, err := v.Verify(ctx, rotated, nil); err == nil {
		t.Error("a key fetched less than a minute ago was refetched")
	}
	v.mu.Lock()
	v.fetched = time.Now().Add(-2 * jwksRefetchAfter)
	v.mu.Unlock()
	if ti, err := v.Verify(ctx, rotated, nil); err != nil || ti.UserID != "oauth:alice" {
		t.Errorf("rotated key: %v %v", ti, err)
	}
	if got := ProtectedResourceMetadataPath(resource); got != "/.well-known/oauth-protected-resource/mcp" {
		t.Errorf("metadata path %q", got)
	}
	if m := ProtectedResourceMetadata(OAuthConfig{Issuer: is.URL, Resource: resource}); m.Resource != resource || !slices.Equal(m.AuthorizationServers, []string{is.URL}) {
		t.Errorf("metadata %+v", m)
	}
}
