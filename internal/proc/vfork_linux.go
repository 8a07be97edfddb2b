//go:build linux && (amd64 || arm64)

package proc

import (
	"golang.org/x/sys/unix"
)

// vforkJoins: this platform starts a command on a hybrid host with
// startRaw (forkJoined: a vfork whose child joins the v1 cgroups), not a
// forker.
const vforkJoins = true

// rawVforkSyscall is a system call whose return address survives a child
// that shares the caller's stack (vfork_linux_*.s).
//
//go:noescape
//go:norace
func rawVforkSyscall(trap, a1, a2, a3 uintptr) (r1 uintptr, err unix.Errno)
