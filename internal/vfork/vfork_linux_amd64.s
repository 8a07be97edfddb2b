// Adapted from the Go project's syscall/asm_linux_amd64.s (BSD-style
// licence): RawSyscall keeps its return address in a register
// across the system call, so that a child sharing this stack
// (CLONE_VM|CLONE_VFORK) cannot overwrite it.

#include "textflag.h"

// func RawSyscall(trap, a1, a2, a3 uintptr) (r1, err uintptr)
TEXT ·RawSyscall(SB),NOSPLIT|NOFRAME,$0-48
	MOVQ	a1+8(FP), DI
	MOVQ	a2+16(FP), SI
	MOVQ	a3+24(FP), DX
	MOVQ	$0, R10
	MOVQ	$0, R8
	MOVQ	$0, R9
	MOVQ	trap+0(FP), AX	// syscall entry
	POPQ	R12 // preserve return address
	SYSCALL
	PUSHQ	R12
	CMPQ	AX, $0xfffffffffffff001
	JLS	ok
	MOVQ	$-1, r1+32(FP)
	NEGQ	AX
	MOVQ	AX, err+40(FP)
	RET
ok:
	MOVQ	AX, r1+32(FP)
	MOVQ	$0, err+40(FP)
	RET
