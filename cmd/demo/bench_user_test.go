package main

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchIdleUser: -user runs every profile as that user in a peer
// process, rotated with root's samples, and compares each restricted
// profile with the same profile as root.
func TestBenchIdleUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching users needs root (this ran in CI's first pass)")
	}
	if demoBin == "" {
		t.Fatal("the demo binary did not build (see TestMain's output)")
	}
	const name = "nobody"
	if _, err := user.Lookup(name); err != nil {
		t.Fatalf("user %s: %v", name, err)
	}
	// The peer runs the program as the user: a copy where it may.
	dir, err := os.MkdirTemp("", "demo-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "demo")
	if out, err := exec.Command("cp", demoBin, bin).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "bench", "-only", "idle", "-idle", "0", "-idle-n", "2", "-user", name).CombinedOutput()
	if err != nil {
		t.Fatalf("demo bench -user: %v\n%s", err, out)
	}
	for _, row := range []string{"idle 0s: root raw os/exec, p50 of 2", "idle 0s: root read-only, p50 of 2",
		"idle 0s: nobody unrestricted, p50 of 2", "idle 0s: nobody read-only, p50 of 2", "idle 0s: nobody workspace-write, p50 of 2"} {
		if !strings.Contains(string(out), row) {
			t.Errorf("missing %q in\n%s", row, out)
		}
	}
	if n := strings.Count(string(out), " ms root"); n != 3 {
		t.Errorf("%d comparisons with root, want 3 (one per profile) in\n%s", n, out)
	}
}
