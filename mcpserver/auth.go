package mcpserver

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/bashvisor/bashvisor/mcpserver/internal/principal"
)

// Principals of requests that carry no credentials of their own.
const (
	// principalDefault is the principal of HTTPOptions.Token, and of the
	// token `bashvisor mcp -http` generates.
	principalDefault = "default"
	// principalAnonymous is the principal of every request when
	// HTTPOptions.NoAuth is set.
	principalAnonymous = "anonymous"
	// principalLocal is the default Options.Principal: the one principal
	// of a stdio (or in-memory) session.
	principalLocal = "local"
)

// clockSkew is how far a token's expiry may be past (as package bearer's
// OAuthVerifier allows).
const clockSkew = time.Minute

// newAuthenticator returns next behind the authentication opts asks for:
// the go-sdk's bearer-token middleware with opts' verifiers, or nothing
// (NoAuth: every request is principalAnonymous). A refused request gets
// 401 (403 for missing scopes) with WWW-Authenticate and
// "Connection: close": a client without credentials has no use for the
// connection.
func newAuthenticator(opts HTTPOptions, next http.Handler) http.Handler {
	if opts.Token == "" && opts.Verifier == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), principalAnonymous)))
		})
	}
	mw := auth.RequireBearerToken(bearerVerifier(opts), &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: opts.ResourceMetadataURL,
		Scopes:              opts.Scopes,
		ClockSkew:           clockSkew,
	})
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Del("Connection") // set in case of a refusal
		w.Header().Del("WWW-Authenticate")
		ti := auth.TokenInfoFromContext(r.Context())
		if ti == nil {
			http.Error(w, "Internal Server Error: no token information", http.StatusInternalServerError)
			return
		}
		next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), ti.UserID)))
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Kept only if the middleware refuses the request.
		w.Header().Set("Connection", "close")
		if opts.ResourceMetadataURL == "" && len(opts.Scopes) == 0 {
			// The go-sdk's middleware names a challenge only with
			// resource metadata or scopes; RFC 6750 wants one.
			w.Header().Set("WWW-Authenticate", `Bearer realm="bashvisor"`)
		}
		h.ServeHTTP(w, r)
	})
}

// bearerVerifier verifies a bearer token as opts asks (Token, then
// Verifier); opts has one of them.
func bearerVerifier(opts HTTPOptions) auth.TokenVerifier {
	var want [sha256.Size]byte
	if opts.Token != "" {
		want = sha256.Sum256([]byte(opts.Token))
	}
	return func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		if opts.Token != "" {
			got := sha256.Sum256([]byte(token))
			if subtle.ConstantTimeCompare(got[:], want[:]) == 1 {
				// A token that does not expire: the go-sdk wants an expiry.
				return &auth.TokenInfo{UserID: principalDefault, Expiration: time.Now().Add(time.Hour)}, nil
			}
		}
		if opts.Verifier != nil {
			return opts.Verifier(ctx, token, r)
		}
		return nil, fmt.Errorf("%w: unknown bearer token", auth.ErrInvalidToken)
	}
}

// principalOf returns the principal the authenticator gave r, checked:
// a verifier's UserID must follow the rule for principals
// ([principal.Check]).
func principalOf(r *http.Request) (string, error) {
	p, _ := principalFrom(r.Context())
	if err := principal.Check(p); err != nil {
		return "", fmt.Errorf("the token verifier returned %w", err)
	}
	return p, nil
}

// originAllowed implements the Origin check: no Origin header passes (not a
// browser, or a same-origin navigation) unless Sec-Fetch-Site says
// cross-site; otherwise the origin must be listed or match the Host.
func originAllowed(r *http.Request, allowed []string) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		site := r.Header.Get("Sec-Fetch-Site")
		return site == "" || site == "same-origin" || site == "none"
	}
	if slices.Contains(allowed, origin) {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return strings.EqualFold(u.Host, r.Host)
}
