//go:build linux

package sandbox

import "golang.org/x/sys/unix"

// auditArch is the seccomp_data.arch this filter is written for; any other
// (i386 through int 0x80) kills the process.
const auditArch = unix.AUDIT_ARCH_X86_64

// x32SyscallBit marks x32 syscall numbers, which reuse the x86_64 table
// under other numbers: all of them fail with EPERM.
const x32SyscallBit = 0x40000000

// archDeniedSyscalls are the legacy syscalls only this architecture has.
var archDeniedSyscalls = []uint32{
	unix.SYS_CHMOD, unix.SYS_CHOWN, unix.SYS_LCHOWN,
	unix.SYS_UTIME, unix.SYS_UTIMES, unix.SYS_FUTIMESAT,
	unix.SYS_IOPL, unix.SYS_IOPERM,
}
