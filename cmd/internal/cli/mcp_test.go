package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
)

// The stdio and HTTP behaviour of `demo mcp` is tested end to end against
// the built binary in package mcpserver; these are the flag checks.

// parseMCPFlags parses and checks args as `demo mcp` does.
func parseMCPFlags(args []string) (*mcpFlags, error) {
	f, fs := newMCPFlags()
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return f, f.check(fs)
}

func TestMCPFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	t.Setenv(tokenEnv, "")
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"-http", "0.0.0.0:8765", "-no-auth"}, "refusing to serve -http 0.0.0.0:8765 with -no-auth"},
		{[]string{"-http", "192.168.1.10:80", "-no-auth"}, "with -no-auth: the address is not loopback"},
		{[]string{"-http", ":0", "-no-auth", "-token", "0123456789abcdef"}, "-no-auth contradicts"},
		{[]string{"-http", ":0", "-token", "short"}, "-token (or $BASHVISOR_MCP_TOKEN) must be at least 16 bytes"},
		{[]string{"-tokens", "f"}, "need -http"},
		{[]string{"-no-auth"}, "need -http"},
		{[]string{"-http", ":0", "-oauth-scope", "x"}, "need -oauth-issuer"},
		{[]string{"-http", "0.0.0.0:1", "-oauth-issuer", "https://auth.example"}, "needs -oauth-resource"},
		{[]string{"-env-policy", "all"}, "-env-policy must be inherit-safe or allowlist"},
		{[]string{"-coauthor", "Bot"}, `-coauthor must look like "Name <email>"`},
		{[]string{"-C", filepath.Join(file, "missing")}, "-C:"},
		{[]string{"-C", file}, "is not a directory"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-timeout", "soon"}, "invalid value"},
		{[]string{"-profile", "paranoid"}, `-profile: unknown permission profile "paranoid"`},
		{[]string{"-metrics"}, "-metrics needs -http"},
		{[]string{"-on-timeout", "detach"}, `-on-timeout must be kill or background, not "detach"`},
		{[]string{"-http", ":0", "-max-sessions", "-1"}, "must not be negative"},
		{[]string{"-http", ":0", "-conn-idle", "0s"}, "-conn-idle must be positive"},
	} {
		_, err := parseMCPFlags(c.args)
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: error %v, want %q", c.args, err, c.err)
		}
	}
	for _, args := range [][]string{
		{},
		{"-http", "127.0.0.1:8765"},
		{"-http", ":8765"}, // binds 127.0.0.1:8765
		{"-http", "localhost:0"},
		{"-http", "[::1]:8765"},
		{"-http", "0.0.0.0:8765", "-token", "0123456789abcdef"},
		{"-http", "0.0.0.0:8765"}, // a generated token
		{"-http", ":0", "-no-auth"},
		{"-http", ":0", "-tokens", file, "-oauth-issuer", "http://127.0.0.1:1", "-oauth-scope", "bash", "-oauth-resource", "http://x/mcp"},
		{"-http", ":0", "-metrics", "-shared-conversation", "-max-sessions", "0", "-session-idle", "0", "-max-conns", "10", "-conn-idle", "1s"},
		{"-C", t.TempDir(), "-timeout", "5s", "-slow-timeout", "1m", "-grace", "1s", "-restricted",
			"-coauthor", "Bot <bot@example.com>", "-audit", filepath.Join(t.TempDir(), "a.jsonl"), "-env-policy", "allowlist", "-profile", "standard"},
	} {
		if _, err := parseMCPFlags(args); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
	t.Setenv(tokenEnv, "from-env-0123456789")
	f, err := parseMCPFlags([]string{"-http", "0.0.0.0:8765"})
	if err != nil || f.token != "from-env-0123456789" {
		t.Errorf("token from $%s: %+v %v", tokenEnv, f, err)
	}
	if f, err := parseMCPFlags(nil); err != nil || f.token != "" {
		t.Errorf("stdio with $%s set: %+v %v; want it ignored", tokenEnv, f, err)
	}
	f, _ = parseMCPFlags([]string{"-timeout", "3s", "-grace", "100ms", "-env-policy", "allowlist", "-profile", "guarded", "-coauthor", "Bot <b@x.org>", "-on-timeout", "background"})
	if c := f.engineConfig(nil, nil); c.Timeout != 3*time.Second || c.Lifecycle.Grace != 100*time.Millisecond || c.Env.Policy != "allowlist" ||
		c.Permissions == nil || c.CoAuthor != "Bot <b@x.org>" || c.Audit != nil || c.OnTimeout != engine.OnTimeoutBackground {
		t.Errorf("engine config %+v", c)
	}
}

func TestMCPRefusesOpenAddressWithoutAuth(t *testing.T) {
	c := demo(t, []string{tokenEnv + "="}, "mcp", "-http", "0.0.0.0:0", "-no-auth")
	if c.code != exitUsage || !strings.HasPrefix(c.stderr, "demo mcp: refusing to serve -http 0.0.0.0:0 with -no-auth") {
		t.Errorf("%v", c)
	}
}

// A stdio server started from a shell that exported $BASHVISOR_MCP_TOKEN
// for HTTP clients serves as usual and says in one line that it ignores
// the variable.
func TestMCPStdioIgnoresHTTPToken(t *testing.T) {
	if demoBin == "" {
		t.Fatal("the demo binary did not build (see TestMain's output)")
	}
	cmd := exec.Command(demoBin, "mcp", "-C", t.TempDir())
	cmd.Env = append(os.Environ(), tokenEnv+"=exported-for-http-0123456789")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	hung := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
	defer hung.Stop()
	io.WriteString(stdin, initializeBody+"\n")
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	stdin.Close() // EOF ends the server
	if err := cmd.Wait(); err != nil {
		t.Fatalf("demo mcp over stdio with $%s set: %v\n%s", tokenEnv, err, stderr.String())
	}
	if !strings.Contains(line, `"serverInfo"`) {
		t.Errorf("no initialize result on stdout: %q", line)
	}
	want := "demo mcp: ignoring $" + tokenEnv + ": it is for -http (a stdio server has one principal and no authentication)\n"
	if !strings.HasPrefix(stderr.String(), want) || strings.Count(stderr.String(), tokenEnv) != 1 {
		t.Errorf("stderr %q, want it to start with %q", stderr.String(), want)
	}
}

// startHTTPServer starts `demo mcp -http addr` with env and returns the
// stderr lines up to the "listening" line (that line last), and its
// address; the server is stopped with SIGTERM at the end of the test.
func startHTTPServer(t *testing.T, env []string, addr string) (lines []string, listening string) {
	t.Helper()
	if demoBin == "" {
		t.Fatal("the demo binary did not build (see TestMain's output)")
	}
	cmd := exec.Command(demoBin, "mcp", "-C", t.TempDir(), "-http", addr)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	hung := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.Contains(sc.Text(), "listening on") {
			break
		}
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		for sc.Scan() {
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("demo mcp -http %s after SIGTERM: %v", addr, err)
		}
		hung.Stop()
	})
	if m := regexp.MustCompile(`listening on http://([^/]+)/mcp`).FindStringSubmatch(lines[len(lines)-1]); m != nil {
		listening = m[1]
	}
	return lines, listening
}

// A server reachable from other hosts whose only credential is the
// generated token warns in one line; on loopback, or with a token given,
// it does not.
func TestMCPGeneratedTokenWarnsOffLoopback(t *testing.T) {
	cfg := "XDG_CONFIG_HOME=" + t.TempDir()
	for _, c := range []struct {
		env  []string
		addr string
		warn bool
	}{
		{[]string{tokenEnv + "=", cfg}, "0.0.0.0:0", true},
		{[]string{tokenEnv + "=", cfg}, "[::]:0", true},
		{[]string{tokenEnv + "=", cfg}, ":0", false},
		{[]string{tokenEnv + "=", cfg}, "127.0.0.1:0", false},
		{[]string{tokenEnv + "=given-0123456789abcdef", cfg}, "0.0.0.0:0", false},
	} {
		lines, addr := startHTTPServer(t, c.env, c.addr)
		if addr == "" {
			t.Errorf("-http %s: no listening line in %q", c.addr, lines)
			continue
		}
		var warned []string
		for _, l := range lines {
			if strings.HasPrefix(l, "warning: ") {
				warned = append(warned, l)
			}
		}
		if got := len(warned) == 1 && strings.Contains(warned[0], "reachable from other hosts") && strings.Contains(warned[0], "bind 127.0.0.1"); got != c.warn || len(warned) > 1 {
			t.Errorf("-http %s (%s): warnings %q, want a warning: %v", c.addr, c.env[0], warned, c.warn)
		}
	}
}

// `-http :PORT` means 127.0.0.1:PORT, as the README says; without a
// token configuration it generates one into a 0600 file, says where, and
// keeps it for the next start.
func TestMCPGeneratedToken(t *testing.T) {
	if demoBin == "" {
		t.Fatal("the demo binary did not build (see TestMain's output)")
	}
	cfg := t.TempDir()
	path := filepath.Join(cfg, "bashvisor", "mcp-token")
	var first string
	for i, verb := range []string{"generated", "kept"} {
		cmd := exec.Command(demoBin, "mcp", "-C", t.TempDir(), "-http", ":0")
		cmd.Env = append(os.Environ(), tokenEnv+"=", "XDG_CONFIG_HOME="+cfg)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		hung := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
		sc := bufio.NewScanner(stderr)
		var line string
		for line == "" && sc.Scan() {
			if strings.Contains(sc.Text(), "listening on") {
				line = sc.Text()
			}
		}
		m := regexp.MustCompile(`^bashvisor MCP server listening on http://(127\.0\.0\.1:\d+)/mcp \(bearer token (\w+) in (.*)\)$`).FindStringSubmatch(line)
		if m == nil || m[2] != verb || m[3] != path {
			t.Errorf("start %d: %q, want it on 127.0.0.1 with the token %s in %s", i, line, verb, path)
		}
		st, err := os.Stat(path)
		tok, _ := os.ReadFile(path)
		if err != nil || st.Mode().Perm() != 0o600 || len(strings.TrimSpace(string(tok))) < 16 {
			t.Errorf("token file: %v %v %q", st, err, tok)
		}
		if i == 0 {
			first = string(tok)
		} else if string(tok) != first {
			t.Error("the token changed between starts")
		}
		if m != nil {
			for auth, want := range map[string]int{"": 401, "Bearer " + strings.TrimSpace(string(tok)): 200} {
				c, br := dial(t, m[1])
				hdr := "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
				if auth != "" {
					hdr += "Authorization: " + auth + "\r\n"
				}
				if resp, body := request(t, c, br, "POST", "/mcp", hdr, initializeBody); resp.StatusCode != want {
					t.Errorf("Authorization %q: %d %s", auth, resp.StatusCode, body)
				}
			}
		}
		cmd.Process.Signal(syscall.SIGTERM)
		for sc.Scan() {
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("demo mcp -http :0 after SIGTERM: %v", err)
		}
		hung.Stop()
	}
	// A token file others can read is refused.
	os.Chmod(path, 0o644)
	if c := demo(t, []string{tokenEnv + "=", "XDG_CONFIG_HOME=" + cfg}, "mcp", "-http", ":0"); c.code != 1 || !strings.Contains(c.stderr, "must be a regular file of yours with mode 0600") {
		t.Errorf("%v", c)
	}
}

func TestListenAddrDefaultsToLoopback(t *testing.T) {
	for in, want := range map[string]string{
		":8765": "127.0.0.1:8765", "0.0.0.0:1": "0.0.0.0:1", "[::]:2": "[::]:2", "127.0.0.1:3": "127.0.0.1:3", "localhost:4": "localhost:4",
	} {
		if got := listenAddr(in); got != want {
			t.Errorf("listenAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestServerRuntime(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	tuned := serverRuntime{maxProcs: 4, gcPercent: serverGCPercent, memLimit: serverMemLimit}
	for _, c := range []struct {
		env    func(string) string
		numCPU int
		want   serverRuntime
	}{
		{env(), 2, tuned},
		{env(), 1, tuned},
		{env(), 8, serverRuntime{maxProcs: 10, gcPercent: serverGCPercent, memLimit: serverMemLimit}},
		{env("GOMAXPROCS", "2"), 2, serverRuntime{gcPercent: serverGCPercent, memLimit: serverMemLimit}},
		{env("GOGC", "100"), 2, serverRuntime{maxProcs: 4}},
		{env("GOMEMLIMIT", "1GiB"), 2, serverRuntime{maxProcs: 4}},
		{env("GOGC", "off", "GOMAXPROCS", "3"), 2, serverRuntime{}},
	} {
		if got := serverRuntimeFor(c.env, c.numCPU); got != c.want {
			t.Errorf("numCPU %d: got %+v, want %+v", c.numCPU, got, c.want)
		}
	}
}

// startHTTPDemo starts `demo mcp -http 127.0.0.1:0 ARGS` and returns the
// address it listens on; the server is stopped with SIGTERM at the end of
// the test and must exit 0.
func startHTTPDemo(t *testing.T, env []string, args ...string) string {
	t.Helper()
	if demoBin == "" {
		t.Fatal("the demo binary did not build (see TestMain's output)")
	}
	cmd := exec.Command(demoBin, append([]string{"mcp", "-C", t.TempDir(), "-grace", "200ms", "-http", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	hung := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	sc := bufio.NewScanner(stderr)
	re := regexp.MustCompile(`listening on http://(\S+)/mcp `)
	var addr string
	for addr == "" && sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			addr = m[1]
		}
	}
	done := make(chan string)
	go func() {
		var rest strings.Builder
		for sc.Scan() {
			rest.WriteString(sc.Text() + "\n")
		}
		done <- rest.String()
	}()
	t.Cleanup(func() {
		defer hung.Stop()
		cmd.Process.Signal(syscall.SIGTERM)
		rest := <-done
		if err := cmd.Wait(); err != nil {
			t.Errorf("demo mcp after SIGTERM: %v\n%s", err, rest)
		}
	})
	if addr == "" {
		t.Fatal("demo mcp -http did not start")
	}
	return addr
}

// request sends one HTTP/1.1 request on c and reads the answer.
func request(t *testing.T, c net.Conn, br *bufio.Reader, method, path, header, body string) (*http.Response, string) {
	t.Helper()
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n%s\r\n%s", method, path, c.RemoteAddr(), len(body), header, body)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// dial connects to addr; the connection is closed at the end of the test.
func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// closedWithin reports how long the server took to close c, failing after d.
func closedWithin(t *testing.T, c net.Conn, br *bufio.Reader, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(start.Add(d))
	if rest, err := io.ReadAll(br); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("connection still open after %v: %v (read %q)", d, err, rest)
	}
	return time.Since(start)
}

// The bounds of `demo mcp -http`: idle keep-alive connections are closed,
// refused requests close their connection, the session cap answers 503,
// and -metrics serves /metrics behind the token.
func TestMCPHTTPBounds(t *testing.T) {
	addr := startHTTPDemo(t, []string{tokenEnv + "=tok-0123456789abcdef"}, "-conn-idle", "500ms", "-max-sessions", "1", "-metrics")
	const auth = "Authorization: Bearer tok-0123456789abcdef\r\n"

	// A scrape keeps its connection alive until it has been idle 500ms.
	c, br := dial(t, addr)
	resp, body := request(t, c, br, "GET", "/metrics", auth, "")
	for _, want := range []string{"bashvisor_commands_running 0", "bashvisor_jobs_running 0", "go_goroutines ", "process_resident_memory_bytes "} {
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("/metrics: %d, %q missing", resp.StatusCode, want)
		}
	}
	if d := closedWithin(t, c, br, 10*time.Second); d < 400*time.Millisecond {
		t.Errorf("idle connection closed after %v, before -conn-idle 500ms", d)
	} else {
		t.Logf("idle connection closed after %v", d)
	}

	// Without the token: 401, and the connection is closed at once.
	for _, path := range []string{"/metrics", "/mcp"} {
		c, br := dial(t, addr)
		if resp, _ := request(t, c, br, "POST", path, "", initializeBody); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s without the token: %d", path, resp.StatusCode)
		}
		if d := closedWithin(t, c, br, 5*time.Second); d > time.Second {
			t.Errorf("%s: connection closed %v after the 401", path, d)
		}
	}

	// One session at most.
	const mcpHeader = auth + "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
	c, br = dial(t, addr)
	if resp, body := request(t, c, br, "POST", "/mcp", mcpHeader, initializeBody); resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("first session: %d %s", resp.StatusCode, body)
	}
	resp, body = request(t, c, br, "POST", "/mcp", mcpHeader, initializeBody)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "1 MCP sessions are open") {
		t.Errorf("second session: %d Retry-After %q %q", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:0": true, "[::1]:9000": true, "127.1.2.3:80": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:80": false, "192.168.1.5:80": false, "example.com:80": false,
	} {
		if got := isLoopback(addr); got != want {
			t.Errorf("isLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
