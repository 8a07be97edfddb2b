package engine_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

func restricted(dir string) engine.ToolContext {
	return engine.ToolContext{WorkingDir: dir, Sandbox: engine.Sandbox{Profile: engine.ReadOnly}, ConversationID: "restricted"}
}

// bothLaunchers runs f with the direct (confined thread) start and with
// the re-executed sandbox helper.
func bothLaunchers(t *testing.T, f func(t *testing.T, mod func(*engine.Config))) {
	needLandlock(t)
	for _, helper := range []bool{false, true} {
		t.Run(map[bool]string{false: "direct", true: "helper"}[helper], func(t *testing.T) {
			f(t, func(c *engine.Config) { c.Sandbox.Helper = helper })
		})
	}
}

func TestRestrictedFilesystem(t *testing.T) { bothLaunchers(t, testRestrictedFilesystem) }
func TestRestrictedNetwork(t *testing.T)    { bothLaunchers(t, testRestrictedNetwork) }
func TestRestrictedTimeoutAndBackground(t *testing.T) {
	bothLaunchers(t, testRestrictedTimeoutAndBackground)
}

func testRestrictedFilesystem(t *testing.T, mod func(*engine.Config)) {
	e := newEngine(t, mod)
	dir := t.TempDir()
	sentinel := filepath.Join(dir, "sentinel.txt")
	os.WriteFile(sentinel, []byte("original"), 0o644)
	r := e.Run(context.Background(), restricted(dir), engine.Input{Command: `
cat sentinel.txt; echo
echo changed > sentinel.txt; echo "write rc=$?"
touch new-file; echo "create rc=$?"
echo scratch > "$TMPDIR/ok" && cat "$TMPDIR/ok"
echo quiet > /dev/null; echo "devnull rc=$?"
echo "$TMPDIR"`})
	if r.Status != engine.StatusOK {
		t.Fatalf("%s %q", r.Status, r.Output)
	}
	// Every mount but the scratch directory and the caches is read-only,
	// and Landlock stands behind it: EROFS.
	for _, want := range []string{"original\n", "Read-only file system", "write rc=1", "create rc=1", "scratch\n", "devnull rc=0"} {
		if !strings.Contains(r.Output, want) {
			t.Errorf("missing %q in %q", want, r.Output)
		}
	}
	if b, _ := os.ReadFile(sentinel); string(b) != "original" || fileExists(filepath.Join(dir, "new-file")) {
		t.Fatalf("sandbox let a write through: %q", b)
	}
	lines := strings.Split(strings.TrimSpace(r.Output), "\n")
	scratch := lines[len(lines)-1]
	if scratch == "" || fileExists(scratch) {
		t.Fatalf("scratch dir %q not removed", scratch)
	}
}

func testRestrictedNetwork(t *testing.T, mod func(*engine.Config)) {
	e := newEngine(t, mod)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	r := e.Run(context.Background(), restricted(t.TempDir()), engine.Input{Command: "echo hi > /dev/tcp/127.0.0.1/" + port + "; echo rc=$?"})
	if !strings.Contains(r.Output, "rc=1") {
		t.Fatalf("connect: %q", r.Output)
	}
	// The same command unrestricted reaches the listener: the test can fail.
	r = e.Run(context.Background(), engine.ToolContext{WorkingDir: t.TempDir()}, engine.Input{Command: "echo hi > /dev/tcp/127.0.0.1/" + port + "; echo rc=$?"})
	var got int32
	testenv.Eventually(t, 10*time.Second, func() bool {
		got = accepted.Load()
		return got == 1
	}, "listener saw %d connections, want exactly the unrestricted one (%q)", testenv.Last(&got), r.Output)
}

func testRestrictedTimeoutAndBackground(t *testing.T, mod func(*engine.Config)) {
	// The timeout leaves the sandboxed shell time to start and print its
	// pid on a loaded machine (the helper re-executes the test binary).
	e := newEngine(t, mod, func(c *engine.Config) { c.Timeout = 2 * time.Second })
	dir := t.TempDir()
	r := e.Run(context.Background(), restricted(dir), engine.Input{Command: "echo $$; sleep 30"})
	const header = "[command timed out after 2s]\n"
	if r.Status != engine.StatusTimedOut || !strings.HasPrefix(r.Output, header) {
		t.Fatalf("%s %q", r.Status, r.Output)
	}
	f := strings.Fields(strings.TrimPrefix(r.Output, header))
	if len(f) == 0 {
		t.Fatalf("no pid in %q", r.Output)
	}
	pid, _ := strconv.Atoi(f[0])
	waitGone(t, pid, 2*time.Second)
	r = e.Run(context.Background(), restricted(dir), engine.Input{Command: "echo in-sandbox; touch x || echo denied", Mode: engine.ModeBackground})
	if r.Status != engine.StatusStarted {
		t.Fatalf("%s %q", r.Status, r.Output)
	}
	j := waitJob(t, e, r.JobID, "restricted")
	b, _ := os.ReadFile(r.OutputFile)
	if j.Status != engine.JobCompleted || !strings.Contains(string(b), "in-sandbox") || !strings.Contains(string(b), "denied") {
		t.Fatalf("job %+v output %q", j, b)
	}
}

func TestRestrictedSafetyStillApplies(t *testing.T) {
	needLandlock(t)
	e := newEngine(t)
	r := e.Run(context.Background(), restricted(t.TempDir()), engine.Input{Command: "rm -rf /"})
	if r.Status != engine.StatusBlocked {
		t.Fatalf("%s %q", r.Status, r.Output)
	}
	d := e.Description(restricted("/w"))
	if !strings.Contains(d, "Sandbox read-only") || !strings.Contains(d, "No network") || !strings.HasSuffix(d, "<pwd>/w</pwd>") {
		t.Fatalf("description %q", d)
	}
}
