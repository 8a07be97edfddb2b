package mcpserver

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/mcpserver/bearer"
	"github.com/bashvisor/bashvisor/mcpserver/internal/authtest"
)

// The per-call cost of authentication and per-principal accounting,
// side by side with no authentication:
//
//	go test ./mcpserver -run '^$' -bench 'Principal|HTTPJobs' -benchtime 20000x
//
// BenchmarkPrincipalPath serves one request through Handler's whole path
// up to the go-sdk (origin check, authentication, body, the call registry,
// the middleware that hands the principal on, the conversation's scope,
// and the named conversation's accounting), with the go-sdk's handler
// replaced by that path's end, so that the figures are ours alone.
// BenchmarkHTTPJobs is the same over a loopback listener with the go-sdk
// and its client: a bash_jobs call (no process), stateless.
func BenchmarkPrincipalPath(b *testing.B) {
	const body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bash_jobs","arguments":{}}}`
	// The benchmark's own cost: building the request and the recorder.
	b.Run("harness", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
			r.Header.Set("Authorization", "Bearer x")
			r.Header.Set(conversationHeader, "bench")
			w := httptest.NewRecorder()
			w.WriteHeader(200)
		}
	})
	for _, v := range authVariants(b) {
		b.Run(v.name, func(b *testing.B) {
			e := newEngine(b, nil)
			s, ms := build(e, Options{WorkingDir: b.TempDir()}, nil)
			hopts := v.opts
			h := Handler(ms, hopts).(*httpHandler)
			end := h.middleware(func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				sc, err := s.scopeOf(ctx, req)
				if err != nil {
					return nil, err
				}
				leave, err := s.convs.enter(sc)
				if err != nil {
					return nil, err
				}
				leave()
				if sc.principal != v.principal {
					return nil, fmt.Errorf("principal %q", sc.principal)
				}
				return nil, nil
			})
			h.stateless = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: toolJobs}, Extra: &mcp.RequestExtra{Header: r.Header}}
				if _, err := end(r.Context(), "tools/call", req); err != nil {
					http.Error(w, err.Error(), 500)
				}
			})
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
				r.Header.Set("Authorization", "Bearer "+v.token)
				r.Header.Set(conversationHeader, "bench")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != 200 {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
	}
}

func BenchmarkHTTPJobs(b *testing.B) {
	for _, v := range authVariants(b) {
		b.Run(v.name, func(b *testing.B) {
			s := newSessServer(b, nil, Options{}, v.opts)
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(),
				&mcp.StreamableClientTransport{Endpoint: s.url, HTTPClient: &http.Client{Transport: headers{map[string]string{"Authorization": "Bearer " + v.token}, s.tr}}}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolJobs, Arguments: map[string]any{}})
				if err != nil || res.IsError {
					b.Fatalf("%v %v", res, err)
				}
			}
		})
	}
}

type authVariant struct {
	name, token, principal string
	opts                   HTTPOptions
}

// authVariants: no authentication; one static token; a token file of
// 100 principals (each lookup compares all 100 digests); an OAuth JWT
// (ES256) of a local issuer, verified once, then from the cache.
func authVariants(b *testing.B) []authVariant {
	var file strings.Builder
	for i := range 100 {
		fmt.Fprintf(&file, "user%d token-%d-0123456789abcdef\n", i, i)
	}
	tf, err := bearer.OpenTokenFile(authtest.WriteTokens(b, file.String()), nil)
	if err != nil {
		b.Fatal(err)
	}
	is := authtest.NewIssuer(b)
	v, err := bearer.NewOAuthVerifier(context.Background(), bearer.OAuthConfig{Issuer: is.URL, Resource: "http://bench/mcp"})
	if err != nil {
		b.Fatal(err)
	}
	jwt := is.Token(b, "k1", nil, authtest.NewClaims(is.URL, "http://bench/mcp", "alice", time.Hour, ""))
	return []authVariant{
		{"none", "", principalAnonymous, HTTPOptions{NoAuth: true}},
		{"token", "static-0123456789abcdef", principalDefault, HTTPOptions{Token: "static-0123456789abcdef"}},
		{"tokenfile-100", "token-99-0123456789abcdef", "user99", HTTPOptions{Verifier: tf.Verify}},
		{"oauth-jwt", jwt, "oauth:alice", HTTPOptions{Verifier: auth.TokenVerifier(v.Verify)}},
	}
}
