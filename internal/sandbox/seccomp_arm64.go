//go:build linux

package sandbox

import "golang.org/x/sys/unix"

// auditArch is the seccomp_data.arch this filter is written for; any other
// (32-bit compat) kills the process.
const auditArch = unix.AUDIT_ARCH_AARCH64

// x32SyscallBit: arm64 has no x32-like ABI.
const x32SyscallBit = 0

// archDeniedSyscalls: arm64 has only the *at variants, covered in common.
var archDeniedSyscalls = []uint32{}

// archMetadataSyscalls: none beyond the common ones.
var archMetadataSyscalls = []uint32{}

// modeArgs are the syscalls that take a file mode, and the index of the
// argument that holds it.
var modeArgs = map[uint32]int{
	unix.SYS_FCHMOD: 1, unix.SYS_FCHMODAT: 2, unix.SYS_FCHMODAT2: 2,
	unix.SYS_OPENAT: 3, unix.SYS_MKNODAT: 2,
}
