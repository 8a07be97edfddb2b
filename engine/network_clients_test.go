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

// noProxyGo is a Go program built without proxy support (its transport
// reads no proxy variable): it prints what GET URL answers, sending
// HOST as the Host header when given.
const noProxyGo = `package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
)

func main() {
	c := &http.Client{Transport: &http.Transport{Proxy: nil}}
	req, err := http.NewRequest("GET", os.Args[1], nil)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	if len(os.Args) > 2 {
		req.Host = os.Args[2]
	}
	r, err := c.Do(req)
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
	goTool := testenv.NeedsTool(t, "go")[0]
	wd := t.TempDir() // the world shows it: the Go program runs from there
	src := filepath.Join(t.TempDir(), "noproxy.go")
	if err := os.WriteFile(src, []byte(noProxyGo), 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command(goTool, "build", "-o", filepath.Join(wd, "noproxy"), src)
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GO111MODULE=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
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

	// The Go program: carried by the Host it sends to the resolver's
	// address; another Host there is refused.
	r := run(`a=$(getent -s dns hosts localhost | cut -d' ' -f1); ./noproxy "http://$a:` + port + `/pkg.tgz" localhost:` + port)
	expect("go without proxy support", r, engine.StatusOK, "package tarball\n", "/pkg.tgz", 1)
	r = run(`a=$(getent -s dns hosts localhost | cut -d' ' -f1); ./noproxy "http://$a:` + port + `/pkg.tgz" denied.example:` + port)
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
