package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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

// gitEnv lets git commit without a user config.
var gitEnv = map[string]string{
	"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
	"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
	"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
	"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "protocol.file.allow", "GIT_CONFIG_VALUE_0": "always",
}

// gitFixture runs git unconfined to build a fixture.
func gitFixture(t testing.TB, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	for k, v := range gitEnv {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func repo(t testing.TB) string {
	t.Helper()
	testenv.NeedsTool(t, "git")
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	gitFixture(t, dir, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o644)
	gitFixture(t, dir, "add", "README")
	gitFixture(t, dir, "commit", "-qm", "first")
	return dir
}

func workspaceWrite(dir string) engine.ToolContext {
	return engine.ToolContext{WorkingDir: dir, ConversationID: "ws", Env: gitEnv,
		Sandbox: engine.Sandbox{Profile: engine.WorkspaceWrite}}
}

// In workspace-write, edits, git add and git commit work in a plain
// repository, a worktree and a submodule; writes outside the workspace
// fail with the kernel's error and end with the workspace note; writes
// to the hooks and config are refused when the command ends.
func TestWorkspaceWriteProfile(t *testing.T) { bothLaunchers(t, testWorkspaceWriteProfile) }

func testWorkspaceWriteProfile(t *testing.T, mod func(*engine.Config)) {
	needNamespaces(t)
	e := newEngine(t, mod)
	main := repo(t)
	wt := filepath.Join(t.TempDir(), "wt")
	gitFixture(t, main, "worktree", "add", "-q", "-b", "feature", wt)
	lib := repo(t)
	super := repo(t)
	gitFixture(t, super, "submodule", "add", "-q", lib, "lib")
	gitFixture(t, super, "commit", "-qm", "add lib")
	for name, dir := range map[string]string{"plain": main, "worktree": wt, "submodule": filepath.Join(super, "lib")} {
		t.Run(name, func(t *testing.T) {
			r := e.Run(context.Background(), workspaceWrite(dir), engine.Input{Command: `set -e
echo edit >> README && git add README && git commit -qm "from the sandbox" && git log -1 --format=%s`})
			if r.Status != engine.StatusOK || !strings.HasPrefix(r.Output, "from the sandbox\n[changed ") {
				t.Fatalf("%s %q", r.Status, r.Output)
			}
			// Applied to the real repository when the command ended.
			if out, err := exec.Command("git", "-C", dir, "log", "-1", "--format=%s").Output(); err != nil || string(out) != "from the sandbox\n" {
				t.Fatalf("outside the sandbox: %v %q", err, out)
			}
		})
	}
	// Outside the workspace and off the host's /tmp (which the world's
	// /tmp covers).
	outside, err := os.MkdirTemp("/var/tmp", "bashvisor-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	r := e.Run(context.Background(), workspaceWrite(main), engine.Input{Command: "echo x > " + outside + "/file"})
	if r.Status != engine.StatusFailed || !strings.Contains(r.Output, "Read-only file system") ||
		!strings.HasSuffix(r.Output, "[sandbox workspace-write: writes outside the working directory, its git directory, /tmp and the build caches fail (setting: writable roots)]") {
		t.Fatalf("outside: %s %q", r.Status, r.Output)
	}
	// The hooks and config are written in the command's layer, and
	// refused when it ends (the layer replaced read-only binds of them).
	for name, c := range map[string]struct{ cmd, refusal string }{
		"hook":   {"echo x > .git/hooks/pre-commit", "[refused .git/hooks/pre-commit (git-hooks): "},
		"config": {"git config core.fsmonitor 'touch /tmp/pwned'", "[refused .git/config (git-config): "},
	} {
		t.Run(name, func(t *testing.T) {
			tc := workspaceWrite(main)
			tc.Approved = true // the analysis asks before writing hooks and command settings: the kernel is tested here
			r := e.Run(context.Background(), tc, engine.Input{Command: c.cmd})
			if r.Status != engine.StatusOK || !strings.Contains(r.Output, c.refusal) || len(r.Refused) == 0 || len(r.Changes) > 0 {
				t.Fatalf("%s %q %+v", r.Status, r.Output, r.Refused)
			}
		})
	}
	if fileExists(filepath.Join(outside, "file")) || fileExists(filepath.Join(main, ".git", "hooks", "pre-commit")) {
		t.Fatal("a write got through")
	}
	if b, _ := os.ReadFile(filepath.Join(main, ".git", "config")); strings.Contains(string(b), "fsmonitor") {
		t.Fatalf("config changed: %s", b)
	}
	// Writable adds a root; read-only ignores the workspace.
	extra, _ := filepath.EvalSymlinks(t.TempDir())
	tc := workspaceWrite(main)
	tc.Sandbox.Writable = []string{extra}
	if r := e.Run(context.Background(), tc, engine.Input{Command: "echo x > " + extra + "/f && echo ok"}); r.Output != "ok\n[changed 1 file: A "+extra+"/f]" {
		t.Fatalf("extra writable root: %s %q", r.Status, r.Output)
	}
	r = e.Run(context.Background(), restricted(main), engine.Input{Command: "echo x >> README"})
	if r.Status != engine.StatusFailed || !strings.HasSuffix(r.Output, "[sandbox read-only: only /tmp ($TMPDIR) and the build caches are writable (setting: sandbox profile workspace-write)]") {
		t.Fatalf("read-only: %s %q", r.Status, r.Output)
	}
}

// Without base caches the build caches live in the conversation's cache
// directory, named by GOCACHE and the other caches' variables: the second
// go build in a sandbox is warm, whatever the scratch directory.
func TestSandboxBuildCacheShared(t *testing.T) {
	needLandlock(t)
	goBin := testenv.NeedsTool(t, "go")[0]
	cacheRoot := t.TempDir()
	e := newEngine(t, func(c *engine.Config) { c.SlowTimeout = 10 * time.Minute; c.Sandbox.CacheDir = cacheRoot })
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hello\n\ngo 1.21\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() { println(\"hello\") }\n"), 0o644)
	tc := restricted(dir)
	tc.Env = map[string]string{"PATH": filepath.Dir(goBin) + ":/usr/bin:/bin", "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
	build := func() time.Duration {
		t.Helper()
		r := e.Run(context.Background(), tc, engine.Input{Command: `go build -o "$TMPDIR/hello" . && echo built`, Mode: engine.ModeSlow})
		if r.Status != engine.StatusOK || r.Output != "built\n" {
			t.Fatalf("go build: %s %q", r.Status, r.Output)
		}
		return time.Duration(r.DurationMS) * time.Millisecond
	}
	first, second := build(), build()
	t.Logf("first go build %v, second %v", first, second)
	if second >= first/2 {
		t.Errorf("the second build (%v) is not much faster than the first (%v): the cache was not kept", second, first)
	}
	// The cache is the conversation's: its commands see it below the cache
	// root, the host sees nothing there.
	r := e.Run(context.Background(), tc, engine.Input{Command: `case "$GOCACHE" in ` + cacheRoot + `/*) ls "$GOCACHE" | wc -l;; *) echo "GOCACHE=$GOCACHE";; esac`})
	if n, err := strconv.Atoi(strings.TrimSpace(r.Output)); err != nil || n < 10 {
		t.Errorf("no go build cache in the conversation's cache directory: %q", r.Output)
	}
	if entries, _ := filepath.Glob(filepath.Join(cacheRoot, "*", "go-build", "*")); len(entries) != 0 {
		t.Errorf("the host sees the conversation's cache: %v", entries)
	}
	// Another conversation has caches of its own; ending a conversation
	// removes its caches.
	if err := e.EndConversation(context.Background(), tc.ConversationID); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(cacheRoot, "*")); len(left) != 0 {
		t.Errorf("caches left after EndConversation: %v", left)
	}
}

// With a network allowlist naming a loopback test server ("the
// registry"), curl through the proxy reaches it and only it: a direct
// connection to the same port fails, a port the allowlist does not name
// is refused by the proxy (with the note), and the audit log records both
// decisions.
func TestSandboxNetworkAllowlist(t *testing.T) { bothLaunchers(t, testSandboxNetworkAllowlist) }

func testSandboxNetworkAllowlist(t *testing.T, mod func(*engine.Config)) {
	needNamespaces(t)
	testenv.NeedsTool(t, "curl")
	var hits atomic.Int64
	registry := startHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "package tarball\n")
	}))
	other := startHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the server the allowlist does not name was reached")
	}))
	var audit lockedBuffer
	e := newEngine(t, mod, func(c *engine.Config) { c.Audit = &audit })
	allow := []string{registry}
	tc := engine.ToolContext{WorkingDir: t.TempDir(), ConversationID: "net",
		Sandbox: engine.Sandbox{Profile: engine.ReadOnly, Network: allow}}

	// The allowlist names a loopback server of the host: loopback goes
	// through the proxy too (the conversation's own loopback is reached
	// with --noproxy).
	r := e.Run(context.Background(), tc, engine.Input{Command: "curl -sS --max-time 20 http://" + registry + "/pkg.tgz"})
	if r.Status != engine.StatusOK || !strings.HasPrefix(r.Output, "package tarball\n[network: "+registry[:strings.LastIndex(registry, ":")]+" ") ||
		!strings.HasSuffix(r.Output, " B]") {
		t.Fatalf("through the proxy: %s %q", r.Status, r.Output)
	}
	r = e.Run(context.Background(), tc, engine.Input{Command: "curl -sS --max-time 20 --noproxy '*' http://" + registry + "/direct"})
	if r.Status != engine.StatusFailed {
		t.Fatalf("direct connection: %s %q", r.Status, r.Output)
	}
	r = e.Run(context.Background(), tc, engine.Input{Command: "curl -sS --fail --max-time 20 http://" + other + "/"})
	if r.Status != engine.StatusFailed || !strings.Contains(r.Output, "403") ||
		!strings.HasSuffix(r.Output, "[sandbox: the egress proxy refused "+other+": not in the network allowlist (setting: allow-net)]") {
		t.Fatalf("not allowed: %s %q", r.Status, r.Output)
	}
	if hits.Load() != 1 {
		t.Errorf("the registry saw %d requests, want the one through the proxy", hits.Load())
	}
	// The audit log has both decisions.
	var allowed, refused bool
	for _, line := range strings.Split(strings.TrimSpace(audit.String()), "\n") {
		var rec struct {
			Msg, Conversation, Host string
			Port                    int
			Allowed                 bool
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if rec.Msg != "egress" {
			continue
		}
		hostport := net.JoinHostPort(rec.Host, fmt.Sprint(rec.Port))
		switch {
		case rec.Allowed && hostport == registry && rec.Conversation == "net":
			allowed = true
		case !rec.Allowed && hostport == other && rec.Conversation == "net":
			refused = true
		}
	}
	if !allowed || !refused {
		t.Errorf("audit log lacks the proxy's decisions (allowed %v, refused %v):\n%s", allowed, refused, audit.String())
	}
	// Without an allowlist there is no network, and the note says so.
	tc.Sandbox.Network = nil
	r = e.Run(context.Background(), tc, engine.Input{Command: "curl -sS --max-time 5 http://registry.example/"})
	if r.Status != engine.StatusFailed || !strings.HasSuffix(r.Output, "[sandbox: no network but the conversation's own loopback; hosts can be allowed through the egress proxy (setting: allow-net)]") {
		t.Fatalf("no network: %s %q", r.Status, r.Output)
	}
}

// startHTTP serves h on loopback and returns its host:port.
func startHTTP(t *testing.T, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return l.Addr().String()
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Bad sandbox settings are refused before anything runs.
func TestSandboxSettingsValidated(t *testing.T) {
	e := newEngine(t)
	allow := []string{"npm"}
	for name, s := range map[string]engine.Sandbox{
		"network-unrestricted":  {Network: allow},
		"writable-unrestricted": {Writable: []string{"/tmp"}},
		"unknown-profile":       {Profile: "write-everything"},
		"relative-root":         {Profile: engine.WorkspaceWrite, Writable: []string{"rel"}},
	} {
		t.Run(name, func(t *testing.T) {
			r := e.Run(context.Background(), engine.ToolContext{WorkingDir: t.TempDir(), Sandbox: s}, engine.Input{Command: "echo ran"})
			if r.Status != engine.StatusError || strings.Contains(r.Output, "ran") {
				t.Fatalf("%s %q", r.Status, r.Output)
			}
		})
	}
	for _, in := range []string{"read-only", "workspace-write", "none", ""} {
		if _, err := engine.ParseProfile(in); err != nil {
			t.Errorf("ParseProfile(%q): %v", in, err)
		}
	}
}

// An allowlist entry that does not parse fails the call before anything
// runs.
func TestBadNetworkAllowlist(t *testing.T) {
	e := newEngine(t)
	tc := engine.ToolContext{WorkingDir: t.TempDir(), Sandbox: engine.Sandbox{Profile: engine.ReadOnly, Network: []string{"http://not a host"}}}
	r := e.Run(context.Background(), tc, engine.Input{Command: "echo ran"})
	if !errors.Is(r.Err, engine.ErrBadInput) || strings.Contains(r.Output, "ran") {
		t.Fatalf("bad allowlist: %s %q %v", r.Status, r.Output, r.Err)
	}
}

// TestBaseCachesWarmTheFirstBuild: with the user's Go build cache as a
// base (Sandbox.BaseCaches.GoBuild, the user's GOCACHE) a conversation's
// first sandboxed go build finds the standard library compiled at the
// user's GOCACHE: measured side by side with the cold build that filled
// the base (the same module, unrestricted, from an empty cache), it is
// much faster; and nothing it writes reaches the base.
func TestBaseCachesWarmTheFirstBuild(t *testing.T) {
	needNamespaces(t)
	goBin := testenv.NeedsTool(t, "go")[0]
	base := t.TempDir()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hello\n\ngo 1.21\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nimport \"net/http\"\n\nfunc main() { _ = http.ListenAndServe }\n"), 0o644)
	env := map[string]string{"PATH": filepath.Dir(goBin) + ":/usr/bin:/bin", "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local", "GOCACHE": base}
	e := newEngine(t, func(c *engine.Config) {
		c.SlowTimeout = 10 * time.Minute
		c.Sandbox.BaseCaches.GoBuild = base
	})
	build := func(tc engine.ToolContext, command string) time.Duration {
		t.Helper()
		tc.Env = env
		r := e.Run(context.Background(), tc, engine.Input{Command: command, Mode: engine.ModeSlow})
		if r.Status != engine.StatusOK || r.Output != "built\n" {
			t.Fatalf("go build: %s %q", r.Status, r.Output)
		}
		return time.Duration(r.DurationMS) * time.Millisecond
	}
	cold := build(engine.ToolContext{WorkingDir: dir, ConversationID: "base-fill"},
		`go build -o /dev/null . && echo built`)
	before, _ := filepath.Glob(filepath.Join(base, "*", "*"))
	warm := build(restricted(dir), `go build -o "$TMPDIR/hello" . && echo built`)
	t.Logf("go build of a module importing net/http: cold (filling the base) %v, first sandboxed build on the base %v (%.2fx)",
		cold, warm, float64(warm)/float64(cold))
	if warm >= cold/2 {
		t.Errorf("the first sandboxed build (%v) is not much faster than the cold one (%v): the base did not warm it", warm, cold)
	}
	if after, _ := filepath.Glob(filepath.Join(base, "*", "*")); len(after) != len(before) {
		t.Errorf("the sandboxed build changed the base: %d entries, then %d", len(before), len(after))
	}
}
