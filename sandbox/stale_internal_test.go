//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestRemoveStale: what a killed engine left (a scratch directory and a
// pids cgroup named after its pid, a process still inside) is removed, and
// what a live engine uses is not.
func TestRemoveStale(t *testing.T) {
	caps := Probe()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	deadName := scratchPrefix + strconv.Itoa(gone.Process.Pid) + "-test"
	liveName := scratchPrefix + strconv.Itoa(os.Getpid()) + "-test"

	old := ScratchRoot
	ScratchRoot = t.TempDir()
	defer func() { ScratchRoot = old }()
	for _, n := range []string{deadName, liveName} {
		if err := os.MkdirAll(filepath.Join(ScratchRoot, n, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	var orphan *exec.Cmd
	if caps.Cgroup {
		for _, n := range []string{deadName, liveName} {
			if _, err := createCgroup(n, 10); err != nil {
				t.Fatal(err)
			}
		}
		defer removeCgroup(filepath.Join(cgroupBase, liveName))
		orphan = exec.Command("sleep", "60")
		orphan.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := orphan.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = orphan.Process.Kill(); _ = orphan.Wait() }()
		if err := joinPid(filepath.Join(cgroupBase, deadName), orphan.Process.Pid); err != nil {
			t.Fatal(err)
		}
	}
	removeStale()

	if _, err := os.Stat(filepath.Join(ScratchRoot, deadName)); !os.IsNotExist(err) {
		t.Errorf("stale scratch dir not removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ScratchRoot, liveName)); err != nil {
		t.Errorf("a live engine's scratch dir was removed: %v", err)
	}
	if !caps.Cgroup {
		return
	}
	if _, err := os.Stat(filepath.Join(cgroupBase, deadName)); !os.IsNotExist(err) {
		t.Errorf("stale pids cgroup not removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cgroupBase, liveName)); err != nil {
		t.Errorf("a live engine's pids cgroup was removed: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- orphan.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Error("the process left in the stale cgroup was not killed")
	}
}

func joinPid(dir string, pid int) error {
	return os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
}
