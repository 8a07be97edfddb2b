package vfork_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/vfork"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRawSyscall: both of RawSyscall's returns, a result and an error
// (its use with a child sharing the stack is tested where it forks:
// internal/proc's TestCgroupChildJoins, internal/sandbox's rootless
// starts).
func TestRawSyscall(t *testing.T) {
	if pid, err := vfork.RawSyscall(unix.SYS_GETPID, 0, 0, 0); err != 0 || int(pid) != os.Getpid() {
		t.Fatalf("getpid: %d, %v; want %d", pid, err, os.Getpid())
	}
	if _, err := vfork.RawSyscall(unix.SYS_CLOSE, ^uintptr(0), 0, 0); err != unix.EBADF {
		t.Fatalf("close(-1): %v, want EBADF", err)
	}
}
