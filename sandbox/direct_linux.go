//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// StartDirect is the fast alternative to starting [Command.Path] with
// [Command.Args]: it starts bash itself, from a throwaway OS thread of the
// calling process that it confines first, so no helper process is executed
// (which saves the helper's Go runtime start, about 1 ms per command here,
// and the package initialisation of a large engine binary, several ms).
//
// cmd is the engine's prepared exec.Cmd (SysProcAttr with Setsid, Stdin,
// Stdout, Stderr, Dir, Env, WaitDelay...); its Path and Args are replaced
// by `bash -c command` and BASH_ENV is appended to its Env. StartDirect
// then, on a new goroutine locked to a new OS thread: puts that thread into
// the pids cgroup (cgroup v1: the thread's tasks entry; cgroup2:
// SysProcAttr.UseCgroupFD, which must then not be in use already), drops
// the thread's capabilities, applies Landlock and the seccomp filter to the
// thread (the same rules as the helper, except that clone3 stays allowed
// for the engine's own exec), and calls cmd.Start there, so bash is forked
// from the confined thread and inherits its confinement. The goroutine
// then exits without unlocking, which makes the Go runtime terminate the
// thread; the runtime never runs other goroutines on a locked thread and
// creates new threads from a clean template thread, so nothing else of the
// engine ever runs confined.
//
// rlimits belong to the whole process, so they cannot be set on the thread:
// bash sets them itself before it runs the command, from the BASH_ENV file
// StartDirect writes into the scratch dir (`ulimit ... || exit 126`; it
// unsets BASH_ENV so nested shells do not read it again). POSIXLY_CORRECT
// and SHELLOPTS are removed from the environment, because bash in POSIX
// mode ignores BASH_ENV, and the same limits are also applied with
// prlimit(2) right after the start as a fallback. The command runs as
// `bash -c command` would. Wait for cmd as usual and call Cleanup
// afterwards (also when StartDirect fails).
func (c *Command) StartDirect(cmd *exec.Cmd) error {
	if c.bash == "" {
		return errors.New("sandbox: StartDirect needs a Command from Prepare")
	}
	limits := filepath.Join(c.Scratch, ".bashvisor-limits.sh")
	if err := os.WriteFile(limits, []byte(ulimitScript(c.cfg)), 0o400); err != nil {
		return fmt.Errorf("sandbox: write limits: %w", err)
	}
	if b := filepath.Base(c.bash); b == "sh" || strings.HasPrefix(b, "sh.") {
		return fmt.Errorf("sandbox: StartDirect needs bash started as bash (BASH_ENV), not %q", c.bash)
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	// bash ignores BASH_ENV in POSIX mode, which these variables switch on.
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		return strings.HasPrefix(kv, "POSIXLY_CORRECT=") || strings.HasPrefix(kv, "SHELLOPTS=")
	})
	cmd.Path = c.bash
	cmd.Args = []string{c.bash, "-c", c.command}
	cmd.Env = append(env, "BASH_ENV="+limits)
	var cgroupFD = -1
	if c.cfg.CgroupDir != "" && cgroupV2 {
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		if cmd.SysProcAttr.UseCgroupFD {
			return errors.New("sandbox: StartDirect cannot place the command in its pids cgroup: SysProcAttr.UseCgroupFD is already in use (set pids.max in that cgroup instead)")
		}
		fd, err := unix.Open(c.cfg.CgroupDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("sandbox: open cgroup: %w", err)
		}
		defer unix.Close(fd)
		cgroupFD = fd
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
	}
	return onThrowawayThread(func() error { return c.confineThreadAndStart(cmd, cgroupFD >= 0) })
}

// onThrowawayThread runs f on a goroutine locked to an OS thread that is
// terminated afterwards (the goroutine exits without unlocking). The main
// thread is never terminated by the Go runtime (it would be kept, confined,
// forever), so if the goroutine lands on it, it keeps the main thread busy
// and runs f on another goroutine, which then cannot land there.
func onThrowawayThread(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			errc <- onThrowawayThread(f)
			runtime.UnlockOSThread() // the main thread was never confined
			return
		}
		errc <- f()
		// Return still locked: the runtime terminates this thread.
	}()
	return <-errc
}

func (c *Command) confineThreadAndStart(cmd *exec.Cmd, v2 bool) error {
	if c.cfg.CgroupDir != "" && !v2 {
		tid := strconv.Itoa(unix.Gettid())
		if err := os.WriteFile(filepath.Join(c.cfg.CgroupDir, "tasks"), []byte(tid), 0); err != nil {
			return fmt.Errorf("sandbox: join pids cgroup: %w", err)
		}
	}
	if err := dropCapabilities(); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if err := applyLandlock(c.Scratch); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if err := installSeccomp(true); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	// Belt and braces: the same limits from outside, right away, in case
	// BASH_ENV was not read. Best effort: the command is already running.
	lims := rlimitsOf(c.cfg)
	if as := c.cfg.AddressSpace; as != Unlimited {
		lims = append(lims, rlimit{"RLIMIT_AS", unix.RLIMIT_AS, as, as})
	}
	for _, l := range lims {
		rl := unix.Rlimit{Cur: l.soft, Max: l.hard}
		_ = unix.Prlimit(cmd.Process.Pid, l.res, &rl, nil)
	}
	return nil
}

// ulimitScript is the BASH_ENV file of StartDirect: the helper's rlimits,
// set by bash on itself before the command runs.
func ulimitScript(cfg config) string {
	var b strings.Builder
	b.WriteString("unset BASH_ENV\n")
	set := func(flag string, v, unit uint64, hardExtra uint64) {
		if v == Unlimited {
			return
		}
		n := v / unit
		if hardExtra > 0 {
			fmt.Fprintf(&b, "ulimit -%s %d && ulimit -S -%s %d || { echo 'bashvisor sandbox: cannot set ulimit -%s' >&2; exit 126; }\n", flag, n+hardExtra, flag, n, flag)
			return
		}
		fmt.Fprintf(&b, "ulimit -%s %d || { echo 'bashvisor sandbox: cannot set ulimit -%s' >&2; exit 126; }\n", flag, n, flag)
	}
	set("c", 0, 1, 0)
	set("t", cfg.CPUSeconds, 1, 5)
	set("f", cfg.FileSize, 1024, 0) // bash counts 1 KiB blocks
	set("n", cfg.OpenFiles, 1, 0)
	set("v", cfg.AddressSpace, 1024, 0) // KiB
	return b.String()
}
