//go:build linux && !amd64 && !arm64

package sandbox

import (
	"errors"

	"golang.org/x/sys/unix"
)

// vforkFlags: on this architecture forkRaw forks (a copy of the engine's
// address space), for want of vfork.RawSyscall's assembly.
const vforkFlags = 0

func seccompFilter(filterOpts) ([]unix.SockFilter, error) {
	return nil, errors.New("no seccomp filter for this architecture")
}
