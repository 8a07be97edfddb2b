//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/fd"
	"github.com/bashvisor/bashvisor/internal/proc"
)

// StartDirect is the fast alternative to starting [Command.Path] with
// [Command.Args] ([Command.StartHelper]): it starts bash itself, from a
// throwaway OS thread of the calling process that it confines first, so no
// helper process is executed (which saves the helper's Go runtime start,
// about 1 ms per command, and the package initialisation of a large engine
// binary, several ms).
//
// cmd is the engine's prepared exec.Cmd (SysProcAttr with Setsid, Stdin,
// Stdout, Stderr, Dir, Env...); its Path and Args are replaced by
// `bash -c command`, BASH_ENV is set and ExtraFiles (which must be empty)
// gets one descriptor. On a new goroutine locked to a new OS thread it
// enters the command's namespaces (see [Capabilities.Namespaces]), drops
// the thread's capabilities, applies Landlock and the seccomp filter to the
// thread, and calls cmd.Start there, so bash is forked from the confined
// thread and inherits its confinement. The goroutine then waits, parked,
// until Cleanup (so that the command's mount namespace is torn down off
// its path, see keep_linux.go), and exits without unlocking, which makes
// the Go runtime terminate the thread; the runtime never runs other
// goroutines on a locked thread and creates new threads from a clean
// template thread, so nothing else of the engine ever runs confined.
//
// The seccomp filter denies clone3, whose CLONE_INTO_CGROUP would let a
// process leave its cgroup, so when the standard files are *os.File (or
// nil, io.Discard), as the engine's are, the thread does not install it
// on itself: it forks bash with a raw vfork (forkRaw), with clone3 into
// the cgroup v2 the engine asked for with SysProcAttr.UseCgroupFD
// (CLONE_INTO_CGROUP), and the child installs the filter, and sets
// SIGINT and SIGQUIT to their defaults, just before it execs bash. So the
// command never waits for a move into its cgroup v2 by pid, which after
// an idle pause waits for an RCU grace period (~11 ms) on a host whose
// cgroup2 is not mounted with favordynmods, and no other program runs
// before bash. Otherwise the thread installs the filter, forks with
// os/exec, and the command is put into its cgroup v2 after the fork;
// os/exec's child keeps ignored signals ignored, so when the engine
// ignores SIGINT or SIGQUIT such a command is started by [Command.StartHelper]
// instead (the helper resets them itself). On a host that keeps memory or pids
// limits in cgroup v1 hierarchies the command joins those after the fork
// too ([Options.Cgroup], proc.Cgroup.MoveIn; the memory bash touched
// while it started, a few hundred KiB, stays charged to the engine).
// Resource limits belong to the whole process, so they cannot be set on
// the thread either: they are set with prlimit(2) after the fork. Until
// both are done bash runs nothing of the
// command: it is blocked reading its BASH_ENV file, fd 3, a pipe,
// which receives the (tiny) start-up script only afterwards. POSIXLY_CORRECT
// and SHELLOPTS are removed from the environment, because bash in POSIX
// mode ignores BASH_ENV. The command then runs as `bash -c command` would,
// with descriptors 0, 1 and 2 only. Wait for cmd as usual and call Cleanup
// afterwards (also when StartDirect fails).
func (c *Command) StartDirect(cmd *exec.Cmd) error {
	if c.bash == "" {
		return errors.New("sandbox: StartDirect needs a Command from Prepare")
	}
	if c.world != nil && c.world.rootless || c.cfg.OwnNamespaces {
		return c.StartHelper(cmd) // a thread cannot join or make a user namespace
	}
	if b := filepath.Base(c.bash); b == "sh" || strings.HasPrefix(b, "sh.") {
		return fmt.Errorf("sandbox: StartDirect needs bash started as bash (BASH_ENV), not %q", c.bash)
	}
	if len(cmd.ExtraFiles) > 0 {
		return errors.New("sandbox: StartDirect needs descriptor 3: ExtraFiles must be empty")
	}
	if !filesOnly(cmd) && proc.IgnoresSignals() {
		// Only a forkRaw child can set them to their defaults: os/exec's
		// cannot, and no other program runs before bash (see below).
		return c.StartHelper(cmd)
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	// bash ignores BASH_ENV in POSIX mode, which these variables switch on.
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		return strings.HasPrefix(kv, "POSIXLY_CORRECT=") || strings.HasPrefix(kv, "SHELLOPTS=")
	})
	closeInheritedOnExec()
	gateR, gateW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	defer gateW.Close()
	cmd.Path = c.bash
	cmd.Args = []string{c.bash, "-c", c.command}
	cmd.Env = append(env, "BASH_ENV=/proc/self/fd/3") // not /dev/fd/3: a host may lack the /dev/fd link
	cmd.ExtraFiles = []*os.File{gateR}
	cgroupFD := -1
	atClone := cmd.SysProcAttr != nil && cmd.SysProcAttr.UseCgroupFD && filesOnly(cmd) && !moveByPid.Load()
	if cmd.SysProcAttr != nil && cmd.SysProcAttr.UseCgroupFD && !atClone {
		sys := *cmd.SysProcAttr
		cgroupFD, sys.UseCgroupFD, sys.CgroupFD = sys.CgroupFD, false, 0
		cmd.SysProcAttr = &sys
	}
	err = c.onCommandThread(func() error { return c.confineThreadAndStart(cmd) }, c.keepThread())
	gateR.Close()
	if err != nil {
		return err
	}
	pid := cmd.Process.Pid
	if err := c.place(pid, cgroupFD); err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	// Only now may bash go on: it reads this script and runs the command.
	if _, err := gateW.WriteString("exec 3<&-\nunset BASH_ENV\n"); err != nil {
		_ = cmd.Process.Kill()
		return fmt.Errorf("sandbox: start the command: %w", err)
	}
	return nil
}

// place puts a started (and still gated) command into its cgroups (the
// cgroup v2 the engine asked for, and its cgroups in v1 hierarchies where
// the host keeps memory or pids limits there) and sets its resource
// limits.
func (c *Command) place(pid, cgroupFD int) error {
	p := []byte(strconv.Itoa(pid))
	if cgroupFD >= 0 {
		procsWrites.Add(1)
		n, err := unix.Openat(cgroupFD, "cgroup.procs", unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("sandbox: join cgroup: %w", err)
		}
		procs := fd.New(n)
		_, err = unix.Write(procs.Int(), p)
		_ = procs.Close()
		if err != nil {
			return fmt.Errorf("sandbox: join cgroup: %w", err)
		}
	}
	if c.cgroup != nil {
		if err := c.cgroup.MoveIn(pid); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
	}
	lims := rlimitsOf(c.cfg)
	if as := c.cfg.AddressSpace; as != config.Unlimited {
		lims = append(lims, rlimit{"RLIMIT_AS", unix.RLIMIT_AS, as, as})
	}
	for _, l := range lims {
		rl := unix.Rlimit{Cur: l.soft, Max: l.hard}
		if err := unix.Prlimit(pid, l.res, &rl, nil); err != nil {
			return fmt.Errorf("sandbox: prlimit %s: %w", l.name, err)
		}
	}
	return nil
}

// StartHelper starts cmd as the sandbox helper ([Command.Path] with
// [Command.Args]: the program re-executed with [HelperArg], see [Main]),
// from a throwaway thread inside the command's namespaces when there are
// any. The helper confines itself and execs bash. cmd's SysProcAttr may use
// UseCgroupFD: the thread is not confined, so the fork may place the
// helper into a cgroup. In a rootless [World] the world's command server
// starts bash instead, when it can (see startRootless), so no helper
// program runs; cmd's Path and Args are then left as they were. Wait for
// cmd as usual and call Cleanup afterwards (also when StartHelper fails).
func (c *Command) StartHelper(cmd *exec.Cmd) error {
	if c.world != nil && c.world.rootless {
		return c.startRootless(cmd)
	}
	cmd.Path, cmd.Args = c.Path, c.Args
	if helperProcs1 && c.cfg.Layer == nil {
		cmd.Env, cmd.Args = c.withHelperRuntime(cmd.Env, cmd.Args)
	}
	closeInheritedOnExec()
	if c.cfg.OwnNamespaces {
		return c.startOwnNamespaces(cmd)
	}
	if !c.ns.fd.Valid() && c.world == nil {
		return cmd.Start()
	}
	return c.onCommandThread(func() error {
		if err := c.enterNamespaces(); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		return cmd.Start()
	}, c.keepThread())
}

// startRootless starts cmd in the command's rootless world: by the
// world's server when it can (server_linux.go), else as the helper,
// forked into the world's namespaces (startInWorld).
func (c *Command) startRootless(cmd *exec.Cmd) error {
	if cmd.Dir == "" {
		cmd.Dir = "."
	}
	if err := c.hand.beforeStart(); err != nil {
		return err
	}
	err := c.startServed(cmd)
	if errors.Is(err, errNoServer) {
		cmd.Path, cmd.Args = c.Path, c.Args
		if helperProcs1 && c.cfg.Layer == nil {
			cmd.Env, cmd.Args = c.withHelperRuntime(cmd.Env, cmd.Args)
		}
		closeInheritedOnExec()
		err = c.world.startInWorld(cmd, c.extraFiles()...)
	}
	if c.proxyChild != nil {
		_ = c.proxyChild.Close() // the helper has its own
	}
	if c.nsChild != nil {
		_ = c.nsChild.Close()
		c.nsChild = nil
	}
	c.hand.afterStart(err == nil)
	return err
}

// confineThreadAndStart confines the calling thread and starts cmd from
// it: with forkRaw when its standard files are files (into its cgroup v2
// by clone3 when SysProcAttr asks for one), whose child installs the
// seccomp filter (which denies clone3) and sets SIGINT and SIGQUIT to
// their defaults; otherwise with os/exec after installing the filter on
// the thread.
func (c *Command) confineThreadAndStart(cmd *exec.Cmd) error {
	if c.ns.fd.Valid() || c.world != nil {
		if err := c.enterNamespaces(); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
	}
	if err := dropCapabilities(); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if err := applyLandlock(c.cfg); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if filesOnly(cmd) {
		filter, err := seccompFilter(c.cfg.filter())
		if err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		extra := cmd.ExtraFiles
		cmd.ExtraFiles = nil
		return rawStart(cmd, rawOpts{join: [3]int{-1, -1, -1}, filter: filter}, extra...)
	}
	if err := installSeccomp(c.cfg.filter()); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	return cmd.Start()
}

// procsWrites counts the processes StartDirect moved into their cgroup v2
// by pid (writes to cgroup.procs), for the tests; moveByPid makes it
// always move them so (the benchmarks compare both).
var (
	procsWrites atomic.Int64
	moveByPid   atomic.Bool
)

// filesOnly reports whether cmd's standard files are all *os.File, nil or
// io.Discard: what rawStart can pass on without copying goroutines.
func filesOnly(cmd *exec.Cmd) bool {
	for _, v := range []any{cmd.Stdin, cmd.Stdout, cmd.Stderr} {
		switch v.(type) {
		case nil, *os.File:
		default:
			if v != io.Discard {
				return false
			}
		}
	}
	return true
}

// closeInheritedOnExec marks every descriptor of the process from 3 up
// close-on-exec, so a command gets only what its exec.Cmd passes on
// purpose. Go opens everything close-on-exec; this catches descriptors the
// process inherited from its own parent or opened through cgo.
func closeInheritedOnExec() {
	_ = unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
}
