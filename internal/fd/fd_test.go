package fd_test

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// open returns an FD of a real file and its descriptor number.
func open(t *testing.T) (*fd.FD, int) {
	t.Helper()
	f, err := fd.Open(filepath.Join(t.TempDir(), "x"), unix.O_RDWR|unix.O_CREAT, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return f, f.Int()
}

// isOpen reports whether the process has descriptor n open.
func isOpen(n int) bool {
	_, err := unix.FcntlInt(uintptr(n), unix.F_GETFD, 0)
	return err == nil
}

func TestCloseOnce(t *testing.T) {
	f, n := open(t)
	if !isOpen(n) || !f.Valid() {
		t.Fatal("a new FD is not open")
	}
	// Concurrent closes close the descriptor exactly once: a second
	// unix.Close of the same number would close whatever reused it.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); _ = f.Close() }()
	}
	wg.Wait()
	if isOpen(n) {
		t.Fatal("descriptor still open after Close")
	}
	if f.Int() != -1 || f.Valid() {
		t.Fatalf("Int after Close = %d", f.Int())
	}
	if err := f.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestRelease(t *testing.T) {
	f, n := open(t)
	if got := f.Release(); got != n {
		t.Fatalf("Release = %d, want %d", got, n)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if !isOpen(n) {
		t.Fatal("Close after Release closed the descriptor")
	}
	unix.Close(n)
}

func TestFileTakesOwnership(t *testing.T) {
	f, n := open(t)
	file := f.File("x")
	if file == nil || int(file.Fd()) != n {
		t.Fatalf("File = %v", file)
	}
	f.Close()
	if !isOpen(n) {
		t.Fatal("Close after File closed the os.File's descriptor")
	}
	file.Close()
	if (*fd.FD)(nil).File("y") != nil || fd.New(-1).File("y") != nil {
		t.Fatal("File of an empty FD is not nil")
	}
}

func TestDupAndOpenat(t *testing.T) {
	dir := t.TempDir()
	d, err := fd.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("hi"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := fd.Openat(d, "a", unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := a.Dup()
	if err != nil {
		t.Fatal(err)
	}
	if b.Int() == a.Int() {
		t.Fatal("Dup returned the same descriptor")
	}
	buf := make([]byte, 2)
	if _, err := unix.Read(b.Int(), buf); err != nil || string(buf) != "hi" {
		t.Fatalf("read through the duplicate: %q %v", buf, err)
	}
	b.Close()
	if _, err := fd.Openat(d, "missing", unix.O_RDONLY, 0); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Openat of a missing file: %v", err)
	}
}

func TestEmpty(t *testing.T) {
	var z fd.FD
	var nilFD *fd.FD
	for _, f := range []*fd.FD{&z, nilFD, fd.New(-1)} {
		if f.Int() != -1 || f.Valid() || f.Release() != -1 || f.Close() != nil {
			t.Fatalf("empty FD %v holds something", f)
		}
	}
}
