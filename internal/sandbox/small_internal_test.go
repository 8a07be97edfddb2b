//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestRootlessHelperNextToExecutable: a rootless engine's probe picks
// bashvisor-sandbox next to its executable when a world can be made with
// it, and its own executable when the file there is not one to trust, or
// is a helper of another version (here: a script that exits, and one
// with another helper protocol). The probe runs as root too: it makes its
// worlds in user namespaces either way.
func TestRootlessHelperNextToExecutable(t *testing.T) {
	if _, err := rootlessHelper(""); err != nil {
		testenv.Need(t, testenv.Namespaces, err)
	}
	dir := t.TempDir()
	small := filepath.Join(dir, helperName)
	build := exec.Command("go", "build", "-o", small, "../../cmd/bashvisor-sandbox")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("cannot build the helper: %v\n%s", err, out)
	}
	if got, err := rootlessHelper(dir); err != nil || got != small {
		t.Fatalf("rootlessHelper(%s) = %q, %v; want %q", dir, got, err, small)
	}

	// Writable by others: not used (and no world is made with it).
	if err := os.Chmod(small, 0o775); err != nil {
		t.Fatal(err)
	}
	if got := adjacentHelper(dir); got != "" {
		t.Errorf("group-writable helper: adjacentHelper = %q, want none", got)
	}
	if err := os.Chmod(small, 0o755); err != nil {
		t.Fatal(err)
	}

	// Not a working helper: the probe falls back to the running executable.
	stale := t.TempDir()
	if err := os.WriteFile(filepath.Join(stale, helperName), []byte("#!/bin/sh\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if adjacentHelper(stale) == "" {
		t.Fatal("the stale helper was not even tried")
	}
	if got, err := rootlessHelper(stale); err != nil || got != "" {
		t.Errorf("rootlessHelper with a failing helper = %q, %v; want the running executable", got, err)
	}
}

// TestWorldRefusesOtherHelperProtocol: a helper asked to make a world by
// an engine of another version refuses before it makes anything.
func TestWorldRefusesOtherHelperProtocol(t *testing.T) {
	err := startWorldChild([]string{"{}", "0123"})
	if err == nil || !strings.Contains(err.Error(), "another version") {
		t.Fatalf("startWorldChild with another protocol: %v", err)
	}
	if p := helperProtocol(); len(p) != 24 || p != helperProtocol() {
		t.Fatalf("helperProtocol() = %q: want 24 stable hex digits", p)
	}
}

// TestAdjacentHelperTrust: the helper next to the executable is used only
// when nobody else can replace it: a regular file (not a symlink, which
// could point anywhere) in a directory only its owner may write (review5).
func TestAdjacentHelperTrust(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	small := filepath.Join(dir, helperName)
	if err := os.WriteFile(small, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := adjacentHelper(dir); got != small {
		t.Fatalf("adjacentHelper = %q, want %q", got, small)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if got := adjacentHelper(dir); got != "" {
		t.Errorf("in a directory others may write: adjacentHelper = %q, want none", got)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(small); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/bin/true", small); err != nil {
		t.Fatal(err)
	}
	if got := adjacentHelper(dir); got != "" {
		t.Errorf("a symlink: adjacentHelper = %q, want none", got)
	}
}
