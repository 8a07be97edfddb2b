//go:build linux

package layer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/testenv"
	"golang.org/x/sys/unix"
)

// TestApplyTakesTurnsPerWorkspace: the apply lock is the root
// directory's (device and inode), not the descriptor's or the path's:
// two sets of two conversations over one workspace (each opened the
// root itself, one through a symlink to it) take turns; another
// workspace does not wait.
func TestApplyTakesTurnsPerWorkspace(t *testing.T) {
	ws, other := t.TempDir(), t.TempDir()
	link := t.TempDir() + "/ws"
	if err := unix.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	a, b, c := openRoot(t, ws), openRoot(t, link), openRoot(t, other)
	unlock, err := lockRoots(context.Background(), []int{a}, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 2)
	go func() {
		u, err := lockRoots(context.Background(), []int{b}, 0)
		if err == nil {
			u() // before saying so: the test then finds no lock kept
			got <- "same workspace"
		}
	}()
	go func() {
		u, err := lockRoots(context.Background(), []int{c}, 0)
		if err == nil {
			u() // before saying so: the test then finds no lock kept
			got <- "other workspace"
		}
	}()
	if first := <-got; first != "other workspace" {
		t.Fatalf("%s went first while the workspace's apply held it", first)
	}
	select {
	case s := <-got:
		t.Fatalf("%s did not wait for the workspace's apply", s)
	case <-time.After(200 * time.Millisecond):
	}
	unlock()
	select {
	case <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the second apply never got the workspace")
	}
	roots.mu.Lock()
	defer roots.mu.Unlock()
	if len(roots.m) != 0 {
		t.Errorf("locks kept after use: %v", roots.m)
	}
}

// openRoot opens the directory p as lockRoots takes it (O_PATH), until
// the test ends.
func openRoot(t *testing.T, p string) int {
	t.Helper()
	n, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Close(n) })
	return n
}

// lockHolderEnv makes the test binary, run for
// TestApplyLockAcrossProcesses, a second engine process that holds the
// apply lock of the directory it names until its standard input ends.
const lockHolderEnv = "LAYER_TEST_HOLD_APPLY_LOCK"

// TestApplyLockAcrossProcesses: two processes on one workspace (two
// engines: a CLI and an MCP server) take turns too. Another process
// holds the workspace's apply lock: this one's apply waits for it, at
// most lockWait, and fails after that (ErrLocked); once the other
// process lets go, it gets the lock; another workspace never waits.
func TestApplyLockAcrossProcesses(t *testing.T) {
	if dir := os.Getenv(lockHolderEnv); dir != "" {
		holdApplyLock(t, dir)
		return
	}
	if dir := os.Getenv(flockHolderEnv); dir != "" {
		holdFlock(t, dir)
		return
	}
	ws, other := t.TempDir(), t.TempDir()
	stdin, cmd := holder(t, lockHolderEnv, ws, 0)
	a, b := openRoot(t, ws), openRoot(t, other)

	u, err := lockRoots(context.Background(), []int{b}, 0)
	if err != nil {
		t.Fatalf("another workspace: %v", err)
	}
	u()

	defer func(w time.Duration) { lockWait = w }(lockWait)
	lockWait = 300 * time.Millisecond
	start := time.Now()
	if u, err := lockRoots(context.Background(), []int{a}, 0); !errors.Is(err, ErrLocked) {
		if err == nil {
			u()
		}
		t.Fatalf("got %v while another process held the workspace's apply lock, want ErrLocked", err)
	}
	if d := time.Since(start); d < lockWait {
		t.Errorf("gave up after %v, before lockWait (%v)", d, lockWait)
	}

	lockWait = time.Minute
	got := make(chan error, 1)
	go func() {
		u, err := lockRoots(context.Background(), []int{a}, 0)
		if err == nil {
			u()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("the apply did not wait for the other process (%v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the other process: %v", err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("after the other process let go: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the apply never got the workspace after the other process let go")
	}
}

// holdApplyLock is the other process of TestApplyLockAcrossProcesses.
func holdApplyLock(t *testing.T, dir string) {
	unlock, err := lockRoots(context.Background(), []int{openRoot(t, dir)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// flockHolderEnv makes the test binary a process that holds an
// exclusive flock of the directory it names until its standard input
// ends (what `flock -x . sleep 20` in a sandboxed command does).
const flockHolderEnv = "LAYER_TEST_HOLD_FLOCK"

// holdFlock is the flock holder of TestApplyLockOutOfSandboxReach.
func holdFlock(t *testing.T, dir string) {
	n, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(n)
	if err := unix.Flock(n, unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// holder starts the test binary as a process that holds a lock on dir
// (env names which), with extra clone flags, and returns when it says
// so, with its input: the holder lets go when the input ends. The
// test's cleanup ends it, unless the test waited for it.
func holder(t *testing.T, env, dir string, clone uintptr) (io.WriteCloser, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestApplyLockAcrossProcesses$")
	cmd.Env = append(os.Environ(), env+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: clone}
	if clone != 0 && os.Geteuid() != 0 {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	cmd.Stderr = os.Stderr
	stdin, _ := testenv.Piped(t, cmd, "locked")
	return stdin, cmd
}

// TestApplyLockWaitEndsWithContext: while another process holds the
// workspace's apply lock (or another apply of this process does), an
// apply whose context ends stops waiting then, long before LockWait,
// with an error wrapping ErrLocked and the context's; a lock that is
// free is taken even with an ended context (it bounds the wait only).
func TestApplyLockWaitEndsWithContext(t *testing.T) {
	waitOneSecond := func(t *testing.T, n int) {
		t.Helper()
		start := time.Now() // before the deadline is set: it ends 1 s after this
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		u, err := lockRoots(ctx, []int{n}, time.Hour)
		took := time.Since(start)
		if err == nil {
			u()
			t.Fatal("took the lock another apply held")
		}
		if !errors.Is(err, ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("got %v, want ErrLocked and the context's error", err)
		}
		if took < time.Second || took > 30*time.Second {
			t.Errorf("stopped waiting after %v with a 1 s context", took)
		}
	}
	t.Run("another process", func(t *testing.T) {
		ws := t.TempDir()
		holder(t, lockHolderEnv, ws, 0)
		waitOneSecond(t, openRoot(t, ws))
	})
	t.Run("another apply of this process", func(t *testing.T) {
		n := openRoot(t, t.TempDir())
		u, err := lockRoots(context.Background(), []int{n}, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer u()
		waitOneSecond(t, n)
	})
	t.Run("free, context ended", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		u, err := lockRoots(ctx, []int{openRoot(t, t.TempDir())}, 0)
		if err != nil {
			t.Fatalf("a free lock with an ended context: %v", err)
		}
		u()
	})
}

// TestApplyLockOutOfSandboxReach: a process that flocks the root
// directory (any sandboxed command that sees the root could) and one
// in another network namespace (a sandboxed command's) that takes the
// apply lock as an engine does cannot make an apply wait; two engine
// processes in one namespace still take turns
// (TestApplyLockAcrossProcesses).
func TestApplyLockOutOfSandboxReach(t *testing.T) {
	for name, h := range map[string]struct {
		env   string
		clone uintptr
	}{
		"flock of the root":       {flockHolderEnv, 0},
		"other network namespace": {lockHolderEnv, syscall.CLONE_NEWNET},
	} {
		t.Run(name, func(t *testing.T) {
			ws := t.TempDir()
			holder(t, h.env, ws, h.clone)
			u, err := lockRoots(context.Background(), []int{openRoot(t, ws)}, 2*time.Second)
			if err != nil {
				t.Fatalf("the apply waited for the holder: %v", err)
			}
			u()
		})
	}
}
