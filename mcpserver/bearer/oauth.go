package bearer

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/bashvisor/bashvisor/mcpserver/internal/principal"
)

// OAuthConfig configures [NewOAuthVerifier].
type OAuthConfig struct {
	// Issuer is the authorization server's issuer identifier
	// ("https://auth.example.com"). Its metadata (RFC 8414, at
	// /.well-known/oauth-authorization-server, else OpenID Connect
	// discovery) must name it exactly and give a jwks_uri; https is
	// required except on loopback addresses.
	Issuer string
	// Resource is this server's canonical URL as clients know it
	// ("https://mcp.example.com/mcp"): an access token is accepted only
	// when its "aud" claim names it (RFC 8707), so that a token issued for
	// another service is refused here.
	Resource string
	// Scopes, when set, must all be in a token's "scope" (or "scp")
	// claim; mcpserver's HTTPOptions.Scopes checks them and answers 403
	// insufficient_scope. They are also published in the protected
	// resource metadata ([ProtectedResourceMetadata]).
	Scopes []string
	// HTTPClient fetches the metadata and keys (default: a client with a
	// 10 s timeout).
	HTTPClient *http.Client
	// Logger receives key refreshes and failures (default: discard).
	Logger *slog.Logger
}

// OAuthVerifier verifies OAuth 2.1 access tokens that are JWTs signed by
// one issuer (RFC 9068 profile): signature with a key of the issuer's JWKS
// (RS256, PS256, ES256, ES384, EdDSA), "iss" equal to the issuer, "aud"
// naming [OAuthConfig.Resource], "exp" present and not past (one minute of
// clock skew allowed), "nbf" not in the future, and a "sub". The
// principal is "oauth:" followed by the subject, so that it never equals
// a [TokenFile] principal; a subject that makes it break the rule for
// principals (more than 256 bytes in all, a space, a control character)
// is refused. An unknown key id fetches the JWKS again, at most
// once a minute, so the issuer may rotate keys. Verified tokens are
// remembered (by SHA-256, until they expire, up to 4096 of them), so that
// a client's later calls cost a hash and a map lookup instead of a
// signature check.
//
// Tokens that are not JWTs (opaque tokens for introspection) are refused.
type OAuthVerifier struct {
	cfg     OAuthConfig
	jwksURI string
	log     *slog.Logger

	mu        sync.Mutex
	keys      jose.JSONWebKeySet
	fetched   time.Time
	cache     map[[sha256.Size]byte]*auth.TokenInfo
	cacheSize int
}

// oauthAlgorithms are the signature algorithms OAuthVerifier accepts
// (never "none", never HMAC: the keys are public).
var oauthAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.PS256, jose.ES256, jose.ES384, jose.EdDSA}

const (
	oauthLeeway       = time.Minute
	jwksRefetchAfter  = time.Minute
	oauthCacheEntries = 4096
	// principalOAuthPrefix starts every principal of OAuthVerifier.
	principalOAuthPrefix = "oauth:"
)

// NewOAuthVerifier fetches the issuer's metadata and keys and returns a
// verifier; see [OAuthVerifier].
func NewOAuthVerifier(ctx context.Context, cfg OAuthConfig) (*OAuthVerifier, error) {
	if cfg.Issuer == "" || cfg.Resource == "" {
		return nil, errors.New("oauth: the issuer and the resource URL are required")
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	v := &OAuthVerifier{cfg: cfg, log: cfg.Logger, cache: map[[sha256.Size]byte]*auth.TokenInfo{}, cacheSize: oauthCacheEntries}
	if v.log == nil {
		v.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	meta, err := issuerMetadata(ctx, cfg.Issuer, cfg.HTTPClient)
	if err != nil {
		return nil, err
	}
	if meta.JWKSURI == "" {
		return nil, fmt.Errorf("oauth: the metadata of %s has no jwks_uri", cfg.Issuer)
	}
	v.jwksURI = meta.JWKSURI
	if err := v.fetchKeys(ctx); err != nil {
		return nil, err
	}
	return v, nil
}

// issuerMetadata fetches the authorization server metadata of issuer: RFC
// 8414 first, then OpenID Connect discovery.
func issuerMetadata(ctx context.Context, issuer string, c *http.Client) (*oauthex.AuthServerMeta, error) {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("oauth: issuer %q is not a URL", issuer)
	}
	path := strings.TrimSuffix(u.Path, "/")
	base := u.Scheme + "://" + u.Host
	var errs []error
	for _, m := range []string{
		base + "/.well-known/oauth-authorization-server" + path,
		base + "/.well-known/openid-configuration" + path,
		base + path + "/.well-known/openid-configuration",
	} {
		meta, err := oauthex.GetAuthServerMeta(ctx, m, issuer, c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if meta != nil {
			return meta, nil
		}
	}
	return nil, fmt.Errorf("oauth: no authorization server metadata for issuer %s: %w", issuer, errors.Join(errs...))
}

// fetchKeys reads the JWKS.
func (v *OAuthVerifier) fetchKeys(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.jwksURI, nil)
	if err != nil {
		return fmt.Errorf("oauth: jwks: %w", err)
	}
	resp, err := v.cfg.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("oauth: jwks: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("oauth: jwks %s: %s", v.jwksURI, resp.Status)
	}
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&set); err != nil {
		return fmt.Errorf("oauth: jwks %s: %w", v.jwksURI, err)
	}
	v.mu.Lock()
	v.keys, v.fetched = set, time.Now()
	v.mu.Unlock()
	v.log.Info("oauth: keys fetched", "jwks", v.jwksURI, "keys", len(set.Keys))
	return nil
}

// keys returns the signing keys named kid (every signing key when kid is
// empty), fetching the JWKS again (at most once per jwksRefetchAfter) when
// there is none.
func (v *OAuthVerifier) keysFor(ctx context.Context, kid string) ([]any, error) {
	for attempt := 0; ; attempt++ {
		v.mu.Lock()
		all := v.keys.Keys
		if kid != "" {
			all = v.keys.Key(kid)
		}
		stale := time.Since(v.fetched) > jwksRefetchAfter
		v.mu.Unlock()
		var keys []any
		for _, k := range all {
			if k.Use == "" || k.Use == "sig" {
				keys = append(keys, k.Key)
			}
		}
		if len(keys) > 0 {
			return keys, nil
		}
		if attempt > 0 || !stale {
			return nil, fmt.Errorf("%w: no signing key %q at %s", auth.ErrInvalidToken, kid, v.jwksURI)
		}
		if err := v.fetchKeys(ctx); err != nil {
			v.log.Warn("oauth: refreshing keys", "err", err)
			return nil, fmt.Errorf("%w: no signing key %q", auth.ErrInvalidToken, kid)
		}
	}
}

// oauthClaims are the claims OAuthVerifier reads.
type oauthClaims struct {
	jwt.Claims
	Scope string   `json:"scope"`
	Scp   []string `json:"scp"`
}

// Verify is an [auth.TokenVerifier].
func (v *OAuthVerifier) Verify(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	sum := sha256.Sum256([]byte(token))
	now := time.Now()
	v.mu.Lock()
	if ti, ok := v.cache[sum]; ok && now.Before(ti.Expiration.Add(oauthLeeway)) {
		v.mu.Unlock()
		return ti, nil
	}
	v.mu.Unlock()

	tok, err := jwt.ParseSigned(token, oauthAlgorithms)
	if err != nil {
		return nil, fmt.Errorf("%w: not a signed JWT: %v", auth.ErrInvalidToken, err)
	}
	if len(tok.Headers) != 1 {
		return nil, fmt.Errorf("%w: want one signature", auth.ErrInvalidToken)
	}
	keys, err := v.keysFor(ctx, tok.Headers[0].KeyID)
	if err != nil {
		return nil, err
	}
	var c oauthClaims
	for _, key := range keys {
		c = oauthClaims{}
		if err = tok.Claims(key, &c); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
	}
	if c.Expiry == nil {
		return nil, fmt.Errorf("%w: no exp claim", auth.ErrInvalidToken)
	}
	if c.Subject == "" {
		return nil, fmt.Errorf("%w: no sub claim", auth.ErrInvalidToken)
	}
	if err := principal.Check(principalOAuthPrefix + c.Subject); err != nil {
		return nil, fmt.Errorf("%w: the sub claim makes %w", auth.ErrInvalidToken, err)
	}
	if err := c.ValidateWithLeeway(jwt.Expected{Issuer: v.cfg.Issuer, AnyAudience: jwt.Audience{v.cfg.Resource}, Time: now}, oauthLeeway); err != nil {
		return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
	}
	scopes := c.Scp
	if c.Scope != "" {
		scopes = strings.Fields(c.Scope)
	}
	ti := &auth.TokenInfo{UserID: principalOAuthPrefix + c.Subject, Scopes: scopes, Expiration: c.Expiry.Time()}
	v.mu.Lock()
	if len(v.cache) >= v.cacheSize {
		for k, old := range v.cache {
			if !now.Before(old.Expiration.Add(oauthLeeway)) {
				delete(v.cache, k)
			}
		}
		if len(v.cache) >= v.cacheSize {
			clear(v.cache)
		}
	}
	v.cache[sum] = ti
	v.mu.Unlock()
	return ti, nil
}

// ProtectedResourceMetadata returns the OAuth protected resource metadata
// (RFC 9728) of a server whose tokens cfg verifies, for
// auth.ProtectedResourceMetadataHandler, served at
// [ProtectedResourceMetadataPath] of the resource URL (and named by
// mcpserver's HTTPOptions.ResourceMetadataURL, so that a client answered
// 401 finds the issuer).
func ProtectedResourceMetadata(cfg OAuthConfig) *oauthex.ProtectedResourceMetadata {
	return &oauthex.ProtectedResourceMetadata{
		Resource:               cfg.Resource,
		AuthorizationServers:   []string{cfg.Issuer},
		ScopesSupported:        cfg.Scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "bashvisor shell",
	}
}

// ProtectedResourceMetadataPath returns where RFC 9728 puts the metadata
// of resource: "/.well-known/oauth-protected-resource" followed by the
// resource URL's path ("/.well-known/oauth-protected-resource/mcp").
func ProtectedResourceMetadataPath(resource string) string {
	const wk = "/.well-known/oauth-protected-resource"
	u, err := url.Parse(resource)
	if err != nil {
		return wk
	}
	return wk + strings.TrimSuffix(u.Path, "/")
}
