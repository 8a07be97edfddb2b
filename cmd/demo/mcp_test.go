package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
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
		{[]string{"-http", "0.0.0.0:8765"}, "refusing to serve -http 0.0.0.0:8765 without a bearer token"},
		{[]string{"-http", "192.168.1.10:80"}, "without a bearer token"},
		{[]string{"-env-policy", "all"}, "-env-policy must be inherit-safe or allowlist"},
		{[]string{"-coauthor", "Bot"}, `-coauthor must look like "Name <email>"`},
		{[]string{"-C", filepath.Join(file, "missing")}, "-C:"},
		{[]string{"-C", file}, "is not a directory"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-timeout", "soon"}, "invalid value"},
		{[]string{"-profile", "paranoid"}, `-profile: unknown permission profile "paranoid"`},
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
		{"-http", "0.0.0.0:8765", "-token", "t"},
		{"-C", t.TempDir(), "-timeout", "5s", "-slow-timeout", "1m", "-grace", "1s", "-restricted",
			"-coauthor", "Bot <bot@example.com>", "-audit", filepath.Join(t.TempDir(), "a.jsonl"), "-env-policy", "allowlist", "-profile", "standard"},
	} {
		if _, err := parseMCPFlags(args); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
	t.Setenv(tokenEnv, "from-env")
	f, err := parseMCPFlags([]string{"-http", "0.0.0.0:8765"})
	if err != nil || f.token != "from-env" {
		t.Errorf("token from $%s: %+v %v", tokenEnv, f, err)
	}
	f, _ = parseMCPFlags([]string{"-timeout", "3s", "-grace", "100ms", "-env-policy", "allowlist", "-profile", "guarded", "-coauthor", "Bot <b@x.org>"})
	if c := f.engineConfig(nil, nil); c.Timeout != 3*time.Second || c.Grace != 100*time.Millisecond || c.EnvPolicy != "allowlist" ||
		c.Permissions == nil || c.CoAuthor != "Bot <b@x.org>" || c.Audit != nil {
		t.Errorf("engine config %+v", c)
	}
}

func TestMCPRefusesOpenAddressWithoutToken(t *testing.T) {
	c := demo(t, []string{tokenEnv + "="}, "mcp", "-http", "0.0.0.0:0")
	if c.code != exitUsage || !strings.HasPrefix(c.stderr, "demo mcp: refusing to serve -http 0.0.0.0:0 without a bearer token") {
		t.Errorf("%v", c)
	}
}

// `-http :PORT` means 127.0.0.1:PORT, as the README says: it serves
// without a token, on loopback only.
func TestMCPColonPortIsLoopback(t *testing.T) {
	if demoBin == "" {
		t.Fatal("the demo binary did not build (see TestMain's output)")
	}
	cmd := exec.Command(demoBin, "mcp", "-C", t.TempDir(), "-http", ":0")
	cmd.Env = append(os.Environ(), tokenEnv+"=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	hung := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
	defer hung.Stop()
	sc := bufio.NewScanner(stderr)
	var first string
	for first == "" && sc.Scan() {
		if strings.Contains(sc.Text(), "listening on") {
			first = sc.Text()
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	var rest strings.Builder
	for sc.Scan() {
		rest.WriteString(sc.Text() + "\n")
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("demo mcp -http :0 after SIGTERM: %v\n%s\n%s", err, first, rest.String())
	}
	if !regexp.MustCompile(`^bashvisor MCP server listening on http://127\.0\.0\.1:\d+/mcp \(no token\)$`).MatchString(first) {
		t.Errorf("first line %q, want it listening on 127.0.0.1 without a token\n%s", first, rest.String())
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
