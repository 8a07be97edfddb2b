package proc

import (
	"os/exec"
	"path/filepath"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A command starts with SIGINT and SIGQUIT at their default actions, even
// when the program that runs the engine ignores them. A program started in
// the background of a script or under nohup has SIGINT (and maybe SIGQUIT)
// ignored; execve keeps an ignored signal ignored, and a non-interactive
// bash cannot undo it ("signals ignored upon entry to the shell cannot be
// trapped or reset"), so ^C on a job's terminal, or `kill -INT`, would do
// nothing to any command. Go resets the signals it handles to their
// defaults in the child before execve, so only ignored ones are inherited:
// SIGINT when the program started with it ignored (Go keeps that), or
// either after [os/signal.Ignore].
//
// The engine never changes the program's own dispositions (catching the
// signals to have them reset at exec would change what the program and
// everything else it starts get). Instead, when the program ignores one of
// them at the moment a command starts (two rt_sigaction(2) reads tell),
// an unrestricted command starts through `env --default-signal=INT,QUIT`
// (GNU coreutils 8.31 or later), one more exec of a small program; a
// sandbox helper resets them itself before it execs bash
// ([ResetSignalsForExec]), and a sandboxed command forked without os/exec
// has them reset by its forking child before the exec (package sandbox's
// forkRaw), so no other program runs in its namespaces before it is
// placed in its cgroups and limited; so has an unrestricted command
// started by the engine's own vfork (amd64, arm64: cgroup_vfork.go), with
// no env. Where no such env is found, an
// unrestricted command starts as before, with the signals ignored.

// sigaction is the kernel's struct sigaction (handler, flags, restorer,
// mask) on the 64-bit platforms: only the handler is read or set.
type sigaction struct {
	handler, flags, restorer, mask uint64
}

const sigIgn = 1 // SIG_IGN; SIG_DFL is 0

// signalsToDefault are the signals a command gets at their defaults.
var signalsToDefault = []unix.Signal{unix.SIGINT, unix.SIGQUIT}

// IgnoresSignals reports whether this process ignores SIGINT or SIGQUIT
// now: a command it starts then needs them set to their defaults before
// it execs ([DefaultSignals], [ResetSignalsForExec], or a raw fork's
// child resetting them itself).
func IgnoresSignals() bool {
	for _, sig := range signalsToDefault {
		var old sigaction
		_, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), 0, uintptr(unsafe.Pointer(&old)), 8, 0, 0)
		if e == 0 && old.handler == sigIgn {
			return true
		}
	}
	return false
}

var (
	envOnce sync.Once
	envPath string
)

// resetter returns the path of an env(1) that knows --default-signal, or
// "" if there is none.
func resetter() string {
	envOnce.Do(func() {
		for _, p := range []string{"/usr/bin/env", "/bin/env"} {
			// An env without the option fails (status 125); one with
			// it prints its version: ask once.
			if exec.Command(p, "--default-signal=INT", "--version").Run() == nil {
				envPath = p
				return
			}
		}
	})
	return envPath
}

// DefaultSignals rewrites cmd, which is about to start, so that the
// program starts with SIGINT and SIGQUIT at their defaults when this
// process ignores either now (see the comment at the top of this file);
// otherwise, or when no suitable env(1) exists, it leaves cmd alone. The
// program's argv[0] becomes cmd.Path; for `bash -c SCRIPT` (three
// arguments) Args[0] stays bash's $0, and so the name in its error
// messages, by being passed after the script.
func DefaultSignals(cmd *exec.Cmd) {
	if !IgnoresSignals() {
		return
	}
	env := resetter()
	if env == "" {
		return
	}
	args := append([]string{"env", "--default-signal=INT,QUIT", "--", cmd.Path}, cmd.Args[1:]...)
	if len(cmd.Args) == 3 && cmd.Args[1] == "-c" && filepath.Base(cmd.Path) == "bash" && cmd.Args[0] != cmd.Path {
		args = append(args, cmd.Args[0])
	}
	cmd.Path, cmd.Args = env, args
}

// ResetSignalsForExec sets SIGINT and SIGQUIT to their default actions in
// this process, which must be about to call execve (a sandbox helper): a
// Go program keeps its own handlers, which execve resets anyway, and an
// ignored signal is set to the default.
func ResetSignalsForExec() {
	for _, sig := range signalsToDefault {
		var old sigaction
		_, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), 0, uintptr(unsafe.Pointer(&old)), 8, 0, 0)
		if e == 0 && old.handler == sigIgn {
			var dfl sigaction
			unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
		}
	}
}
