//go:build linux && !amd64 && !arm64

package sandbox

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// vforkFlags: on this architecture forkRaw forks (a copy of the engine's
// address space), for want of rawVforkSyscall's assembly.
const vforkFlags = 0

//go:nosplit
//go:norace
func rawVforkSyscall(trap, a1, a2, a3 uintptr) (uintptr, unix.Errno) {
	r1, _, e := syscall.RawSyscall(trap, a1, a2, a3)
	return r1, unix.Errno(e)
}

func seccompFilter(filterOpts) ([]unix.SockFilter, error) {
	return nil, errors.New("no seccomp filter for this architecture")
}
