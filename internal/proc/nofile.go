package proc

import (
	"os/exec"
	"sync"

	"golang.org/x/sys/unix"
)

// The open-files limit a command starts with. At start the Go runtime
// raises this process's soft RLIMIT_NOFILE to its hard limit, and its own
// fork (os/exec) gives a child the original soft limit back before it
// execs; the original is kept where no other package can read it. The
// engine's own starts (startRaw) must do the same, or every command would
// run with the raised limit (programs that walk every possible descriptor,
// select() users). So the limit is learnt from a child os/exec started: the
// watchdog's bash when there is one (learnNofile), else a `sleep` started
// once for that (probeNofile), and startRaw's child sets it before it
// execs when this process's soft limit now differs from it.
//
// The limit is learnt once: a later setrlimit of this process's
// RLIMIT_NOFILE (after which os/exec restores nothing) is not followed;
// nothing in the engine makes one.
var nofile struct {
	mu    sync.Mutex
	lim   unix.Rlimit
	known bool
}

// learnNofile records the open-files limit of pid, an unreaped child
// that os/exec started, unless one was recorded already.
func learnNofile(pid int) {
	var lim unix.Rlimit
	if unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &lim) != nil {
		return
	}
	nofile.mu.Lock()
	defer nofile.mu.Unlock()
	if !nofile.known {
		nofile.lim, nofile.known = lim, true
	}
}

// probeNofile starts `sleep` with os/exec to learn the limit os/exec
// gives a child, once (a failed probe is not repeated: commands then
// inherit this process's limit).
var probeNofile = sync.OnceFunc(func() {
	nofile.mu.Lock()
	known := nofile.known
	nofile.mu.Unlock()
	if known {
		return
	}
	cmd := exec.Command("sleep", "60")
	if cmd.Start() != nil {
		return
	}
	learnNofile(cmd.Process.Pid) // unreaped: the pid is still the sleep's
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
})

// childNofile returns the open-files limit a command's child must set
// before it execs, and false when it inherits this process's (the same,
// or none was learnt). It is decided once, at the first start (the
// watchdog, started with the engine, has learnt it by then): nothing in
// the engine changes its own limit, so no start pays a getrlimit.
var childNofile = sync.OnceValues(func() (unix.Rlimit, bool) {
	probeNofile()
	nofile.mu.Lock()
	lim, known := nofile.lim, nofile.known
	nofile.mu.Unlock()
	var cur unix.Rlimit
	if !known || unix.Getrlimit(unix.RLIMIT_NOFILE, &cur) != nil || cur == lim {
		return cur, false
	}
	return lim, true
})
