package cli

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/bashvisor/bashvisor/mcpserver"
	"github.com/bashvisor/bashvisor/mcpserver/bearer"
)

// tokenFileName is where `bashvisor mcp -http` keeps the token it generates,
// under $XDG_CONFIG_HOME (default ~/.config).
const tokenFileName = "bashvisor/mcp-token"

// generatedTokenPath returns where the generated token lives.
func generatedTokenPath() (string, error) {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no $XDG_CONFIG_HOME or home directory for the generated token: %w", err)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, tokenFileName), nil
}

// generatedToken returns the token in path, creating it (0600, in a 0700
// directory) the first time: the same token serves every later start, so
// that clients configured with it keep working. An existing file must be
// a regular file of this user that no one else can read.
func generatedToken(path string) (token string, created bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return "", false, err
		}
		token = rand.Text()
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return "", false, err
		}
		_, err = f.WriteString(token + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return token, true, err
	}
	if err != nil {
		return "", false, err
	}
	st, err := os.Lstat(path)
	if err != nil {
		return "", false, err
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !st.Mode().IsRegular() || st.Mode().Perm()&0o077 != 0 || (ok && int(sys.Uid) != os.Getuid()) {
		return "", false, fmt.Errorf("%s must be a regular file of yours with mode 0600 (it is %v): fix it or delete it to get a new token", path, st.Mode())
	}
	token = strings.TrimSpace(string(data))
	if len(token) < bearer.MinTokenLength || strings.ContainsAny(token, " \t\n") {
		return "", false, fmt.Errorf("%s does not hold one token of at least %d characters: delete it to get a new one", path, bearer.MinTokenLength)
	}
	return token, false, nil
}

// httpAuth is how `bashvisor mcp -http` authenticates.
type httpAuth struct {
	opts      mcpserver.HTTPOptions // the authentication fields
	prmPath   string                // with OAuth: where the protected resource metadata is served
	prm       http.Handler
	describe  string // for the "listening" line
	generated string // the file of the generated token, when it is the only credential
}

// httpAuth builds the authentication of the flags for a server listening
// at addr: -no-auth; else -token, -tokens and -oauth-issuer together;
// else the generated token.
func (f *mcpFlags) httpAuth(ctx context.Context, addr string, log *slog.Logger) (*httpAuth, error) {
	a := &httpAuth{}
	if f.noAuth {
		a.opts.NoAuth = true
		a.describe = "no authentication: any local process can run commands"
		return a, nil
	}
	var verifiers []auth.TokenVerifier
	var what []string
	if f.tokens != "" {
		tf, err := bearer.OpenTokenFile(f.tokens, log)
		if err != nil {
			return nil, err
		}
		verifiers = append(verifiers, tf.Verify)
		what = append(what, fmt.Sprintf("tokens of %s from %s", strings.Join(tf.Principals(), ", "), f.tokens))
	}
	if f.oauthIssuer != "" {
		cfg := bearer.OAuthConfig{Issuer: f.oauthIssuer, Resource: f.oauthRes, Scopes: f.oauthScopes, Logger: log}
		if cfg.Resource == "" {
			cfg.Resource = "http://" + addr + "/mcp"
		}
		v, err := bearer.NewOAuthVerifier(ctx, cfg)
		if err != nil {
			return nil, err
		}
		verifiers = append(verifiers, v.Verify)
		a.prmPath = bearer.ProtectedResourceMetadataPath(cfg.Resource)
		a.prm = auth.ProtectedResourceMetadataHandler(bearer.ProtectedResourceMetadata(cfg))
		a.opts.Scopes = cfg.Scopes
		if u, err := urlOrigin(cfg.Resource); err == nil {
			a.opts.ResourceMetadataURL = u + a.prmPath
		}
		what = append(what, "OAuth access tokens of "+f.oauthIssuer+" for "+cfg.Resource)
	}
	if f.token != "" {
		a.opts.Token = f.token
		what = append(what, "the -token or $"+tokenEnv)
	}
	if len(what) == 0 {
		path, err := generatedTokenPath()
		if err != nil {
			return nil, err
		}
		token, created, err := generatedToken(path)
		if err != nil {
			return nil, fmt.Errorf("generated token: %w", err)
		}
		a.opts.Token = token
		verb := "kept"
		if created {
			verb = "generated"
		}
		a.generated = path
		what = append(what, fmt.Sprintf("bearer token %s in %s", verb, path))
	}
	if len(verifiers) > 0 {
		a.opts.Verifier = anyVerifier(verifiers)
	}
	a.describe = strings.Join(what, "; ")
	return a, nil
}

// anyVerifier accepts a token any of vs accepts, trying them in order.
func anyVerifier(vs []auth.TokenVerifier) auth.TokenVerifier {
	if len(vs) == 1 {
		return vs[0]
	}
	return func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		var err error
		for _, v := range vs {
			var ti *auth.TokenInfo
			if ti, err = v(ctx, token, r); err == nil {
				return ti, nil
			}
		}
		return nil, err
	}
}

// urlOrigin returns scheme://host of a URL.
func urlOrigin(raw string) (string, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "", fmt.Errorf("%q is not a URL", raw)
	}
	host, _, _ := strings.Cut(rest, "/")
	return scheme + "://" + host, nil
}
