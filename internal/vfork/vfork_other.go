//go:build linux && !amd64 && !arm64

package vfork

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// Supported is false: this architecture has no assembly for RawSyscall,
// which is then a plain raw system call (for a clone that copies the
// caller's memory, not one that shares it).
const Supported = false

// RawSyscall is the raw system call trap with arguments a1, a2 and a3.
//
//go:nosplit
//go:norace
func RawSyscall(trap, a1, a2, a3 uintptr) (uintptr, unix.Errno) {
	r1, _, e := syscall.RawSyscall(trap, a1, a2, a3)
	return r1, unix.Errno(e)
}
