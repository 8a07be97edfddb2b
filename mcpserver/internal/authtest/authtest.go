// Package authtest holds the credentials of the tests of mcpserver and
// package bearer: a small OAuth authorization server on loopback (metadata,
// RFC 8414, and a JWKS; it mints ES256 access tokens) and token files.
package authtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Issuer is the authorization server.
type Issuer struct {
	// URL is its issuer identifier.
	URL  string
	keys map[string]*ecdsa.PrivateKey
	pub  jose.JSONWebKeySet
}

// NewIssuer starts an issuer with one key, "k1", stopped at the end of
// the test.
func NewIssuer(t testing.TB) *Issuer {
	t.Helper()
	is := &Issuer{keys: map[string]*ecdsa.PrivateKey{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"issuer": is.URL, "authorization_endpoint": is.URL + "/authorize", "token_endpoint": is.URL + "/token",
			"jwks_uri": is.URL + "/jwks", "response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"},
		})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(is.pub)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	is.URL = ts.URL
	is.AddKey(t, "k1")
	return is
}

// AddKey adds a signing key named kid to the JWKS.
func (is *Issuer) AddKey(t testing.TB, kid string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is.keys[kid] = k
	is.pub.Keys = append(is.pub.Keys, jose.JSONWebKey{Key: &k.PublicKey, KeyID: kid, Algorithm: string(jose.ES256), Use: "sig"})
}

// Claims are an access token's claims.
type Claims struct {
	jwt.Claims
	Scope string `json:"scope,omitempty"`
}

// NewClaims returns the claims of a token of issuer iss for audience aud
// and subject sub, expiring in exp (none when 0), granting scope.
func NewClaims(iss, aud, sub string, exp time.Duration, scope string) Claims {
	c := Claims{Claims: jwt.Claims{Issuer: iss, Subject: sub, Audience: jwt.Audience{aud}, IssuedAt: jwt.NewNumericDate(time.Now())}, Scope: scope}
	if exp != 0 {
		c.Expiry = jwt.NewNumericDate(time.Now().Add(exp))
	}
	return c
}

// Token mints a token with claims c signed with key (nil: the issuer's key
// kid), naming kid in its header.
func (is *Issuer) Token(t testing.TB, kid string, key *ecdsa.PrivateKey, c Claims) string {
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

// WriteTokens writes a token file (0600) of content and returns its path.
func WriteTokens(t testing.TB, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
