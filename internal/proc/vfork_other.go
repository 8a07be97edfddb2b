//go:build linux && !amd64 && !arm64

package proc

import "golang.org/x/sys/unix"

// vforkJoins: on this architecture, for want of rawVforkSyscall's
// assembly, a command on a hybrid host is forked by its cgroup's forker
// or a joining thread (cgroup_place.go).
const vforkJoins = false

func rawVforkSyscall(trap, a1, a2, a3 uintptr) (uintptr, unix.Errno) {
	return 0, unix.ENOSYS
}
