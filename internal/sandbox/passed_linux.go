//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
)

// handover receives, once, the descriptors a rootless helper made in the
// world's network and handed over (on helperConfig.ProxyFD): the proxy's
// listener, then, with a resolver (helperConfig.Resolver), its UDP and
// TCP sockets and the carried listeners it could bind, one data byte per
// carried port saying whether it did. Until then their users wait.
type handover struct {
	conn  *net.UnixConn
	ports int // carried ports asked for
	once  sync.Once
	mu    sync.Mutex
	files []*os.File // by position: proxy, udp, tcp, each carried port (nil: not bound)
	taken []bool
	err   error
	shut  bool // closed
}

// newHandover returns the engine's end and the helper's end of the
// handover socket, which the helper gets as descriptor 3.
func newHandover(ports int) (*handover, *os.File, error) {
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: proxy socket: %w", err)
	}
	f := os.NewFile(uintptr(sp[0]), "proxy-handover")
	child := os.NewFile(uintptr(sp[1]), "proxy-handover-child")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		child.Close()
		return nil, nil, fmt.Errorf("sandbox: proxy socket: %w", err)
	}
	return &handover{conn: c.(*net.UnixConn), ports: ports}, child, nil
}

func (h *handover) receive() {
	want := 1
	if h.ports > 0 {
		want = 3 + h.ports
	}
	files, err := h.read(want)
	h.mu.Lock()
	h.files, h.err, h.taken = files, err, make([]bool, want)
	if h.shut {
		closeFiles(files)
		h.files, h.err = nil, net.ErrClosed
	}
	h.mu.Unlock()
}

// read receives the handover's message: want descriptors by position
// (see handover.files). Every descriptor received is closed on every
// error (none returned then), and so is every one the message carried
// beyond those it places: more than want, in a control message of its
// own, or a carried port's that the data does not say was bound.
func (h *handover) read(want int) ([]*os.File, error) {
	data := make([]byte, 1+h.ports)
	oob := make([]byte, unix.CmsgSpace(4*want))
	n, oobn, flags, _, err := h.conn.ReadMsgUnix(data, oob)
	var fds []int
	if oobn > 0 {
		// Every SCM_RIGHTS message is parsed, whatever else came, so
		// that none of its descriptors is left open.
		msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
		for i := range msgs {
			if more, rerr := unix.ParseUnixRights(&msgs[i]); rerr == nil {
				fds = append(fds, more...)
			}
		}
		if err == nil && (perr != nil || len(msgs) != 1) {
			err = errors.New("sandbox: the helper's handover has unexpected control messages")
		}
	}
	switch {
	case err != nil:
	case flags&unix.MSG_CTRUNC != 0:
		err = errors.New("sandbox: the helper handed over more descriptors than asked for")
	case len(fds) == 0 || n != len(data):
		err = errors.New("sandbox: the helper handed over no listener")
	}
	files := make([]*os.File, 0, len(fds))
	for _, fdn := range fds {
		files = append(files, os.NewFile(uintptr(fdn), "handed-over"))
	}
	if err != nil {
		closeFiles(files)
		return nil, err
	}
	if len(files) > want {
		closeFiles(files[want:])
		files = files[:want]
	}
	out := make([]*os.File, want)
	copy(out, files)
	if h.ports == 0 {
		return out, nil
	}
	// files holds proxy, udp, tcp and the bound ports, in order; place
	// each bound port's at its position, and close what is left over.
	bound := out[3:]
	placed := make([]*os.File, h.ports)
	next := 0
	for i := 0; i < h.ports; i++ {
		if data[1+i] == 1 && next < len(bound) {
			placed[i], bound[next] = bound[next], nil
			next++
		}
	}
	closeFiles(bound)
	copy(out[3:], placed)
	return out, nil
}

// closeFiles closes each file of fs that is not nil.
func closeFiles(fs []*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// take waits for the handover and returns descriptor i (once; nil when
// the helper made none there).
func (h *handover) take(i int) (*os.File, error) {
	h.once.Do(h.receive)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return nil, h.err
	}
	if i >= len(h.files) || h.taken[i] {
		return nil, net.ErrClosed
	}
	h.taken[i] = true
	f := h.files[i]
	h.files[i] = nil
	return f, nil
}

// close closes the engine's end and what was never taken.
func (h *handover) close() {
	_ = h.conn.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.shut = true
	for i, f := range h.files {
		if f != nil {
			f.Close()
			h.files[i] = nil
		}
	}
}

// passedListener is one listener of a handover: the proxy's (0) or a
// carried port's (3...); Accept waits for it.
type passedListener struct {
	h      *handover
	i      int
	addr   net.Addr
	once   sync.Once
	mu     sync.Mutex
	l      net.Listener
	err    error
	closed bool
}

func (p *passedListener) get() (net.Listener, error) {
	p.once.Do(func() {
		f, err := p.h.take(p.i)
		var l net.Listener
		if err == nil && f == nil {
			err = net.ErrClosed // the helper could not bind it
		}
		if err == nil {
			l, err = net.FileListener(f)
			f.Close()
		}
		if err != nil && !errors.Is(err, net.ErrClosed) {
			// What waits on it (an accept loop) stops, as on a closed
			// listener.
			err = fmt.Errorf("%w: %w", net.ErrClosed, err)
		}
		p.mu.Lock()
		p.l, p.err = l, err
		if p.closed && l != nil {
			l.Close()
			p.err = net.ErrClosed
		}
		p.mu.Unlock()
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.l, p.err
}

// Accept waits for the helper's listener, then accepts on it.
func (p *passedListener) Accept() (net.Conn, error) {
	l, err := p.get()
	if err != nil {
		return nil, err
	}
	return l.Accept()
}

// Close closes the listener (and stops waiting for it).
func (p *passedListener) Close() error {
	p.mu.Lock()
	p.closed = true
	l := p.l
	p.mu.Unlock()
	p.h.close()
	if l != nil {
		return l.Close()
	}
	return nil
}

// Addr is the listener's address once the helper handed it over.
func (p *passedListener) Addr() net.Addr {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		return p.l.Addr()
	}
	return p.addr
}

// passedPacketConn is the resolver's UDP socket of a handover (1): its
// calls wait for it.
type passedPacketConn struct {
	h    *handover
	addr net.Addr
	once sync.Once
	mu   sync.Mutex
	pc   net.PacketConn
	err  error
}

func (p *passedPacketConn) get() (net.PacketConn, error) {
	p.once.Do(func() {
		f, err := p.h.take(1)
		var pc net.PacketConn
		if err == nil && f == nil {
			err = net.ErrClosed
		}
		if err == nil {
			pc, err = net.FilePacketConn(f)
			f.Close()
		}
		if err != nil && !errors.Is(err, net.ErrClosed) {
			err = fmt.Errorf("%w: %w", net.ErrClosed, err)
		}
		p.mu.Lock()
		p.pc, p.err = pc, err
		p.mu.Unlock()
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pc, p.err
}

func (p *passedPacketConn) ReadFrom(b []byte) (int, net.Addr, error) {
	pc, err := p.get()
	if err != nil {
		return 0, nil, err
	}
	return pc.ReadFrom(b)
}

func (p *passedPacketConn) WriteTo(b []byte, a net.Addr) (int, error) {
	pc, err := p.get()
	if err != nil {
		return 0, err
	}
	return pc.WriteTo(b, a)
}

func (p *passedPacketConn) Close() error {
	p.h.close()
	p.mu.Lock()
	pc := p.pc
	p.mu.Unlock()
	if pc != nil {
		return pc.Close()
	}
	return nil
}

func (p *passedPacketConn) LocalAddr() net.Addr { return p.addr }

func (p *passedPacketConn) SetDeadline(t time.Time) error {
	if p.stop(t) {
		return nil
	}
	pc, err := p.get()
	if err != nil {
		return err
	}
	return pc.SetDeadline(t)
}

// stop: a deadline in the past before the socket was handed over (a
// server shutting down) stops waiting for it instead.
func (p *passedPacketConn) stop(t time.Time) bool {
	p.mu.Lock()
	pc := p.pc
	p.mu.Unlock()
	if pc == nil && !t.After(time.Now()) {
		p.h.close()
		return true
	}
	return false
}

func (p *passedPacketConn) SetReadDeadline(t time.Time) error {
	if p.stop(t) {
		return nil
	}
	pc, err := p.get()
	if err != nil {
		return err
	}
	return pc.SetReadDeadline(t)
}

func (p *passedPacketConn) SetWriteDeadline(t time.Time) error {
	pc, err := p.get()
	if err != nil {
		return err
	}
	return pc.SetWriteDeadline(t)
}

// handOverProxy is the helper's side: it makes the proxy listener in the
// world's network (and, with cfg.Resolver, the resolver's sockets and the
// carried listeners), hands them to the engine on cfg.ProxyFD and returns
// the proxy's port.
func handOverProxy(cfg *helperConfig) (int, error) {
	sock := fd.New(cfg.ProxyFD)
	defer sock.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("proxy listener: %w", err)
	}
	defer l.Close()
	files := []*os.File{}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	f, err := l.(*net.TCPListener).File()
	if err != nil {
		return 0, fmt.Errorf("proxy listener: %w", err)
	}
	files = append(files, f)
	data := []byte{0}
	if cfg.Resolver != "" {
		cs, err := openCapture(cfg.Resolver, cfg.Capture, cfg.Carry)
		if err != nil {
			return 0, err
		}
		defer cs.close()
		more, bound, err := cs.files()
		if err != nil {
			return 0, err
		}
		files = append(files, more...)
		data = append(data, bound...)
	}
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	if err := unix.Sendmsg(sock.Int(), data, unix.UnixRights(fds...), nil, 0); err != nil {
		return 0, fmt.Errorf("hand the proxy listener over: %w", err)
	}
	return l.Addr().(*net.TCPAddr).Port, nil
}
