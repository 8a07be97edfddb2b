//go:build linux

package layer

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// widenAsUnprivileged makes the package widen permissions as an
// unprivileged engine does, for the test (as root, which skips it;
// TestModesUnprivileged runs these tests unprivileged as well).
func widenAsUnprivileged(t *testing.T) {
	old := overrides
	overrides = func() bool { return false }
	t.Cleanup(func() { overrides = old })
}

// reachDir returns a temporary tree holding the directory a (mode) with
// the file a/x, and the path of a.
func reachDir(t *testing.T, mode uint32) (*tree, string) {
	t.Helper()
	dir := t.TempDir()
	a := filepath.Join(dir, "a")
	if err := os.Mkdir(a, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(a, mode); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(a, 0o755) })
	tr, err := openTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.close)
	return tr, a
}

// permOf returns the permission bits (with setuid, setgid, sticky) of p.
func permOf(t *testing.T, p string) uint32 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Mode & 0o7777
}

// denyOnce returns a lookup that fails with EACCES the first time (what
// an unprivileged engine gets below a directory its owner cannot
// search), then runs then.
func denyOnce(then func() error) func() error {
	n := 0
	return func() error {
		if n++; n == 1 {
			return unix.EACCES
		}
		return then()
	}
}

// TestModesReachKeepsConcurrentChmod: a chmod of a directory that
// reach widened, made meanwhile (another conversation's Apply, which
// holds the apply lock that Diff does not take, applying chmod 700),
// stands: reach gives a mode back only while it is the widened one.
// Before, the restore reverted it to 055.
func TestModesReachKeepsConcurrentChmod(t *testing.T) {
	widenAsUnprivileged(t)
	tr, a := reachDir(t, 0o055)
	err := reach(tr, "a/x", 0, denyOnce(func() error {
		if m := permOf(t, a); m != 0o155 {
			t.Errorf("a while reached: %o, want 155", m)
		}
		return unix.Chmod(a, 0o700)
	}))
	if err != nil {
		t.Fatal(err)
	}
	if m := permOf(t, a); m != 0o700 {
		t.Errorf("a after reach: %o, want the concurrent chmod's 700", m)
	}
}

// TestModesReachTwice: two reaches of one process (two conversations'
// Diffs) widen the same mode 0 directory, each with other bits, and end
// in the order they did not start: the last to end gives the directory
// its mode 0 back. Before, it was left 0100 for good.
func TestModesReachTwice(t *testing.T) {
	widenAsUnprivileged(t)
	t1, a := reachDir(t, 0)
	t2, err := openTree(filepath.Dir(a))
	if err != nil {
		t.Fatal(err)
	}
	defer t2.close()
	firstWide, secondWide, firstDone, secondDone := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		<-firstWide
		secondDone <- reach(t2, "a", 0o500, denyOnce(func() error {
			close(secondWide)
			<-firstDone
			_, err := t2.names("a")
			return err
		}))
	}()
	err = reach(t1, "a/x", 0, denyOnce(func() error {
		close(firstWide)
		<-secondWide
		_, _, err := t1.lstat("a/x")
		return err
	}))
	if m := permOf(t, a); m != 0o500 {
		t.Errorf("a once the first reach ended, the second still on: %o, want 500", m)
	}
	close(firstDone)
	if err != nil {
		t.Fatalf("first reach: %v", err)
	}
	if err := <-secondDone; err != nil {
		t.Fatalf("second reach: %v", err)
	}
	if m := permOf(t, a); m != 0 {
		t.Errorf("a after both reaches: %o, want 0", m)
	}
	widenings.mu.Lock()
	defer widenings.mu.Unlock()
	if len(widenings.m) != 0 {
		t.Errorf("widenings left: %v", widenings.m)
	}
}

// TestModesReachSetgidForeignGroup: reach leaves a setgid directory
// whose group the engine is not in as it is (a chmod by a non-member
// clears S_ISGID for good), and the lookup's EACCES stands. Before, it
// widened it (and, unprivileged, cleared the bit).
func TestModesReachSetgidForeignGroup(t *testing.T) {
	widenAsUnprivileged(t)
	gid := uint32(61_999)
	if inGroup(gid) {
		t.Fatalf("the test's process is in group %d", gid)
	}
	tr, a := reachDir(t, 0o755)
	if os.Geteuid() != 0 {
		// Unprivileged, no foreign group can be given: a's is the
		// engine's own, which keeps S_ISGID through the widening and
		// back.
		if err := unix.Chmod(a, 0o2055); err != nil {
			t.Fatal(err)
		}
		if err := reach(tr, "a/x", 0, denyOnce(func() error { return nil })); err != nil {
			t.Fatal(err)
		}
		if m := permOf(t, a); m != 0o2055 {
			t.Errorf("a after reach, own group: %o, want 2055", m)
		}
		return
	}
	if err := os.Chown(a, -1, int(gid)); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(a, 0o2055); err != nil {
		t.Fatal(err)
	}
	calls := 0
	err := reach(tr, "a/x", 0, func() error { calls++; return unix.EACCES })
	if !errors.Is(err, unix.EACCES) || calls != 1 {
		t.Errorf("reach: %v after %d lookups, want EACCES after 1", err, calls)
	}
	if m := permOf(t, a); m != 0o2055 {
		t.Errorf("a after reach: %o, want 2055", m)
	}
}

// TestModesSettleSkipsReplaced: settleRoot gives permissions only to the
// directory apply made: one put in its place meanwhile keeps its own.
// Before, it was found by name and given them.
func TestModesSettleSkipsReplaced(t *testing.T) {
	widenAsUnprivileged(t)
	tr, a := reachDir(t, 0o755)
	var old unix.Stat_t
	if err := unix.Lstat(a, &old); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(a, a+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(a, 0o755); err != nil {
		t.Fatal(err)
	}
	ap := &applier{s: &Set{}, res: &Result{}}
	ap.settleLater("a", &old, 0o500)
	ap.settleRoot(0, tr)
	if m := permOf(t, a); m != 0o755 {
		t.Errorf("the directory put in a's place: %o, want its own 755", m)
	}
	if m := permOf(t, a+".old"); m != 0o755 {
		t.Errorf("a, moved away: %o, want 755", m)
	}
	var st unix.Stat_t
	if err := unix.Lstat(a, &st); err != nil {
		t.Fatal(err)
	}
	ap.settleLater("a", &st, 0o500)
	ap.settleRoot(0, tr)
	if m := permOf(t, a); m != 0o500 {
		t.Errorf("a, the one noted: %o, want 500", m)
	}
}
