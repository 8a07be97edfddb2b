package proc_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/proc"
)

// What a command started by the engine's own vfork (cgroup_vfork.go)
// inherits must be what os/exec gives it: its open-files limit and no
// descriptor of the engine.

// needVforkStarts skips where commands are not started by the engine's
// own vfork.
func needVforkStarts(t *testing.T) {
	t.Helper()
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skip("no vfork starts on " + runtime.GOARCH)
	}
}

// startOutput starts bash -c script with proc.Start (no cgroup: the vfork
// start) and returns what it printed.
func startOutput(t *testing.T, script string) string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := proc.Start(proc.Spec{Path: cgBash(t), Args: []string{"bash", "-c", script}, Dir: "/", Output: f})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestVforkStartKeepsNofile: the Go runtime raises its own soft
// open-files limit at start and os/exec gives children the original back;
// a command the engine starts gets the original too. The test binary runs
// itself with a soft limit of 512 below its hard limit.
func TestVforkStartKeepsNofile(t *testing.T) {
	needVforkStarts(t)
	if os.Getenv("BASHVISOR_TEST_NOFILE") == "1" {
		var cur unix.Rlimit
		if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &cur); err != nil {
			t.Fatal(err)
		}
		if cur.Cur <= 512 {
			t.Fatalf("the runtime did not raise the soft limit: %+v", cur)
		}
		raw, err := exec.Command("bash", "-c", "ulimit -Sn").Output()
		if err != nil {
			t.Fatal(err)
		}
		if got := startOutput(t, "ulimit -Sn"); got != string(raw) || strings.TrimSpace(got) != "512" {
			t.Fatalf("a started command's soft open-files limit %q, os/exec's %q, want 512", got, raw)
		}
		return
	}
	var cur unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &cur); err != nil {
		t.Fatal(err)
	}
	if cur.Max <= 512 {
		t.Skipf("hard open-files limit %d: cannot lower the soft one below it", cur.Max)
	}
	cmd := exec.Command("/bin/sh", "-c", `ulimit -Sn 512 && exec "$0" -test.run '^TestVforkStartKeepsNofile$' -test.count 1`, os.Args[0])
	cmd.Env = append(os.Environ(), "BASHVISOR_TEST_NOFILE=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestVforkStartLeaksNoDescriptor: while other goroutines make
// descriptors without close-on-exec the way Go documents (under
// syscall.ForkLock's read lock, then marked), a command the engine starts
// (which takes no ForkLock) sees exactly the descriptors a quiet start
// shows.
func TestVforkStartLeaksNoDescriptor(t *testing.T) {
	needVforkStarts(t)
	const list = `for f in /proc/self/fd/*; do printf '%s ' "${f##*/}"; done`
	want := startOutput(t, list)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				syscall.ForkLock.RLock()
				n, err := syscall.Dup(2)
				if err == nil {
					syscall.CloseOnExec(n)
				}
				syscall.ForkLock.RUnlock()
				if err == nil {
					syscall.Close(n)
				}
			}
		}()
	}
	defer wg.Wait()
	defer cancel()
	for i := range 300 {
		if got := startOutput(t, list); got != want {
			t.Fatalf("start %d: descriptors %q, want %q", i, got, want)
		}
	}
}
