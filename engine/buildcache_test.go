package engine_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// goModule writes a module importing a few modules of this repository's
// (in the module cache already: built offline) into a new git
// repository, built once and committed, whose out/ is ignored.
func goModule(t testing.TB, goCmd string, env []string) string {
	t.Helper()
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	files := map[string]string{
		"go.mod": "module example.com/hello\n\ngo 1.26.0\n\nrequire (\n\tgithub.com/creack/pty v1.1.24\n\tgolang.org/x/sys v0.49.0\n\tgolang.org/x/time v0.15.0\n\tmvdan.cc/sh/v3 v3.14.1\n)\n",
		"main.go": `package main

import (
	"fmt"
	"strings"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
	"golang.org/x/time/rate"
	"mvdan.cc/sh/v3/syntax"
)

func main() {
	f, err := syntax.NewParser().Parse(strings.NewReader("echo hello"), "")
	fmt.Println(err == nil && len(f.Stmts) == 1, unix.Getpid() > 0, rate.Inf > 0, pty.ErrUnsupported != nil)
}
`,
		".gitignore": "out/\n",
	}
	sum, err := os.ReadFile("../go.sum")
	if err != nil {
		t.Fatal(err)
	}
	files["go.sum"] = string(sum)
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// -mod=mod completes go.mod and go.sum offline before the commit.
	fill := exec.Command(goCmd, "build", "-mod=mod", "-o", os.DevNull, ".")
	fill.Dir, fill.Env = dir, env
	if out, err := fill.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	testenv.NeedsTool(t, "git")
	gitFixture(t, dir, "init", "-q", "-b", "main")
	gitFixture(t, dir, "add", "-A")
	gitFixture(t, dir, "commit", "-qm", "first")
	return dir
}

// goEnv returns what `go env` prints for the variables, in env.
func goEnv(t testing.TB, goCmd string, env []string, vars ...string) []string {
	t.Helper()
	cmd := exec.Command(goCmd, append([]string{"env"}, vars...)...)
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestGoBuildAtTheUsersPaths: with the user's Go caches as bases, a go
// build of a module with dependencies in workspace-write finds them at
// the user's own paths (no GOCACHE or GOMODCACHE of the sandbox's), so it
// hits the build cache an unrestricted build warmed instead of compiling
// every dependency again, and its binary, stamped with the repository's
// commit (-buildvcs=true: git works in the sandbox), is byte for byte
// the unrestricted one. Times side by side: the warm unrestricted build,
// then the sandboxed one.
func TestGoBuildAtTheUsersPaths(t *testing.T) {
	needNamespaces(t)
	goCmd := testenv.NeedsTool(t, "go")[0]
	vars := map[string]string{"GOFLAGS": "-mod=mod -buildvcs=true", "GOPROXY": "off", "GOTOOLCHAIN": "local"}
	env := os.Environ()
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	caches := goEnv(t, goCmd, env, "GOCACHE", "GOMODCACHE")
	dir := goModule(t, goCmd, env)
	e := newEngine(t, func(c *engine.Config) {
		c.SlowTimeout = 10 * time.Minute
		c.Sandbox.BaseCaches.GoBuild, c.Sandbox.BaseCaches.GoMod = caches[0], caches[1]
	})
	tcs := map[string]engine.ToolContext{
		"unrestricted":    {WorkingDir: dir, ConversationID: "u"},
		"workspace-write": workspaceWrite(dir),
	}
	build := func(profile, out string) time.Duration {
		t.Helper()
		tc := tcs[profile]
		tc.Env = map[string]string{}
		for k, v := range gitEnv {
			tc.Env[k] = v
		}
		for k, v := range vars {
			tc.Env[k] = v
		}
		r := e.Run(context.Background(), tc, engine.Input{Mode: engine.ModeSlow,
			Command: `echo "GOCACHE=${GOCACHE-} GOMODCACHE=${GOMODCACHE-}"; go env GOCACHE GOMODCACHE && go build -o out/` + out + ` . && echo built`})
		// The user's own variables, if any, and nothing else.
		want := "GOCACHE=" + os.Getenv("GOCACHE") + " GOMODCACHE=" + os.Getenv("GOMODCACHE") + "\n" + caches[0] + "\n" + caches[1] + "\nbuilt\n"
		if r.Status != engine.StatusOK || !strings.HasPrefix(r.Output, want) {
			t.Fatalf("%s go build: %s %q, want %q", profile, r.Status, r.Output, want)
		}
		return time.Duration(r.DurationMS) * time.Millisecond
	}
	build("unrestricted", "warm-up") // fills the user's cache for this module
	unrestricted := build("unrestricted", "u")
	sandboxed := build("workspace-write", "s")
	t.Logf("go build of a module with 4 dependencies, warm cache: unrestricted %v, workspace-write %v (%.2fx)",
		unrestricted, sandboxed, float64(sandboxed)/float64(unrestricted))
	// Missing the cache compiles every dependency again: ~10x here.
	if sandboxed > 3*unrestricted+2*time.Second {
		t.Errorf("the sandboxed build (%v) is far slower than the unrestricted one (%v): the warm cache was missed", sandboxed, unrestricted)
	}
	u, err1 := os.ReadFile(filepath.Join(dir, "out", "u"))
	s, err2 := os.ReadFile(filepath.Join(dir, "out", "s"))
	if err1 != nil || err2 != nil || !bytes.Equal(u, s) {
		t.Fatalf("the binaries differ (%d and %d bytes; %v %v)", len(u), len(s), err1, err2)
	}
	info := exec.Command(goCmd, "version", "-m", filepath.Join(dir, "out", "s"))
	if out, err := info.Output(); err != nil || !strings.Contains(string(out), "vcs.revision=") || !strings.Contains(string(out), "vcs.modified=false") {
		t.Fatalf("the sandboxed binary carries no commit: %v\n%s", err, out)
	}
}

// TestPycacheInTheWorkspace: the sandbox does not stop Python writing
// bytecode (no PYTHONDONTWRITEBYTECODE of its own): a script's first run
// in workspace-write leaves __pycache__ in the workspace (through the
// layer), and its second run loads it instead of compiling again.
func TestPycacheInTheWorkspace(t *testing.T) {
	needNamespaces(t)
	testenv.NeedsTool(t, "python3")
	dir := repo(t)
	if err := os.WriteFile(filepath.Join(dir, "mod.py"), []byte("x = 42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEngine(t)
	tc := workspaceWrite(dir)
	tc.Env = map[string]string{"PYTHONDONTWRITEBYTECODE": ""} // this machine's may set it
	r := e.Run(context.Background(), tc, engine.Input{Command: `echo "${PYTHONDONTWRITEBYTECODE-unset}"; python3 -c 'import mod; print(mod.x)'`})
	if r.Status != engine.StatusOK || !strings.HasPrefix(r.Output, "\n42\n") {
		t.Fatalf("first run: %s %q", r.Status, r.Output)
	}
	pyc, _ := filepath.Glob(filepath.Join(dir, "__pycache__", "mod.*.pyc"))
	if len(pyc) != 1 {
		t.Fatalf("no __pycache__ in the workspace after the first run: %q", r.Output)
	}
	r = e.Run(context.Background(), tc, engine.Input{Command: `python3 -v -c 'import mod' 2>&1 | grep -c "code object from '` + pyc[0] + `'"`})
	if r.Status != engine.StatusOK || r.Output != "1\n" {
		t.Fatalf("the second run did not load %s: %s %q", pyc[0], r.Status, r.Output)
	}
}

// TestCargoTargetInTheWorkspace: cargo build writes ./target (no
// CARGO_TARGET_DIR of the sandbox's), so `cargo build &&
// ./target/debug/hello` works in workspace-write and leaves the binary in
// the workspace; in read-only the kernel refuses the write, as every
// write to the workspace, with the sandbox's note.
func TestCargoTargetInTheWorkspace(t *testing.T) {
	needNamespaces(t)
	if _, err := exec.LookPath("cargo"); err != nil && os.Geteuid() != 0 {
		// rustup installs cargo in a user's home: CI's run as root has it.
		t.Skipf("cargo is not on this user's PATH: %v", err)
	}
	testenv.NeedsTool(t, "cargo")
	dir := repo(t)
	if err := os.MkdirAll(filepath.Join(dir, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "Cargo.toml"), []byte("[package]\nname = \"hello\"\nversion = \"0.1.0\"\nedition = \"2021\"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "src", "main.rs"), []byte("fn main() { println!(\"hello\"); }\n"), 0o644)
	e := newEngine(t, func(c *engine.Config) { c.SlowTimeout = 10 * time.Minute })
	command := `echo "${CARGO_TARGET_DIR-unset}"; cargo build --offline -q && ./target/debug/hello`
	ro := restricted(dir)
	r := e.Run(context.Background(), ro, engine.Input{Command: command, Mode: engine.ModeSlow})
	if r.Status != engine.StatusFailed || !strings.Contains(r.Output, "Read-only file system") {
		t.Fatalf("read-only: %s %q", r.Status, r.Output)
	}
	r = e.Run(context.Background(), workspaceWrite(dir), engine.Input{Command: command, Mode: engine.ModeSlow})
	if r.Status != engine.StatusOK || !strings.HasPrefix(r.Output, "unset\nhello\n") {
		t.Fatalf("workspace-write: %s %q", r.Status, r.Output)
	}
	if fi, err := os.Stat(filepath.Join(dir, "target", "debug", "hello")); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("no target/debug/hello in the workspace: %v", err)
	}
}

// BenchmarkGoBuildWarm: go build of a module with dependencies (see
// goModule), warm cache, unrestricted and in workspace-write, alternating
// in one run (-benchtime=Nx: N builds of each); it reports each one's
// median and the ratio of the medians.
func BenchmarkGoBuildWarm(b *testing.B) {
	needNamespaces(b)
	goCmd := testenv.NeedsTool(b, "go")[0]
	vars := map[string]string{"GOFLAGS": "-mod=mod -buildvcs=true", "GOPROXY": "off", "GOTOOLCHAIN": "local"}
	env := os.Environ()
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	for k, v := range gitEnv {
		vars[k] = v
	}
	caches := goEnv(b, goCmd, env, "GOCACHE", "GOMODCACHE")
	dir := goModule(b, goCmd, env)
	e := newEngine(b, func(c *engine.Config) {
		c.SlowTimeout = 10 * time.Minute
		c.Sandbox.BaseCaches.GoBuild, c.Sandbox.BaseCaches.GoMod = caches[0], caches[1]
	})
	run := func(tc engine.ToolContext, out string) time.Duration {
		tc.Env = vars
		start := time.Now()
		r := e.Run(context.Background(), tc, engine.Input{Mode: engine.ModeSlow, Command: `rm -f out/` + out + ` && go build -o out/` + out + ` .`})
		if r.Status != engine.StatusOK {
			b.Fatalf("go build: %s %q", r.Status, r.Output)
		}
		return time.Since(start)
	}
	u := engine.ToolContext{WorkingDir: dir, ConversationID: "u"}
	run(u, "u") // fills the user's cache for this module
	var ut, st []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ut = append(ut, run(u, "u"))
		st = append(st, run(workspaceWrite(dir), "s"))
	}
	b.StopTimer()
	median := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)/2]
	}
	mu, ms := median(ut), median(st)
	b.ReportMetric(float64(mu.Milliseconds()), "unrestricted-ms")
	b.ReportMetric(float64(ms.Milliseconds()), "workspace-write-ms")
	b.ReportMetric(float64(ms)/float64(mu), "ratio")
	u1, _ := os.ReadFile(filepath.Join(dir, "out", "u"))
	s1, _ := os.ReadFile(filepath.Join(dir, "out", "s"))
	if !bytes.Equal(u1, s1) {
		b.Fatal("the binaries differ")
	}
}

// TestCacheInsideTheWorkspace: a base cache below the workspace (a
// workspace-write conversation in the user's home) stays the
// conversation's cache over the workspace's layer: what a command writes
// there is kept for the next command and is no change of the workspace's
// (not in the change report, not applied to the user's cache).
func TestCacheInsideTheWorkspace(t *testing.T) {
	needNamespaces(t)
	dir := repo(t)
	cache := filepath.Join(dir, "cache")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(cache, "warm"), []byte("base\n"), 0o644)
	e := newEngine(t, func(c *engine.Config) { c.Sandbox.BaseCaches.GoBuild = cache })
	tc := workspaceWrite(dir)
	r := e.Run(context.Background(), tc, engine.Input{Command: `cat cache/warm && echo new > cache/added && echo edit > f`})
	if r.Status != engine.StatusOK || r.Output != "base\n[changed 1 file: A f]" {
		t.Fatalf("%s %q", r.Status, r.Output)
	}
	if _, err := os.Stat(filepath.Join(cache, "added")); err == nil {
		t.Fatal("the cache write reached the user's cache")
	}
	if r := e.Run(context.Background(), tc, engine.Input{Command: `cat cache/added`}); r.Status != engine.StatusOK || r.Output != "new\n" {
		t.Fatalf("the next command's cache: %s %q", r.Status, r.Output)
	}
}
