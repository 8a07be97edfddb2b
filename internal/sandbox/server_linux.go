//go:build linux

package sandbox

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/fd"
)

// A rootless world's command server. Starting each command as a helper
// program (forkInWorld's exec of the engine's binary, or the small
// helper) costs that program's start; instead a rootless world starts
// one server when it is made: the helper program started with
// serverArg, forked into the world's user, network and mount namespaces
// as a command's helper is (startInWorld: the capabilities of worldCaps
// over the world's user namespace only, the engine's child). For each
// command the engine sends it one request on its socket (serverRequest:
// the command's helperConfig, argv, environment and directory, with its
// standard files and the helper's extra descriptors, and a socket for
// the answer, by SCM_RIGHTS), and the server starts the command as
// root's StartDirect does, from a throwaway thread of its own: the
// thread leaves the server's working directory and mount namespace,
// makes the command's view (makeView, after a held layer's overlays),
// tells the engine the namespace, hands the proxy over, drops its
// capabilities, applies Landlock, and forks bash with a raw vfork
// (rawFork) whose child sets the resource limits, installs the seccomp
// filter and execs. The fork has CLONE_PARENT, so the command is the
// engine's child, which waits for it as for any other; the server only
// answers its pid (or why it failed; the engine then reaps the failed
// child). The thread then ends, and with it its confinement.
//
// The server runs nothing of the commands': it execs nothing, and its
// own threads never enter a command's namespace or Landlock domain (the
// runtime makes new threads from a clean one while a thread is locked).
// It is not dumpable (its /proc files belong to root, which the world's
// user namespace does not map, and it cannot be ptraced), and with
// Landlock ABI 6 (Capabilities.Scoping) a command cannot signal it
// (Landlock scoping: it is outside every command's domain). Below ABI 6
// nothing keeps a command from signalling it, as the engine itself and
// every process of the engine's user (same user, no scoping): a command
// that kills it sends the world's later commands to the helper, and
// fails a start in flight (the command forked for it, if any, is killed
// and reaped, see below); one that stops it stalls the starts it was
// asked for, each at most serverAnswerWait (30 s): the engine then kills
// it, and the command takes the helper.
//
// The command it forks sends the engine its pid (pidMark) on the
// request's answer socket first thing after the fork, before anything
// can fail: a server that dies before its answer (the engine reads end
// of file) leaves no command nobody supervises: the engine kills and
// reaps that child and the start fails. A server whose parent is no
// longer the engine (it ended, and the server was reparented) refuses
// the requests still queued.
//
// It ends with its world: when the engine closes the control socket
// (World.Close, or the engine's exit, which closes it too), it reads end
// of file and exits, after the requests it is serving; Close waits for
// it, at most serverWait (10 s), and kills it then. It has no
// parent-death signal: that follows the thread that forked it, which in
// a Go engine may be any thread, ended when a locked goroutine returns.
//
// When the server cannot be started (a helper program of an older
// version, which knows no serverArg), or a request cannot be delivered
// (the server died), the command and every later one of the world take
// the helper (startInWorld), as before; a server that dies after it
// received a request fails that command (the command it may have forked
// is killed and reaped: readAnswer).
// Commands whose start the server does not cover take the helper too:
// standard files that are not files, extra files, a cgroup by clone3 or
// in cgroup v1 hierarchies (rootless engines have neither).

// serverArg is the hidden argv[1] of a rootless world's command server.
const serverArg = "__bashvisor_server"

// worldServer is the engine's side of a world's command server.
type worldServer struct {
	sock   *fd.FD // the engine's end of the control socket
	pid    int    // the server, the engine's child until reaped
	pidfd  *fd.FD
	gone   atomic.Bool // a request could not be delivered: commands take the helper
	reaped sync.Once
}

// serverRequest is one command for the server (JSON, with the
// descriptors: the answer's socket, the standard files of Stdio, then
// Extra more, which cfg's descriptor numbers 3, 4... name).
type serverRequest struct {
	Config helperConfig `json:"config"`
	Argv   []string     `json:"argv"`
	Env    []string     `json:"env"`
	Dir    string       `json:"dir"`  // absolute, in the world's mount namespace
	Ctty   int          `json:"ctty"` // the command's descriptor to make its controlling terminal (-1: none)
	Stdio  [3]bool      `json:"stdio"`
	Extra  int          `json:"extra"`
	answer int          // the server's descriptor of the answer's socket (set on receipt)
}

// serverReply is the server's answer: the command's pid, and why it
// failed (Pid then names a child of the engine's that ended at once, to
// reap; 0: none).
type serverReply struct {
	Pid int    `json:"pid,omitempty"`
	Err string `json:"err,omitempty"`
}

// errNoServer: the world has no command server to start the command.
var errNoServer = errors.New("sandbox: no command server")

// useServer lets rootless worlds start servers and commands by them (the
// tests and benchmarks compare with and without); serverStarts counts
// the commands started so.
var (
	useServer    atomic.Bool
	serverStarts atomic.Int64
)

func init() { useServer.Store(true) }

// serverWait bounds how long the engine waits for a new server to say
// it is ready, and for a closed world's server to end.
const serverWait = 10 * time.Second

// serverAnswerWait bounds how long a command's start waits for the
// world's server to answer (see readAnswer); a variable for the tests.
var serverAnswerWait = 3 * serverWait

// startServer starts the world's command server (see above); without
// one (it failed to start) the world's commands take the helper.
func (w *world) startServer() {
	if !useServer.Load() {
		return
	}
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return
	}
	s := &worldServer{sock: fd.New(sp[0])}
	child := os.NewFile(uintptr(sp[1]), "world-server")
	cmd := exec.Command(w.helper, serverArg, helperProtocol())
	cmd.Dir, cmd.Env = "/", []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	closeInheritedOnExec()
	err = w.startInWorld(cmd, child)
	_ = child.Close()
	if err != nil {
		_ = s.sock.Close()
		return
	}
	s.pid = cmd.Process.Pid
	_ = cmd.Process.Release()
	n, err := unix.PidfdOpen(s.pid, 0) // the engine's unreaped child: the pid is its
	if err == nil {
		s.pidfd = fd.New(n)
		tv := unix.NsecToTimeval(serverWait.Nanoseconds())
		_ = unix.SetsockoptTimeval(s.sock.Int(), unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		var ready [1]byte
		n, err = unix.Read(s.sock.Int(), ready[:])
		for errors.Is(err, unix.EINTR) {
			n, err = unix.Read(s.sock.Int(), ready[:])
		}
		if err == nil && n != 1 {
			err = errors.New("no answer")
		}
	}
	if err != nil {
		s.stop()
		return
	}
	w.mu.Lock()
	if !w.mntns.Valid() { // closed meanwhile (a server started by startLater)
		w.mu.Unlock()
		s.stop()
		return
	}
	w.server = s
	w.mu.Unlock()
}

// serverDelay is how long after a serveSecond world's first command
// started its server starts (see startLater); a variable for the tests.
var serverDelay = 200 * time.Millisecond

// startLater counts a serveSecond world's commands and starts its
// server: serverDelay after the first command started (agents' commands
// come seconds apart: the second then finds it ready), or as the second
// command starts if that is sooner (which waits for a start under way).
// The first command takes the helper. A world of one command that ends
// within serverDelay, such as `bashvisor run -sandbox … -- true`'s, pays
// for neither the server's start nor its stop: as a user other than root
// that run took 2.5–3.4 ms less wall time and 2.7–2.8 ms less CPU with
// the probe's world serving nothing either (docs/measurements.md);
// BenchmarkRootlessWorldFirstCommands (TestWorldServerStartsOnSecondCommand,
// TestWorldServerStartsAfterDelay).
func (w *world) startLater() {
	w.mu.Lock()
	n := w.commands
	w.commands++
	if w.serverAt != serveSecond || w.server != nil || !w.mntns.Valid() || n > 1 {
		w.mu.Unlock()
		return
	}
	if n == 0 {
		w.starting.Add(1) // done by whoever stops the timer, or by its start
		w.serverTimer = time.AfterFunc(serverDelay, w.startInBackground)
		w.mu.Unlock()
		return
	}
	now := w.serverTimer.Stop()
	w.mu.Unlock()
	if now {
		w.starting.Done()
		w.startServer()
		return
	}
	w.starting.Wait() // the timer's start, under way or done
}

// startInBackground is serverTimer's: it starts the server unless the
// world was closed meanwhile (close waits for a start under way).
func (w *world) startInBackground() {
	defer w.starting.Done()
	w.mu.Lock()
	closed := !w.mntns.Valid() || w.server != nil
	w.mu.Unlock()
	if !closed {
		w.startServer()
	}
}

// stop closes the control socket, so that the server ends, and reaps it
// (killing it after serverWait). Once only.
func (s *worldServer) stop() {
	s.reaped.Do(func() {
		_ = s.sock.Close()
		if s.pidfd.Valid() {
			p := []unix.PollFd{{Fd: int32(s.pidfd.Int()), Events: unix.POLLIN}}
			n, err := unix.Poll(p, int(serverWait.Milliseconds()))
			for errors.Is(err, unix.EINTR) {
				n, err = unix.Poll(p, int(serverWait.Milliseconds()))
			}
			if n == 0 {
				_ = unix.PidfdSendSignal(s.pidfd.Int(), unix.SIGKILL, nil, 0)
			}
			_ = s.pidfd.Close()
		} else {
			_ = unix.Kill(s.pid, unix.SIGKILL) // unreaped: still the server
		}
		var ws unix.WaitStatus
		_, err := unix.Wait4(s.pid, &ws, 0, nil)
		for errors.Is(err, unix.EINTR) {
			_, err = unix.Wait4(s.pid, &ws, 0, nil)
		}
	})
}

// servable reports whether the world's server can start cmd.
func (c *Command) servable(cmd *exec.Cmd) bool {
	sys := cmd.SysProcAttr
	return useServer.Load() && len(c.cfg.CgroupDirs) == 0 && filesOnly(cmd) && len(cmd.ExtraFiles) == 0 &&
		(sys == nil || !sys.UseCgroupFD) && len(c.Args) > 4 && c.Args[3] == "--"
}

// startServed starts cmd by the world's server (see above), or returns
// errNoServer.
func (c *Command) startServed(cmd *exec.Cmd) error {
	if !c.servable(cmd) {
		return errNoServer
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	dir := cmd.Dir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join("/", dir) // as the helper's: joining a mount namespace changes to its root
	}
	req := serverRequest{Config: c.cfg, Argv: c.Args[4:], Env: dedupEnv(env), Dir: dir, Ctty: -1}
	if cmd.SysProcAttr != nil && cmd.SysProcAttr.Setctty {
		req.Ctty = cmd.SysProcAttr.Ctty
	}
	var files []*os.File
	for i, v := range []any{cmd.Stdin, cmd.Stdout, cmd.Stderr} {
		if f, ok := v.(*os.File); ok && f != nil {
			req.Stdio[i] = true
			files = append(files, f)
		}
	}
	extra := c.extraFiles()
	req.Extra = len(extra)
	c.world.startLater()
	pid, err := c.world.serve(&req, append(files, extra...))
	if err != nil {
		return err
	}
	p, err := os.FindProcess(pid) // the engine's child, unreaped
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	cmd.Process = p
	serverStarts.Add(1)
	return nil
}

// serve sends req with files to the world's server and returns the pid
// of the command it started: errNoServer when there is no server or the
// request could not be delivered.
func (w *world) serve(req *serverRequest, files []*os.File) (int, error) {
	enc, err := json.Marshal(req)
	if err != nil {
		return 0, fmt.Errorf("sandbox: %w", err)
	}
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("sandbox: %w", err)
	}
	answer := fd.New(sp[0])
	defer answer.Close()
	fds := []int{sp[1]}
	for _, f := range files {
		fds = append(fds, int(f.Fd()))
	}
	w.mu.Lock()
	s := w.server
	if s == nil || s.gone.Load() {
		w.mu.Unlock()
		_ = unix.Close(sp[1])
		return 0, errNoServer
	}
	err = unix.Sendmsg(s.sock.Int(), enc, unix.UnixRights(fds...), nil, unix.MSG_NOSIGNAL)
	w.mu.Unlock()
	_ = unix.Close(sp[1])
	runtime.KeepAlive(files)
	if err != nil {
		if !errors.Is(err, unix.EMSGSIZE) { // a large environment: this command only
			s.gone.Store(true)
		}
		return 0, fmt.Errorf("%w: %w", errNoServer, err)
	}
	return readAnswer(s, answer)
}

// readAnswer reads the server's answer to one request: first the pid
// message of the command's child (pidMark, sent by the child itself
// right after the fork, so also when the server dies before it answers),
// then the server's serverReply. When the server ended before its reply,
// the child it forked is killed and reaped (the engine's unreaped child:
// its pid is still its own) and the start fails. A server that does not
// answer within serverAnswerWait (stopped, or starved) is given up and
// killed (it holds the standard files of the requests it received, the
// commands' output pipes among them), and the answer's socket is shut
// for reading, so that a child it forked but that has not told its pid
// yet cannot, and exits rather than exec; a child that told it is
// killed and the start fails, else the command takes the helper
// (errNoServer), as every later one of the world.
func readAnswer(s *worldServer, answer *fd.FD) (int, error) {
	tv := unix.NsecToTimeval(serverAnswerWait.Nanoseconds())
	_ = unix.SetsockoptTimeval(answer.Int(), unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	buf := make([]byte, 64<<10)
	child, late := 0, false
	for {
		flags := 0
		if late {
			flags = unix.MSG_DONTWAIT
		}
		n, _, err := unix.Recvfrom(answer.Int(), buf, flags)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) && !late {
			s.gone.Store(true)
			if s.pidfd.Valid() { // it holds the descriptors of the requests it queued: the commands' pipes
				_ = unix.PidfdSendSignal(s.pidfd.Int(), unix.SIGKILL, nil, 0)
			}
			_ = unix.Shutdown(answer.Int(), unix.SHUT_RD) // later sends fail; what came is still read
			late = true
			continue
		}
		if err != nil || n == 0 {
			s.gone.Store(true)
			switch {
			case child > 0:
				killChild(child)
				return 0, fmt.Errorf("sandbox: the world's command server ended or stalled before it answered (%v); the command it forked, pid %d, was killed", err, child)
			case late:
				return 0, fmt.Errorf("%w: the world's command server did not answer in %v", errNoServer, serverAnswerWait)
			}
			return 0, fmt.Errorf("sandbox: the world's command server ended before it answered (%v)", err)
		}
		if n == 5 && buf[0] == pidMark && child == 0 {
			child = int(binary.LittleEndian.Uint32(buf[1:5]))
			continue
		}
		var r serverReply
		if err := json.Unmarshal(buf[:n], &r); err != nil {
			killChild(child)
			return 0, fmt.Errorf("sandbox: the world's command server's answer: %w", err)
		}
		if r.Err != "" || r.Pid <= 0 {
			if r.Pid > 0 {
				child = r.Pid
			}
			killChild(child) // ended at once (exit 127), unless the server misbehaved
			return 0, fmt.Errorf("sandbox: %s", r.Err)
		}
		return r.Pid, nil
	}
}

// killChild kills and reaps pid (when > 0), the engine's child that a
// request to its world's server forked, for a start that failed.
func killChild(pid int) {
	if pid <= 0 {
		return
	}
	_ = unix.Kill(pid, unix.SIGKILL) // unreaped: still that child
	var ws unix.WaitStatus
	_, err := unix.Wait4(pid, &ws, 0, nil)
	for errors.Is(err, unix.EINTR) {
		_, err = unix.Wait4(pid, &ws, 0, nil)
	}
}

// serverParent is the server's parent, the engine, when it started: a
// request is refused once the server's parent is another (the engine
// ended and the server was reparented), as CLONE_PARENT would make the
// command that process's child, which supervises nothing.
var serverParent int

// serverMain is the server (the helper program started with serverArg,
// fd 3 its control socket): it serves requests until end of file.
func serverMain(args []string) error {
	if len(args) != 1 || args[0] != helperProtocol() {
		return errors.New("the helper program is from another version of bashvisor (its helper protocol differs)")
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE): %w", err)
	}
	closeInheritedOnExec()
	serverParent = unix.Getppid()
	if err := unix.Sendmsg(3, []byte{1}, nil, nil, unix.MSG_NOSIGNAL); err != nil {
		return fmt.Errorf("ready: %w", err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	buf := make([]byte, 1<<20)
	oob := make([]byte, unix.CmsgSpace(4*(4+maxExtra)))
	for {
		n, oobn, flags, _, err := unix.Recvmsg(3, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("receive a request: %w", err)
		}
		var fds []int
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, m := range msgs {
				got, _ := unix.ParseUnixRights(&m)
				fds = append(fds, got...)
			}
		}
		if n == 0 && len(fds) == 0 {
			return nil // end of file: the world was closed, or the engine ended
		}
		var req serverRequest
		if len(fds) == 0 || flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 || json.Unmarshal(buf[:n], &req) != nil {
			for _, f := range fds {
				_ = unix.Close(f)
			}
			continue // nobody to answer: the engine's read ends with the descriptors
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			serveOne(&req, fds)
		}()
	}
}

// serveOne starts one request's command and answers on fds[0].
func serveOne(req *serverRequest, fds []int) {
	answer := fd.New(fds[0])
	defer answer.Close()
	req.answer = answer.Int()
	pid, err := startRequested(req, fds[1:])
	r := serverReply{Pid: pid}
	if err != nil {
		r.Err = err.Error()
	}
	enc, _ := json.Marshal(r)
	_ = unix.Sendmsg(answer.Int(), enc, nil, nil, unix.MSG_NOSIGNAL)
}

// startRequested checks a request's descriptors, names them in its
// config, and starts its command from a throwaway thread. Each extra
// descriptor is closed by the step that uses it (layer.Spec.Open,
// reportNamespace, handOverProxy), or here when that step did not run.
func startRequested(req *serverRequest, fds []int) (int, error) {
	extra := fds
	var stdio [3]*os.File
	for i, ok := range req.Stdio {
		if ok && len(extra) > 0 {
			stdio[i] = os.NewFile(uintptr(extra[0]), "stdio")
			defer stdio[i].Close()
			extra = extra[1:]
		}
	}
	owned := map[int]bool{}
	for _, n := range extra {
		owned[n] = true
	}
	defer func() {
		for n := range owned {
			_ = unix.Close(n)
		}
	}()
	if len(extra) != req.Extra || len(fds) != len(extra)+countTrue(req.Stdio[:]) {
		return 0, errors.New("bad request: its descriptors")
	}
	cfg := req.Config
	at := func(n *int) bool { // the helper's descriptor n is extra[n-3]
		if *n == 0 {
			return true
		}
		if *n < 3 || *n-3 >= len(extra) {
			return false
		}
		*n = extra[*n-3]
		return true
	}
	ok := at(&cfg.ProxyFD) && at(&cfg.NamespaceFD)
	if cfg.Layer != nil {
		l := *cfg.Layer
		ok = ok && at(&l.Hand)
		cfg.Layer = &l
	}
	if !ok {
		return 0, errors.New("bad request: a descriptor it names")
	}
	var pid int
	err := onThrowawayThread(func() (err error) {
		pid, err = startOnThread(&cfg, req, stdio, owned)
		return err
	})
	return pid, err
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// startOnThread is the thread's part of startRequested: what the helper
// does (helper_linux.go's helper) up to its exec, then rawFork with
// CLONE_PARENT.
func startOnThread(cfg *helperConfig, req *serverRequest, stdio [3]*os.File, owned map[int]bool) (int, error) {
	if cfg.World == nil || !cfg.World.Rootless || len(cfg.CgroupDirs) > 0 || len(req.Argv) == 0 ||
		!filepath.IsAbs(req.Argv[0]) || !filepath.IsAbs(req.Dir) {
		return 0, errors.New("bad request")
	}
	lim := config.SandboxLimits{CPUSeconds: cfg.CPUSeconds, FileSize: cfg.FileSize, OpenFiles: cfg.OpenFiles, AddressSpace: cfg.AddressSpace}.WithDefaults()
	cfg.CPUSeconds, cfg.FileSize, cfg.OpenFiles, cfg.AddressSpace = lim.CPUSeconds, lim.FileSize, lim.OpenFiles, lim.AddressSpace
	// The thread's own working directory (the server's other threads
	// keep theirs), the command's before the view is made, as the
	// helper's is.
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return 0, fmt.Errorf("unshare(CLONE_FS): %w", err)
	}
	if err := unix.Chdir(req.Dir); err != nil {
		return 0, fmt.Errorf("working directory: %w", err)
	}
	if cfg.Layer != nil {
		delete(owned, cfg.Layer.Hand)
		m, err := cfg.Layer.Open()
		if err != nil {
			return 0, fmt.Errorf("copy-on-write layer: %w", err)
		}
		cfg.mounts = m
		defer m.Close() // attached by then, or not to be
	}
	if err := makeView(cfg); err != nil {
		return 0, err
	}
	if cfg.NamespaceFD != 0 {
		delete(owned, cfg.NamespaceFD)
		if err := reportNamespace(cfg.NamespaceFD); err != nil {
			return 0, err
		}
	}
	if err := unix.Chdir(req.Dir); err != nil {
		return 0, fmt.Errorf("working directory: %w", err)
	}
	env := req.Env
	if cfg.ProxyFD != 0 {
		delete(owned, cfg.ProxyFD)
		port, err := handOverProxy(cfg)
		if err != nil {
			return 0, err
		}
		cfg.ProxyPort = port
		if cfg.ProxyEnv {
			env = withEnv(env, proxyEnv(port, cfg.LoopbackDirect))
		}
	}
	return forkServed(cfg, req, env, stdio)
}

// forkServed confines the thread and forks the command from it (see
// startOnThread).
func forkServed(cfg *helperConfig, req *serverRequest, env []string, stdio [3]*os.File) (int, error) {
	if err := dropCapabilities(); err != nil {
		return 0, err
	}
	if err := applyLandlock(*cfg); err != nil {
		return 0, err
	}
	filter, err := seccompFilter(cfg.filter())
	if err != nil {
		return 0, err
	}
	lims := rlimitsOf(*cfg)
	if as := cfg.AddressSpace; as != config.Unlimited {
		lims = append(lims, rlimit{"RLIMIT_AS", unix.RLIMIT_AS, as, as})
	}
	cmd := &exec.Cmd{Path: req.Argv[0], Args: req.Argv, Env: env, Dir: req.Dir,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Setctty: req.Ctty >= 0, Ctty: req.Ctty}}
	for i, f := range stdio {
		if f == nil {
			continue
		}
		switch i {
		case 0:
			cmd.Stdin = f
		case 1:
			cmd.Stdout = f
		case 2:
			cmd.Stderr = f
		}
	}
	if unix.Getppid() != serverParent {
		return 0, errors.New("the engine ended")
	}
	return rawFork(cmd, rawOpts{join: [3]int{-1, -1, -1}, filter: filter, parent: true, rlimits: lims, pidTo: req.answer})
}
