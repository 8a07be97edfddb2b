//go:build linux

package sandbox

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A rootless world's network namespace belongs to the world's user
// namespace, which no thread of the engine can join (setns of a user
// namespace needs a single-threaded process). World.Dial then asks the
// world's connector: the helper program, started in the world's
// namespaces with connectArg (as commands are: rawStart), which connects
// to 127.0.0.1:PORT there for each request on a SOCK_SEQPACKET socket
// (the port, 2 bytes big endian) and answers with the errno of its
// connect (4 bytes, host order) and, when 0, the connected socket
// (SCM_RIGHTS); port 0 asks for a sock_diag socket made there instead
// (see diagSocket), which the engine keeps for World.Listening. It runs
// without confinement (it is the engine's own
// code and does nothing else), one per world, started on the world's
// first Dial and ended when the world closes (its socket's end; it also
// exits when the engine dies, on the same EOF).
const connectArg = "__bashvisor_connect"

// errConnector: the connector did not answer (it died, or the socket
// failed); another may be started.
var errConnector = errors.New("the world's connector did not answer")

// connectTimeout bounds one connect of the connector (SO_SNDTIMEO): a
// listener whose backlog is full leaves the SYN unanswered.
const connectTimeout = 10 * time.Second

// connectMain is the connector's loop on descriptor 3; it returns the
// exit status.
func connectMain() int {
	const sock = 3
	dropPrivileges()
	req := make([]byte, 2)
	for {
		n, _, _, _, err := unix.Recvmsg(sock, req, nil, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n != 2 {
			return 0 // the engine closed its end
		}
		var fd int
		var errno syscall.Errno
		if port := int(binary.BigEndian.Uint16(req)); port == 0 {
			if fd, err = diagSocket(); err != nil {
				fd, errno = -1, errnoOf(err)
			}
		} else {
			fd, errno = connectLoopback(port)
		}
		resp := binary.NativeEndian.AppendUint32(nil, uint32(errno))
		var oob []byte
		if fd >= 0 {
			oob = unix.UnixRights(fd)
		}
		err = unix.Sendmsg(sock, resp, oob, nil, 0)
		if fd >= 0 {
			unix.Close(fd)
		}
		if err != nil {
			return 0
		}
	}
}

// dropPrivileges makes the connector non-dumpable (a process of the
// world without CAP_SYS_PTRACE over it can neither trace it nor read its
// memory) and gives up the capabilities rawStart gave it (making and
// connecting sockets needs none): on the calling thread, which the
// connector's goroutine keeps (it is locked to it), and on every other
// thread where the runtime can change them all (not with cgo: those
// threads then keep them, running only the runtime).
func dropPrivileges() {
	runtime.LockOSThread()
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	_ = unix.Capset(&hdr, &data[0])
	_, _, _ = syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
}

// connectLoopback connects a TCP socket to 127.0.0.1:port of the calling
// process's network namespace.
func connectLoopback(port int) (int, syscall.Errno) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, errnoOf(err)
	}
	tv := unix.NsecToTimeval(connectTimeout.Nanoseconds())
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	for {
		err = unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return -1, errnoOf(err)
	}
	return fd, 0
}

func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EIO
}

// connector is what the engine keeps of a world's network, by world
// (connectors): its sock_diag socket, made on first use and kept (see
// World.Listening), and, rootless, its running connector helper, if any.
type connector struct {
	mu   sync.Mutex    // one request, or one sock_diag dump, at a time; guards the rest
	conn *net.UnixConn // the helper's socket; nil: none runs
	proc *os.Process
	done chan struct{} // closed once the helper was waited for
	diag int           // -1: not made yet
}

// connectors holds the worlds' entries.
var connectors = struct {
	sync.Mutex
	m map[*world]*connector
}{m: map[*world]*connector{}}

// entry returns w's entry, made if needed; none for a closed world
// (stopConnector removes an entry once the world's descriptors are
// closed, so none is left behind).
func (w *world) entry() (*connector, error) {
	connectors.Lock()
	defer connectors.Unlock()
	if c := connectors.m[w]; c != nil {
		return c, nil
	}
	if w.closed() {
		return nil, errors.New("the conversation's world was closed")
	}
	c := &connector{diag: -1}
	connectors.m[w] = c
	return c, nil
}

// dialConnector connects to port of the rootless world w through its
// connector helper, starting one where none runs (or the last one died).
func (w *world) dialConnector(ctx context.Context, port int) (net.Conn, error) {
	c, err := w.entry()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for try := 0; ; try++ {
		if err := c.start(w); err != nil {
			return nil, err
		}
		fd, err := c.ask(ctx, port)
		if errors.Is(err, errConnector) && ctx.Err() == nil && try == 0 {
			c.stopHelper() // something of the world killed it: start another
			continue
		}
		if err != nil {
			return nil, err
		}
		f := os.NewFile(uintptr(fd), "forwarded")
		defer f.Close()
		return net.FileConn(f)
	}
}

// start starts w's connector helper unless one runs (c.mu held).
func (c *connector) start(w *world) error {
	if c.conn != nil {
		return nil
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("connector socket: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "connector"), os.NewFile(uintptr(fds[1]), "connector-child")
	defer theirs.Close()
	defer ours.Close()
	fc, err := net.FileConn(ours)
	if err != nil {
		return fmt.Errorf("connector socket: %w", err)
	}
	cmd := &exec.Cmd{Path: w.helper, Args: []string{w.helper, connectArg}, Dir: "/", Env: []string{}}
	if err := w.startInWorld(cmd, theirs); err != nil {
		fc.Close()
		return fmt.Errorf("start the world's connector: %w", err)
	}
	c.conn, c.proc, c.done = fc.(*net.UnixConn), cmd.Process, make(chan struct{})
	go func(p *os.Process, done chan struct{}) {
		_, _ = p.Wait()
		close(done)
	}(c.proc, c.done)
	return nil
}

// stopHelper ends the connector helper, if one runs (c.mu held): closing
// its socket ends it; it is killed if it has not exited after a second.
func (c *connector) stopHelper() {
	if c.conn == nil {
		return
	}
	c.conn.Close()
	select {
	case <-c.done:
	case <-time.After(time.Second):
		_ = c.proc.Kill()
		<-c.done
	}
	c.conn, c.proc, c.done = nil, nil, nil
}

// ask sends one request to the helper (c.mu held) and returns the
// descriptor it answered with.
func (c *connector) ask(ctx context.Context, port int) (int, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(connectTimeout + 5*time.Second)
	}
	_ = c.conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.conn.SetDeadline(time.Now()) })
	defer stop()
	if _, err := c.conn.Write(binary.BigEndian.AppendUint16(nil, uint16(port))); err != nil {
		return -1, fmt.Errorf("%w: %w", errConnector, err)
	}
	resp, oob := make([]byte, 4), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := c.conn.ReadMsgUnix(resp, oob)
	if err != nil || n != 4 {
		return -1, fmt.Errorf("%w: %v", errConnector, err)
	}
	fd := -1
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil && len(msgs) == 1 {
		if fds, err := unix.ParseUnixRights(&msgs[0]); err == nil && len(fds) == 1 {
			fd = fds[0]
		}
	}
	if errno := syscall.Errno(binary.NativeEndian.Uint32(resp)); errno != 0 {
		if fd >= 0 {
			unix.Close(fd)
		}
		return -1, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)}
	}
	if fd < 0 {
		return -1, errors.New("the world's connector answered without a socket")
	}
	return fd, nil
}

// withDiag runs f with the world's sock_diag socket, made on first use:
// as root on a throwaway thread in the world's network; rootless by its
// connector helper, which is ended again unless it was running already
// (for forwarding).
func (w *world) withDiag(f func(fd int) error) error {
	c, err := w.entry()
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.diag < 0 {
		if c.diag, err = w.makeDiag(c); err != nil {
			c.diag = -1
			return err
		}
	}
	return f(c.diag)
}

// makeDiag makes the world's sock_diag socket (c.mu held).
func (w *world) makeDiag(c *connector) (int, error) {
	if !w.rootless {
		fd := -1
		err := onThrowawayThread(func() error {
			if err := w.joinNetwork(); err != nil {
				return err
			}
			var err error
			fd, err = diagSocket()
			return err
		})
		return fd, err
	}
	running := c.conn != nil
	if err := c.start(w); err != nil {
		return -1, err
	}
	if !running {
		defer c.stopHelper()
	}
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	return c.ask(ctx, 0)
}

// stopConnector forgets w's entry (world.close): its sock_diag socket is
// closed, its helper ended.
func stopConnector(w *world) {
	connectors.Lock()
	c := connectors.m[w]
	delete(connectors.m, w)
	connectors.Unlock()
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.diag >= 0 {
		unix.Close(c.diag)
		c.diag = -1
	}
	c.stopHelper()
}
