//go:build linux

package sandbox_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// newWorld makes a world for the test in dir (made), closed at the end.
func newWorld(t *testing.T, opts sandbox.WorldOptions) *sandbox.World {
	t.Helper()
	requireNamespaces(t)
	if opts.Dir == "" {
		opts.Dir = filepath.Join(t.TempDir(), "world")
	}
	w, err := sandbox.NewWorld(opts)
	if err != nil {
		t.Fatalf("NewWorld: %v", err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Error(err)
		}
	})
	return w
}

// runWorld runs command in world w, in dir, read-only (or with opts'
// roots).
func runWorld(t *testing.T, w *sandbox.World, opts sandbox.Options, dir, command string) result {
	t.Helper()
	opts.World, opts.Dir = w, dir
	return runOpts(t, opts, nil, dir, command)
}

// startWorld starts command in world w and leaves it running; it is
// killed (its process group and cgroup) at the end of the test.
func startWorld(t *testing.T, w *sandbox.World, dir, command string) {
	t.Helper()
	sc, cg := prepareOpts(t, sandbox.Options{World: w, Dir: dir}, command)
	cmd := exec.Command(sc.Path, sc.Args[1:]...)
	cmd.Args[0] = sc.Args[0]
	cmd.Dir, cmd.Env = dir, withEnv(os.Environ(), sc.Env)
	logf, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devNull(t), logf, logf
	cmd.SysProcAttr = sysProcAttr(cg)
	if err := start(sc, cmd); err != nil {
		t.Fatal(err)
	}
	logf.Close()
	g := testenv.GroupOf(t, cmd.Process.Pid)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("%s: %s", command, b)
		}
	})
	t.Cleanup(func() {
		g.Kill()
		_ = cmd.Wait()
		_ = sc.Cleanup(endCgroup(cg))
	})
}

// freePort returns a TCP port nothing on the host listens on now.
func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestWorldTmpIsTheConversations: /tmp ($TMPDIR) is writable, keeps its
// files from one command to the next, is the world's own (another world
// and the host do not see them), and its quota ends writes with ENOSPC.
func TestWorldTmpIsTheConversations(t *testing.T) {
	a := newWorld(t, sandbox.WorldOptions{Bytes: 4 << 20})
	b := newWorld(t, sandbox.WorldOptions{})
	dir := t.TempDir()
	marker := "world-test-" + strconv.Itoa(os.Getpid())
	if r := runWorld(t, a, sandbox.Options{}, dir, `test "$TMPDIR" = /tmp && echo kept > /tmp/`+marker+` && chmod 600 /tmp/`+marker+` && touch -d @0 /tmp/`+marker); r.code != 0 {
		t.Fatalf("write /tmp: %d %s", r.code, r.out)
	}
	if r := runWorld(t, a, sandbox.Options{}, dir, `cat /tmp/`+marker+`; stat -c %a:%Y /tmp/`+marker); r.code != 0 || r.out != "kept\n600:0\n" {
		t.Fatalf("next command: %d %q", r.code, r.out)
	}
	if r := runWorld(t, b, sandbox.Options{}, dir, `ls /tmp/`+marker); r.code == 0 {
		t.Fatalf("another world sees the file: %s", r.out)
	}
	if _, err := os.Stat("/tmp/" + marker); err == nil {
		t.Fatal("the host sees the world's /tmp")
	}
	r := runWorld(t, a, sandbox.Options{}, dir, `head -c 8M /dev/zero > /tmp/big`)
	if r.code == 0 || !strings.Contains(r.out, "No space left on device") {
		t.Fatalf("8 MiB into a 4 MiB world: %d %q", r.code, r.out)
	}
	if used, size, err := a.Usage(); err != nil || size != 4<<20 || used < 3<<20 {
		t.Fatalf("Usage = %d of %d, %v", used, size, err)
	}
	if r := runWorld(t, a, sandbox.Options{}, dir, `rm /tmp/big && echo freed > /tmp/small && cat /tmp/small`); r.code != 0 || r.out != "freed\n" {
		t.Fatalf("after freeing: %d %q", r.code, r.out)
	}
}

// TestWorldLoopbackShared: a server one command leaves running is
// reachable by the next command of the world, not by another world's
// commands nor by the host, and another world can listen on the same port.
func TestWorldLoopbackShared(t *testing.T) {
	testenv.NeedsTool(t, "python3", "curl")
	a := newWorld(t, sandbox.WorldOptions{})
	b := newWorld(t, sandbox.WorldOptions{})
	port := strconv.Itoa(freePort(t))
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte("hello from a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	startWorld(t, a, dir, `exec python3 -m http.server --bind 127.0.0.1 `+port+` >/tmp/server.log 2>&1`)
	curl := `for i in $(seq 100); do curl -sf http://localhost:` + port + `/index.html && exit 0; sleep 0.1; done; cat /tmp/server.log; curl -v http://localhost:` + port + `/index.html; exit 7`
	if r := runWorld(t, a, sandbox.Options{}, dir, curl); r.code != 0 || r.out != "hello from a\n" {
		t.Fatalf("the world's next command: %d %q", r.code, r.out)
	}
	if r := runWorld(t, b, sandbox.Options{}, dir, `curl -sS --max-time 5 http://localhost:`+port+`/index.html`); r.code == 0 {
		t.Fatalf("another world reached it: %q", r.out)
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second); err == nil {
		c.Close()
		t.Fatal("the host reached the world's server")
	}
	// b listens on the same port, and reaches its own server.
	bdir := t.TempDir()
	os.WriteFile(filepath.Join(bdir, "index.html"), []byte("hello from b\n"), 0o644)
	startWorld(t, b, bdir, `exec python3 -m http.server --bind 127.0.0.1 `+port)
	if r := runWorld(t, b, sandbox.Options{}, bdir, curl); r.code != 0 || r.out != "hello from b\n" {
		t.Fatalf("b's own server: %d %q", r.code, r.out)
	}
	// UDP stays denied (seccomp): the boundary is TCP on loopback.
	if r := runWorld(t, a, sandbox.Options{}, dir, `python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)'`); r.code == 0 {
		t.Fatal("a UDP socket was made")
	}
}

// TestWorldHidesTheEngine: a directory of the engine's is empty in view
// (another conversation's files there are not), but for the world's own
// shown directory (read-only) and its caches (read-write, kept from one
// command to the next, not seen by the host).
func TestWorldHidesTheEngine(t *testing.T) {
	root := t.TempDir()
	state := filepath.Join(root, "state")
	own, other := filepath.Join(state, "conversation-a"), filepath.Join(state, "conversation-b")
	for _, d := range []string{own, other} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "job-1.log"), []byte(filepath.Base(d)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	w := newWorld(t, sandbox.WorldOptions{Dir: filepath.Join(state, "cache", "a"), Hide: []string{state}, Show: []string{own}})
	dir := t.TempDir()
	r := runWorld(t, w, sandbox.Options{}, dir, `ls `+state+`; cat `+own+`/job-1.log; cat `+other+`/job-1.log; echo x > `+own+`/forged`)
	if strings.Contains(r.out, "conversation-b\n") || !strings.Contains(r.out, "conversation-a\n") || !strings.Contains(r.out, "No such file") ||
		!strings.Contains(r.out, "Read-only file system") {
		t.Fatalf("view of the engine's directory:\n%s", r.out)
	}
	if _, err := os.Stat(filepath.Join(own, "forged")); err == nil {
		t.Fatal("a command wrote into its conversation's output directory")
	}
	if r := runWorld(t, w, sandbox.Options{}, dir, `mkdir -p "$GOCACHE" && echo built > "$GOCACHE/entry"`); r.code != 0 {
		t.Fatalf("cache write: %d %s", r.code, r.out)
	}
	if r := runWorld(t, w, sandbox.Options{}, dir, `cat "$GOCACHE/entry"; test "$XDG_CACHE_HOME" = `+w.CacheDir()); r.code != 0 || r.out != "built\n" {
		t.Fatalf("cache read: %d %q", r.code, r.out)
	}
	if entries, _ := os.ReadDir(w.CacheDir()); len(entries) > 0 {
		t.Fatalf("the host sees the world's cache: %v", entries)
	}
}

// TestWorldWorkspaceWrite: in a world the workspace-write profile keeps
// working (the workspace below the host's /tmp is mounted at its path in
// the world's /tmp), metadata changes work in the workspace and /tmp, and
// writes elsewhere fail.
func TestWorldWorkspaceWrite(t *testing.T) {
	testenv.NeedsTool(t, "git")
	w := newWorld(t, sandbox.WorldOptions{})
	ws := t.TempDir()
	roots, err := sandbox.WorkspaceRoots(ws)
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	r := runWorld(t, w, sandbox.Options{Roots: roots}, ws, `set -e
		git init -q . && echo a > a && chmod 755 a && touch -d @5 a && cp -p a b && tar cf /tmp/x.tar a b && git add a b
		git -c user.email=t@e -c user.name=t commit -qm one && git log --format=%s
		(echo no > `+outside+`/f) 2>/dev/null && echo wrote-outside || true`)
	if r.code != 0 || r.out != "one\n" {
		t.Fatalf("%d %q", r.code, r.out)
	}
	if _, err := os.Stat(filepath.Join(outside, "f")); err == nil {
		t.Fatal("wrote outside the workspace")
	}
	if fi, err := os.Stat(filepath.Join(ws, "b")); err != nil || fi.Mode().Perm() != 0o755 || fi.ModTime().Unix() != 5 {
		t.Fatalf("cp -p in the workspace: %v %v", fi, err)
	}
}

// TestWorldBaseCache: each cache with a base (Go build and module, npm,
// pip) is at the base's own path in the world (no variable points
// elsewhere): it sees the base's files, adds its own on the world's file
// system, keeps them for the world's next command, and never changes the
// base (which another world and the host see as it was). A base that
// does not exist yet is made, empty.
func TestWorldBaseCache(t *testing.T) {
	var b config.BaseCaches
	fields := []*string{&b.GoBuild, &b.GoMod, &b.Npm, &b.Pip}
	for _, f := range fields {
		*f = t.TempDir()
		if err := os.WriteFile(filepath.Join(*f, "warm"), []byte("from base\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b.Pip = filepath.Join(b.Pip, "not", "made", "yet")
	w := newWorld(t, sandbox.WorldOptions{BaseCaches: b})
	dir := t.TempDir()
	// The variables the command has are the user's own, if any (no
	// variable added to point at another cache).
	names := regexp.MustCompile(`^(GOCACHE|GOMODCACHE|npm_config_cache|PIP_CACHE_DIR|XDG_CACHE_HOME)=`)
	var own []string
	for _, kv := range os.Environ() {
		if names.MatchString(kv) {
			own = append(own, kv+"\n")
		}
	}
	sort.Strings(own)
	r := runWorld(t, w, sandbox.Options{}, dir, `env | grep -E '`+names.String()+`' | LC_ALL=C sort; echo end`)
	if want := strings.Join(own, "") + "end\n"; r.code != 0 || r.out != want {
		t.Fatalf("the environment names caches: %d %q, want %q", r.code, r.out, want)
	}
	for _, c := range []string{b.GoBuild, b.GoMod, b.Npm} {
		r := runWorld(t, w, sandbox.Options{}, dir, `cat `+c+`/warm && echo new > `+c+`/added && echo changed > `+c+`/warm && rm `+c+`/warm && ls `+c)
		if r.code != 0 || r.out != "from base\nadded\n" {
			t.Fatalf("%s: %d %q", c, r.code, r.out)
		}
		if r := runWorld(t, w, sandbox.Options{}, dir, `ls `+c); r.code != 0 || r.out != "added\n" {
			t.Fatalf("%s: the next command's cache: %d %q", c, r.code, r.out)
		}
		if b, err := os.ReadFile(filepath.Join(c, "warm")); err != nil || string(b) != "from base\n" {
			t.Fatalf("%s: the base changed: %q %v", c, b, err)
		}
		if _, err := os.Stat(filepath.Join(c, "added")); err == nil {
			t.Fatalf("%s: a file reached the base", c)
		}
	}
	if r := runWorld(t, w, sandbox.Options{}, dir, `echo new > `+b.Pip+`/added && ls `+b.Pip); r.code != 0 || r.out != "added\n" {
		t.Fatalf("the pip cache made for the world: %d %q", r.code, r.out)
	}
	if entries, err := os.ReadDir(b.Pip); err != nil || len(entries) != 0 {
		t.Fatalf("the pip base made on the host: %v %v", entries, err)
	}
	other := newWorld(t, sandbox.WorldOptions{BaseCaches: b})
	if r := runWorld(t, other, sandbox.Options{}, dir, `ls `+b.GoBuild); r.code != 0 || r.out != "warm\n" {
		t.Fatalf("another world's cache: %d %q", r.code, r.out)
	}
}

// TestWorldClosed: a closed world's directory is gone and it starts no
// command.
func TestWorldClosed(t *testing.T) {
	requireNamespaces(t)
	dir := filepath.Join(t.TempDir(), "w")
	w, err := sandbox.NewWorld(sandbox.WorldOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("the world's directory is left")
	}
	if _, err := sandbox.Prepare(sandbox.Options{World: w, Bash: bashPath(t), Command: "true"}); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("a closed world prepared a command: %v", err)
	}
}

// TestRootlessWhenUnprivileged: in CI's unprivileged pass
// (REQUIRE_UNPRIVILEGED=1) the tests run as a user other than root and
// the sandbox has its namespaces from user namespaces (every test above
// then ran rootless).
func TestRootlessWhenUnprivileged(t *testing.T) {
	c := requireSandbox(t)
	testenv.Needf(t, testenv.Unprivileged, os.Geteuid() != 0, "running as root")
	if !c.Namespaces || !c.Rootless {
		t.Fatalf("an unprivileged run without user namespaces: %s", c)
	}
}

// TestWorldBaseCacheThatCannotBeMade: a base cache below a path that
// cannot hold a directory (a HOME of /nonexistent for a system user, here
// a regular file) does not fail the world: it is taken as no base (the
// cache starts empty where the tool's variable points).
func TestWorldBaseCacheThatCannotBeMade(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	npm := filepath.Join(file, ".npm")
	w := newWorld(t, sandbox.WorldOptions{BaseCaches: config.BaseCaches{Npm: npm, GoBuild: t.TempDir()}})
	dir := t.TempDir()
	r := runWorld(t, w, sandbox.Options{}, dir, `mkdir -p "$npm_config_cache" && echo x > "$npm_config_cache/f" && cat "$npm_config_cache/f"`)
	if r.code != 0 || r.out != "x\n" {
		t.Fatalf("the cache that cannot be made: %d %q", r.code, r.out)
	}
}
