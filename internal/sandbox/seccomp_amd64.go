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
var archDeniedSyscalls = []uint32{unix.SYS_IOPL, unix.SYS_IOPERM}

// archMetadataSyscalls are this architecture's legacy metadata syscalls
// (see metadataSyscalls).
var archMetadataSyscalls = []uint32{
	unix.SYS_CHMOD, unix.SYS_CHOWN, unix.SYS_LCHOWN,
	unix.SYS_UTIME, unix.SYS_UTIMES, unix.SYS_FUTIMESAT,
}

// modeArgs are the syscalls that take a file mode, and the index of the
// argument that holds it.
var modeArgs = map[uint32]int{
	unix.SYS_CHMOD: 1, unix.SYS_FCHMOD: 1, unix.SYS_FCHMODAT: 2, unix.SYS_FCHMODAT2: 2,
	unix.SYS_OPEN: 2, unix.SYS_OPENAT: 3, unix.SYS_CREAT: 1,
	unix.SYS_MKNOD: 1, unix.SYS_MKNODAT: 2,
}
