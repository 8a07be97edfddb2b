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
