//go:build linux

package sandbox

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/fd"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestNamespaceDescriptorKeepsMounts: a descriptor of a mount namespace
// keeps the namespace and its mounts after its last task exited (what
// keep_linux.go's comment says, and what rootless worlds and the
// namespace a helper reports rely on): a process that made a tmpfs in a
// namespace of its own exits and is reaped, then a process joined to
// the namespace by the descriptor alone reads the file it wrote there,
// which the host's directory does not have. As root and rootless (a
// user namespace of its own, joined first).
func TestNamespaceDescriptorKeepsMounts(t *testing.T) {
	c := Probe()
	testenv.Needf(t, testenv.Namespaces, c.Namespaces, "no namespaces: %s", c)
	unshare := testenv.NeedsTool(t, "unshare")[0]
	dir := t.TempDir()
	args := []string{"-m", "--propagation", "private"}
	if c.Rootless {
		args = append([]string{"-U", "-r"}, args...)
	}
	maker := exec.Command(unshare, append(args, "sh", "-c",
		`mount -t tmpfs kept "$0" && echo made >"$0/marker" && echo ready && exec cat >/dev/null`, dir)...)
	in, err := maker.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := maker.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	maker.Stderr = os.Stderr
	if err := maker.Start(); err != nil {
		t.Fatal(err)
	}
	testenv.KillAtCleanup(t, maker.Process.Pid)
	line, err := bufio.NewReader(out).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("the namespace's maker said %q (%v)", line, err)
	}
	// The maker execs cat in its namespace: its pid is the namespace's
	// only task.
	ns := [3]int{-1, -1, -1}
	for i, name := range map[int]string{0: "user", 2: "mnt"} {
		if i == 0 && !c.Rootless {
			continue
		}
		f, err := fd.Open("/proc/"+strconv.Itoa(maker.Process.Pid)+"/ns/"+name, os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		ns[i] = f.Int()
	}
	in.Close()
	if err := maker.Wait(); err != nil {
		t.Fatalf("the namespace's maker: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "marker")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the host sees the namespace's tmpfs: %v", err)
	}
	// Joined by the descriptors alone (the maker is reaped).
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	reader := exec.Command("/bin/cat", filepath.Join(dir, "marker"))
	reader.Stdout, reader.Stderr = w, w
	err = rawStart(reader, rawOpts{join: ns})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := bufio.NewReader(r).ReadString(0)
	if err := reader.Wait(); err != nil || strings.TrimSpace(b) != "made" {
		t.Errorf("joined by its descriptor after its last task ended, the namespace shows the marker as %q (%v): its mounts were not kept", b, err)
	}
}
