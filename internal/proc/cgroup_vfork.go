package proc

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
	"github.com/bashvisor/bashvisor/internal/vfork"
)

// A command's start, in the calling thread (on amd64 and arm64): a vfork
// (clone3 with CLONE_VM|CLONE_VFORK, into the command's cgroup v2 when it
// has one) whose child, on a hybrid host, writes 0 to the tasks file of
// each of the command's v1 cgroups (memory, pids) before anything else,
// then sets up its session, directory and descriptors and execs. Every
// unrestricted command starts so, with or without a cgroup: the clone
// resets the engine's caught signals itself (CLONE_CLEAR_SIGHAND), where
// os/exec's child makes one rt_sigaction call per signal (about 64, ~22
// µs here).
//
// On a hybrid host the command is in all its cgroups before its
// program's first instruction, as with a forker, without the two thread
// hand-offs to a forker and back and with two cgroup writes instead of
// a joining thread's four. Writing 0 to tasks moves the writer only, so
// it takes no global lock (unlike moving another process, which waits for
// an RCU grace period).
//
// What differs from a forker: the child's kernel structures (its
// task_struct, allocated by the clone) are charged to the engine's memory
// cgroup rather than the command's, a few KiB per command, and the child
// enters the pids cgroup by migration, which pids.max does not check (the
// cgroup holds no process of a command then, so the limit cannot be
// exceeded by it).
//
// clone3 with CLONE_INTO_CGROUP needs Linux 5.7, which the engine's
// cgroups need anyway (ProbeCgroups); CLONE_CLEAR_SIGHAND 5.5.

// vforkStarts: unrestricted commands start with startRaw (vforkJoins; a
// benchmark turns it off to compare with os/exec and the forker).
// keepForkers gives recycled cgroups their forkers even with vforkStarts
// (a benchmark compares both in one engine).
var vforkStarts, keepForkers atomic.Bool

func init() { vforkStarts.Store(vforkJoins) }

// joinSpec is everything the child of forkJoined needs, prepared before
// the fork. The child shares this memory until it execs: it only reads
// it, makes system calls, and records why it failed.
type joinSpec struct {
	path, dir  *byte
	argv, envv **byte
	tasks      [nCtl]int // v1 tasks descriptors the child writes 0 to (-1: none)
	fds        [3]int    // the child's descriptors 0, 1 and 2, all >= 3
	ctty       bool      // make descriptor 0 the controlling terminal
	zero       [1]byte   // "0"
	clone      cloneArgs
	sigOld     uint64
	dflAct     [4]uintptr  // struct sigaction for SIG_DFL
	nofile     unix.Rlimit // the open-files limit to set (setNofile; see nofile.go)
	setNofile  bool
	// Set by a child that could not exec, before it exits 127.
	failed, failStep, failErrno uintptr
}

// cloneArgs is struct clone_args (CLONE_ARGS_SIZE_VER2).
type cloneArgs struct {
	flags, pidfd, childTID, parentTID, exitSignal, stack, stackSize, tls, setTID, setTIDSize, cgroup uint64
}

// Steps of forkJoined's child, for its errors.
const (
	joinStepCgroup = iota
	joinStepChdir
	joinStepSetsid
	joinStepFiles
	joinStepTTY
	joinStepExec
)

// forkJoined forks as vfork does (the child runs on this thread's stack,
// in the engine's memory, until it execs; this thread waits for that)
// and, in the child, joins the v1 cgroups, changes directory, starts a
// session, sets up descriptors and the terminal, sets SIGINT and SIGQUIT
// to their defaults (ignored or not: see signals.go; the clone reset the
// signals the engine catches), restores the signal mask and execs. It runs only raw
// system calls in the child (no allocation, no runtime), like syscall's
// own forkAndExecInChild; the caller has blocked every signal on this
// thread.
//
//go:noinline
//go:norace
//go:nosplit
//go:nocheckptr
func forkJoined(s *joinSpec) (int, syscall.Errno) {
	var (
		i, step uintptr
		e       syscall.Errno
	)
	r1, e := vfork.RawSyscall(unix.SYS_CLONE3, uintptr(unsafe.Pointer(&s.clone)), unsafe.Sizeof(s.clone), 0)
	if e != 0 || r1 != 0 {
		// The parent, once the child exec'd or exited.
		return int(r1), e
	}
	step = joinStepCgroup
	for i = 0; i < nCtl; i++ {
		if s.tasks[i] >= 0 {
			if _, _, e = syscall.RawSyscall(unix.SYS_WRITE, uintptr(s.tasks[i]), uintptr(unsafe.Pointer(&s.zero[0])), 1); e != 0 {
				goto fail
			}
		}
	}
	step = joinStepChdir
	if _, _, e = syscall.RawSyscall(unix.SYS_CHDIR, uintptr(unsafe.Pointer(s.dir)), 0, 0); e != 0 {
		goto fail
	}
	step = joinStepSetsid
	if _, _, e = syscall.RawSyscall(unix.SYS_SETSID, 0, 0, 0); e != 0 {
		goto fail
	}
	step = joinStepFiles
	for i = 0; i < 3; i++ {
		if _, _, e = syscall.RawSyscall(unix.SYS_DUP3, uintptr(s.fds[i]), i, 0); e != 0 {
			goto fail
		}
	}
	// A descriptor made without close-on-exec since Start marked them all
	// (this start takes no syscall.ForkLock) must not reach the command:
	// mark them again, in the child's own table (best effort: before
	// Linux 5.11 the flag is unknown).
	syscall.RawSyscall(unix.SYS_CLOSE_RANGE, 3, ^uintptr(0), unix.CLOSE_RANGE_CLOEXEC)
	step = joinStepTTY
	if s.ctty {
		if _, _, e = syscall.RawSyscall(unix.SYS_IOCTL, 0, uintptr(unix.TIOCSCTTY), 1); e != 0 {
			goto fail
		}
	}
	if s.setNofile { // as os/exec's child: errors ignored
		syscall.RawSyscall6(unix.SYS_PRLIMIT64, 0, unix.RLIMIT_NOFILE, uintptr(unsafe.Pointer(&s.nofile)), 0, 0, 0)
	}
	// The engine's signal handlers would run on its memory: the clone
	// set every caught signal to its default (CLONE_CLEAR_SIGHAND, one
	// flag instead of 64 rt_sigaction calls, ~22 µs here); ignored ones
	// stay ignored (execve keeps them) but SIGINT and SIGQUIT.
	syscall.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGINT), uintptr(unsafe.Pointer(&s.dflAct[0])), 0, 8, 0, 0)
	syscall.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGQUIT), uintptr(unsafe.Pointer(&s.dflAct[0])), 0, 8, 0, 0)
	syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&s.sigOld)), 0, 8, 0, 0)
	step = joinStepExec
	_, _, e = syscall.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(s.path)), uintptr(unsafe.Pointer(s.argv)), uintptr(unsafe.Pointer(s.envv)))
fail:
	s.failStep, s.failErrno, s.failed = step, uintptr(e), 1
	for {
		syscall.RawSyscall(unix.SYS_EXIT_GROUP, 127, 0, 0)
	}
}

// forkJoinedLocked runs forkJoined on a locked thread with every signal
// blocked. It does not take syscall.ForkLock for writing: that would
// serialise every start (os/exec lets concurrent forks share it), which
// cost about a fifth of the throughput at 64 commands in flight (`demo
// bench -only conc`, 6-7 runs each, load 3-8: 55-92 % of raw os/exec's
// with it, 83-107 % without, the forker's build before 70-96 %). The
// lock orders forks only against descriptors made without close-on-exec
// under its read lock (Go makes every descriptor close-on-exec as it
// creates it; a dependency may not): proc.Start marks every descriptor
// close-on-exec before each start, and the child marks its own table
// again after it set up 0, 1 and 2, so that one made in between does not
// reach the command either (`TestVforkStartLeaksNoDescriptor`).
func forkJoinedLocked(s *joinSpec) (int, syscall.Errno) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	all := ^uint64(0)
	if _, _, e := syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&all)), uintptr(unsafe.Pointer(&s.sigOld)), 8, 0, 0); e != 0 {
		return 0, e
	}
	pid, errno := forkJoined(s)
	syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&s.sigOld)), 0, 8, 0, 0)
	return pid, errno
}

// startRaw starts cmd, as proc.Start prepared it (Path, Args, Env, Dir,
// *os.File standard files, SysProcAttr with Setsid, maybe Setctty with
// Ctty 0 and UseCgroupFD), with forkJoined, into the v1 cgroups whose
// tasks descriptors are given (noTasks: none; the caller keeps them open
// meanwhile). It returns the child's pid; cmd.Process stays nil. Errors
// are os/exec's (a *os.PathError "fork/exec PATH"), the cgroup's step
// named.
func startRaw(cmd *exec.Cmd, tasks [nCtl]*fd.FD) (int, error) {
	fail := func(err error) (int, error) { return 0, &os.PathError{Op: "fork/exec", Path: cmd.Path, Err: err} }
	s := &joinSpec{zero: [1]byte{'0'}}
	for i, t := range tasks {
		s.tasks[i] = t.Int()
	}
	var err error
	if s.path, err = syscall.BytePtrFromString(cmd.Path); err != nil {
		return fail(err)
	}
	dir := cmd.Dir
	if dir == "" {
		dir = "."
	}
	if s.dir, err = syscall.BytePtrFromString(dir); err != nil {
		return fail(err)
	}
	argv, err := syscall.SlicePtrFromStrings(cmd.Args)
	if err != nil {
		return fail(err)
	}
	envv, err := syscall.SlicePtrFromStrings(dedupEnv(cmd.Env))
	if err != nil {
		return fail(err)
	}
	s.argv, s.envv = &argv[0], &envv[0]
	files := [3]*os.File{}
	for i, v := range []any{cmd.Stdin, cmd.Stdout, cmd.Stderr} {
		f, ok := v.(*os.File)
		if !ok || f == nil {
			return fail(fmt.Errorf("standard file %d is %T, not an *os.File", i, v))
		}
		files[i] = f
		s.fds[i] = int(f.Fd())
		if s.fds[i] < 3 {
			// Above the child's 0, 1 and 2, so that setting those up
			// cannot overwrite a source it still needs.
			n, err := unix.FcntlInt(uintptr(s.fds[i]), unix.F_DUPFD_CLOEXEC, 3)
			if err != nil {
				return fail(err)
			}
			defer unix.Close(n)
			s.fds[i] = n
		}
	}
	s.nofile, s.setNofile = childNofile()
	s.clone.flags = unix.CLONE_VM | unix.CLONE_VFORK | unix.CLONE_CLEAR_SIGHAND
	s.clone.exitSignal = uint64(unix.SIGCHLD)
	if sys := cmd.SysProcAttr; sys != nil {
		if sys.Setctty {
			if sys.Ctty != 0 {
				return fail(fmt.Errorf("controlling terminal %d: only descriptor 0", sys.Ctty))
			}
			s.ctty = true
		}
		if sys.UseCgroupFD {
			s.clone.flags |= unix.CLONE_INTO_CGROUP
			s.clone.cgroup = uint64(sys.CgroupFD)
		}
	}
	pid, errno := forkJoinedLocked(s)
	runtime.KeepAlive(argv)
	runtime.KeepAlive(envv)
	runtime.KeepAlive(files)
	if errno != 0 {
		return fail(errno)
	}
	if s.failed == 0 {
		return pid, nil
	}
	var ws unix.WaitStatus
	_, _ = unix.Wait4(pid, &ws, 0, nil) // it exited 127
	err = syscall.Errno(s.failErrno)
	if s.failStep == joinStepCgroup {
		err = fmt.Errorf("join the command's v1 cgroups: %w", err)
	}
	return fail(err)
}

// dedupEnv keeps the last value of each name, as os/exec does.
func dedupEnv(env []string) []string {
	last := make(map[string]int, len(env))
	for i, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		last[name] = i
	}
	if len(last) == len(env) {
		return env
	}
	out := make([]string, 0, len(last))
	for i, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); last[name] == i {
			out = append(out, kv)
		}
	}
	return out
}
