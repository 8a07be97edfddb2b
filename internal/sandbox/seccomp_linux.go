//go:build linux && (amd64 || arm64)

package sandbox

import (
	"fmt"
	"slices"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// deniedSyscalls fail with EPERM inside the sandbox. Landlock (ABI <= 7)
// does not cover them, or they would let a process reach around it (and so
// do, unless a filterOpts allows them, metadataSyscalls: chmod, chown,
// utimes, xattrs of existing files, and connect(2): without network only
// AF_UNIX sockets can be created, and a seccomp filter cannot read the
// path a unix socket connects to):
//
//   - other processes: ptrace, process_vm_readv/writev, pidfd_getfd;
//   - io_uring, whose operations (connect, socket, openat...) bypass seccomp;
//   - what only root could do and has no place in a read-only sandbox:
//     modules, kexec, reboot, swap, mounts, clock and hostname changes, bpf,
//     perf, keyrings, new namespaces (unshare, setns), quotas, accounting,
//     userfaultfd, fanotify, open_by_handle_at, vhangup.
//
// A few more are allowed only on the calling process itself (see
// selfOnlyArg0): the resource-limit and scheduling calls that take a pid.
var deniedSyscalls = append([]uint32{
	unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV, unix.SYS_PIDFD_GETFD,
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_REBOOT,
	unix.SYS_SWAPON, unix.SYS_SWAPOFF,
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_MOVE_MOUNT,
	unix.SYS_OPEN_TREE, unix.SYS_OPEN_TREE_ATTR, unix.SYS_FSOPEN, unix.SYS_FSMOUNT,
	unix.SYS_FSCONFIG, unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR,
	unix.SYS_SETHOSTNAME, unix.SYS_SETDOMAINNAME,
	unix.SYS_SETTIMEOFDAY, unix.SYS_CLOCK_SETTIME, unix.SYS_CLOCK_ADJTIME, unix.SYS_ADJTIMEX,
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN,
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_UNSHARE, unix.SYS_SETNS,
	unix.SYS_ACCT, unix.SYS_QUOTACTL, unix.SYS_QUOTACTL_FD,
	unix.SYS_USERFAULTFD, unix.SYS_FANOTIFY_INIT, unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_VHANGUP,
}, archDeniedSyscalls...)

// sysvIPCSyscalls are SysV IPC and POSIX message queues. They are denied
// when the command has no IPC namespace of its own (filterOpts.denyIPC):
// the objects would be the host's, and would outlive the command.
var sysvIPCSyscalls = []uint32{
	unix.SYS_SHMGET, unix.SYS_SHMAT, unix.SYS_SHMCTL, unix.SYS_SHMDT,
	unix.SYS_SEMGET, unix.SYS_SEMOP, unix.SYS_SEMCTL, unix.SYS_SEMTIMEDOP,
	unix.SYS_MSGGET, unix.SYS_MSGSND, unix.SYS_MSGRCV, unix.SYS_MSGCTL,
	unix.SYS_MQ_OPEN, unix.SYS_MQ_UNLINK, unix.SYS_MQ_TIMEDSEND, unix.SYS_MQ_TIMEDRECEIVE,
	unix.SYS_MQ_NOTIFY, unix.SYS_MQ_GETSETATTR,
}

// selfOnlyArg0 are the syscalls whose first argument names the target
// process (0 = the caller): they are allowed only with 0, so a command can
// change its own limits, scheduling and memory placement but never those of
// the engine or any other process (prlimit --pid $PPID would otherwise
// reach the engine: same uid). setpriority and ioprio_set, whose target is
// (which, who), are handled apart: only (a process, 0).
var selfOnlyArg0 = []uint32{
	unix.SYS_PRLIMIT64,
	unix.SYS_SCHED_SETAFFINITY, unix.SYS_SCHED_SETSCHEDULER, unix.SYS_SCHED_SETPARAM, unix.SYS_SCHED_SETATTR,
	unix.SYS_MIGRATE_PAGES, unix.SYS_MOVE_PAGES,
}

// Targets of setpriority(2) and ioprio_set(2) that mean "this process".
const (
	prioProcess      = 0 // PRIO_PROCESS
	ioprioWhoProcess = 1 // IOPRIO_WHO_PROCESS
)

// nsCloneFlags are the clone(2) flags that create namespaces; clone with
// any of them fails with EPERM. clone3, whose flags a filter cannot read
// (they are behind a pointer), always fails with ENOSYS so that libc falls
// back to clone: its CLONE_INTO_CGROUP would also let a process leave the
// command's cgroup.
const nsCloneFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// Offsets into struct seccomp_data (little endian on amd64 and arm64).
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16 // low 32 bits of args[0]
	offArg1 = 24 // low 32 bits of args[1]
	offArg2 = 32 // low 32 bits of args[2]
)

const (
	retAllow  = unix.SECCOMP_RET_ALLOW
	retKill   = unix.SECCOMP_RET_KILL_PROCESS
	retEPERM  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retENOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
)

// prog is a tiny assembler with forward labels on top of x/net/bpf.
type prog struct {
	ins    []bpf.Instruction
	labels []int // label -> instruction index, -1 until placed
	fixups []fixup
}

// label names a place in the program; next means the next instruction.
type label int

const next label = -1

type fixup struct {
	at          int
	true, false label
}

func (p *prog) newLabel() label {
	p.labels = append(p.labels, -1)
	return label(len(p.labels) - 1)
}

func (p *prog) add(i bpf.Instruction) { p.ins = append(p.ins, i) }
func (p *prog) place(l label)         { p.labels[l] = len(p.ins) }

// jump adds a conditional jump to t if the condition holds, else to f.
func (p *prog) jump(cond bpf.JumpTest, val uint32, t, f label) {
	p.fixups = append(p.fixups, fixup{at: len(p.ins), true: t, false: f})
	p.ins = append(p.ins, bpf.JumpIf{Cond: cond, Val: val})
}

// tree emits a binary search over the sorted nrs (the syscall number is in
// the accumulator): each leaf jumps to its verdict, anything not listed to
// allow.
func (p *prog) tree(nrs []uint32, verdicts map[uint32]label, allow label) {
	if len(nrs) == 1 {
		p.jump(bpf.JumpEqual, nrs[0], verdicts[nrs[0]], allow)
		return
	}
	mid := len(nrs) / 2
	right := p.newLabel()
	p.jump(bpf.JumpGreaterOrEqual, nrs[mid], right, next)
	p.tree(nrs[:mid], verdicts, allow)
	p.place(right)
	p.tree(nrs[mid:], verdicts, allow)
}

func (p *prog) assemble() ([]bpf.RawInstruction, error) {
	for _, fx := range p.fixups {
		j := p.ins[fx.at].(bpf.JumpIf)
		skip := func(l label) (uint8, error) {
			if l == next {
				return 0, nil
			}
			d := p.labels[l] - fx.at - 1
			if p.labels[l] < 0 || d < 0 || d > 255 {
				return 0, fmt.Errorf("seccomp: bad jump from %d to label %d", fx.at, l)
			}
			return uint8(d), nil
		}
		var err error
		if j.SkipTrue, err = skip(fx.true); err != nil {
			return nil, err
		}
		if j.SkipFalse, err = skip(fx.false); err != nil {
			return nil, err
		}
		p.ins[fx.at] = j
	}
	return bpf.Assemble(p.ins)
}

// filterOpts are the variations of the filter.
type filterOpts struct {
	// denyIPC denies SysV IPC and POSIX message queues (no private IPC
	// namespace).
	denyIPC bool
	// denyBind denies bind(2) (no private network namespace: a bound
	// abstract unix socket would be reachable from the host).
	denyBind bool
	// metadata allows changing permissions, owners, times and xattrs
	// (metadataSyscalls): every mount but the writable roots is read-only
	// (helperConfig.readOnlyMounts), so the kernel refuses them elsewhere. Modes
	// with the setuid or setgid bit are still denied, also when a file is
	// created (open, creat, mknod), and openat2, whose mode a filter
	// cannot read, fails with ENOSYS (libc and Go use openat).
	metadata bool
	// network allows TCP sockets (AF_INET and AF_INET6 streams) and
	// connect(2), for the proxy in the command's network namespace, and
	// denies socket(AF_UNIX) instead: connect(2) cannot be told apart by
	// family, and a unix socket could reach any socket file of the host.
	// socketpair(AF_UNIX) stays.
	network bool
}

// metadataSyscalls change metadata of existing files; they are denied
// unless filterOpts.metadata.
var metadataSyscalls = append([]uint32{
	unix.SYS_FCHMOD, unix.SYS_FCHMODAT, unix.SYS_FCHMODAT2,
	unix.SYS_FCHOWN, unix.SYS_FCHOWNAT,
	unix.SYS_UTIMENSAT,
	unix.SYS_SETXATTR, unix.SYS_LSETXATTR, unix.SYS_FSETXATTR, unix.SYS_SETXATTRAT,
	unix.SYS_REMOVEXATTR, unix.SYS_LREMOVEXATTR, unix.SYS_FREMOVEXATTR, unix.SYS_REMOVEXATTRAT,
}, archMetadataSyscalls...)

// setIDBits are S_ISUID and S_ISGID.
const setIDBits = unix.S_ISUID | unix.S_ISGID

// buildFilter returns the seccomp program: kill on a foreign architecture,
// EPERM for x32 syscalls and deniedSyscalls, socket/socketpair only for
// AF_UNIX stream and seqpacket sockets, clone without namespace flags,
// ENOSYS for clone3, the selfOnly syscalls only on the caller, and what
// opts adds.
func buildFilter(opts filterOpts) ([]bpf.RawInstruction, error) {
	p := &prog{ins: make([]bpf.Instruction, 0, 256)}
	archOK, socket, socketpair, clone := p.newLabel(), p.newLabel(), p.newLabel(), p.newLabel()
	modeAt := [4]label{p.newLabel(), p.newLabel(), p.newLabel(), p.newLabel()}
	self0, setprio, ioprio := p.newLabel(), p.newLabel(), p.newLabel()
	allow, eperm, enosys := p.newLabel(), p.newLabel(), p.newLabel()

	p.add(bpf.LoadAbsolute{Off: offArch, Size: 4})
	p.jump(bpf.JumpEqual, auditArch, archOK, next)
	p.add(bpf.RetConstant{Val: retKill})
	p.place(archOK)
	p.add(bpf.LoadAbsolute{Off: offNr, Size: 4})
	if x32SyscallBit != 0 {
		p.jump(bpf.JumpGreaterOrEqual, x32SyscallBit, eperm, next)
	}
	// A binary search over the syscall numbers with a verdict: the kernel
	// emulates the filter for every syscall number when it is installed (to
	// cache the always-allowed ones), so a balanced tree instead of a linear
	// list of ~80 comparisons makes installing it several times cheaper.
	verdicts := map[uint32]label{
		unix.SYS_SOCKET:      socket,
		unix.SYS_SOCKETPAIR:  socketpair,
		unix.SYS_CLONE:       clone,
		unix.SYS_CLONE3:      enosys,
		unix.SYS_SETPRIORITY: setprio,
		unix.SYS_IOPRIO_SET:  ioprio,
		unix.SYS_CONNECT:     eperm,
	}
	for _, nr := range selfOnlyArg0 {
		verdicts[nr] = self0
	}
	for _, nr := range deniedSyscalls {
		verdicts[nr] = eperm
	}
	for _, nr := range metadataSyscalls {
		verdicts[nr] = eperm
	}
	if opts.metadata {
		for _, nr := range metadataSyscalls {
			delete(verdicts, nr)
		}
		for nr, arg := range modeArgs {
			verdicts[nr] = modeAt[arg]
		}
		verdicts[unix.SYS_OPENAT2] = enosys
	}
	if opts.network {
		delete(verdicts, unix.SYS_CONNECT)
	}
	if opts.denyIPC {
		for _, nr := range sysvIPCSyscalls {
			verdicts[nr] = eperm
		}
	}
	if opts.denyBind {
		verdicts[unix.SYS_BIND] = eperm
	}
	nrs := make([]uint32, 0, len(verdicts))
	for nr := range verdicts {
		nrs = append(nrs, nr)
	}
	slices.Sort(nrs)
	p.tree(nrs, verdicts, allow)

	// socket(domain, type, protocol) and socketpair(domain, type, ...):
	// AF_UNIX with SOCK_STREAM or SOCK_SEQPACKET only. No AF_INET/AF_INET6
	// (TCP, UDP, MPTCP, raw, ICMP), no AF_PACKET, no AF_NETLINK (as root it
	// reconfigures the host's network; glibc copes without it), no AF_UNIX
	// datagrams (sendto/sendmsg on them can name any pathname socket).
	//
	// With network, socket(2) makes TCP sockets only (AF_INET or AF_INET6,
	// SOCK_STREAM, protocol 0 or IPPROTO_TCP: no MPTCP, no SCTP) and no
	// AF_UNIX ones; socketpair(2) stays as it is.
	p.place(socket)
	p.add(bpf.LoadAbsolute{Off: offArg0, Size: 4})
	if opts.network {
		inet := p.newLabel()
		p.jump(bpf.JumpEqual, unix.AF_INET, inet, next)
		p.jump(bpf.JumpEqual, unix.AF_INET6, inet, eperm)
		p.place(inet)
		p.add(bpf.LoadAbsolute{Off: offArg1, Size: 4})
		p.add(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0xf}) // SOCK_TYPE_MASK
		p.jump(bpf.JumpEqual, unix.SOCK_STREAM, next, eperm)
		p.add(bpf.LoadAbsolute{Off: offArg2, Size: 4})
		p.jump(bpf.JumpEqual, 0, allow, next)
		p.jump(bpf.JumpEqual, unix.IPPROTO_TCP, allow, eperm)
	} else {
		p.jump(bpf.JumpEqual, unix.AF_UNIX, next, eperm)
		p.add(bpf.LoadAbsolute{Off: offArg1, Size: 4})
		p.add(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0xf}) // SOCK_TYPE_MASK
		p.jump(bpf.JumpEqual, unix.SOCK_STREAM, allow, next)
		p.jump(bpf.JumpEqual, unix.SOCK_SEQPACKET, allow, eperm)
	}
	p.place(socketpair)
	p.add(bpf.LoadAbsolute{Off: offArg0, Size: 4})
	p.jump(bpf.JumpEqual, unix.AF_UNIX, next, eperm)
	p.add(bpf.LoadAbsolute{Off: offArg1, Size: 4})
	p.add(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0xf}) // SOCK_TYPE_MASK
	p.jump(bpf.JumpEqual, unix.SOCK_STREAM, allow, next)
	p.jump(bpf.JumpEqual, unix.SOCK_SEQPACKET, allow, eperm)

	// chmod, open, mknod...: no setuid or setgid bit in the mode (the
	// mode is argument 1, 2 or 3, see modeArgs).
	for arg, l := range modeAt {
		if arg == 0 {
			continue // no syscall has its mode first
		}
		p.place(l)
		p.add(bpf.LoadAbsolute{Off: offArg0 + 8*uint32(arg), Size: 4})
		p.jump(bpf.JumpBitsSet, setIDBits, eperm, allow)
	}

	// clone(flags, ...): flags are args[0] on amd64 and arm64.
	p.place(clone)
	p.add(bpf.LoadAbsolute{Off: offArg0, Size: 4})
	p.jump(bpf.JumpBitsSet, nsCloneFlags, eperm, allow)

	// prlimit64(pid, ...) and friends: pid 0 (the caller) only. pid_t is
	// an int: the kernel reads the low 32 bits.
	p.place(self0)
	p.add(bpf.LoadAbsolute{Off: offArg0, Size: 4})
	p.jump(bpf.JumpEqual, 0, allow, eperm)

	// setpriority(which, who, prio) and ioprio_set(which, who, prio):
	// this process (who 0) only; not a group, not a user's processes.
	p.place(setprio)
	p.add(bpf.LoadAbsolute{Off: offArg0, Size: 4})
	p.jump(bpf.JumpEqual, prioProcess, next, eperm)
	p.add(bpf.LoadAbsolute{Off: offArg1, Size: 4})
	p.jump(bpf.JumpEqual, 0, allow, eperm)
	p.place(ioprio)
	p.add(bpf.LoadAbsolute{Off: offArg0, Size: 4})
	p.jump(bpf.JumpEqual, ioprioWhoProcess, next, eperm)
	p.add(bpf.LoadAbsolute{Off: offArg1, Size: 4})
	p.jump(bpf.JumpEqual, 0, allow, eperm)

	// BPF jumps only forward: the verdicts come last.
	p.place(allow)
	p.add(bpf.RetConstant{Val: retAllow})
	p.place(eperm)
	p.add(bpf.RetConstant{Val: retEPERM})
	p.place(enosys)
	p.add(bpf.RetConstant{Val: retENOSYS})
	return p.assemble()
}

// installSeccomp installs the filter on the calling thread, the one that
// execs bash (see applyLandlock). no_new_privs must already be set.
func installSeccomp(opts filterOpts) error {
	raw, err := buildFilter(opts)
	if err != nil {
		return err
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		0, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return fmt.Errorf("seccomp(SET_MODE_FILTER): %w", errno)
	}
	return nil
}

// seccompUsable reports whether the kernel supports seccomp filters with
// the actions the filter uses.
func seccompUsable() error {
	if _, err := buildFilter(filterOpts{denyIPC: true, denyBind: true, metadata: true, network: true}); err != nil {
		return err
	}
	for _, a := range []uint32{unix.SECCOMP_RET_ERRNO, unix.SECCOMP_RET_KILL_PROCESS} {
		a := a
		_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&a)))
		if errno != 0 {
			return fmt.Errorf("seccomp action %#x unavailable: %w", a, errno)
		}
	}
	return nil
}
