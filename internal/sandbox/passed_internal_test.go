//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// openCopies counts the descriptors of this process open on path.
func openCopies(t *testing.T, path string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && target == path {
			n++
		}
	}
	return n
}

// handOver sends data and count descriptors of a sentinel file over a
// new handover's helper end, as a helper would, and returns the
// handover and the sentinel's path; the sender's copies are closed.
func handOver(t *testing.T, ports int, data []byte, count int) (*handover, string) {
	t.Helper()
	h, child, err := newHandover(ports)
	if err != nil {
		t.Fatal(err)
	}
	defer child.Close()
	path := filepath.Join(t.TempDir(), "sentinel")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fds := make([]int, count)
	for i := range fds {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fds[i] = int(f.Fd())
	}
	if err := unix.Sendmsg(int(child.Fd()), data, unix.UnixRights(fds...), nil, 0); err != nil {
		t.Fatal(err)
	}
	return h, path
}

// TestHandoverBadMessageLeaksNothing: a handover message that is not
// what the engine asked for (short data, more descriptors than asked)
// is an error, and every descriptor it carried is closed at once, not
// kept until the handover is closed.
func TestHandoverBadMessageLeaksNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ports int
		data  []byte
		count int
	}{
		{"short data", 2, []byte{0, 1}, 5},
		{"too many descriptors", 0, []byte{0}, 3},
		{"too many for the ports", 1, []byte{0, 1}, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, path := handOver(t, tc.ports, tc.data, tc.count)
			defer h.close()
			if _, err := h.take(0); err == nil {
				t.Fatal("take: a bad handover was taken")
			}
			if n := openCopies(t, path); n != 0 {
				t.Fatalf("%d descriptors of the bad handover are still open", n)
			}
		})
	}
}

// TestHandoverUnboundPortLeaksNothing: a descriptor for a carried port
// that the data says was not bound is closed, not lost; the bound
// port's lands at its position.
func TestHandoverUnboundPortLeaksNothing(t *testing.T) {
	// Two ports, the first not bound, yet a descriptor for each.
	h, path := handOver(t, 2, []byte{0, 0, 1}, 5)
	f, err := h.take(4)
	if err != nil || f == nil {
		t.Fatalf("take(4) = %v, %v; want the bound port's descriptor", f, err)
	}
	f.Close()
	if f, err := h.take(3); err != nil || f != nil {
		t.Fatalf("take(3) = %v, %v; want nil (not bound)", f, err)
	}
	h.close()
	if n := openCopies(t, path); n != 0 {
		t.Fatalf("%d handed-over descriptors are still open after close", n)
	}
}
