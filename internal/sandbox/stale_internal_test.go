//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestRemoveStale: a scratch directory named after an engine process that
// no longer exists (one killed before its cleanup) is removed; one of a
// live engine is not.
func TestRemoveStale(t *testing.T) {
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	deadName := scratchPrefix + strconv.Itoa(gone.Process.Pid) + "-test"
	liveName := scratchPrefix + strconv.Itoa(os.Getpid()) + "-test"
	root := t.TempDir()
	for _, n := range []string{deadName, liveName} {
		if err := os.MkdirAll(filepath.Join(root, n, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	removeStale(root)
	if _, err := os.Stat(filepath.Join(root, deadName)); !os.IsNotExist(err) {
		t.Errorf("stale scratch dir not removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, liveName)); err != nil {
		t.Errorf("a live engine's scratch dir was removed: %v", err)
	}
}
