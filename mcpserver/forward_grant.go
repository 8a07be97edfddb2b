package mcpserver

import (
	"crypto/rand"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// A browser cannot send the Authorization header, and the bearer token
// never appears in a forward URL (a forwarded page could read it): the URL
// bash_forward returns carries a one-time code instead (forwardCodeParam),
// random, good once and for forwardCodeTTL, for that principal's
// conversation and port only. The forward path exchanges it for a grant:
// a random value, not the token, in the cookie forwardCookie (HttpOnly,
// SameSite=Lax, Path the forward path's prefix, for forwardGrantTTL), and
// redirects to the URL without the code. Later requests of that prefix
// carry the cookie; a grant names its principal, conversation and port,
// so that it opens nothing else. Neither code nor cookie reaches the
// conversation's server. A code and a grant live only as long as the
// bearer token of the bash_forward call that made them: each request
// verifies that token again (stillGranted), so a token removed from the
// token file, expired, or now naming another principal, ends them. The
// check is not cached here: a cache would outlive a token removed from a
// token file (which has no expiry to cache until), and the verifiers
// are cheap again — bearer.OAuthVerifier remembers the JWTs it checked,
// a TokenFile hashes — 0.5 µs against a forwarded request's 620 µs
// (BenchmarkForwardGrantCheck). A Verifier of the embedding program
// that checks a JWT's signature on every call costs +25 % per request.
const (
	forwardCodeParam = "bashvisor_code"
	forwardCookie    = "bashvisor_forward"
	forwardCodeTTL   = 10 * time.Minute
	forwardGrantTTL  = 24 * time.Hour
	// maxForwardGrants bounds the codes, and the grants, a server keeps
	// (each a few hundred bytes): beyond it, after dropping the expired
	// ones, the oldest is dropped.
	maxForwardGrants = 4096
)

// forwardGrant is what a code or a cookie grants: one port of one
// conversation of a principal (name in its URLs, conv its ID), until
// expires, while token (the bearer token of the bash_forward call; ""
// without authentication) still names the principal.
type forwardGrant struct {
	principal, name, conv string
	port                  int
	token                 string
	expires               time.Time
}

// forwardGrants holds a server's codes and grants.
type forwardGrants struct {
	mu     sync.Mutex
	codes  map[string]forwardGrant // one-time code → grant
	grants map[string]forwardGrant // cookie value → grant
}

// issue records g, good until now+ttl, in m under a new random key, which
// it returns; f.mu is held.
func issue(m map[string]forwardGrant, g forwardGrant, now time.Time, ttl time.Duration) string {
	if len(m) >= maxForwardGrants {
		var oldest string
		for k, v := range m {
			if !now.Before(v.expires) {
				delete(m, k)
			} else if oldest == "" || v.expires.Before(m[oldest].expires) {
				oldest = k
			}
		}
		if len(m) >= maxForwardGrants {
			delete(m, oldest)
		}
	}
	k := rand.Text()
	g.expires = now.Add(ttl)
	m[k] = g
	return k
}

// code returns a new one-time code for g.
func (f *forwardGrants) code(g forwardGrant, now time.Time) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.codes == nil {
		f.codes, f.grants = map[string]forwardGrant{}, map[string]forwardGrant{}
	}
	return issue(f.codes, g, now, forwardCodeTTL)
}

// exchange consumes code, which must be unexpired and for name and port,
// and returns its grant; issue makes the grant's cookie value.
func (f *forwardGrants) exchange(code, name string, port int, now time.Time) (forwardGrant, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, found := f.codes[code]
	if !found {
		return forwardGrant{}, false
	}
	delete(f.codes, code) // once, even when it does not fit
	if g.name != name || g.port != port || !now.Before(g.expires) {
		return forwardGrant{}, false
	}
	return g, true
}

// issue returns a new grant's cookie value for g (from exchange).
func (f *forwardGrants) issue(g forwardGrant, now time.Time) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return issue(f.grants, g, now, forwardGrantTTL)
}

// grant returns the unexpired grant among r's forwardCookie cookies that
// is for name and port, and its cookie value.
func (f *forwardGrants) grant(r *http.Request, name string, port int, now time.Time) (string, forwardGrant, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range r.CookiesNamed(forwardCookie) {
		if g, ok := f.grants[c.Value]; ok && g.name == name && g.port == port && now.Before(g.expires) {
			return c.Value, g, true
		}
	}
	return "", forwardGrant{}, false
}

// revoke ends the grant of cookie value v.
func (f *forwardGrants) revoke(v string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.grants, v)
}

// stillGranted reports whether g's token still names g's principal: the
// verifier (or Token) accepts it, unexpired, with the scopes Scopes
// asks. Without authentication (NoAuth) a grant needs no token.
func (h *httpHandler) stillGranted(r *http.Request, g forwardGrant) bool {
	if h.opts.Token == "" && h.opts.Verifier == nil {
		return true // NoAuth: nothing to outlive (over stdio, the session's principal)
	}
	if g.token == "" {
		return false
	}
	ti, err := bearerVerifier(h.opts)(r.Context(), g.token, r)
	if err != nil || ti == nil || ti.UserID != g.principal {
		return false
	}
	if !ti.Expiration.IsZero() && time.Now().After(ti.Expiration.Add(clockSkew)) {
		return false
	}
	for _, sc := range h.opts.Scopes {
		if !slices.Contains(ti.Scopes, sc) {
			return false
		}
	}
	return true
}

// bearerToken is the token of r's "Authorization: Bearer TOKEN", or "".
func bearerToken(h http.Header) string {
	scheme, token, ok := strings.Cut(h.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// exchangeCode answers a request of a forward path (prefix, of
// conversation name and port) that carries a one-time code: the grant's
// cookie and a redirect to the URL without the code; 401 when the code is
// unknown, used, expired or for another path.
func (h *httpHandler) exchangeCode(w http.ResponseWriter, r *http.Request, fw *forwarding, prefix, name string, port int) {
	q := r.URL.Query()
	g, ok := fw.grants.exchange(q.Get(forwardCodeParam), name, port, time.Now())
	switch {
	case !ok:
		unauthorized(w, "this link's code is unknown, used or expired: ask the agent for a new one (bash_forward)")
		return
	case !fw.atOrigin(r.Host, g.principal, name, port):
		forbiddenHost(w, fw, g.principal, name, port)
		return
	case !h.stillGranted(r, g):
		unauthorized(w, "the credentials this link was made with are no longer valid")
		return
	}
	cookie := fw.grants.issue(g, time.Now())
	q.Del(forwardCodeParam)
	http.SetCookie(w, &http.Cookie{Name: forwardCookie, Value: cookie, Path: prefix + "/", MaxAge: int(forwardGrantTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil})
	u := *r.URL
	u.RawQuery = q.Encode()
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
}

// unauthorized answers 401 with a bearer challenge.
func unauthorized(w http.ResponseWriter, why string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="bashvisor"`)
	http.Error(w, "Unauthorized: "+why, http.StatusUnauthorized)
}

// forwardRefusal says why a request of a forward path is refused before
// anything else (403), or "": a Host that is not a loopback name on a
// loopback listener (DNS rebinding, as the go-sdk refuses for /mcp), a
// service worker's script (a forwarded page must not install one: it
// would see every later request of the origin), or a cross-origin request
// that is not a browser's top-level GET navigation (a link to the forward
// URL clicked on another site is one; its code, or its cookie, still
// decides).
func forwardRefusal(r *http.Request, allowed []string) string {
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la != nil &&
		isLoopbackHost(la.String()) && !isLoopbackHost(r.Host) {
		return "invalid Host header " + r.Host
	}
	if r.Header.Get("Service-Worker") != "" {
		return "forwarded pages may not install service workers"
	}
	navigation := (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		r.Header.Get("Sec-Fetch-Mode") == "navigate" && r.Header.Get("Sec-Fetch-Dest") == "document"
	if !navigation && !originAllowed(r, allowed) {
		return "origin not allowed"
	}
	return ""
}

// isLoopbackHost reports whether host (with or without a port) is
// localhost or a loopback address.
func isLoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if lower := strings.ToLower(host); lower == "localhost" || strings.HasSuffix(lower, ".localhost") {
		return true // browsers resolve *.localhost to loopback (RFC 6761)
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
