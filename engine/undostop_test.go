package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/engine"
)

// setImmutable sets or clears the immutable flag of directory dir, which
// keeps even root from changing the entries in it (rename(2) fails).
func setImmutable(t *testing.T, dir string, on bool) {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		t.Skipf("no file flags here: %v", err)
	}
	const fsImmutable = 0x10
	if on {
		flags |= fsImmutable
	} else {
		flags &^= fsImmutable
	}
	if err := unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags)); err != nil {
		t.Fatal(err)
	}
}

// TestUndoThatStopsSaysWhatItRestored: an undo that cannot restore one
// path (its directory immutable) stops there; its error names what it
// restored before, the rest stays kept, and undoing again once the path
// can be restored finishes the step.
func TestUndoThatStopsSaysWhatItRestored(t *testing.T) {
	needNamespaces(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root (the immutable flag)")
	}
	e := newEngine(t)
	dir := repo(t)
	tc := workspaceWrite(dir)
	for _, d := range []string{"a", "z"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, d, "f"), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if r := e.Run(context.Background(), tc, engine.Input{Command: `echo y > a/f && echo y > z/f`}); r.Status != engine.StatusOK {
		t.Fatalf("%s %q", r.Status, r.Output)
	}
	setImmutable(t, filepath.Join(dir, "a"), true)
	t.Cleanup(func() { setImmutable(t, filepath.Join(dir, "a"), false) })
	_, err := e.Undo(context.Background(), tc, 1)
	if err == nil || !strings.Contains(err.Error(), "restored M z/f") || !strings.Contains(err.Error(), "run it again") {
		t.Fatalf("an undo that stopped: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "z", "f")); string(b) != "x\n" {
		t.Fatalf("z/f after the stopped undo: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a", "f")); string(b) != "y\n" {
		t.Fatalf("a/f after the stopped undo: %q", b)
	}
	setImmutable(t, filepath.Join(dir, "a"), false)
	u, err := e.Undo(context.Background(), tc, 1)
	if err != nil {
		t.Fatalf("undo again: %v", err)
	}
	if !strings.Contains(u.Text(), "a/f") {
		t.Errorf("undo again: %q", u.Text())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a", "f")); string(b) != "x\n" {
		t.Fatalf("a/f after undoing again: %q", b)
	}
}
