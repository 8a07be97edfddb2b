//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestRootlessHelperNextToExecutable: a rootless engine's worlds are made
// by the bashvisor-sandbox next to its executable when its probe found one
// to trust, and by its own executable once the one there could not make a
// world (here: a script that exits): that world is made all the same, and
// later ones start the executable. Root runs it too: a rootless world has
// its namespaces from a user namespace either way.
func TestRootlessHelperNextToExecutable(t *testing.T) {
	if err := probeUserns(); err != nil {
		testenv.Need(t, testenv.Namespaces, err)
	}
	prev, _ := smallHelper.Load().(string)
	t.Cleanup(func() { smallHelper.Store(prev) })
	dir := t.TempDir()
	small := filepath.Join(dir, helperName)
	build := exec.Command("go", "build", "-o", small, "../../cmd/bashvisor-sandbox")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("cannot build the helper: %v\n%s", err, out)
	}
	if got := adjacentHelper(dir); got != small {
		t.Fatalf("adjacentHelper(%s) = %q, want %q", dir, got, small)
	}
	world := func(want string) {
		t.Helper()
		w, err := makeWorld(WorldOptions{Dir: filepath.Join(t.TempDir(), "w")}, true, serveNever)
		if err != nil {
			t.Fatalf("makeWorld: %v", err)
		}
		if w.w.helper != want {
			t.Errorf("the world was made by %s, want %s", w.w.helper, want)
		}
		if err := w.Close(); err != nil {
			t.Error(err)
		}
	}
	smallHelper.Store(small)
	world(small)
	if got, _ := smallHelper.Load().(string); got != small {
		t.Errorf("after a world made with it the helper is %q, want %q", got, small)
	}

	// Writable by others: not used (and no world is made with it).
	if err := os.Chmod(small, 0o775); err != nil {
		t.Fatal(err)
	}
	if got := adjacentHelper(dir); got != "" {
		t.Errorf("group-writable helper: adjacentHelper = %q, want none", got)
	}

	// A helper that failed as helpers fail (here: out of memory) is
	// kept: the world fails, and the next one tries it again.
	script := func(body string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, helperName), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if adjacentHelper(dir) == "" {
			t.Fatal("the script would not even be tried")
		}
		return filepath.Join(dir, helperName)
	}
	failing := script(`echo "bashvisor sandbox: world: mount: cannot allocate memory" >&2; exit 126`)
	smallHelper.Store(failing)
	if w, err := makeWorld(WorldOptions{Dir: filepath.Join(t.TempDir(), "w")}, true, serveNever); err == nil {
		w.Close()
		t.Fatal("a world made by a helper that failed")
	} else if errors.Is(err, errNotHelper) || !strings.Contains(err.Error(), "cannot allocate memory") {
		t.Errorf("the helper's failure: %v", err)
	}
	if got, _ := smallHelper.Load().(string); got != failing {
		t.Errorf("after a helper's own failure smallHelper is %q, want it kept", got)
	}

	// Not this engine's helper (a program that exits without a word, one
	// of another version, an older one): the world falls back to the
	// running executable, and so do later ones.
	for _, body := range []string{
		"exit 3",
		`echo "bashvisor sandbox: world: ` + otherVersion + `" >&2; exit 126`,
		// What the helper of the version before said (it knew another usage).
		`echo "bashvisor sandbox: world: usage: __bashvisor_world_child SPEC" >&2; exit 126`,
	} {
		smallHelper.Store(script(body))
		world(ownExe())
		if got, _ := smallHelper.Load().(string); got != "" || selfPath() != ownExe() {
			t.Errorf("after a world %q could not make: smallHelper %q, selfPath %q", body, got, selfPath())
		}
	}
}

// TestWorldRefusesOtherHelperProtocol: a helper asked to make a world by
// an engine of another version refuses before it makes anything.
func TestWorldRefusesOtherHelperProtocol(t *testing.T) {
	err := worldChild([]string{"{}", "0123"})
	if err == nil || !strings.Contains(err.Error(), "another version") {
		t.Fatalf("worldChild with another protocol: %v", err)
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

// TestProbeOutOfDescriptors: a probe made while the process is out of
// descriptors decides nothing (Transient), and, once they are back, the
// same process finds the mode it has with them: as root with
// CAP_SYS_ADMIN its own namespaces, not rootless ones (whose probe needs
// no descriptor, so that a root engine out of descriptors would otherwise
// run rootless for life). The out-of-descriptors probe runs in a child of
// the test binary, under a low descriptor limit.
func TestProbeOutOfDescriptors(t *testing.T) {
	if os.Getenv("BASHVISOR_PROBE_CHILD") == "1" {
		release := testenv.ExhaustDescriptors()
		out := probe()
		release()
		back := probe()
		fmt.Printf("out: transient=%v\nback: transient=%v namespaces=%v rootless=%v\n", out.Transient != nil, back.Transient != nil, back.Namespaces, back.Rootless)
		return
	}
	testenv.NeedsTool(t, "prlimit")
	want := Probe()
	testenv.Needf(t, testenv.Namespaces, want.Namespaces, "no private namespaces: %s", want)
	cmd := exec.Command("prlimit", "--nofile=256:256", "--", os.Args[0], "-test.run=^TestProbeOutOfDescriptors$", "-test.count=1")
	cmd.Env = append(os.Environ(), "BASHVISOR_PROBE_CHILD=1")
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	for _, line := range []string{
		"out: transient=true\n",
		fmt.Sprintf("back: transient=false namespaces=true rootless=%v\n", want.Rootless),
	} {
		if !strings.Contains(string(b), line) {
			t.Errorf("want %q in the child's output:\n%s", line, b)
		}
	}
}
