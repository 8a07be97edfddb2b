//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// nsIno is the inode number that names the namespace f refers to.
func nsIno(t *testing.T, f *fd.FD) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(f.Int(), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// TestRootWorldTakesPooledNetns: as root, a world takes an idle network
// namespace of the pool (the sandbox's probe leaves one there) instead of
// making one, so that a one-command engine makes one network namespace,
// not two; its loopback is up (it was when it went into the pool).
func TestRootWorldTakesPooledNetns(t *testing.T) {
	caps := Probe()
	testenv.Needf(t, testenv.Namespaces, caps.Namespaces, "no private namespaces: %s", caps)
	if caps.Rootless {
		t.Skip("a rootless world's namespaces come from its own user namespace, never from the pool")
	}
	idle, err := getNetns()
	if err != nil {
		t.Fatal(err)
	}
	want := nsIno(t, idle)
	putNetns(idle) // the pool is a stack: the world takes this one
	w, err := NewWorld(WorldOptions{Dir: filepath.Join(t.TempDir(), "world")})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if got := nsIno(t, w.w.netns); got != want {
		t.Errorf("the world's network namespace is %d, not the idle one of the pool (%d): it made another", got, want)
	}
	netnsPool.Lock()
	for _, f := range netnsPool.idle {
		if nsIno(t, f) == want {
			t.Errorf("the world's network namespace is still in the pool: a command could take it")
		}
	}
	netnsPool.Unlock()
	l, err := w.w.listen()
	if err != nil {
		t.Fatalf("listen on the world's loopback: %v", err)
	}
	l.Close()
}

// TestWorldCloseLeavesTeardownToThread: as root, closing a world hands its
// mount namespace's last reference to a throwaway thread (closeOnThread),
// which must end: no thread of the engine stays in the closed world's
// namespace (a thread given back to the runtime would run goroutines
// there), and the world's descriptors are closed.
func TestWorldCloseLeavesTeardownToThread(t *testing.T) {
	caps := Probe()
	testenv.Needf(t, testenv.Namespaces, caps.Namespaces, "no private namespaces: %s", caps)
	if caps.Rootless {
		t.Skip("a rootless world's namespaces belong to its user namespace: the engine cannot join them")
	}
	w, err := NewWorld(WorldOptions{Dir: filepath.Join(t.TempDir(), "world")})
	if err != nil {
		t.Fatal(err)
	}
	mnt := "mnt:[" + strconv.FormatUint(nsIno(t, w.w.mntns), 10) + "]"
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []*fd.FD{w.w.root, w.w.netns, w.w.mntns} {
		if f.Valid() {
			t.Errorf("a descriptor of the closed world is still open")
		}
	}
	in := func() (tids []string) {
		tasks, _ := os.ReadDir("/proc/self/task")
		for _, task := range tasks {
			if l, _ := os.Readlink("/proc/self/task/" + task.Name() + "/ns/mnt"); l == mnt {
				tids = append(tids, task.Name())
			}
		}
		return tids
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return len(in()) == 0 }, "threads %v stay in the closed world's mount namespace", testenv.Lazy(func() string { return strings.Join(in(), " ") }))
}
