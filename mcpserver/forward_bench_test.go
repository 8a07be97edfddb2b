package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/bashvisor/bashvisor/mcpserver/bearer"
	"github.com/bashvisor/bashvisor/mcpserver/internal/authtest"
)

// BenchmarkForwardGrantCheck: a browser's request of a forward path with
// its grant's cookie, which verifies the grant's bearer token again
// (stillGranted), served by a conversation's Python server, under OAuth,
// by the token's verifier:
//
//   - free: a verifier that only returns the token's TokenInfo (the check
//     as cheap as it gets: what a cache of the grant's verification
//     would cost);
//   - oauth: bearer.OAuthVerifier, what -oauth serves (it remembers the
//     tokens it verified: a SHA-256 and a map lookup per request);
//   - jwt-each: a verifier that checks the JWT's ES256 signature and
//     claims on every call (one that remembers nothing).
//
// The three alternate request by request on one server; "request"
// reports each one's median and its ratio to free's (x-free). The
// check-* benchmarks time the check alone (stillGranted).
//
//	go test ./mcpserver -run '^$' -bench ForwardGrantCheck -benchtime 500x
func BenchmarkForwardGrantCheck(b *testing.B) {
	is := authtest.NewIssuer(b)
	const resource = "http://bench/mcp"
	ov, err := bearer.NewOAuthVerifier(context.Background(), bearer.OAuthConfig{Issuer: is.URL, Resource: resource})
	if err != nil {
		b.Fatal(err)
	}
	token := is.Token(b, "k1", nil, authtest.NewClaims(is.URL, resource, "alice", time.Hour, ""))
	ti, err := ov.Verify(context.Background(), token, nil)
	if err != nil {
		b.Fatal(err)
	}
	verifiers := []struct {
		name   string
		verify auth.TokenVerifier
	}{
		{"free", func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
			if tok != token {
				return nil, auth.ErrInvalidToken
			}
			return ti, nil
		}},
		{"oauth", ov.Verify},
		{"jwt-each", jwtEachCall(b, is.URL, resource)},
	}
	var current atomic.Int32
	_, fts, tr, hs := newForwardSetupVerifier(b, func(ctx context.Context, tok string, r *http.Request) (*auth.TokenInfo, error) {
		return verifiers[current.Load()].verify(ctx, tok, r)
	})
	cs := startServingAs(b, hs, token, echoServer+"page")
	u, code := forwardURL(b, cs, fts)
	fc := forwardClient{b, tr}
	resp, _ := fc.do(u+"?"+forwardCodeParam+"="+code, "")
	cookie := grantCookie(resp)
	if cookie == nil {
		b.Fatalf("the code: %d", resp.StatusCode)
	}
	// The variants alternate request by request (load drifts); medians.
	b.Run("request", func(b *testing.B) {
		took := make([][]time.Duration, len(verifiers))
		for b.Loop() {
			for i := range verifiers {
				current.Store(int32(i))
				start := time.Now()
				if resp, body := fc.do(u, "", "Cookie: "+forwardCookie+"="+cookie.Value); resp.StatusCode != 200 {
					b.Fatalf("%d %q", resp.StatusCode, body)
				}
				took[i] = append(took[i], time.Since(start))
			}
		}
		free := median(took[0])
		for i, v := range verifiers {
			b.ReportMetric(float64(median(took[i]).Microseconds()), v.name+"-µs")
			if i > 0 {
				b.ReportMetric(float64(median(took[i]))/float64(free), v.name+"-x-free")
			}
		}
	})
	// The check alone, as stillGranted makes it.
	h := Handler(New(newEngine(b, nil), Options{WorkingDir: b.TempDir()}), HTTPOptions{Verifier: func(ctx context.Context, tok string, r *http.Request) (*auth.TokenInfo, error) {
		return verifiers[current.Load()].verify(ctx, tok, r)
	}}).(*httpHandler)
	g := forwardGrant{principal: "oauth:alice", token: token}
	r, _ := http.NewRequest(http.MethodGet, u, nil)
	for i, v := range verifiers {
		b.Run("check-"+v.name, func(b *testing.B) {
			current.Store(int32(i))
			for b.Loop() {
				if !h.stillGranted(r, g) {
					b.Fatal("not granted")
				}
			}
		})
	}
}

// median is the median of ds (which it sorts).
func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// jwtEachCall is a verifier of the issuer's ES256 access tokens for
// resource that checks each token in full on every call.
func jwtEachCall(b *testing.B, issuer, resource string) auth.TokenVerifier {
	resp, err := http.Get(issuer + "/jwks")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var keys jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&keys); err != nil || len(keys.Keys) != 1 {
		b.Fatalf("jwks: %v %d", err, len(keys.Keys))
	}
	return func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
		if err != nil {
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		var c jwt.Claims
		if err := tok.Claims(keys.Keys[0].Key, &c); err != nil {
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		if err := c.ValidateWithLeeway(jwt.Expected{Issuer: issuer, AnyAudience: jwt.Audience{resource}, Time: time.Now()}, time.Minute); err != nil {
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		return &auth.TokenInfo{UserID: "oauth:" + c.Subject, Expiration: c.Expiry.Time()}, nil
	}
}
