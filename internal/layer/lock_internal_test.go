//go:build linux

package layer

import (
	"testing"
	"time"

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
	open := func(p string) int {
		n, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = unix.Close(n) })
		return n
	}
	a, b, c := open(ws), open(link), open(other)
	unlock, err := lockRoots([]int{a})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 2)
	go func() {
		u, err := lockRoots([]int{b})
		if err == nil {
			u() // before saying so: the test then finds no lock kept
			got <- "same workspace"
		}
	}()
	go func() {
		u, err := lockRoots([]int{c})
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
