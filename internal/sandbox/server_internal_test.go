//go:build linux

package sandbox

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// serverWorld makes a rootless world (so as root too, where user
// namespaces allow) and returns it with a descriptor of its server
// process (a pidfd the test owns: it names the server however late it is
// used).
func serverWorld(t *testing.T) (*World, *fd.FD) {
	t.Helper()
	c := Probe()
	testenv.Needf(t, testenv.Namespaces, c.Namespaces, "no private namespaces: %s", c)
	testenv.NeedsTool(t, "bash")
	w, err := newWorld(WorldOptions{Dir: filepath.Join(t.TempDir(), "world")}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	s := w.w.server
	if s == nil {
		t.Fatal("a rootless world has no command server")
	}
	n, err := unix.FcntlInt(uintptr(s.pidfd.Int()), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	pidfd := fd.New(n)
	t.Cleanup(func() { _ = pidfd.Close() })
	return w, pidfd
}

// runInWorld runs script in w by StartHelper (the launcher of every
// rootless command) and returns its output and error (safe from any
// goroutine: it reports failures to prepare it as errors too).
func runInWorld(t *testing.T, w *World, script string) (string, error) {
	return runInWorldDir(t, w, t.TempDir(), script)
}

// runInWorldDir is runInWorld in dir (writable by the command).
func runInWorldDir(t *testing.T, w *World, dir, script string) (string, error) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		return "", err
	}
	sc, err := Prepare(Options{Bash: bash, Command: script, World: w, Dir: dir})
	if err != nil {
		return "", err
	}
	defer sc.Cleanup(true)
	r, wr, err := os.Pipe()
	if err != nil {
		return "", err
	}
	defer r.Close()
	cmd := exec.Command(sc.Path)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, wr, wr
	cmd.Env = append(os.Environ(), sc.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = sc.StartHelper(cmd)
	wr.Close()
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	_, _ = out.ReadFrom(r)
	return out.String(), cmd.Wait()
}

// exited reports whether the process of pidfd ended (within wait).
func exited(pidfd *fd.FD, wait time.Duration) bool {
	p := []unix.PollFd{{Fd: int32(pidfd.Int()), Events: unix.POLLIN}}
	n, _ := unix.Poll(p, int(wait.Milliseconds()))
	return n == 1
}

// TestWorldServerStartsCommands: a rootless world's commands are
// started by its server (serverStarts), as children of the engine (their
// $PPID), confined as the helper confines them (no capabilities, no new
// privileges, a seccomp filter, the read-only view) and with their
// exit status; a command whose program cannot be executed fails to
// start with the exec's error.
func TestWorldServerStartsCommands(t *testing.T) {
	w, _ := serverWorld(t)
	before := serverStarts.Load()
	out, err := runInWorld(t, w, `echo ppid=$PPID; grep -E '^(CapEff|CapPrm|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status; `+
		`touch /etc/bashvisor-server-probe 2>/dev/null && echo wrote; echo x >/tmp/f && cat /tmp/f; exit 3`)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("exit: %v, want status 3 (output %q)", err, out)
	}
	if got := serverStarts.Load() - before; got != 1 {
		t.Fatalf("the server started %d commands, want 1", got)
	}
	caps := "0000000000000000"
	if os.Geteuid() == 0 {
		caps = "0000000000000006" // root's commands keep CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (keptCapabilities)
	}
	want := []string{"ppid=" + strconv.Itoa(os.Getpid()), "CapEff:\t" + caps, "CapPrm:\t" + caps,
		"CapAmb:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2", "x"}
	for _, line := range want {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("output lacks %q:\n%s", line, out)
		}
	}
	if strings.Contains(out, "wrote") {
		t.Errorf("the command wrote /etc:\n%s", out)
	}
	sc, err := Prepare(Options{Bash: "/nonexistent/bash", Command: "true", World: w, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Cleanup(true)
	cmd := exec.Command(sc.Path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := sc.StartHelper(cmd); err == nil || !strings.Contains(err.Error(), "exec") {
		if err == nil {
			_ = cmd.Wait()
		}
		t.Fatalf("StartHelper of a missing program: %v, want the exec's error", err)
	}
}

// TestWorldServerOutOfReach: a command cannot signal its world's server
// nor read its environment (it is not dumpable, and outside the
// command's Landlock domain) nor, but as root (whose commands keep
// CAP_DAC_READ_SEARCH), list its descriptors; and the server holds no
// descriptor of the command's (pipe, socket, namespace) after it
// started it.
func TestWorldServerOutOfReach(t *testing.T) {
	w, pidfd := serverWorld(t)
	pid := strconv.Itoa(w.w.server.pid)
	script := `kill -9 ` + pid + ` 2>/dev/null && echo killed; kill -0 ` + pid + ` 2>/dev/null && echo signalled; ` +
		`cat /proc/` + pid + `/environ >/dev/null 2>&1 && echo environ; `
	if os.Geteuid() != 0 {
		script += `ls /proc/` + pid + `/fd >/dev/null 2>&1 && echo fds; `
	}
	out, err := runInWorld(t, w, script+`echo done`)
	if err != nil || out != "done\n" {
		t.Fatalf("the command reached the server: %q, %v", out, err)
	}
	if exited(pidfd, 0) {
		t.Fatal("the server ended")
	}
	// The server's descriptors: no pipe, socket or namespace but its
	// control socket, once the command started (as root: the server is
	// not dumpable, so its /proc files belong to root).
	ents, err := os.ReadDir("/proc/" + pid + "/fd")
	if os.Geteuid() != 0 {
		// Not even the engine's user lists them; that the server holds
		// no end of the command's output pipe shows in runInWorld,
		// which reads it to its end.
		if !errors.Is(err, unix.EACCES) {
			t.Fatalf("the engine's user lists the server's descriptors: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		l, _ := os.Readlink("/proc/" + pid + "/fd/" + e.Name())
		if e.Name() != "3" && (strings.HasPrefix(l, "pipe:") || strings.HasPrefix(l, "socket:") || strings.HasPrefix(l, "mnt:")) {
			t.Errorf("the server holds descriptor %s -> %s", e.Name(), l)
		}
	}
}

// TestWorldServerCrashFallsBack: after its server died, a world's
// commands take the helper (startInWorld) and run.
func TestWorldServerCrashFallsBack(t *testing.T) {
	w, pidfd := serverWorld(t)
	if err := unix.PidfdSendSignal(pidfd.Int(), unix.SIGKILL, nil, 0); err != nil {
		t.Fatal(err)
	}
	if !exited(pidfd, 30*time.Second) {
		t.Fatal("the server did not end")
	}
	before := serverStarts.Load()
	out, err := runInWorld(t, w, `echo ppid=$PPID`)
	if err != nil || out != "ppid="+strconv.Itoa(os.Getpid())+"\n" {
		t.Fatalf("after the server died: %q, %v", out, err)
	}
	if serverStarts.Load() != before || !w.w.server.gone.Load() {
		t.Fatal("the command was not started by the helper")
	}
	out, err = runInWorld(t, w, `echo again`)
	if err != nil || out != "again\n" {
		t.Fatalf("a second command: %q, %v", out, err)
	}
}

// TestWorldServerEndsWithWorld: closing a world ends its server.
func TestWorldServerEndsWithWorld(t *testing.T) {
	w, pidfd := serverWorld(t)
	if exited(pidfd, 0) {
		t.Fatal("the server ended before its world")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !exited(pidfd, 0) { // Close reaped it
		t.Fatal("the server outlived its world")
	}
}

// TestWorldServerConcurrent: commands started at once in one world are
// all started by its server, each with its own output and status.
func TestWorldServerConcurrent(t *testing.T) {
	w, _ := serverWorld(t)
	before := serverStarts.Load()
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() {
			out, err := runInWorld(t, w, `echo `+strconv.Itoa(i)+`; exit `+strconv.Itoa(i))
			if want := strconv.Itoa(i) + "\n"; out != want {
				errs <- errors.New("output " + strconv.Quote(out) + ", want " + strconv.Quote(want))
				return
			}
			var ee *exec.ExitError
			if i == 0 && err != nil || i > 0 && (!errors.As(err, &ee) || ee.ExitCode() != i) {
				errs <- errors.New("command " + strconv.Itoa(i) + ": " + errString(err))
				return
			}
			errs <- nil
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if got := serverStarts.Load() - before; got != n {
		t.Errorf("the server started %d commands, want %d", got, n)
	}
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// TestWorldServerLargeEnvironment: a command whose request is too large
// for the server's socket (a 300 KB environment) takes the helper, and
// the server stays in use for the next one.
func TestWorldServerLargeEnvironment(t *testing.T) {
	w, _ := serverWorld(t)
	for _, v := range []string{"A", "B", "C"} { // each below the kernel's 128 KiB per string
		t.Setenv("BASHVISOR_LARGE_"+v, strings.Repeat("x", 100<<10))
	}
	before := serverStarts.Load()
	out, err := runInWorld(t, w, `echo $((${#BASHVISOR_LARGE_A}+${#BASHVISOR_LARGE_B}+${#BASHVISOR_LARGE_C}))`)
	if err != nil || out != strconv.Itoa(300<<10)+"\n" {
		t.Fatalf("%q, %v", out, err)
	}
	if serverStarts.Load() != before || w.w.server.gone.Load() {
		t.Fatalf("started by the server: %v, server gone: %v", serverStarts.Load() != before, w.w.server.gone.Load())
	}
	for _, v := range []string{"A", "B", "C"} {
		os.Unsetenv("BASHVISOR_LARGE_" + v)
	}
	if out, err := runInWorld(t, w, `echo small`); err != nil || out != "small\n" || serverStarts.Load() != before+1 {
		t.Fatalf("the next command: %q, %v, by the server: %v", out, err, serverStarts.Load() == before+1)
	}
}

// TestWorldServerDiesMidRequest: a server killed while it starts a
// command (0 to 10 ms after the request, 40 times, each time a new
// server of the same world) leaves no command behind: the start either succeeds (the test then
// ends the command) or fails, and then the command it may have forked
// was killed and reaped by the engine (no child of the test's runs
// it). Before the forked child told the engine its pid, about one try
// in five left it running, unsupervised and unreaped.
func TestWorldServerDiesMidRequest(t *testing.T) {
	testenv.NeedsTool(t, "bash")
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	w, pidfd := serverWorld(t)
	failed, forked := 0, 0
	for i := range 40 {
		if i > 0 {
			pidfd = restartServer(t, w)
		}
		marker := "91." + strconv.Itoa(os.Getpid()) + strconv.Itoa(i)
		sc, err := Prepare(Options{Bash: bash, Command: "exec sleep " + marker, World: w, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(sc.Path)
		cmd.Env = append(os.Environ(), sc.Env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		delay := time.Duration(rand.Int64N(int64(10 * time.Millisecond)))
		killed := make(chan error, 1)
		go func() {
			time.Sleep(delay)
			killed <- unix.PidfdSendSignal(pidfd.Int(), unix.SIGKILL, nil, 0)
		}()
		err = sc.StartHelper(cmd)
		if kerr := <-killed; kerr != nil {
			t.Fatal(kerr)
		}
		if err == nil {
			// Started (by the server, or by the helper after it died):
			// the test's unreaped child, so its pid is still its own.
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		} else {
			failed++
			if strings.Contains(err.Error(), "was killed") {
				forked++
			}
		}
		sc.Cleanup(true)
		if left := childrenRunning(t, marker); len(left) > 0 {
			t.Errorf("try %d (kill after %v, start: %v): the command was left running as pid %v", i, delay, err, left)
		}
	}
	t.Logf("%d of 40 starts failed, %d of them after the command was forked", failed, forked)
}

// restartServer ends w's server and starts a new one, and returns a
// descriptor of it (as serverWorld's).
func restartServer(t *testing.T, w *World) *fd.FD {
	t.Helper()
	w.w.mu.Lock()
	old := w.w.server
	w.w.server = nil
	w.w.mu.Unlock()
	old.stop()
	w.w.startServer()
	s := w.w.server
	if s == nil {
		t.Fatal("no new command server")
	}
	n, err := unix.FcntlInt(uintptr(s.pidfd.Int()), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	pidfd := fd.New(n)
	t.Cleanup(func() { _ = pidfd.Close() })
	return pidfd
}

// childrenRunning returns the test process's children whose command
// line holds marker, after killing and reaping them (they are its
// unreaped children, so their pids are theirs).
func childrenRunning(t *testing.T, marker string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var left []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		status, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil || !strings.Contains(string(status), "\nPPid:\t"+strconv.Itoa(os.Getpid())+"\n") {
			continue
		}
		line, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(line, []byte(marker)) {
			continue
		}
		left = append(left, pid)
		_ = unix.Kill(pid, unix.SIGKILL)
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, 0, nil)
	}
	return left
}

// TestWorldServerStalled: a stopped server does not hold a command's
// start beyond serverAnswerWait: the engine kills it (it held the
// command's output pipe), and the command takes the helper and runs.
func TestWorldServerStalled(t *testing.T) {
	w, pidfd := serverWorld(t)
	defer func(d time.Duration) { serverAnswerWait = d }(serverAnswerWait)
	serverAnswerWait = 2 * time.Second
	if err := unix.PidfdSendSignal(pidfd.Int(), unix.SIGSTOP, nil, 0); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	before := serverStarts.Load()
	got, err := runInWorld(t, w, `echo started`)
	took := time.Since(begin)
	if err != nil || got != "started\n" {
		t.Fatalf("with a stopped server: %q, %v", got, err)
	}
	if took > time.Minute || serverStarts.Load() != before || !w.w.server.gone.Load() {
		t.Fatalf("took %v, by the server: %v, server given up: %v", took, serverStarts.Load() != before, w.w.server.gone.Load())
	}
	if !exited(pidfd, 30*time.Second) {
		t.Fatal("the stalled server was not killed")
	}
	t.Logf("the start took %v with a stopped server (bound %v)", took, serverAnswerWait)
}

// TestWorldServerStartsOnSecondCommand: a conversation's rootless world
// (NewWorld: serveSecond) whose second command comes before serverDelay
// starts its server then, and the server starts that command and every
// later one; its first command takes the helper and runs as well. The
// probe's world (serveNever) starts none at all.
func TestWorldServerStartsOnSecondCommand(t *testing.T) {
	c := Probe()
	testenv.Needf(t, testenv.Namespaces, c.Namespaces, "no private namespaces: %s", c)
	testenv.NeedsTool(t, "bash")
	defer func(d time.Duration) { serverDelay = d }(serverDelay)
	serverDelay = time.Hour // the second command always comes first
	for _, at := range []serverStart{serveSecond, serveNever} {
		w, err := makeWorld(WorldOptions{Dir: filepath.Join(t.TempDir(), "world")}, true, at)
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []int64{0, 1, 1} {
			if at == serveNever {
				want = 0
			}
			before := serverStarts.Load()
			out, err := runInWorld(t, w, "echo ran")
			if err != nil || out != "ran\n" {
				t.Fatalf("world %d, command %d: %q, %v", at, i+1, out, err)
			}
			if got := serverStarts.Load() - before; got != want {
				t.Errorf("world %d, command %d: the server started %d commands, want %d", at, i+1, got, want)
			}
			w.w.mu.Lock()
			has := w.w.server != nil
			w.w.mu.Unlock()
			if has != (at == serveSecond && i > 0) {
				t.Errorf("world %d, after command %d: server %v", at, i+1, has)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWorldServerStartsAfterDelay: a serveSecond world starts its server
// serverDelay after its first command started, without a second one,
// which the server then starts; a world closed before that starts none
// and leaves no start behind (Close waits for one under way).
func TestWorldServerStartsAfterDelay(t *testing.T) {
	c := Probe()
	testenv.Needf(t, testenv.Namespaces, c.Namespaces, "no private namespaces: %s", c)
	testenv.NeedsTool(t, "bash")
	defer func(d time.Duration) { serverDelay = d }(serverDelay)
	serverDelay = 50 * time.Millisecond
	w, err := makeWorld(WorldOptions{Dir: filepath.Join(t.TempDir(), "world")}, true, serveSecond)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if out, err := runInWorld(t, w, "echo ran"); err != nil || out != "ran\n" {
		t.Fatalf("first command: %q, %v", out, err)
	}
	hasServer := func() bool {
		w.w.mu.Lock()
		defer w.w.mu.Unlock()
		return w.w.server != nil
	}
	testenv.Eventually(t, 30*time.Second, hasServer, "no server %v after the first command", serverDelay)
	before := serverStarts.Load()
	if out, err := runInWorld(t, w, "echo ran"); err != nil || out != "ran\n" {
		t.Fatalf("second command: %q, %v", out, err)
	}
	if got := serverStarts.Load() - before; got != 1 {
		t.Errorf("the server started %d commands, want 1", got)
	}
	serverDelay = time.Hour
	closed, err := makeWorld(WorldOptions{Dir: filepath.Join(t.TempDir(), "closed")}, true, serveSecond)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := runInWorld(t, closed, "echo ran"); err != nil || out != "ran\n" {
		t.Fatalf("first command: %q, %v", out, err)
	}
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	if closed.w.server != nil || closed.w.serverTimer.Stop() {
		t.Errorf("a closed world's server timer is still armed, or it has a server")
	}
}
