//go:build linux && (amd64 || arm64)

package sandbox

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// TestFilterVerdicts runs the seccomp program in x/net/bpf's VM. The VM
// loads big-endian words, so seccomp_data is encoded big-endian here (the
// kernel reads it in native order, which the program's offsets assume).
func TestFilterVerdicts(t *testing.T) {
	raw, err := buildFilter(false)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 255 {
		t.Errorf("filter has %d instructions", len(raw))
	}
	ins, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("cannot disassemble")
	}
	vm, err := bpf.NewVM(ins)
	if err != nil {
		t.Fatal(err)
	}
	eval := func(arch, nr uint32, args ...uint64) uint32 {
		data := make([]byte, 64)
		binary.BigEndian.PutUint32(data[0:], nr)
		binary.BigEndian.PutUint32(data[4:], arch)
		for i, a := range args { // low 32 bits at 16+8i, as on little endian
			binary.BigEndian.PutUint32(data[16+8*i:], uint32(a))
			binary.BigEndian.PutUint32(data[20+8*i:], uint32(a>>32))
		}
		v, err := vm.Run(data)
		if err != nil {
			t.Fatal(err)
		}
		return uint32(v)
	}
	cases := []struct {
		name string
		nr   uint32
		args []uint64
		want uint32
	}{
		{"read", unix.SYS_READ, nil, retAllow},
		{"openat", unix.SYS_OPENAT, nil, retAllow},
		{"execve", unix.SYS_EXECVE, nil, retAllow},
		{"fchmodat", unix.SYS_FCHMODAT, nil, retEPERM},
		{"fchmodat2", unix.SYS_FCHMODAT2, nil, retEPERM},
		{"utimensat", unix.SYS_UTIMENSAT, nil, retEPERM},
		{"setxattrat", unix.SYS_SETXATTRAT, nil, retEPERM},
		{"connect", unix.SYS_CONNECT, nil, retEPERM},
		{"ptrace", unix.SYS_PTRACE, nil, retEPERM},
		{"io_uring_setup", unix.SYS_IO_URING_SETUP, nil, retEPERM},
		{"mount", unix.SYS_MOUNT, nil, retEPERM},
		{"unshare", unix.SYS_UNSHARE, nil, retEPERM},
		{"clone3", unix.SYS_CLONE3, nil, retENOSYS},
		{"clone-thread", unix.SYS_CLONE, []uint64{unix.CLONE_VM | unix.CLONE_THREAD | unix.CLONE_SIGHAND}, retAllow},
		{"clone-fork", unix.SYS_CLONE, []uint64{17 /* SIGCHLD */}, retAllow},
		{"clone-newuser", unix.SYS_CLONE, []uint64{unix.CLONE_NEWUSER | 17}, retEPERM},
		{"clone-newnet", unix.SYS_CLONE, []uint64{unix.CLONE_NEWNET}, retEPERM},
		{"socket-unix-stream", unix.SYS_SOCKET, []uint64{unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC}, retAllow},
		{"socket-unix-seqpacket", unix.SYS_SOCKET, []uint64{unix.AF_UNIX, unix.SOCK_SEQPACKET}, retAllow},
		{"socket-unix-dgram", unix.SYS_SOCKET, []uint64{unix.AF_UNIX, unix.SOCK_DGRAM}, retEPERM},
		{"socket-inet-stream", unix.SYS_SOCKET, []uint64{unix.AF_INET, unix.SOCK_STREAM}, retEPERM},
		{"socket-inet-mptcp", unix.SYS_SOCKET, []uint64{unix.AF_INET, unix.SOCK_STREAM, 262}, retEPERM},
		{"socket-inet6-dgram", unix.SYS_SOCKET, []uint64{unix.AF_INET6, unix.SOCK_DGRAM}, retEPERM},
		{"socket-packet", unix.SYS_SOCKET, []uint64{unix.AF_PACKET, unix.SOCK_RAW}, retEPERM},
		{"socket-netlink", unix.SYS_SOCKET, []uint64{unix.AF_NETLINK, unix.SOCK_RAW}, retEPERM},
		{"socket-unix-high-bits", unix.SYS_SOCKET, []uint64{1<<32 | unix.AF_UNIX, unix.SOCK_STREAM}, retAllow}, // the kernel sees int(AF_UNIX)
		{"socketpair-unix-stream", unix.SYS_SOCKETPAIR, []uint64{unix.AF_UNIX, unix.SOCK_STREAM}, retAllow},
		{"socketpair-unix-dgram", unix.SYS_SOCKETPAIR, []uint64{unix.AF_UNIX, unix.SOCK_DGRAM}, retEPERM},
	}
	for _, nr := range deniedSyscalls {
		cases = append(cases, struct {
			name string
			nr   uint32
			args []uint64
			want uint32
		}{"denied", nr, nil, retEPERM})
	}
	for _, c := range cases {
		if got := eval(auditArch, c.nr, c.args...); got != c.want {
			t.Errorf("%s (nr %d %v): got %#x, want %#x", c.name, c.nr, c.args, got, c.want)
		}
	}
	if got := eval(unix.AUDIT_ARCH_I386, unix.SYS_READ); got != retKill {
		t.Errorf("foreign arch: got %#x, want kill", got)
	}
	if x32SyscallBit != 0 {
		if got := eval(auditArch, x32SyscallBit|unix.SYS_READ); got != retEPERM {
			t.Errorf("x32 read: got %#x, want EPERM", got)
		}
	}
	// StartDirect's variant lets clone3 through and nothing else changes.
	raw3, err := buildFilter(true)
	if err != nil {
		t.Fatal(err)
	}
	ins3, _ := bpf.Disassemble(raw3)
	vm3, err := bpf.NewVM(ins3)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 64)
	binary.BigEndian.PutUint32(data[0:], unix.SYS_CLONE3)
	binary.BigEndian.PutUint32(data[4:], auditArch)
	if v, _ := vm3.Run(data); uint32(v) != retAllow {
		t.Errorf("clone3 with allowClone3: got %#x", v)
	}
	binary.BigEndian.PutUint32(data[0:], unix.SYS_CONNECT)
	if v, _ := vm3.Run(data); uint32(v) != retEPERM {
		t.Errorf("connect with allowClone3: got %#x", v)
	}

	// Every syscall number not listed is allowed.
	listed := map[uint32]bool{unix.SYS_SOCKET: true, unix.SYS_SOCKETPAIR: true, unix.SYS_CLONE: true, unix.SYS_CLONE3: true}
	for _, nr := range deniedSyscalls {
		listed[nr] = true
	}
	for nr := uint32(0); nr < 600; nr++ {
		if !listed[nr] {
			if got := eval(auditArch, nr); got != retAllow {
				t.Errorf("syscall %d: got %#x, want allow", nr, got)
			}
		}
	}
}
