//go:build linux && (amd64 || arm64)

// Package vfork holds the one system call a vfork-style clone needs: a
// child that shares its parent's memory and stack (CLONE_VM|CLONE_VFORK)
// runs on the caller's stack until it execs or exits, so the call that
// made it must keep its return address where the child cannot write (a
// register), as the Go runtime's own fork does. The child's code must be
// what syscall's forkAndExecInChild is: nosplit, norace, no allocation,
// raw system calls only.
package vfork

import "golang.org/x/sys/unix"

// Supported reports whether this architecture has RawSyscall's assembly;
// elsewhere RawSyscall is a plain raw system call, which a vfork-style
// child must not use.
const Supported = true

// RawSyscall is the system call trap with arguments a1, a2 and a3, whose
// return address survives a child that shares the caller's stack
// (vfork_linux_*.s, adapted from the Go project's).
//
//go:noescape
//go:norace
func RawSyscall(trap, a1, a2, a3 uintptr) (r1 uintptr, err unix.Errno)
