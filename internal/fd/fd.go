// Package fd owns file descriptors. An FD is closed exactly once, by
// whoever holds it, unless it is released to a new owner first: the shape
// of gVisor's pkg/fd, and of os/exec's single deferred cleanup in
// Cmd.Start.
//
// The zero value and a nil *FD hold nothing: Int returns -1, Close and
// Release do nothing. Methods are safe for concurrent use; a descriptor
// read with Int may be closed by another goroutine's Close, so an FD that
// is shared must be closed only once its users are done.
package fd

import (
	"fmt"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// FD is an owned file descriptor.
type FD struct {
	// n is the descriptor plus one, so that the zero FD holds nothing.
	n atomic.Int64
}

// New takes ownership of n. A negative n gives an FD that holds nothing.
func New(n int) *FD {
	f := &FD{}
	if n >= 0 {
		f.n.Store(int64(n) + 1)
	}
	return f
}

// Open opens path with open(2)'s flags and mode, O_CLOEXEC added.
func Open(path string, flags int, mode uint32) (*FD, error) {
	n, err := unix.Open(path, flags|unix.O_CLOEXEC, mode)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return New(n), nil
}

// Openat opens path relative to the directory dir with openat(2)'s flags
// and mode, O_CLOEXEC added.
func Openat(dir *FD, path string, flags int, mode uint32) (*FD, error) {
	n, err := unix.Openat(dir.Int(), path, flags|unix.O_CLOEXEC, mode)
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: path, Err: err}
	}
	return New(n), nil
}

// Int returns the descriptor, or -1 once it was closed or released (and
// for a nil FD). The FD keeps ownership.
func (f *FD) Int() int {
	if f == nil {
		return -1
	}
	return int(f.n.Load()) - 1
}

// Valid reports whether the FD still holds a descriptor.
func (f *FD) Valid() bool { return f.Int() >= 0 }

// Release gives up ownership and returns the descriptor (-1 if there was
// none): the caller, or whoever it hands the number to, closes it.
func (f *FD) Release() int {
	if f == nil {
		return -1
	}
	return int(f.n.Swap(0)) - 1
}

// Close closes the descriptor if the FD still owns one. Only the first
// call closes; later calls, and calls after Release, return nil.
func (f *FD) Close() error {
	n := f.Release()
	if n < 0 {
		return nil
	}
	if err := unix.Close(n); err != nil {
		return fmt.Errorf("closing descriptor %d: %w", n, err)
	}
	return nil
}

// File releases the descriptor into an *os.File with the given name, which
// then owns it. It returns nil if the FD held nothing.
func (f *FD) File(name string) *os.File {
	n := f.Release()
	if n < 0 {
		return nil
	}
	return os.NewFile(uintptr(n), name)
}

// Dup returns a new FD holding a close-on-exec duplicate of the descriptor.
func (f *FD) Dup() (*FD, error) {
	n, err := unix.FcntlInt(uintptr(f.Int()), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("duplicating descriptor %d: %w", f.Int(), err)
	}
	return New(n), nil
}
