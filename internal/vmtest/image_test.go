//go:build linux

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCpioNewc: the archive is the kernel's initramfs format: each entry a
// 110-byte "070701" header, the NUL-terminated name and the data, each
// padded to 4 bytes, and a TRAILER!!! entry.
func TestCpioNewc(t *testing.T) {
	var buf bytes.Buffer
	c := &cpioWriter{w: &buf}
	c.dir("d")
	c.file("d/f", 0o644, []byte("hello"))
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	want := "070701" + "00000001" + "000041ED" + "00000000" + "00000000" + "00000002" + "00000000" + "00000000" +
		"00000000" + "00000000" + "00000000" + "00000000" + "00000002" + "00000000" + "d\x00" +
		"070701" + "00000002" + "000081A4" + "00000000" + "00000000" + "00000001" + "00000000" + "00000005" +
		"00000000" + "00000000" + "00000000" + "00000000" + "00000004" + "00000000" + "d/f\x00\x00\x00" + "hello\x00\x00\x00" +
		"070701" + "00000003" + "00000000" + "00000000" + "00000000" + "00000001" + "00000000" + "00000000" +
		"00000000" + "00000000" + "00000000" + "00000000" + "0000000B" + "00000000" + "TRAILER!!!\x00" + "\x00\x00\x00"
	if got := buf.String(); got != want {
		t.Fatalf("archive:\n%q\nwant:\n%q", got, want)
	}
	if buf.Len()%4 != 0 {
		t.Fatalf("length %d not a multiple of 4", buf.Len())
	}
}

// TestResolveModulesMissing: a module that is not there is an error that
// names it and the directory.
func TestResolveModulesMissing(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "modules.builtin"), []byte("kernel/fs/overlayfs/overlay.ko\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Built in: nothing to load.
	if mods, err := resolveModules(dir, []string{"overlay"}); err != nil || len(mods) != 0 {
		t.Fatalf("built-in overlay: %v %v", mods, err)
	}
	_, err := resolveModules(dir, []string{"9pnet-virtio"})
	if err == nil || !strings.Contains(err.Error(), "9pnet_virtio") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("got %v", err)
	}
}

// TestMaskedTop: a directory below a tmpfs the guest mounts is revealed
// from the directory right below that mount (the clone's root, so that
// tests reading ../README.md find it), and only below it.
func TestMaskedTop(t *testing.T) {
	masks := []string{"/tmp", "/run", "/dev/shm"}
	cases := []struct {
		dir, mask, top string
		ok             bool
	}{
		{"/tmp/clone/internal/proc", "/tmp", "/tmp/clone", true},
		{"/tmp/clone", "/tmp", "/tmp/clone", true},
		{"/run/user/0/x/", "/run", "/run/user", true},
		{"/tmp", "", "", false},
		{"/tmpfoo/x", "", "", false},
		{"/work/main/.vm/run", "", "", false},
	}
	for _, c := range cases {
		mask, top, ok := maskedTop(c.dir, masks)
		if mask != c.mask || top != c.top || ok != c.ok {
			t.Errorf("maskedTop(%q) = %q, %q, %v; want %q, %q, %v", c.dir, mask, top, ok, c.mask, c.top, c.ok)
		}
	}
}

// TestRevealNamesMissingDirectory: a run whose directory the guest cannot
// see (not even once a masking tmpfs is looked behind) fails with that
// directory named, not as the "fork/exec …: no such file or directory" of
// a failed chdir.
func TestRevealNamesMissingDirectory(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone", "internal", "proc")
	err := reveal(missing)
	if err == nil || !strings.Contains(err.Error(), "directory "+missing+" does not exist in the guest") {
		t.Fatalf("reveal(%q) = %v", missing, err)
	}
	// Under a tmpfs the guest mounted, with nothing of that name behind it
	// on the host: still named (and nothing is mounted).
	behind := t.TempDir()
	f, err := os.Open(behind)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hidden["/masked-by-test"] = int(f.Fd())
	defer delete(hidden, "/masked-by-test")
	err = reveal("/masked-by-test/clone/internal/proc")
	if err == nil || !strings.Contains(err.Error(), "directory /masked-by-test/clone/internal/proc does not exist in the guest") {
		t.Fatalf("masked: %v", err)
	}
	if _, err := os.Stat("/masked-by-test"); err == nil {
		t.Errorf("reveal made /masked-by-test for a directory the host lacks too")
	}
}
