package engine_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// goClient is a Go program built without proxy support (its transport
// reads no proxy variable) that prints what GET URL answers, sending
// $AUTH as Authorization when set, and connecting to $DIAL ("addr:port")
// when set instead of the URL's host, as curl's --resolve does: the URL's
// name is still its TLS server name and Host. Its TLS trusts the system's
// roots (on Debian the file Go reads is /etc/ssl/certs/ca-certificates.crt).
const goClient = `package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
)

func main() {
	tr := &http.Transport{Proxy: nil, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if d := os.Getenv("DIAL"); d != "" {
			addr = d
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	req, err := http.NewRequest("GET", os.Args[1], nil)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	if a := os.Getenv("AUTH"); a != "" {
		req.Header.Set("Authorization", a)
	}
	r, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	defer r.Body.Close()
	io.Copy(os.Stdout, r.Body)
	if r.StatusCode != http.StatusOK {
		fmt.Println("status", r.StatusCode)
		os.Exit(1)
	}
}
`

// buildGoClient builds goClient as dir/goclient (dir: a directory the
// sandbox shows, such as the working directory).
func buildGoClient(t *testing.T, dir string) {
	t.Helper()
	goTool := testenv.NeedsTool(t, "go")[0]
	src := filepath.Join(t.TempDir(), "goclient.go")
	if err := os.WriteFile(src, []byte(goClient), 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command(goTool, "build", "-o", filepath.Join(dir, "goclient"), src)
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GO111MODULE=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
}

// registryUpstream stands in for the internet: a tarball, a PyPI simple
// index with one wheel, and an npm registry with one package; it counts
// the requests of each path.
type registryUpstream struct {
	port string
	mu   sync.Mutex
	hits map[string]int
}

func (u *registryUpstream) count(path string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.hits[path]
}

func startRegistry(t *testing.T) *registryUpstream {
	t.Helper()
	var whl bytes.Buffer
	zw := zip.NewWriter(&whl)
	for name, body := range map[string]string{
		"bvpkg/__init__.py":                 "",
		"bvpkg-1.0.dist-info/METADATA":      "Metadata-Version: 2.1\nName: bvpkg\nVersion: 1.0\n",
		"bvpkg-1.0.dist-info/WHEEL":         "Wheel-Version: 1.0\nGenerator: bashvisor-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
		"bvpkg-1.0.dist-info/RECORD":        "",
		"bvpkg-1.0.dist-info/top_level.txt": "bvpkg\n",
	} {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(w, body)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(whl.Bytes())
	u := &registryUpstream{hits: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.hits[r.URL.Path]++
		u.mu.Unlock()
		switch r.URL.Path {
		case "/pkg.tgz":
			fmt.Fprint(w, "package tarball\n")
		case "/simple/bvpkg/":
			fmt.Fprintf(w, `<html><body><a href="/files/bvpkg-1.0-py3-none-any.whl#sha256=%x">bvpkg-1.0-py3-none-any.whl</a></body></html>`, sum)
		case "/files/bvpkg-1.0-py3-none-any.whl":
			w.Write(whl.Bytes())
		case "/bvpkg":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"name":"bvpkg","dist-tags":{"latest":"1.0.0"},"versions":{"1.0.0":{"name":"bvpkg","version":"1.0.0",`+
				`"dist":{"tarball":"http://localhost:%s/pkg.tgz","shasum":"0000000000000000000000000000000000000000"}}}}`, u.port)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	_, u.port, _ = net.SplitHostPort(srv.Listener.Addr().String())
	return u
}

// Real clients in the sandbox reach an allowed host and nothing else:
// Node's fetch (which ignores the proxy variables) and a Go program built
// without proxy support, carried by the world's resolver's answer; pip
// download and npm view through the proxy (exported here: the allowlist
// names a loopback server). The upstream sees each request; names the
// allowlist lacks get NXDOMAIN, or are refused by Host.
// The upstream stands for the internet as "localhost": a client asks the
// world's resolver for it as the absolute name "localhost." (which
// /etc/hosts does not answer) or takes its address from getent -s dns.
func TestProxyUnawareClients(t *testing.T) {
	needNamespaces(t)
	testenv.NeedsTool(t, "getent")
	wd := t.TempDir() // the world shows it: the Go program runs from there
	buildGoClient(t, wd)
	bothLaunchers(t, func(t *testing.T, mod func(*engine.Config)) { testProxyUnawareClients(t, mod, wd) })
}

func testProxyUnawareClients(t *testing.T, mod func(*engine.Config), wd string) {
	up := startRegistry(t)
	port := up.port
	e := newEngine(t, mod, func(c *engine.Config) { c.Timeout = 90 * time.Second })
	tc := engine.ToolContext{WorkingDir: wd, ConversationID: "clients",
		Sandbox: engine.Sandbox{Profile: engine.ReadOnly, Network: []string{"localhost:" + port}}}
	run := func(cmd string) engine.Result {
		t.Helper()
		return e.Run(context.Background(), tc, engine.Input{Command: cmd})
	}
	expect := func(what string, r engine.Result, status engine.Status, prefix, path string, hits int) {
		t.Helper()
		if r.Status != status || !strings.HasPrefix(strings.TrimPrefix(r.Output, "[command failed: exit code 1]\n"), prefix) {
			t.Errorf("%s: %s %q, want %s and %q first", what, r.Status, r.Output, status, prefix)
		}
		if path != "" && up.count(path) != hits {
			t.Errorf("%s: the upstream saw %d requests of %s, want %d", what, up.count(path), path, hits)
		}
	}

	// The Go program: carried from the resolver's address by the Host it
	// sends; another Host there is refused.
	r := run(`a=$(getent -s dns hosts localhost | cut -d' ' -f1); DIAL=$a:` + port + ` ./goclient http://localhost:` + port + `/pkg.tgz`)
	expect("go without proxy support", r, engine.StatusOK, "package tarball\n", "/pkg.tgz", 1)
	r = run(`a=$(getent -s dns hosts localhost | cut -d' ' -f1); DIAL=$a:` + port + ` ./goclient http://denied.example:` + port + `/pkg.tgz`)
	expect("go, a host not allowed", r, engine.StatusFailed, "", "/pkg.tgz", 1)
	if !strings.Contains(r.Output, "refused: denied.example") {
		t.Errorf("go, a host not allowed: %q, want its refusal", r.Output)
	}

	if testenv.HasTool(t, "node") {
		r = run(`node -e 'fetch("http://localhost.:` + port + `/pkg.tgz").then(r => r.text()).then(t => process.stdout.write(t), e => { console.log("error", (e.cause || e).code); process.exitCode = 1 })'`)
		expect("node fetch", r, engine.StatusOK, "package tarball\n", "/pkg.tgz", 2)
		r = run(`node -e 'fetch("http://denied.example:` + port + `/pkg.tgz").then(r => r.text()).then(t => process.stdout.write(t), e => { console.log("error", (e.cause || e).code); process.exitCode = 1 })'`)
		expect("node fetch, a host not allowed", r, engine.StatusFailed, "error ENOTFOUND\n", "/pkg.tgz", 2)
	}
	if testenv.HasTool(t, "npm") {
		r = run(`npm view bvpkg version --registry http://localhost:` + port + `/ --no-update-notifier --no-audit --no-fund`)
		expect("npm view", r, engine.StatusOK, "1.0.0\n", "/bvpkg", 1)
	}
	if testenv.HasTool(t, "python3") {
		r = run(`python3 -m pip download -q --no-deps --only-binary=:all: --no-cache-dir --disable-pip-version-check ` +
			`-d "$TMPDIR/dl" -i http://localhost:` + port + `/simple/ --trusted-host localhost bvpkg==1.0 && ls "$TMPDIR/dl"`)
		expect("pip download", r, engine.StatusOK, "bvpkg-1.0-py3-none-any.whl\n", "/files/bvpkg-1.0-py3-none-any.whl", 1)
	}
}

// A Go program without proxy support, carried, reaches a broker host with
// the secret in place of its placeholder, trusting the conversation's CA
// from the system bundle mounted over the host's (Go reads no
// NODE_EXTRA_CA_CERTS); without the placeholder the host sees no secret.
func TestBrokerGoClient(t *testing.T) {
	needNamespaces(t)
	testenv.NeedsTool(t, "getent")
	wd := t.TempDir()
	buildGoClient(t, wd)
	const secret = "ghp_G0ClientS3cretN0tInTheSandb0x42abcdef"
	t.Setenv("BVTEST_GO_TOKEN", secret)
	roots, _, port := upstreamPKI(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secret {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, "authorized\n")
	}))
	host := "localhost:" + port
	e := newEngine(t, func(c *engine.Config) {
		c.Broker = []string{host + "=env:BVTEST_GO_TOKEN"}
		c.BrokerRoots = roots
		c.Timeout = 60 * time.Second
	})
	tc := engine.ToolContext{WorkingDir: wd, ConversationID: "broker-go",
		Sandbox: engine.Sandbox{Profile: engine.ReadOnly, Network: []string{host}}}
	carried := `DIAL=$(getent -s dns hosts localhost | cut -d' ' -f1):` + port + ` `
	r := e.Run(context.Background(), tc, engine.Input{Command: carried + `AUTH="Bearer $BVTEST_GO_TOKEN" ./goclient https://` + host + `/api`})
	if r.Status != engine.StatusOK || !strings.HasPrefix(r.Output, "authorized\n") || strings.Contains(r.Output, secret) {
		t.Errorf("go through the broker: %s %q", r.Status, r.Output)
	}
	r = e.Run(context.Background(), tc, engine.Input{Command: carried + `AUTH="Bearer guess" ./goclient https://` + host + `/api`})
	if r.Status != engine.StatusFailed || !strings.Contains(r.Output, "status 401") {
		t.Errorf("go without the placeholder: %s %q", r.Status, r.Output)
	}
}
