//go:build linux

package sandbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
	"github.com/bashvisor/bashvisor/internal/vfork"
)

// Rootless worlds. An engine that is not root can have namespaces only in
// a user namespace of its own, and a multi-threaded process (any Go
// program) can neither make one for itself nor join one (unshare and setns
// with CLONE_NEWUSER refuse it). So:
//
//   - a world is made by a child the engine forks by a raw clone(2) (see
//     below) into new user, network and mount namespaces, keeping
//     CAP_SYS_ADMIN, CAP_NET_ADMIN and the rest of worldCaps as ambient
//     capabilities, which execs the helper program with [worldChildArg]:
//     it maps its own uid and gid to themselves (mapSelf: a process may
//     write its own maps once it exec'd and so is dumpable; the engine may
//     not write them for it, as os/exec would, since the child of a
//     non-dumpable process, proc.ProtectEngine, has /proc files that
//     belong to root until it execs), sets loopback up, builds the
//     world's mount namespace (buildWorld, overlays with userxattr) and
//     hands the descriptors of its namespaces and of the world's file
//     system to the engine over a socket, then exits; the descriptors
//     keep them;
//   - a command is started by the world's command server (server_linux.go),
//     which is itself started as a command's helper is below, once per
//     world; when the server cannot (see there), or before it is ready:
//   - a command is forked from the engine by a raw clone(2), whose child is
//     single-threaded until it execs and can therefore join the world's
//     user namespace, then its network and mount namespaces (forkInWorld);
//     it keeps, as ambient capabilities, what mounting the command's view
//     takes (over the world's user namespace only: the engine's own files)
//     and execs the helper, which makes the command's mount namespace
//     (makeView), confines itself and execs bash without any capability.
//     The engine stays the command's parent: it waits for it as for any
//     other (proc.Process).
//
// The direct-thread start (Command.StartDirect) cannot join a user
// namespace either, so in a rootless world it starts the helper this way
// too.

// worldChildArg is the hidden argv[1] of the helper program started to
// make a rootless world (see above).
const worldChildArg = "__bashvisor_world_child"

// errNotHelper marks a world the helper program may have failed to make
// because it is not this engine's helper: it could not be executed, or it
// exited without the world for a reason other than a shortage (see
// shortOfResource) or the timeout.
var errNotHelper = errors.New("not this engine's helper")

// otherVersion starts what a helper of another version says.
const otherVersion = "the helper program is from another version of bashvisor"

// shortOfResource reports whether a helper's message names a shortage
// (ENOMEM, EMFILE, ENFILE, EAGAIN), after which the same helper may well
// work.
func shortOfResource(msg string) bool {
	for _, e := range []unix.Errno{unix.ENOMEM, unix.EMFILE, unix.ENFILE, unix.EAGAIN} {
		if strings.Contains(msg, e.Error()) {
			return true
		}
	}
	return false
}

// mainCalled records that the program called Main (as its first
// statement): only then may the engine re-execute itself as a helper
// without knowing a helper program.
var mainCalled atomic.Bool

// worldCaps are the capabilities a rootless world's child and a command's
// helper keep until they exec: mounting (SYS_ADMIN), setting loopback up
// (NET_ADMIN), binding the resolver's port 53 and carried ports below 1024
// (NET_BIND_SERVICE, see capture_linux.go), and the file capabilities
// overlayfs uses in its upper layer on its mounter's behalf (see package
// layer).
var worldCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_NET_BIND_SERVICE, unix.CAP_DAC_OVERRIDE, unix.CAP_DAC_READ_SEARCH,
	unix.CAP_FOWNER, unix.CAP_CHOWN, unix.CAP_FSETID}

// makeRootless makes the world's namespaces in a child (see above).
func (w *world) makeRootless(spec worldSpec) error {
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sandbox: world: %w", err)
	}
	child := os.NewFile(uintptr(sp[1]), "world-child")
	parent := fd.New(sp[0])
	defer parent.Close()
	enc, err := json.Marshal(spec)
	if err != nil {
		child.Close()
		return err
	}
	var stderr bytes.Buffer
	errR, errW, err := os.Pipe()
	if err != nil {
		child.Close()
		return fmt.Errorf("sandbox: world: %w", err)
	}
	cmd := &exec.Cmd{Path: w.helper, Args: []string{w.helper, worldChildArg, string(enc), helperProtocol()}, Dir: "/", Env: []string{}, Stderr: errW}
	closeInheritedOnExec()
	err = rawStart(cmd, rawOpts{join: [3]int{-1, -1, -1}, keepCaps: true, newNamespaces: true}, child)
	child.Close()
	errW.Close()
	if err != nil {
		errR.Close()
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOEXEC) || errors.Is(err, unix.EACCES) {
			err = fmt.Errorf("%w: %w", errNotHelper, err)
		}
		return fmt.Errorf("sandbox: world: start %s: %w", w.helper, err)
	}
	stderrDone := make(chan struct{})
	go func() { _, _ = stderr.ReadFrom(errR); errR.Close(); close(stderrDone) }()
	fds, rerr := recvFDs(parent.Int(), 4, 30*time.Second)
	if rerr != nil {
		_ = cmd.Process.Kill()
	}
	var werr error
	if st, err := cmd.Process.Wait(); err != nil {
		werr = err
	} else if !st.Success() {
		werr = errors.New(st.String())
	}
	<-stderrDone
	if rerr != nil || werr != nil {
		for _, n := range fds {
			_ = fd.New(n).Close()
		}
		msg := strings.TrimSpace(stderr.String())
		err := errors.Join(rerr, werr, errors.New(msg))
		if werr != nil && !errors.Is(rerr, unix.EAGAIN) && !shortOfResource(msg) {
			// It exited without the world, neither stopped at the
			// timeout nor short of memory, descriptors or processes:
			// not a helper at all, another version's (one that says so,
			// or an older one that only knows another usage), or a
			// failure the engine's own executable meets too (then the
			// small helper is kept: see makeWorld).
			err = fmt.Errorf("%w: %w", errNotHelper, err)
		}
		return fmt.Errorf("sandbox: world: %w", err)
	}
	w.userns, w.netns, w.mntns, w.root = fd.New(fds[0]), fd.New(fds[1]), fd.New(fds[2]), fd.New(fds[3])
	return nil
}

// recvFDs receives one message carrying n descriptors on the socket sock.
func recvFDs(sock, n int, timeout time.Duration) ([]int, error) {
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	_ = unix.SetsockoptTimeval(sock, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	oob := make([]byte, unix.CmsgSpace(n*4))
	_, oobn, _, _, err := unix.Recvmsg(sock, make([]byte, 1), oob, unix.MSG_CMSG_CLOEXEC)
	for errors.Is(err, unix.EINTR) { // the runtime's preemption signal
		_, oobn, _, _, err = unix.Recvmsg(sock, make([]byte, 1), oob, unix.MSG_CMSG_CLOEXEC)
	}
	if err != nil {
		return nil, fmt.Errorf("receive descriptors: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("receive descriptors: no descriptors (%v)", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != n {
		for _, f := range fds {
			_ = fd.New(f).Close()
		}
		return nil, fmt.Errorf("receive descriptors: got %d, want %d (%v)", len(fds), n, err)
	}
	return fds, nil
}

// worldChild is the helper started with worldChildArg: it builds the
// world in its own new namespaces and hands their descriptors over on fd
// 3.
func worldChild(args []string) error {
	if len(args) != 2 {
		return errors.New("usage: " + worldChildArg + " SPEC PROTOCOL")
	}
	if args[1] != helperProtocol() {
		return errors.New(otherVersion + " (its helper protocol differs)")
	}
	var spec worldSpec
	if err := json.Unmarshal([]byte(args[0]), &spec); err != nil {
		return fmt.Errorf("bad spec: %w", err)
	}
	if err := mapSelf(spec.UID, spec.GID); err != nil {
		return err
	}
	if err := loopbackUp(); err != nil {
		return err
	}
	if err := buildWorld(spec); err != nil {
		return err
	}
	fds, err := openWorldFDs(spec.Dir, true)
	if err != nil {
		return err
	}
	return unix.Sendmsg(3, []byte{0}, unix.UnixRights(fds[:]...), nil, 0)
}

// mapSelf maps uid and gid (this process's outside its new user
// namespace) to themselves, as os/exec does for a child from its parent:
// setgroups denied, then one line each (a process may map its own
// effective ids; CAP_SYS_ADMIN over the namespace, which it has as an
// ambient capability, lets it write the files).
func mapSelf(uid, gid int) error {
	for _, m := range [...]struct{ file, line string }{
		{"/proc/self/setgroups", "deny"},
		{"/proc/self/uid_map", fmt.Sprintf("%d %d 1", uid, uid)},
		{"/proc/self/gid_map", fmt.Sprintf("%d %d 1", gid, gid)},
	} {
		f, err := os.OpenFile(m.file, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("map ids: %w", err)
		}
		_, err = f.WriteString(m.line)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("map ids: %s: %w", m.file, err)
		}
	}
	return nil
}

// cloneArgs is struct clone_args (CLONE_ARGS_SIZE_VER2).
type cloneArgs struct {
	flags, pidfd, childTID, parentTID, exitSignal, stack, stackSize, tls, setTID, setTIDSize, cgroup uint64
}

// forkSpec is everything forkRaw's child needs, prepared before the
// fork: the child only reads it and makes system calls.
type forkSpec struct {
	path, dir  *byte
	argv, envv **byte
	ns         [3]int            // user, net and mount namespace descriptors to join (-1: skip)
	fds        [3 + maxExtra]int // the child's descriptors 0, 1, 2, 3... (-1: none), all >= len(fds)
	ctty       int               // the child's descriptor to make its controlling terminal (-1: none)
	keepCaps   bool              // set capData and raise ambient (else the caller's stay)
	capHdr     unix.CapUserHeader
	capData    [2]unix.CapUserData
	ambient    [8]uintptr
	nAmbient   int
	filter     *unix.SockFprog // a seccomp filter the child installs last (nil: none)
	rlim       [maxRlimits]childRlimit
	nRlim      int     // the rlimits the child sets (in rlim), RLIMIT_AS last
	cloneFlags uintptr // more clone flags (CLONE_PARENT)
	pdeath     bool    // the child gets SIGKILL when the engine's thread that forked it ends
	errPipe    int
	pidTo      int     // rawOpts.pidTo
	pidMsg     [5]byte // pidMark, then the child's pid (little-endian), written by the child
	sigOld     uint64
	dflAct     [4]uintptr // struct sigaction for SIG_DFL
	oldAct     [4]uintptr // the child's scratch for rt_sigaction
	clone      cloneArgs
	useClone3  bool
}

// forkRaw forks as vfork does (CLONE_VM|CLONE_VFORK, vforkFlags: the
// child runs on this thread's stack, in the engine's memory, until it
// execs; this thread waits for that; clone3 into a cgroup when asked)
// and, in the child, joins the namespaces, keeps the ambient
// capabilities, sets up the descriptors, the session and the terminal,
// installs the seccomp filter, and execs. The child stays as non-dumpable as
// the engine until it execs (it runs in the engine's memory). On failure the child writes the
// step and errno to errPipe and exits 127. It runs only raw system calls
// in the child (no allocation, no runtime), like syscall's own
// forkAndExecInChild; the caller has blocked every signal on this thread.
//
//go:norace
//go:nosplit
func forkRaw(s *forkSpec) (int, syscall.Errno) {
	var r1 uintptr
	var e syscall.Errno
	if s.useClone3 {
		r1, e = vfork.RawSyscall(unix.SYS_CLONE3, uintptr(unsafe.Pointer(&s.clone)), unsafe.Sizeof(s.clone), 0)
	} else {
		r1, e = vfork.RawSyscall(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD)|vforkFlags|s.cloneFlags, 0, 0)
	}
	if e != 0 || r1 != 0 {
		// The parent, once the child exec'd or exited: return at once
		// (the child ran on this stack; only the return address and
		// the results written after it are the parent's).
		return int(r1), e
	}
	step := uintptr(0)
	nsType := [3]uintptr{unix.CLONE_NEWUSER, unix.CLONE_NEWNET, unix.CLONE_NEWNS}
	if s.pidTo > 0 {
		p, _, _ := syscall.RawSyscall(unix.SYS_GETPID, 0, 0, 0)
		s.pidMsg[1], s.pidMsg[2], s.pidMsg[3], s.pidMsg[4] = byte(p), byte(p>>8), byte(p>>16), byte(p>>24)
		if _, _, e = syscall.RawSyscall6(unix.SYS_SENDTO, uintptr(s.pidTo), uintptr(unsafe.Pointer(&s.pidMsg[0])), uintptr(len(s.pidMsg)), unix.MSG_NOSIGNAL, 0, 0); e != 0 {
			goto fail // the engine no longer waits for this command: it would supervise nothing
		}
	}
	step++
	for i := 0; i < 3; i++ {
		if s.ns[i] >= 0 {
			if _, _, e = syscall.RawSyscall(unix.SYS_SETNS, uintptr(s.ns[i]), nsType[i], 0); e != 0 {
				goto fail
			}
		}
	}
	step++
	if s.keepCaps {
		if _, _, e = syscall.RawSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&s.capHdr)), uintptr(unsafe.Pointer(&s.capData[0])), 0); e != 0 {
			goto fail
		}
	}
	for i := 0; i < s.nAmbient; i++ {
		if _, _, e = syscall.RawSyscall6(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, s.ambient[i], 0, 0, 0); e != 0 {
			goto fail
		}
	}
	step++
	if _, _, e = syscall.RawSyscall(unix.SYS_CHDIR, uintptr(unsafe.Pointer(s.dir)), 0, 0); e != 0 {
		goto fail
	}
	step++
	if _, _, e = syscall.RawSyscall(unix.SYS_SETSID, 0, 0, 0); e != 0 {
		goto fail
	}
	step++
	if s.pdeath {
		if _, _, e = syscall.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0, 0); e != 0 {
			goto fail
		}
	}
	step++
	for i := 0; i < len(s.fds); i++ {
		if s.fds[i] >= 0 {
			if _, _, e = syscall.RawSyscall(unix.SYS_DUP3, uintptr(s.fds[i]), uintptr(i), 0); e != 0 {
				goto fail
			}
		}
	}
	step++
	if s.ctty >= 0 {
		if _, _, e = syscall.RawSyscall(unix.SYS_IOCTL, uintptr(s.ctty), uintptr(unix.TIOCSCTTY), 0); e != 0 {
			goto fail
		}
	}
	step++
	for i := 0; i < s.nRlim; i++ {
		if _, _, e = syscall.RawSyscall6(unix.SYS_PRLIMIT64, 0, s.rlim[i].res, uintptr(unsafe.Pointer(&s.rlim[i].rl)), 0, 0, 0); e != 0 {
			goto fail
		}
	}
	// The engine's signal handlers would run on its memory: the default
	// action for every caught signal before the mask is restored. Ignored
	// ones stay ignored, as execve keeps them, except SIGINT and SIGQUIT,
	// which a command gets at their defaults even when the engine's
	// program ignores them (see package proc, signals.go): reset here, in
	// the child, rather than by another program run before the command.
	for i := uintptr(1); i <= 64; i++ {
		if _, _, e = syscall.RawSyscall6(unix.SYS_RT_SIGACTION, i, 0, uintptr(unsafe.Pointer(&s.oldAct[0])), 8, 0, 0); e == 0 &&
			(s.oldAct[0] > 1 || s.oldAct[0] == 1 && (i == uintptr(unix.SIGINT) || i == uintptr(unix.SIGQUIT))) {
			syscall.RawSyscall6(unix.SYS_RT_SIGACTION, i, uintptr(unsafe.Pointer(&s.dflAct[0])), 0, 8, 0, 0)
		}
	}
	step++
	if s.filter != nil {
		if _, _, e = syscall.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(s.filter))); e != 0 {
			goto fail
		}
	}
	step++
	syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&s.sigOld)), 0, 8, 0, 0)
	_, _, e = syscall.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(s.path)), uintptr(unsafe.Pointer(s.argv)), uintptr(unsafe.Pointer(s.envv)))
fail:
	report := [2]uint32{uint32(step), uint32(e)}
	syscall.RawSyscall(unix.SYS_WRITE, uintptr(s.errPipe), uintptr(unsafe.Pointer(&report[0])), 8)
	for {
		syscall.RawSyscall(unix.SYS_EXIT_GROUP, 127, 0, 0)
	}
}

var forkSteps = []string{"send the engine its pid", "join the world's namespaces", "keep capabilities",
	"change to the working directory", "start a session", "set the parent-death signal", "set up descriptors", "take the terminal", "set resource limits",
	"install the seccomp filter", "exec"}

// childRlimit is one resource limit forkRaw's child sets on itself.
type childRlimit struct {
	res uintptr
	rl  unix.Rlimit
}

// maxRlimits bounds the limits a forkRaw child sets (rlimitsOf's and
// RLIMIT_AS).
const maxRlimits = 6

// rawOpts say what rawStart's child does besides os/exec's steps.
type rawOpts struct {
	join     [3]int // the user, net and mount namespaces to join (-1: not that one)
	keepCaps bool   // keep worldCaps as ambient capabilities
	// newNamespaces: the child is made in new user, network and mount
	// namespaces (a rootless world's child; join is then all -1), and
	// gets SIGKILL if the engine's forking thread ends first.
	newNamespaces bool
	filter        []unix.SockFilter // a seccomp filter to install before the exec (nil: none)
	// parent: the child is the caller's parent's (CLONE_PARENT; a
	// world's server starting a command for the engine), which must
	// reap it, also when it failed (rawFork then returns its pid).
	parent bool
	// rlimits are set by the child on itself just before the seccomp
	// filter (at most maxRlimits; RLIMIT_AS last).
	rlimits []rlimit
	// pidTo is a socket the child sends its pid to first thing (pidMark
	// and the pid, 5 bytes; 0: none): a world's server's answer socket,
	// so that the engine learns of its child even when the server dies
	// before it answers. When that send fails (the engine gave up on
	// the request) the child exits 127 without exec'ing: a zombie of
	// the engine's that nobody reaps, rather than a command nobody
	// supervises.
	pidTo int
}

// pidMark starts the message a rawFork child sends to rawOpts.pidTo.
const pidMark = 'P'

// rawStart starts cmd (as prepared by proc.Start: Path, Args, Env, Dir,
// *os.File stdio, SysProcAttr with Setsid, maybe Setctty and
// UseCgroupFD) with forkRaw, with extra as its descriptors 3 and up (at
// most maxExtra) and what o adds. The engine stays its parent.
func rawStart(cmd *exec.Cmd, o rawOpts, extra ...*os.File) error {
	pid, err := rawFork(cmd, o, extra...)
	if err != nil {
		return err
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	cmd.Process = p
	return nil
}

// rawFork is rawStart's fork: it returns the child's pid. With o.parent
// the child is not the caller's to wait for: on the child's failure
// rawFork returns its pid with the error, for the parent to reap.
func rawFork(cmd *exec.Cmd, o rawOpts, extra ...*os.File) (int, error) {
	if len(extra) > maxExtra || len(o.rlimits) > maxRlimits {
		return 0, fmt.Errorf("sandbox: %d extra descriptors (at most %d), %d limits (at most %d)", len(extra), maxExtra, len(o.rlimits), maxRlimits)
	}
	s := &forkSpec{ctty: -1, ns: o.join, keepCaps: o.keepCaps, pidTo: o.pidTo, pidMsg: [5]byte{pidMark}}
	for i, l := range o.rlimits {
		s.rlim[i] = childRlimit{res: uintptr(l.res), rl: unix.Rlimit{Cur: l.soft, Max: l.hard}}
	}
	s.nRlim = len(o.rlimits)
	if o.parent {
		s.cloneFlags = unix.CLONE_PARENT
		s.clone.flags |= unix.CLONE_PARENT
	}
	if o.newNamespaces {
		s.cloneFlags |= unix.CLONE_NEWUSER | unix.CLONE_NEWNET | unix.CLONE_NEWNS
		s.clone.flags |= unix.CLONE_NEWUSER | unix.CLONE_NEWNET | unix.CLONE_NEWNS
		s.pdeath = true // a world's child ends with the engine (it holds capabilities over its namespaces)
	}
	if len(o.filter) > 0 {
		s.filter = &unix.SockFprog{Len: uint16(len(o.filter)), Filter: &o.filter[0]}
	}
	for i := range s.fds {
		s.fds[i] = -1
	}
	var err error
	if s.path, err = syscall.BytePtrFromString(cmd.Path); err != nil {
		return 0, err
	}
	dir := cmd.Dir
	if dir == "" {
		dir = "."
	}
	if s.dir, err = syscall.BytePtrFromString(dir); err != nil {
		return 0, err
	}
	argv, err := syscall.SlicePtrFromStrings(cmd.Args)
	if err != nil {
		return 0, err
	}
	envv, err := syscall.SlicePtrFromStrings(dedupEnv(cmd.Env))
	if err != nil {
		return 0, err
	}
	s.argv, s.envv = &argv[0], &envv[0]
	dups, err := s.setFiles(cmd, extra)
	defer func() {
		for _, n := range dups {
			_ = unix.Close(n)
		}
	}()
	if err != nil {
		return 0, err
	}
	if sys := cmd.SysProcAttr; sys != nil {
		if sys.Setctty {
			s.ctty = sys.Ctty
		}
		if sys.UseCgroupFD {
			s.useClone3 = true
			s.clone.flags |= unix.CLONE_INTO_CGROUP
			s.clone.cgroup = uint64(sys.CgroupFD)
		}
	}
	s.clone.exitSignal = uint64(unix.SIGCHLD)
	s.clone.flags |= vforkFlags
	s.capHdr.Version = unix.LINUX_CAPABILITY_VERSION_3
	for _, c := range worldCaps {
		if !o.keepCaps {
			break
		}
		s.capData[c/32].Permitted |= 1 << (c % 32)
		s.capData[c/32].Effective |= 1 << (c % 32)
		s.capData[c/32].Inheritable |= 1 << (c % 32)
		s.ambient[s.nAmbient] = c
		s.nAmbient++
	}
	var pipe [2]int
	if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC); err != nil {
		return 0, fmt.Errorf("sandbox: %w", err)
	}
	defer unix.Close(pipe[0])
	s.errPipe = pipe[1]
	pid, errno := forkLocked(s)
	unix.Close(pipe[1])
	runtime.KeepAlive(argv)
	runtime.KeepAlive(envv)
	runtime.KeepAlive(o.filter)
	if errno != 0 {
		return 0, fmt.Errorf("sandbox: fork: %w", errno)
	}
	var report [2]uint32
	n, _ := unix.Read(pipe[0], (*[8]byte)(unsafe.Pointer(&report))[:])
	if n == 0 {
		return pid, nil
	}
	step := "start"
	if int(report[0]) < len(forkSteps) {
		step = forkSteps[report[0]]
	}
	err = fmt.Errorf("sandbox: %s: %w", step, syscall.Errno(report[1]))
	if o.parent {
		return pid, err
	}
	var ws unix.WaitStatus
	_, _ = unix.Wait4(pid, &ws, 0, nil)
	return 0, err
}

// setFiles sets the child's descriptors (s.fds): duplicates of cmd's
// standard files (/dev/null for nil and io.Discard) and of extra, which
// it returns for the caller to close after the fork.
func (s *forkSpec) setFiles(cmd *exec.Cmd, extra []*os.File) ([]int, error) {
	files := [len(s.fds)]*os.File{}
	for i, v := range []any{cmd.Stdin, cmd.Stdout, cmd.Stderr} {
		if v == io.Discard {
			v = nil
		}
		switch f := v.(type) {
		case *os.File:
			files[i] = f
		case nil:
			null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
			if err != nil {
				return nil, fmt.Errorf("sandbox: %w", err)
			}
			defer null.Close()
			files[i] = null
		default:
			return nil, fmt.Errorf("sandbox: the standard files of a rootless command (in a world, or started by a non-dumpable process) must be *os.File, nil or io.Discard (descriptor %d is %T)", i, v)
		}
	}
	copy(files[3:], extra)
	// Duplicates above the child's descriptors, so that setting those up
	// in the child cannot overwrite a source it still needs.
	var dups []int
	for i, f := range files {
		if f == nil {
			continue
		}
		n, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, len(files))
		if err != nil {
			return dups, fmt.Errorf("sandbox: %w", err)
		}
		dups = append(dups, n)
		s.fds[i] = n
	}
	return dups, nil
}

// dedupEnv keeps the last value of each name, as os/exec does.
func dedupEnv(env []string) []string {
	last := map[string]int{}
	for i, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		last[name] = i
	}
	out := make([]string, 0, len(last))
	for i, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); last[name] == i {
			out = append(out, kv)
		}
	}
	return out
}

// maxExtra bounds the descriptors rawStart passes on beyond 0, 1 and 2.
const maxExtra = 3

// startInWorld starts cmd in the world's user, network and mount
// namespaces (see rawStart), with extra as its descriptors 3 and up.
func (w *world) startInWorld(cmd *exec.Cmd, extra ...*os.File) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.mntns.Valid() {
		return errors.New("sandbox: the conversation's world was closed")
	}
	return rawStart(cmd, rawOpts{join: [3]int{w.userns.Int(), w.netns.Int(), w.mntns.Int()}, keepCaps: true}, extra...)
}

// forkLocked runs forkRaw with every signal blocked on the calling thread
// (and syscall.ForkLock held, as os/exec does).
func forkLocked(s *forkSpec) (int, syscall.Errno) {
	syscall.ForkLock.Lock()
	defer syscall.ForkLock.Unlock()
	return signalsBlocked(&s.sigOld, func() (int, syscall.Errno) { return forkRaw(s) })
}

// signalsBlocked runs fork, a vfork-style clone whose child runs on this
// thread's stack in the engine's memory, on a locked thread with every
// signal blocked (no handler of the engine's may run in the child), the
// mask before in *old (for the child to restore before it execs).
func signalsBlocked(old *uint64, fork func() (int, syscall.Errno)) (int, syscall.Errno) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	all := ^uint64(0)
	if _, _, e := syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&all)), uintptr(unsafe.Pointer(old)), 8, 0, 0); e != 0 {
		return 0, e
	}
	pid, errno := fork()
	syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(old)), 0, 8, 0, 0)
	return pid, errno
}

// startOwnNamespaces starts the helper in new user and network namespaces
// (a rootless command without a world): its uid and gid map to
// themselves, and it keeps worldCaps as ambient capabilities until it
// execs bash (makeView, loopback).
//
// A non-dumpable process (the engine, see proc.ProtectEngine) cannot: its
// children's /proc files belong to root until they exec, so that os/exec
// cannot write the child's uid_map. Such a process runs its commands in a
// World (which the engine always does).
func (c *Command) startOwnNamespaces(cmd *exec.Cmd) error {
	var err error
	if d, _ := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); d == 1 {
		var sys syscall.SysProcAttr
		if cmd.SysProcAttr != nil {
			sys = *cmd.SysProcAttr
		}
		uid, gid := os.Getuid(), os.Getgid()
		sys.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET
		sys.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		sys.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		sys.AmbientCaps = worldCaps
		cmd.SysProcAttr = &sys
		if c.proxyChild != nil {
			cmd.ExtraFiles = []*os.File{c.proxyChild}
		}
		err = cmd.Start()
	} else {
		err = errors.New("sandbox: a non-dumpable process starts rootless commands in a World only")
	}
	if c.proxyChild != nil {
		_ = c.proxyChild.Close() // the helper has its own
	}
	return err
}

// helperProtocol identifies what the engine hands its helper: the names,
// types and JSON keys of every field of helperConfig and worldSpec, in
// order, hashed. A helper program built from other sources (a stale
// bashvisor-sandbox next to a newer engine) has another one unless they
// agree on it, and refuses to make a world (worldChild): the world is
// then made by the engine's own executable (makeWorld).
var helperProtocol = sync.OnceValue(func() string {
	h := sha256.New()
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		fmt.Fprintf(h, "%s:%s;", t.PkgPath(), t.String())
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map || t.Kind() == reflect.Array {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			fmt.Fprintf(h, "%s %q{", f.Name, f.Tag.Get("json"))
			walk(f.Type)
			h.Write([]byte("}"))
		}
	}
	walk(reflect.TypeFor[helperConfig]())
	walk(reflect.TypeFor[worldSpec]())
	walk(reflect.TypeFor[serverRequest]())
	walk(reflect.TypeFor[serverReply]())
	return hex.EncodeToString(h.Sum(nil)[:12])
})
