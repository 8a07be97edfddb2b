//go:build linux

package layer_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/layer/layertest"
)

// TestResetLayerIsNew: a layer reset after a command is what a new one
// is: its next command's change set has nothing of the first one's (its
// files, whiteouts, opaque directories and overlayfs's volatile work
// directory are gone), its upper directory follows the root's new mode,
// and a root that is gone makes Reset fail and the layer stale.
func TestResetLayerIsNew(t *testing.T) {
	w := newWorld(t)
	w.write(t, map[string]string{"a.txt": "a", "d/b.txt": "b", "keep": "k"})
	l := w.layer(t)
	premount := func() {
		if !layertest.Unprivileged() { // overlays are premade by a root engine only
			if err := l.Premount(); err != nil {
				t.Fatal(err)
			}
		}
	}
	run := func(script, want string) {
		t.Helper()
		if out, err := layertest.Run(t, l.Spec(), w.ws, w.env, script); err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
		s, err := l.Diff()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if got := w.kinds(s.Changes); got != want {
			t.Errorf("after %q:\n%s\nwant:\n%s", script, got, want)
		}
	}
	premount()
	run("echo x > new.txt; rm a.txt; rm -r d; mkdir d; echo c > d/c.txt", "D a.txt\nD d/b.txt\nA d/c.txt\nA new.txt")
	if err := os.Chmod(w.ws, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := l.Reset(); err != nil {
		t.Fatal(err)
	}
	if l.Stale() {
		t.Fatal("stale after Reset")
	}
	for _, o := range l.Spec().Overlays {
		for _, d := range []string{o.Upper, o.Work} {
			if ents, err := os.ReadDir(d); err != nil || len(ents) > 0 {
				t.Errorf("%s after Reset: %v, %v", d, ents, err)
			}
		}
	}
	premount()
	run("echo y > other.txt; cat a.txt d/b.txt keep >/dev/null", "A other.txt")
	if err := l.Reset(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(w.ws, w.ws+".old"); err != nil {
		t.Fatal(err)
	}
	if err := l.Reset(); err == nil {
		t.Error("Reset of a layer whose root is gone succeeded")
	}
	if !l.Stale() {
		t.Error("not stale after a failed Reset")
	}
}

// Reset waits for the threads that Spec.MountedBy named (a parked
// thread whose exit unmounts the layer's overlays) to end, and for no
// other.
func TestResetWaitsForMountingThread(t *testing.T) {
	w := newWorld(t)
	l := w.layer(t)
	release, named := make(chan struct{}), make(chan struct{})
	onThrowawayThread(func() {
		l.Spec().MountedBy(unix.Gettid())
		close(named)
		<-release
	})
	<-named
	reset := make(chan error, 1)
	go func() { reset <- l.Reset() }()
	select {
	case err := <-reset:
		t.Fatalf("Reset returned while the thread lives: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-reset:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Reset still waits after the thread ended")
	}
	if err := l.Reset(); err != nil { // nothing to wait for
		t.Fatal(err)
	}
}

// Reset removes overlayfs's marks in a work directory by name but
// never follows what a command put in the upper layer: a symlink named
// "work" to a directory outside that holds incompat/volatile/dirty
// leaves that file alone; an upper "work" tree of the command's is
// removed whole, and so is anything else left in a work directory.
func TestResetDoesNotFollowUpperSymlinks(t *testing.T) {
	w := newWorld(t)
	w.write(t, map[string]string{"a.txt": "a"})
	outside := t.TempDir()
	sentinel := filepath.Join(outside, "incompat", "volatile", "dirty")
	if err := os.MkdirAll(filepath.Dir(sentinel), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sentinel, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := w.layer(t)
	for _, script := range []string{
		"ln -s " + outside + " work",
		"mkdir -p work/incompat/volatile && echo x > work/incompat/volatile/dirty && echo y > work/more",
	} {
		if !layertest.Unprivileged() {
			if err := l.Premount(); err != nil {
				t.Fatal(err)
			}
		}
		if out, err := layertest.Run(t, l.Spec(), w.ws, w.env, script); err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
		o := l.Spec().Overlays[0]
		if err := os.WriteFile(filepath.Join(o.Work, "left"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := l.Reset(); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(sentinel); err != nil || string(b) != "keep" {
			t.Fatalf("after %q and Reset the file behind the symlink: %q, %v", script, b, err)
		}
		for _, d := range []string{o.Upper, o.Work} {
			if ents, err := os.ReadDir(d); err != nil || len(ents) > 0 {
				t.Errorf("after %q, %s after Reset: %v, %v", script, d, ents, err)
			}
		}
	}
}
