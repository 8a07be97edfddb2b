package engine_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// upstreamPKI is a CA of the test's and a TLS listener on loopback with
// its certificate for "localhost": a host of the internet the engine
// trusts (Config.BrokerRoots) and the sandbox does not.
func upstreamPKI(t testing.TB, h http.Handler) (roots *x509.CertPool, caPEM []byte, port string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test upstream CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ = x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close(); <-done })
	roots = x509.NewCertPool()
	roots.AddCert(ca)
	_, port, _ = net.SplitHostPort(l.Addr().String())
	return roots, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), port
}

// A brokered secret reaches its host from real clients in the sandbox —
// curl through the proxy and carried, Python's urllib, Node's https, a
// git clone over https with the token in its URL — while the sandbox
// holds only a placeholder of the secret's shape: in the variable (in
// place of the secret inside any value, overrides included), over the
// secret's file, and nowhere else (its environment, its output, a host's
// echo of a request header, the audit log). Those clients verify the host's certificate (the
// conversation's CA is in the system bundle mounted over the host's); a
// request to the host without the placeholder gets no secret.
func TestBrokerEndToEnd(t *testing.T) { bothLaunchers(t, testBrokerEndToEnd) }

func testBrokerEndToEnd(t *testing.T, mod func(*engine.Config)) {
	needNamespaces(t)
	testenv.NeedsTool(t, "curl")
	testenv.NeedsTool(t, "getent")
	const secret = "ghp_R3alS3cretT0kenN0tInTheSandb0x42abcd"
	fileSecret := "glpat-F1leS3cretT0kenXYZ" + strconv.Itoa(os.Getpid())
	wd := t.TempDir() // shown in the world: the secret's file is visible there
	secretFile := filepath.Join(wd, ".token")
	if err := os.WriteFile(secretFile, []byte(fileSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Not a name the environment policy treats as a secret: the engine's
	// environment passes it, and the placeholder must win.
	t.Setenv("BVTEST_GH", secret)
	t.Setenv("BVTEST_GH_COPY", secret)                      // the same secret under another name
	t.Setenv("BVTEST_FILE_COPY", fileSecret)                // the file's secret in a variable
	t.Setenv("BVTEST_URL", "https://x:"+secret+"@example/") // inside a value

	repos := t.TempDir()
	var authorized, unauthorized atomic.Int64
	var git http.Handler
	if _, err := exec.LookPath("git"); err == nil {
		src := filepath.Join(t.TempDir(), "src")
		for _, args := range [][]string{{"init", "-q", src}, {"-C", src, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "brokered"},
			{"clone", "-q", "--bare", src, filepath.Join(repos, "repo.git")}} {
			if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v %s", args, err, out)
			}
		}
		git = &cgi.Handler{Path: "/usr/lib/git-core/git-http-backend", Env: []string{"GIT_PROJECT_ROOT=" + repos, "GIT_HTTP_EXPORT_ALL=1"}}
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := r.Header.Get("Authorization")
		ok := a == "Bearer "+secret || a == "token "+fileSecret
		if raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(a, "Basic ")); err == nil && strings.HasPrefix(a, "Basic ") {
			ok = strings.HasSuffix(string(raw), ":"+secret)
		}
		if !ok {
			unauthorized.Add(1)
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized: "+a, http.StatusUnauthorized)
			return
		}
		authorized.Add(1)
		if r.URL.Path == "/echo" { // a host quoting the request back (GitHub's 400s)
			fmt.Fprintf(w, "version=%s auth=%s\n", r.Header.Get("X-Github-Api-Version"), a)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/repo.git") && git != nil {
			git.ServeHTTP(w, r)
			return
		}
		w.Write([]byte("authorized\n"))
	})
	roots, _, port := upstreamPKI(t, handler)
	host := "localhost:" + port
	var audit bytes.Buffer
	var mu sync.Mutex
	e := newEngine(t, mod, func(c *engine.Config) {
		c.Broker = []string{host + "=env:BVTEST_GH", host + "=file:" + secretFile}
		c.BrokerRoots = roots
		c.Audit = &lockedWriter{w: &audit, mu: &mu}
		c.Timeout = 60 * time.Second
	})
	tc := engine.ToolContext{WorkingDir: wd, ConversationID: "broker",
		Sandbox: engine.Sandbox{Profile: engine.ReadOnly, Network: []string{host}}}
	var outputs []string
	run := func(cmd string) engine.Result {
		t.Helper()
		r := e.Run(context.Background(), tc, engine.Input{Command: cmd})
		outputs = append(outputs, r.Output)
		return r
	}

	// The placeholders: the secrets' shapes, not their values.
	r := run(`printf '%s\n' "$BVTEST_GH"; cat ` + secretFile)
	ph := strings.Split(r.Output, "\n")
	if r.Status != engine.StatusOK || len(ph) < 2 || len(ph[0]) != len(secret) || !strings.HasPrefix(ph[0], "ghp_") || ph[0] == secret ||
		len(ph[1]) != len(fileSecret) || !strings.HasPrefix(ph[1], "glpat-") || ph[1] == fileSecret {
		t.Fatalf("placeholders: %s %q", r.Status, r.Output)
	}

	// curl through the proxy (the allowlist names a loopback server, so
	// the proxy variables are exported), verifying the certificate.
	r = run(`curl -sS --fail --max-time 30 -H "Authorization: Bearer $BVTEST_GH" https://` + host + `/api`)
	if r.Status != engine.StatusOK || !strings.HasPrefix(r.Output, "authorized\n") {
		t.Fatalf("curl through the proxy: %s %q", r.Status, r.Output)
	}
	// The file's placeholder works too, in another header scheme.
	r = run(`curl -sS --fail --max-time 30 -H "Authorization: token $(cat ` + secretFile + `)" https://` + host + `/api`)
	if r.Status != engine.StatusOK || !strings.HasPrefix(r.Output, "authorized\n") {
		t.Fatalf("curl with the file's placeholder: %s %q", r.Status, r.Output)
	}
	// The secret goes only into Authorization; what the host quotes back
	// reaches the sandbox as the placeholder.
	r = run(`curl -sS --fail --max-time 30 -H "X-GitHub-Api-Version: $BVTEST_GH" -H "Authorization: Bearer $BVTEST_GH" https://` + host + `/echo`)
	if want := "version=" + ph[0] + " auth=Bearer " + ph[0] + "\n"; r.Status != engine.StatusOK || !strings.HasPrefix(r.Output, want) {
		t.Errorf("echo: %s %q, want %q", r.Status, r.Output, want)
	}
	// The caller's overrides get the placeholder too.
	over := tc
	over.Env = map[string]string{"BVTEST_OVERRIDE": "Bearer " + secret}
	r = e.Run(context.Background(), over, engine.Input{Command: `printf '%s\n' "$BVTEST_OVERRIDE"`})
	outputs = append(outputs, r.Output)
	if r.Status != engine.StatusOK || r.Output != "Bearer "+ph[0]+"\n" {
		t.Errorf("override: %s %q", r.Status, r.Output)
	}
	// Carried: a client that ignores the proxy variables, by the
	// resolver's answer.
	r = run(`a=$(getent -s dns hosts localhost | cut -d' ' -f1); ` + noProxy +
		`curl -sS --fail --max-time 30 --resolve ` + host + `:"$a" -H "Authorization: Bearer $BVTEST_GH" https://` + host + `/api`)
	if r.Status != engine.StatusOK || !strings.HasPrefix(r.Output, "authorized\n") {
		t.Fatalf("carried curl: %s %q", r.Status, r.Output)
	}
	// Without the placeholder the host sees no secret.
	before := unauthorized.Load()
	r = run(`curl -sS --max-time 30 -o /dev/null -w '%{http_code}\n' -H "Authorization: Bearer guess" https://` + host + `/api`)
	if r.Status != engine.StatusOK || !strings.HasPrefix(r.Output, "401\n") || unauthorized.Load() != before+1 {
		t.Fatalf("without the placeholder: %s %q", r.Status, r.Output)
	}

	if testenv.HasTool(t, "python3") {
		r = run(`python3 -c 'import os, urllib.request as u; print(u.urlopen(u.Request("https://` + host + `/py", headers={"Authorization": "Bearer " + os.environ["BVTEST_GH"]}), timeout=30).read().decode(), end="")'`)
		if r.Status != engine.StatusOK || !strings.HasPrefix(r.Output, "authorized\n") {
			t.Errorf("python urllib: %s %q", r.Status, r.Output)
		}
	}
	if testenv.HasTool(t, "node") {
		// Node's https with the resolver's address (it trusts the CA
		// through NODE_EXTRA_CA_CERTS).
		r = run(`A=$(getent -s dns hosts localhost | cut -d' ' -f1) node -e '
require("https").get({host: process.env.A, servername: "localhost", port: ` + port + `, path: "/node",
  headers: {Authorization: "Bearer " + process.env.BVTEST_GH}}, r => r.pipe(process.stdout)).on("error", e => { console.log(e.message); process.exitCode = 1 })'`)
		if r.Status != engine.StatusOK || !strings.HasPrefix(r.Output, "authorized\n") {
			t.Errorf("node https: %s %q", r.Status, r.Output)
		}
	}
	if git != nil {
		r = run(`cd "$TMPDIR" && git clone -q https://x-access-token:$BVTEST_GH@` + host + `/repo.git && git -C repo log --format=%s`)
		if r.Status != engine.StatusOK || !strings.HasPrefix(r.Output, "brokered\n") {
			t.Errorf("git clone: %s %q", r.Status, r.Output)
		}
	}

	// Nowhere in the sandbox: its environment, every process's it can
	// read, the secret's file, the bundle; the engine's own environment
	// (t.Setenv is not in /proc/PID/environ, but the file is the
	// engine's: the sandbox must not read it at all).
	r = run(`env; cat /proc/*/environ 2>/dev/null | tr '\0' '\n'; cat ` + secretFile + ` /etc/ssl/certs/ca-certificates.crt 2>/dev/null | tail -3; ` +
		`if cat /proc/` + strconv.Itoa(os.Getpid()) + `/environ >/dev/null 2>&1; then echo engine-environ-readable; fi`)
	if r.Status != engine.StatusOK || strings.Contains(r.Output, "engine-environ-readable") || !strings.Contains(r.Output, "BVTEST_GH="+ph[0]) ||
		!strings.Contains(r.Output, "BVTEST_GH_COPY="+ph[0]) || !strings.Contains(r.Output, "BVTEST_FILE_COPY="+ph[1]) ||
		!strings.Contains(r.Output, "BVTEST_URL=https://x:"+ph[0]+"@example/") {
		t.Errorf("sandbox view: %s %q", r.Status, r.Output)
	}
	if authorized.Load() == 0 {
		t.Error("the host never saw the secret")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range []string{secret, fileSecret} {
		for i, out := range outputs {
			if strings.Contains(out, s) {
				t.Errorf("output %d holds a secret: %q", i, out)
			}
		}
		if strings.Contains(audit.String(), s) {
			t.Errorf("the audit log holds a secret")
		}
	}
}

// The proxy variables are not exported to a command whose clients the
// world's resolver carries: only when Config.ProxyEnv asks, when the
// allowlist names a loopback server of the host (reachable only through
// the proxy), and when the engine's own environment has a proxy variable
// (which would otherwise send the command's clients there).
func TestProxyVariablesOnlyWhenNeeded(t *testing.T) {
	needNamespaces(t)
	const show = `echo "${HTTPS_PROXY-unset} ${http_proxy-unset} ${npm_config_proxy-unset} ${NO_PROXY-unset}"`
	run := func(e *engine.Engine, network ...string) string {
		t.Helper()
		tc := engine.ToolContext{WorkingDir: t.TempDir(), ConversationID: "proxy-env",
			Sandbox: engine.Sandbox{Profile: engine.ReadOnly, Network: network}}
		r := e.Run(context.Background(), tc, engine.Input{Command: show})
		if r.Status != engine.StatusOK {
			t.Fatalf("%s %q", r.Status, r.Output)
		}
		return strings.TrimSpace(r.Output)
	}
	noHostProxy := func(c *engine.Config) {
		for _, kv := range os.Environ() {
			if name, _, _ := strings.Cut(kv, "="); !strings.HasSuffix(strings.ToUpper(name), "_PROXY") {
				c.Env.Environ = append(c.Env.Environ, kv)
			}
		}
	}
	e := newEngine(t, noHostProxy)
	if got := run(e, "registry.npmjs.org"); got != "unset unset unset unset" {
		t.Errorf("carried: %q, want no proxy variables", got)
	}
	if got := run(e, "localhost:8080"); !strings.HasPrefix(got, "http://127.0.0.1:") {
		t.Errorf("a loopback server of the host: %q, want the proxy", got)
	}
	if got := run(newEngine(t, noHostProxy, func(c *engine.Config) { c.ProxyEnv = true }), "registry.npmjs.org"); !strings.HasPrefix(got, "http://127.0.0.1:") {
		t.Errorf("Config.ProxyEnv: %q, want the proxy", got)
	}
	hostProxy := newEngine(t, noHostProxy, func(c *engine.Config) {
		c.Env.Environ = append(c.Env.Environ, "HTTPS_PROXY=http://proxy.corp.example:3128")
	})
	if got := run(hostProxy, "registry.npmjs.org"); !strings.HasPrefix(got, "http://127.0.0.1:") {
		t.Errorf("the engine's own HTTPS_PROXY: %q, want the egress proxy", got)
	}
}

// A call asking for a host its sandbox's allowlist lacks (Input.Network)
// needs approval and names the host, without running; approved, it runs
// with the host allowed; a host the allowlist covers asks nothing; the
// engine remembers no grant (the caller passes it on later calls).
func TestNetworkAskNeedsApproval(t *testing.T) {
	needNamespaces(t)
	testenv.NeedsTool(t, "curl")
	up := startCounted(t, "reached\n")
	_, port, _ := net.SplitHostPort(up.addr)
	host := "localhost:" + port
	e := newEngine(t)
	tc := engine.ToolContext{WorkingDir: t.TempDir(), ConversationID: "ask-net",
		Sandbox: engine.Sandbox{Profile: engine.ReadOnly, Network: []string{"pypi"}}}
	in := engine.Input{Command: `curl -sS --fail --max-time 20 http://` + host + `/`, Network: []string{host, "files.pythonhosted.org"}}

	r := e.Run(context.Background(), tc, in)
	if r.Status != engine.StatusNeedsApproval || !strings.Contains(r.Output, "network access to "+host+",") ||
		strings.Contains(r.Output, "pythonhosted") || up.hits.Load() != 0 {
		t.Fatalf("unapproved: %s %q (%d hits)", r.Status, r.Output, up.hits.Load())
	}
	approved := tc
	approved.Approved = true
	if r = e.Run(context.Background(), approved, in); r.Status != engine.StatusOK || !strings.HasPrefix(r.Output, "reached\n") || up.hits.Load() != 1 {
		t.Fatalf("approved: %s %q", r.Status, r.Output)
	}
	// No grant kept: the next call without the host has no way to it.
	if r = e.Run(context.Background(), tc, engine.Input{Command: in.Command}); r.Status == engine.StatusOK || up.hits.Load() != 1 {
		t.Errorf("a later call without the host: %s %q", r.Status, r.Output)
	}
	// Covered entries ask nothing.
	if r = e.Run(context.Background(), tc, engine.Input{Command: "true", Network: []string{"files.pythonhosted.org", "pypi"}}); r.Status != engine.StatusOK {
		t.Errorf("covered: %s %q", r.Status, r.Output)
	}
	for _, c := range []struct {
		tc engine.ToolContext
		in []string
	}{
		{engine.ToolContext{WorkingDir: tc.WorkingDir}, []string{"example.com"}}, // no sandbox
		{tc, []string{"http://example.com"}},                                     // not an entry
	} {
		if r = e.Run(context.Background(), c.tc, engine.Input{Command: "true", Network: c.in}); r.Status != engine.StatusError || !errors.Is(r.Err, engine.ErrBadInput) {
			t.Errorf("%v: %s %q, want bad input", c.in, r.Status, r.Output)
		}
	}
}

// TestBrokerLookupEndToEnd: a secret the embedding program's store
// resolves (Config.BrokerLookup, a reference other than env: and file:)
// is read once, by New, and brokered like the others: a call's own
// variable holding it reaches the sandbox as a placeholder, and a request
// with that placeholder reaches the host with the secret. A reference
// the store cannot resolve fails New.
func TestBrokerLookupEndToEnd(t *testing.T) {
	needNamespaces(t)
	testenv.NeedsTool(t, "curl")
	const secret = "ghp_St0reS3cretT0kenN0tInTheSandb0x42xyz"
	var authorized atomic.Int64
	roots, _, port := upstreamPKI(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secret {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		authorized.Add(1)
		w.Write([]byte("authorized\n"))
	}))
	host := "localhost:" + port
	var looked []string
	lookup := func(ref string) (string, error) {
		looked = append(looked, ref)
		if ref == "vault:gh" {
			return secret, nil
		}
		return "", errors.New("no such secret")
	}
	bad := testConfig()
	bad.Broker, bad.BrokerLookup = []string{host + "=vault:missing"}, lookup
	if e, err := engine.New(bad); err == nil {
		_ = e.Shutdown(context.Background())
		t.Fatal("New with a reference the store cannot resolve succeeded")
	}
	looked = nil
	e := newEngine(t, func(c *engine.Config) {
		c.Broker, c.BrokerLookup, c.BrokerRoots = []string{host + "=vault:gh"}, lookup, roots
		c.Timeout = 60 * time.Second
	})
	if len(looked) != 1 || looked[0] != "vault:gh" {
		t.Fatalf("lookups by New: %q, want one of vault:gh", looked)
	}
	tc := engine.ToolContext{WorkingDir: t.TempDir(), ConversationID: "lookup", Env: map[string]string{"GH_TOKEN": secret},
		Sandbox: engine.Sandbox{Profile: engine.ReadOnly, Network: []string{host}}}
	r := e.Run(context.Background(), tc, engine.Input{Command: `printf '%s\n' "$GH_TOKEN"; curl -sS --fail --max-time 30 -H "Authorization: Bearer $GH_TOKEN" https://` + host + `/api`})
	ph, rest, _ := strings.Cut(r.Output, "\n")
	if r.Status != engine.StatusOK || ph == secret || len(ph) != len(secret) || !strings.HasPrefix(ph, "ghp_") || !strings.HasPrefix(rest, "authorized\n") {
		t.Fatalf("%s %q", r.Status, r.Output)
	}
	if strings.Contains(r.Output, secret) || authorized.Load() != 1 {
		t.Fatalf("output %q, authorized %d", r.Output, authorized.Load())
	}
	if len(looked) != 1 {
		t.Errorf("the store was asked again after New: %q", looked)
	}
}
