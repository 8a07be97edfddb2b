package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/psx"
)

// ErrStart wraps every error that kept a process from starting.
var ErrStart = errors.New("cannot start process")

// Spec describes a process to start.
type Spec struct {
	// Path is the program; Args its argv (Args[0] included).
	Path string
	Args []string
	// Dir is the working directory.
	Dir string
	// Env is the complete environment.
	Env []string
	// Output, when set, receives stdout and stderr (a background job's
	// file). When nil, Start creates a pipe and returns its read end.
	Output *os.File
	// SeparateStderr gives stderr a pipe of its own (only with Output nil).
	SeparateStderr bool
	// Stdin gives the process a pipe as stdin, whose write end is
	// Process.Stdin; otherwise stdin is /dev/null.
	Stdin bool
	// TTY, when set, runs the process on a new pseudo-terminal of this
	// size: its stdin, stdout and stderr are the terminal, which becomes
	// the controlling terminal of its new session. Process.Stdout reads
	// the terminal's output and Process.Stdin writes its input (keys).
	// Output, SeparateStderr and Stdin are then ignored.
	TTY *Winsize
	// Cgroup, when set, starts the process inside that cgroup: its cgroup
	// v2 from the fork on (CLONE_INTO_CGROUP), and on a hybrid host its
	// cgroups in the v1 memory and pids hierarchies too, with no window in
	// which the command runs outside them: its child joins them before it
	// execs, or, on other architectures than amd64 and arm64, it is forked
	// by the cgroup's resident forker thread or by a thread that joins
	// them for the fork (see cgroup_place.go).
	Cgroup *Cgroup
	// Launch, when set, starts the prepared command instead of cmd.Start
	// (restricted mode starts it from a confined thread). It may change
	// Path, Args, Env, ExtraFiles and SysProcAttr but must keep Setsid and
	// the standard files. With a Cgroup, SysProcAttr asks for its cgroup
	// v2 (UseCgroupFD) and Launch must place the process into
	// [Cgroup.V1Dirs] itself. Launch must also start the program with
	// SIGINT and SIGQUIT at their defaults: [DefaultSignals] once Path and
	// Args are final, or [ResetSignalsForExec] in a helper that execs.
	Launch func(cmd *exec.Cmd) error
}

// Process is a started command: the leader of a new session and process
// group whose id equals its pid.
type Process struct {
	// Pid is the leader's pid and the process group id.
	Pid int
	// Stdout is the read end of the output pipe (nil when Spec.Output was
	// set). With SeparateStderr it carries only stdout.
	Stdout *os.File
	// Stderr is the read end of the stderr pipe with SeparateStderr.
	Stderr *os.File
	// Stdin is the write end of the stdin pipe (Spec.Stdin), or the
	// terminal's input (Spec.TTY); nil otherwise. The caller closes it.
	Stdin *os.File

	proc  *os.Process
	pidfd *os.File // the leader's, kept after Wait while its group has survivors (see SignalGroup)
	// reaped is set once Wait reaped the leader; gone once the group was
	// seen empty after that, for good (the pidfd is closed then);
	// released by Release (the pidfd is closed once Wait is done with it).
	reaped, gone, released atomic.Bool
}

var (
	devNullOnce sync.Once
	devNull     *os.File
	devNullErr  error
)

// stdin returns a shared read-only /dev/null, opened once per process.
func stdin() (*os.File, error) {
	devNullOnce.Do(func() { devNull, devNullErr = os.Open(os.DevNull) })
	return devNull, devNullErr
}

// Start starts spec in a new session (setsid): no controlling terminal
// (unless Spec.TTY gives it one), stdin /dev/null, stdout and stderr on
// one pipe unless spec says otherwise.
func Start(spec Spec) (*Process, error) {
	in, err := stdin()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}
	p := &Process{}
	var out, errw *os.File
	var closeAfter []*os.File
	fail := func(err error) (*Process, error) {
		for _, f := range closeAfter {
			f.Close()
		}
		if p.Stdout != nil {
			p.Stdout.Close()
		}
		if p.Stderr != nil {
			p.Stderr.Close()
		}
		if p.Stdin != nil {
			p.Stdin.Close()
		}
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}
	sys := &syscall.SysProcAttr{Setsid: true}
	switch {
	case spec.TTY != nil:
		master, slave, err := openTTY(*spec.TTY)
		if err != nil {
			return fail(err)
		}
		p.Stdout = master
		closeAfter = append(closeAfter, slave)
		if p.Stdin, err = dupFile(master, "tty-input"); err != nil {
			return fail(err)
		}
		in, out, errw = slave, slave, slave
		// The terminal (the child's stdin) becomes the controlling
		// terminal of the child's new session.
		sys.Setctty, sys.Ctty = true, 0
	case spec.Stdin:
		r, w, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		in, p.Stdin = r, w
		closeAfter = append(closeAfter, r)
	}
	switch {
	case spec.TTY != nil:
	case spec.Output != nil:
		out, errw = spec.Output, spec.Output
	default:
		r, w, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		p.Stdout, out, errw = r, w, w
		closeAfter = append(closeAfter, w)
		if spec.SeparateStderr {
			r2, w2, err := os.Pipe()
			if err != nil {
				return fail(err)
			}
			p.Stderr, errw = r2, w2
			closeAfter = append(closeAfter, w2)
		}
	}
	if spec.Cgroup != nil {
		fd := spec.Cgroup.FD()
		if fd < 0 {
			return fail(errors.New("cgroup descriptor closed"))
		}
		sys.UseCgroupFD, sys.CgroupFD = true, fd
	}
	// *os.File stdio is handed to the child as is: exec.Cmd starts no
	// copying goroutines, and Wait is never called on cmd (see Wait).
	cmd := &exec.Cmd{
		Path: spec.Path, Args: spec.Args, Dir: spec.Dir, Env: spec.Env,
		Stdin: in, Stdout: out, Stderr: errw, SysProcAttr: sys,
	}
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	// A descriptor this process inherited without close-on-exec (or opened
	// through cgo) would reach the command: mark them all close-on-exec
	// (one syscall; Go's own descriptors already are), so the command gets
	// exactly 0, 1 and 2 plus what the launcher passes on purpose.
	_ = unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	switch {
	case spec.Launch != nil:
		err = spec.Launch(cmd)
	case spec.Cgroup != nil:
		p.Pid, err = spec.Cgroup.start(cmd)
	case vforkStarts.Load(): // its child sets SIGINT and SIGQUIT to their defaults
		p.Pid, err = startRaw(cmd, noTasks)
	default:
		DefaultSignals(cmd)
		err = cmd.Start()
	}
	if err != nil {
		return fail(err)
	}
	for _, f := range closeAfter {
		f.Close()
	}
	if cmd.Process != nil { // else started without os/exec (Cgroup.start)
		p.proc, p.Pid = cmd.Process, cmd.Process.Pid
	}
	// A pidfd in the netpoller lets Wait park a goroutine, not a thread.
	// The child is not reaped yet, so its pid cannot have been reused.
	if fd, err := unix.PidfdOpen(p.Pid, unix.O_NONBLOCK); err == nil {
		p.pidfd = os.NewFile(uintptr(fd), "pidfd")
	}
	return p, nil
}

// Exit is how a process ended, from the wait4 that reaped it.
type Exit struct {
	// Status is its wait status.
	Status syscall.WaitStatus
	// Rusage is its resource usage together with that of the descendants
	// it waited for (wait4 reports RUSAGE_BOTH): Utime and Stime add up,
	// Maxrss is the largest resident set of any one of them, in KiB.
	// Descendants that were orphaned and reaped by another process are
	// missing.
	Rusage syscall.Rusage
}

// Success reports whether it exited with status 0.
func (e *Exit) Success() bool { return e.Status.Exited() && e.Status.ExitStatus() == 0 }

// ExitCode is its exit status, or -1 when a signal ended it.
func (e *Exit) ExitCode() int {
	if e.Status.Exited() {
		return e.Status.ExitStatus()
	}
	return -1
}

// Sys returns the syscall.WaitStatus, as os.ProcessState.Sys does.
func (e *Exit) Sys() any { return e.Status }

// Wait waits for the leader to exit and reaps it. The wait parks no OS
// thread: the pidfd is in the netpoller, and each wake-up costs one
// non-blocking wait4, the last of which reaps the leader.
func (p *Process) Wait() (*Exit, error) {
	var ex Exit
	if p.proc != nil {
		defer func() { _ = p.proc.Release() }() // os keeps a handle of its own
	}
	reap := func(flags int) (bool, error) {
		for {
			pid, err := syscall.Wait4(p.Pid, &ex.Status, flags, &ex.Rusage)
			switch {
			case errors.Is(err, syscall.EINTR):
			case err != nil:
				return true, fmt.Errorf("wait for pid %d: %w", p.Pid, err)
			default:
				return pid == p.Pid, nil
			}
		}
	}
	defer func() {
		p.reaped.Store(true)
		if p.released.Load() {
			p.closePidfd()
		} else {
			_ = p.signalOwnGroup(0) // an empty group is gone: its pidfd is closed
		}
	}()
	if p.pidfd != nil {
		if rc, err := p.pidfd.SyscallConn(); err == nil {
			var werr error
			if err := rc.Read(func(uintptr) bool {
				var done bool
				done, werr = reap(syscall.WNOHANG)
				return done
			}); err == nil {
				return &ex, werr
			}
		}
	}
	if _, err := reap(0); err != nil { // no pidfd: block this thread
		return nil, err
	}
	return &ex, nil
}

// SetRlimit sets resource limit resource (unix.RLIMIT_AS, ...) of the
// started process with prlimit(2). Processes it forked before keep theirs;
// later ones inherit it.
func (p *Process) SetRlimit(resource int, soft, hard uint64) error {
	if err := unix.Prlimit(p.Pid, resource, &unix.Rlimit{Cur: soft, Max: hard}, nil); err != nil {
		return fmt.Errorf("prlimit %d: %w", resource, err)
	}
	return nil
}

// Release closes the leader's pidfd once Wait is done with it (at once
// when it is), for a group that is no longer signalled (after that,
// SignalGroup goes by the group's number, see there). It does not end or
// reap anything. Wait closes the pidfd itself when the group is empty by
// then, and so does any call that finds it empty after Wait: Release is
// for a group whose survivors are left alone, or whose shell is.
func (p *Process) Release() {
	p.released.Store(true)
	if p.reaped.Load() {
		p.closePidfd()
	}
}

// closePidfd closes the leader's pidfd (again: nothing).
func (p *Process) closePidfd() {
	if p.pidfd != nil {
		_ = p.pidfd.Close()
	}
}

// SignalGroup sends sig to every process of the group the process leads,
// before and after Wait reaped it, and to no other group (see
// signalOwnGroup). A group that no longer exists is not an error.
func (p *Process) SignalGroup(sig syscall.Signal) error {
	if err := p.signalOwnGroup(sig); err != nil && !errors.Is(err, unix.ESRCH) {
		return err
	}
	return nil
}

// SignalGroup sends sig to process group pgid; ESRCH (no such group) is
// not an error. The caller must know that pgid still names the group it
// means: pids are reused, within a minute on a busy host with pid_max
// 32768, so a number whose leader was reaped and whose group emptied may
// name another group by then. Prefer [Process.SignalGroup].
func SignalGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 1 {
		return fmt.Errorf("refusing to signal process group %d", pgid)
	}
	if err := unix.Kill(-pgid, sig); err != nil && !errors.Is(err, unix.ESRCH) {
		return err
	}
	return nil
}

// GroupAlive reports whether process group pgid has a live member (one
// with a thread that has not exited). The fast path is one kill(-pgid,
// 0); when that finds members, /proc is scanned to ignore zombies:
// orphaned members are reparented to init, which may reap them late.
// Like SignalGroup(pgid), it trusts the number: prefer
// [Process.GroupAlive].
func GroupAlive(pgid int) bool {
	if pgid <= 1 {
		return false
	}
	if err := unix.Kill(-pgid, 0); err != nil && !errors.Is(err, unix.EPERM) {
		return false
	}
	return scanGroup(pgid, true) != nil
}

// LiveMembers is GroupMembers with the kill(-pgid, 0) fast path: nil when
// the group has no member at all.
func LiveMembers(pgid int) []Member {
	if pgid <= 1 {
		return nil
	}
	if err := unix.Kill(-pgid, 0); err != nil && !errors.Is(err, unix.EPERM) {
		return nil
	}
	return scanGroup(pgid, false)
}

// memoryCapabilities are the capabilities with which a process can read
// another process's memory, and so the secrets the environment policy kept
// from it: ptrace and /proc/PID/{environ,mem} of non-dumpable processes
// (CAP_SYS_PTRACE), BPF and perf tracing (CAP_BPF, CAP_PERFMON, and
// CAP_SYS_ADMIN, which implies both), kernel modules (CAP_SYS_MODULE),
// /dev/mem and /proc/kcore (CAP_SYS_RAWIO), and a new kernel
// (CAP_SYS_BOOT).
var memoryCapabilities = []uintptr{
	unix.CAP_SYS_PTRACE, unix.CAP_SYS_ADMIN, unix.CAP_BPF, unix.CAP_PERFMON,
	unix.CAP_SYS_MODULE, unix.CAP_SYS_RAWIO, unix.CAP_SYS_BOOT,
}

// ProtectEngine keeps the commands this process starts from reading its
// environment or memory (through /proc/PPID/environ, /proc/PPID/mem,
// ptrace and the like), as root or not.
//
// It makes the process non-dumpable, so that only a process with
// CAP_SYS_PTRACE can read those files or attach to it; and, when the
// process runs with CAP_SETPCAP (root) and dropCaps is set, it removes the
// capabilities that read other processes' memory (CAP_SYS_PTRACE,
// CAP_SYS_ADMIN, CAP_BPF, CAP_PERFMON, CAP_SYS_MODULE, CAP_SYS_RAWIO,
// CAP_SYS_BOOT) from the bounding set of every thread of the process. The
// process itself keeps them (the bounding set limits only what a program
// gains at execve), but every program it starts from then on, commands
// and anything else, runs without them. Both changes are process-wide and
// cannot be undone. An unprivileged process has none of those capabilities
// to begin with.
func ProtectEngine(dropCaps bool) error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE): %w", err)
	}
	if !dropCaps || os.Geteuid() != 0 {
		return nil
	}
	for _, c := range memoryCapabilities {
		// Gone already (dropped before the runtime started its threads,
		// as cmd/bashvisor does, or never there): every thread inherited
		// the bounding set of this one, which only psx changes for all.
		if in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, c, 0, 0, 0); err == nil && in == 0 {
			continue
		}
		// psx runs the prctl on every OS thread of the process (the
		// bounding set is per thread, and new threads inherit it).
		_, _, errno := psx.Syscall3(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, c, 0)
		switch errno {
		case 0, unix.EINVAL: // EINVAL: a capability this kernel does not know
		default:
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, errno)
		}
	}
	return nil
}
