// Adapted from the Go project's syscall/asm_linux_arm64.s (BSD-style
// licence): the return address stays in the link register across the
// system call, so a child sharing this stack (CLONE_VM|CLONE_VFORK)
// cannot overwrite it.

#include "textflag.h"

// func RawSyscall(trap, a1, a2, a3 uintptr) (r1, err uintptr)
TEXT ·RawSyscall(SB),NOSPLIT,$0-48
	MOVD	a1+8(FP), R0
	MOVD	a2+16(FP), R1
	MOVD	a3+24(FP), R2
	MOVD	$0, R3
	MOVD	$0, R4
	MOVD	$0, R5
	MOVD	trap+0(FP), R8	// syscall entry
	SVC
	CMN	$4095, R0
	BCC	ok
	MOVD	$-1, R4
	MOVD	R4, r1+32(FP)	// r1
	NEG	R0, R0
	MOVD	R0, err+40(FP)	// errno
	RET
ok:
	MOVD	R0, r1+32(FP)	// r1
	MOVD	ZR, err+40(FP)	// errno
	RET
