package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestMCPForwardFlag: -forward needs the sandbox (not -http, nor a local
// engine); -forward-addr must name an address browsers reach.
func TestMCPForwardFlag(t *testing.T) {
	t.Setenv(tokenEnv, "")
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"-forward", "-http", ":0", "-no-auth"}, "-forward needs -sandbox"},
	} {
		if _, err := parseMCPFlags(c.args); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: error %v, want %q", c.args, err, c.err)
		}
	}
	if f, err := parseMCPFlags([]string{"-forward", "-forward-addr", ":0", "-http", ":0", "-no-auth", "-sandbox", "workspace-write"}); err != nil || !f.forward || f.forwardAddr != ":0" {
		t.Errorf("-forward -http -sandbox: %+v %v", f, err)
	}
	for _, args := range [][]string{{"-forward", "-sandbox", "read-only"}, {"-forward", "-http", ":0", "-no-auth", "-sandbox", "read-only", "-executors", "127.0.0.1:1"}} {
		if _, err := parseMCPFlags(args); err != nil {
			t.Errorf("%q (over stdio; on a fleet front): %v", args, err)
		}
	}
	for addr, want := range map[string]string{"0.0.0.0:0": "name the address browsers reach", ":0": "http://127.0.0.1:"} {
		f := &mcpFlags{forward: true, forwardAddr: addr}
		base, err := f.listenForward()
		if f.forwardLn != nil {
			f.forwardLn.Close()
		}
		if got := base + fmt.Sprint(err); !strings.Contains(got, want) {
			t.Errorf("-forward-addr %s: %q, want %q", addr, got, want)
		}
	}
}

// withBearer adds an Authorization header to every request.
type withBearer struct {
	token string
	next  http.RoundTripper
}

func (b withBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// TestMCPForward: `mcp -http -sandbox read-only -forward` offers
// bash_forward, whose URL (a path of fw-LABEL.localhost at another
// loopback port than -http's: an origin of its own) serves the server a background command runs on the
// conversation's localhost, with the token, or to a browser once with
// its one-time code and then with the cookie it got. The forward origin
// serves no /mcp.
func TestMCPForward(t *testing.T) {
	testenv.Needf(t, testenv.Namespaces, sandbox.Probe().Namespaces, "no private namespaces: %s", sandbox.Probe())
	testenv.NeedsTool(t, "python3", "curl")
	const token = "forward-token-0123456789"
	checkForward(t, startHTTPDemo(t, []string{tokenEnv + "="}, "-sandbox", "read-only", "-forward", "-token", token), token)
}

// TestMCPForwardFleet: on a fleet front (`mcp -http -sandbox read-only
// -forward -executors ADDR`), bash_forward's URL serves the server a
// background command runs on its executor, as TestMCPForward checks for a
// local engine: the connection is carried over the cluster transport.
func TestMCPForwardFleet(t *testing.T) {
	testenv.Needf(t, testenv.Namespaces, sandbox.Probe().Namespaces, "no private namespaces: %s", sandbox.Probe())
	testenv.NeedsTool(t, "python3", "curl")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	exec1 := ln.Addr().String()
	ln.Close()
	startDemo(t, []string{"BV_SCRATCH=" + t.TempDir(), "BV_NAME=exec-1"}, regexp.MustCompile(`serving at (\S+)`),
		"executor", "-listen", exec1, "-name", "exec-1", "-grace", "200ms")
	const token = "forward-fleet-token-0123456789"
	checkForward(t, startHTTPDemo(t, []string{tokenEnv + "="}, "-sandbox", "read-only", "-forward", "-token", token, "-executors", exec1), token)
}

// checkForward is TestMCPForward's check of the server at addr, which
// takes token.
func checkForward(t *testing.T, addr, token string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, port, _ := net.SplitHostPort(addr); strings.HasSuffix(host, ".localhost") {
			addr = net.JoinHostPort("127.0.0.1", port) // as browsers and curl resolve it
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", HTTPClient: &http.Client{Transport: withBearer{token, tr}}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	text := func(tool string, args map[string]any) string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		s := res.Content[0].(*mcp.TextContent).Text
		if res.IsError {
			t.Fatalf("%s: %s", tool, s)
		}
		return s
	}
	text("bash", map[string]any{"mode": "background",
		"command": "mkdir -p /tmp/site && echo served-from-the-sandbox > /tmp/site/index.html && cd /tmp/site && exec python3 -m http.server 3000"})
	if out := text("bash", map[string]any{"command": "for i in $(seq 200); do curl -sf -o /dev/null localhost:3000/ && exit 0; sleep 0.1; done; exit 7"}); out != "[listening: 3000 (job-1)]" {
		t.Fatalf("the conversation's next command: %q", out)
	}
	reply := text("bash_forward", map[string]any{"port": 3000})
	u, _, _ := strings.Cut(reply, "\n")
	clean, code, _ := strings.Cut(u, "?bashvisor_code=")
	origin, path, _ := strings.Cut(strings.TrimPrefix(clean, "http://"), "/")
	_, port, _ := net.SplitHostPort(origin)
	if !strings.HasPrefix(origin, "fw-") || !strings.HasSuffix(origin, ".localhost:"+port) || strings.HasSuffix(addr, ":"+port) ||
		!strings.HasPrefix(path, "forward/") || code == "" || strings.Contains(reply, token) ||
		!strings.Contains(reply, "Programs use http://127.0.0.1:"+port+"/"+path+" with") {
		t.Fatalf("bash_forward's reply %q is not a one-time link of an origin of its own apart from http://%s", reply, addr)
	}
	// Curl resolves *.localhost as browsers do.
	if out, err := exec.CommandContext(ctx, "curl", "-s", clean).CombinedOutput(); err != nil || !strings.Contains(string(out), "Unauthorized") {
		t.Errorf("curl %s: %q %v", clean, out, err)
	}
	get := func(c *http.Client, u, tok string) string {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.Status[:4] + string(b)
	}
	plain := &http.Client{Transport: tr}
	for tok, want := range map[string]string{token: "200 served-from-the-sandbox\n", "": "401 "} {
		if got := get(plain, clean+"index.html", tok); !strings.HasPrefix(got, want) {
			t.Errorf("GET %s with token %q: %q, want %q", clean, tok, got, want)
		}
	}
	if got := get(plain, "http://127.0.0.1:"+port+"/"+path+"index.html", token); got != "200 served-from-the-sandbox\n" {
		t.Errorf("a program at the forward origin's own host: %q", got)
	}
	// A browser: the link once, then its cookie.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Transport: tr, Jar: jar}
	if got := get(browser, u, ""); got != "200 served-from-the-sandbox\n" {
		t.Errorf("a browser opening %s: %q", u, got)
	}
	if got := get(browser, clean+"index.html", ""); got != "200 served-from-the-sandbox\n" {
		t.Errorf("the browser's next request: %q", got)
	}
	if got := get(plain, u, ""); !strings.HasPrefix(got, "401 ") {
		t.Errorf("the link a second time: %q", got)
	}
	// The forward origin serves no /mcp, and /mcp's serves no forward.
	if got := get(plain, "http://"+origin+"/mcp", token); !strings.HasPrefix(got, "404 ") {
		t.Errorf("/mcp at the forward origin: %q", got)
	}
	if got := get(plain, "http://"+addr+strings.TrimPrefix(clean, "http://"+origin), token); !strings.HasPrefix(got, "404 ") {
		t.Errorf("the forward path at /mcp's origin: %q", got)
	}
}

// TestMCPForwardStdio: `mcp -sandbox read-only -forward` over stdio
// offers bash_forward and serves its URLs on the -forward-addr listener
// alone (stdio has no token): a browser opens the link once with its
// one-time code and then with its cookie; without them, or with any
// Authorization header, nothing is served; the listener serves no /mcp.
func TestMCPForwardStdio(t *testing.T) {
	testenv.Needf(t, testenv.Namespaces, sandbox.Probe().Namespaces, "no private namespaces: %s", sandbox.Probe())
	testenv.NeedsTool(t, "python3", "curl")
	if demoBin == "" {
		t.Fatal("the demo binary did not build (see TestMain's output)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.Command(demoBin, "mcp", "-C", t.TempDir(), "-grace", "200ms", "-sandbox", "read-only", "-forward")
	cmd.Env = append(os.Environ(), tokenEnv+"=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	sc := bufio.NewScanner(stderr)
	re := regexp.MustCompile(`forwards \(bash_forward\) at http://(\S+)/forward/`)
	var fwAddr string
	for fwAddr == "" && sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			fwAddr = m[1]
		}
	}
	go io.Copy(io.Discard, stderr)
	if fwAddr == "" {
		t.Fatal("no forward listener announced")
	}
	text := func(tool string, args map[string]any) string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		s := res.Content[0].(*mcp.TextContent).Text
		if res.IsError {
			t.Fatalf("%s: %s", tool, s)
		}
		return s
	}
	text("bash", map[string]any{"mode": "background",
		"command": "mkdir -p /tmp/site && echo stdio-served > /tmp/site/index.html && cd /tmp/site && exec python3 -m http.server 3000"})
	text("bash", map[string]any{"command": "for i in $(seq 200); do curl -sf -o /dev/null localhost:3000/ && exit 0; sleep 0.1; done; exit 7"})
	u, _, _ := strings.Cut(text("bash_forward", map[string]any{"port": 3000}), "\n")
	clean, code, _ := strings.Cut(u, "?bashvisor_code=")
	_, port, _ := net.SplitHostPort(fwAddr)
	if !strings.HasPrefix(clean, "http://fw-") || !strings.Contains(clean, ".localhost:"+port+"/forward/") || code == "" {
		t.Fatalf("bash_forward's URL %q is not a one-time link of the forward listener %s", u, fwAddr)
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, port, _ := net.SplitHostPort(addr); strings.HasSuffix(host, ".localhost") {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	get := func(c *http.Client, u, auth string) string {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.Status[:4] + string(b)
	}
	plain := &http.Client{Transport: tr}
	if got := get(plain, clean+"index.html", ""); !strings.HasPrefix(got, "401 ") {
		t.Errorf("without the code: %q", got)
	}
	for _, auth := range []string{"Bearer anything-0123456789", "Basic YTpi"} {
		if got := get(plain, clean+"index.html", auth); !strings.HasPrefix(got, "401 ") {
			t.Errorf("with Authorization %q: %q", auth, got)
		}
	}
	if got := get(plain, "http://"+fwAddr+"/mcp", ""); !strings.HasPrefix(got, "404 ") {
		t.Errorf("/mcp on the forward listener: %q", got)
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Transport: tr, Jar: jar}
	if got := get(browser, u, ""); got != "200 stdio-served\n" {
		t.Errorf("a browser opening %s: %q", u, got)
	}
	if got := get(browser, clean+"index.html", ""); got != "200 stdio-served\n" {
		t.Errorf("the browser's next request: %q", got)
	}
	if got := get(plain, u, ""); !strings.HasPrefix(got, "401 ") {
		t.Errorf("the link a second time: %q", got)
	}
}
