//go:build linux && (amd64 || arm64)

package sandbox

import (
	"encoding/binary"
	"fmt"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// TestFilterVerdicts runs the seccomp program in x/net/bpf's VM. The VM
// loads big-endian words, so seccomp_data is encoded big-endian here (the
// kernel reads it in native order, which the program's offsets assume).
func TestFilterVerdicts(t *testing.T) {
	for _, opts := range []filterOpts{{}, {denyIPC: true, denyBind: true}, {metadata: true}, {network: true}, {metadata: true, network: true}} {
		t.Run(fmt.Sprintf("%+v", opts), func(t *testing.T) { testFilterVerdicts(t, opts) })
	}
}

func testFilterVerdicts(t *testing.T, opts filterOpts) {
	raw, err := buildFilter(opts)
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
	// Verdicts that depend on opts.
	meta, setid, openat2, connect, unixSock, tcp := uint32(retEPERM), uint32(retAllow), uint32(retAllow), uint32(retEPERM), uint32(retAllow), uint32(retEPERM)
	if opts.metadata {
		meta, setid, openat2 = retAllow, retEPERM, retENOSYS
	}
	if opts.network {
		connect, unixSock, tcp = retAllow, retEPERM, retAllow
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
		{"fchmodat", unix.SYS_FCHMODAT, []uint64{0, 0, 0o755}, meta},
		{"fchmodat-setuid", unix.SYS_FCHMODAT, []uint64{0, 0, 0o4755}, retEPERM},
		{"fchmodat2-setgid", unix.SYS_FCHMODAT2, []uint64{0, 0, 0o2755}, retEPERM},
		{"fchmod", unix.SYS_FCHMOD, []uint64{0, 0o644}, meta},
		{"fchmod-setuid", unix.SYS_FCHMOD, []uint64{0, 0o4644}, retEPERM},
		{"fchownat", unix.SYS_FCHOWNAT, nil, meta},
		{"utimensat", unix.SYS_UTIMENSAT, nil, meta},
		{"setxattrat", unix.SYS_SETXATTRAT, nil, meta},
		{"openat-create", unix.SYS_OPENAT, []uint64{0, 0, unix.O_CREAT, 0o644}, retAllow},
		{"openat-create-setuid", unix.SYS_OPENAT, []uint64{0, 0, unix.O_CREAT, 0o4755}, setid},
		{"mknodat-setgid", unix.SYS_MKNODAT, []uint64{0, 0, unix.S_IFREG | 0o2755}, setid},
		{"openat2", unix.SYS_OPENAT2, nil, openat2},
		{"connect", unix.SYS_CONNECT, nil, connect},
		{"ptrace", unix.SYS_PTRACE, nil, retEPERM},
		{"io_uring_setup", unix.SYS_IO_URING_SETUP, nil, retEPERM},
		{"mount", unix.SYS_MOUNT, nil, retEPERM},
		{"unshare", unix.SYS_UNSHARE, nil, retEPERM},
		{"clone3", unix.SYS_CLONE3, nil, retENOSYS},
		{"clone3-into-cgroup", unix.SYS_CLONE3, []uint64{0x7fff0000, 88}, retENOSYS},
		{"prlimit-self", unix.SYS_PRLIMIT64, []uint64{0, unix.RLIMIT_NOFILE}, retAllow},
		{"prlimit-other", unix.SYS_PRLIMIT64, []uint64{1234, unix.RLIMIT_NOFILE}, retEPERM},
		{"prlimit-high-bits", unix.SYS_PRLIMIT64, []uint64{1 << 32, unix.RLIMIT_NOFILE}, retAllow}, // the kernel sees pid 0
		{"sched_setaffinity-other", unix.SYS_SCHED_SETAFFINITY, []uint64{1234}, retEPERM},
		{"sched_setaffinity-self", unix.SYS_SCHED_SETAFFINITY, []uint64{0}, retAllow},
		{"sched_setattr-other", unix.SYS_SCHED_SETATTR, []uint64{1234}, retEPERM},
		{"migrate_pages-other", unix.SYS_MIGRATE_PAGES, []uint64{1234}, retEPERM},
		{"setpriority-self", unix.SYS_SETPRIORITY, []uint64{prioProcess, 0, 10}, retAllow},
		{"setpriority-other", unix.SYS_SETPRIORITY, []uint64{prioProcess, 1234, 10}, retEPERM},
		{"setpriority-user", unix.SYS_SETPRIORITY, []uint64{2 /* PRIO_USER */, 0, 10}, retEPERM},
		{"setpriority-group", unix.SYS_SETPRIORITY, []uint64{1 /* PRIO_PGRP */, 0, 10}, retEPERM},
		{"ioprio_set-self", unix.SYS_IOPRIO_SET, []uint64{ioprioWhoProcess, 0, 0}, retAllow},
		{"ioprio_set-other", unix.SYS_IOPRIO_SET, []uint64{ioprioWhoProcess, 1234, 0}, retEPERM},
		{"ioprio_set-user", unix.SYS_IOPRIO_SET, []uint64{3 /* IOPRIO_WHO_USER */, 0, 0}, retEPERM},
		{"clone-thread", unix.SYS_CLONE, []uint64{unix.CLONE_VM | unix.CLONE_THREAD | unix.CLONE_SIGHAND}, retAllow},
		{"clone-fork", unix.SYS_CLONE, []uint64{17 /* SIGCHLD */}, retAllow},
		{"clone-newuser", unix.SYS_CLONE, []uint64{unix.CLONE_NEWUSER | 17}, retEPERM},
		{"clone-newnet", unix.SYS_CLONE, []uint64{unix.CLONE_NEWNET}, retEPERM},
		{"socket-unix-stream", unix.SYS_SOCKET, []uint64{unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC}, unixSock},
		{"socket-unix-seqpacket", unix.SYS_SOCKET, []uint64{unix.AF_UNIX, unix.SOCK_SEQPACKET}, unixSock},
		{"socket-unix-dgram", unix.SYS_SOCKET, []uint64{unix.AF_UNIX, unix.SOCK_DGRAM}, retEPERM},
		{"socket-inet-stream", unix.SYS_SOCKET, []uint64{unix.AF_INET, unix.SOCK_STREAM | unix.SOCK_NONBLOCK}, tcp},
		{"socket-inet6-tcp", unix.SYS_SOCKET, []uint64{unix.AF_INET6, unix.SOCK_STREAM, unix.IPPROTO_TCP}, tcp},
		{"socket-inet-mptcp", unix.SYS_SOCKET, []uint64{unix.AF_INET, unix.SOCK_STREAM, 262}, retEPERM},
		{"socket-inet-sctp", unix.SYS_SOCKET, []uint64{unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP}, retEPERM},
		{"socket-inet-dgram", unix.SYS_SOCKET, []uint64{unix.AF_INET, unix.SOCK_DGRAM}, retEPERM},
		{"socket-inet6-dgram", unix.SYS_SOCKET, []uint64{unix.AF_INET6, unix.SOCK_DGRAM}, retEPERM},
		{"socket-inet-raw", unix.SYS_SOCKET, []uint64{unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP}, retEPERM},
		{"socket-packet", unix.SYS_SOCKET, []uint64{unix.AF_PACKET, unix.SOCK_RAW}, retEPERM},
		{"socket-netlink", unix.SYS_SOCKET, []uint64{unix.AF_NETLINK, unix.SOCK_RAW}, retEPERM},
		{"socket-unix-high-bits", unix.SYS_SOCKET, []uint64{1<<32 | unix.AF_UNIX, unix.SOCK_STREAM}, unixSock}, // the kernel sees int(AF_UNIX)
		{"socketpair-inet", unix.SYS_SOCKETPAIR, []uint64{unix.AF_INET, unix.SOCK_STREAM}, retEPERM},
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
	ipc, bind := uint32(retAllow), uint32(retAllow)
	if opts.denyIPC {
		ipc = retEPERM
	}
	if opts.denyBind {
		bind = retEPERM
	}
	for _, nr := range sysvIPCSyscalls {
		cases = append(cases, struct {
			name string
			nr   uint32
			args []uint64
			want uint32
		}{"sysv-ipc", nr, nil, ipc})
	}
	cases = append(cases, struct {
		name string
		nr   uint32
		args []uint64
		want uint32
	}{"bind", unix.SYS_BIND, nil, bind})
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
	// Every syscall number not listed is allowed.
	listed := map[uint32]bool{unix.SYS_SOCKET: true, unix.SYS_SOCKETPAIR: true, unix.SYS_CLONE: true, unix.SYS_CLONE3: true,
		unix.SYS_SETPRIORITY: true, unix.SYS_IOPRIO_SET: true, unix.SYS_BIND: true, unix.SYS_CONNECT: true, unix.SYS_OPENAT2: true}
	for nr := range modeArgs {
		listed[nr] = true
	}
	for _, nrs := range [][]uint32{deniedSyscalls, sysvIPCSyscalls, selfOnlyArg0, metadataSyscalls} {
		for _, nr := range nrs {
			listed[nr] = true
		}
	}
	for nr := uint32(0); nr < 600; nr++ {
		if !listed[nr] {
			if got := eval(auditArch, nr); got != retAllow {
				t.Errorf("syscall %d: got %#x, want allow", nr, got)
			}
		}
	}
}
