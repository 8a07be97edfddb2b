//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// A command with Network in a World gets, besides the proxy's listener, a
// resolver and carried listeners in the world's network (Options.Carry):
// on slot n of the world (one per such command running, the lowest free
// one), the resolver's UDP and TCP sockets on 127.0.n.1:53 and a listener
// on 127.0.n.2 for each carried port; /etc/resolv.conf in the command's
// mount namespace reads "nameserver 127.0.n.1" (see maskResolvConf). The
// slots keep two commands of a conversation that run at once from taking
// each other's ports: the first is 127.0.0.1:53 and 127.0.0.2.

// maxSlots bounds the network commands of a world that run at once with a
// resolver; the next gets no resolver (its proxy still works).
const maxSlots = 256

// slotAddrs are slot n's resolver and capture addresses.
func slotAddrs(n int) (resolver, capture netip.Addr) {
	return netip.AddrFrom4([4]byte{127, 0, byte(n), 1}), netip.AddrFrom4([4]byte{127, 0, byte(n), 2})
}

// takeSlot reserves the lowest free slot of the world (-1: none free).
func (w *world) takeSlot() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	for n := range maxSlots {
		if !w.slots[n] {
			w.slots[n] = true
			return n
		}
	}
	return -1
}

// freeSlot gives slot n back, once its sockets are closed.
func (w *world) freeSlot(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.slots[n] = false
}

// captureSet is a command's resolver sockets and carried listeners, made
// in its network namespace.
type captureSet struct {
	udp     *net.UDPConn
	tcp     *net.TCPListener
	carried []*net.TCPListener // by port of Carry; nil where the port is taken
}

// openCapture makes, in the calling thread's network namespace, the
// resolver's sockets on resolver:53 and a listener on capture for each
// port. A port something of the conversation already listens on there (a
// server on 0.0.0.0) is left out; the resolver's sockets must be made.
func openCapture(resolver, capture string, ports []int) (*captureSet, error) {
	cs := &captureSet{carried: make([]*net.TCPListener, len(ports))}
	udp, err := net.ListenPacket("udp", net.JoinHostPort(resolver, "53"))
	if err != nil {
		return nil, fmt.Errorf("resolver: %w", err)
	}
	cs.udp = udp.(*net.UDPConn)
	tcp, err := net.Listen("tcp", net.JoinHostPort(resolver, "53"))
	if err != nil {
		cs.close()
		return nil, fmt.Errorf("resolver: %w", err)
	}
	cs.tcp = tcp.(*net.TCPListener)
	for i, port := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort(capture, strconv.Itoa(port)))
		if errors.Is(err, syscall.EADDRINUSE) {
			continue
		}
		if err != nil {
			cs.close()
			return nil, fmt.Errorf("carried port %d: %w", port, err)
		}
		cs.carried[i] = l.(*net.TCPListener)
	}
	return cs, nil
}

// close closes what openCapture made.
func (cs *captureSet) close() {
	if cs.udp != nil {
		cs.udp.Close()
	}
	if cs.tcp != nil {
		cs.tcp.Close()
	}
	for _, l := range cs.carried {
		if l != nil {
			l.Close()
		}
	}
}

// files dups the set's sockets for a handover: the UDP socket, the TCP
// listener and the carried listeners made, and one byte per port saying
// whether it was made.
func (cs *captureSet) files() ([]*os.File, []byte, error) {
	var files []*os.File
	fail := func(err error) ([]*os.File, []byte, error) {
		for _, f := range files {
			f.Close()
		}
		return nil, nil, fmt.Errorf("resolver: %w", err)
	}
	f, err := cs.udp.File()
	if err != nil {
		return fail(err)
	}
	files = append(files, f)
	if f, err = cs.tcp.File(); err != nil {
		return fail(err)
	}
	files = append(files, f)
	bound := make([]byte, len(cs.carried))
	for i, l := range cs.carried {
		if l == nil {
			continue
		}
		if f, err = l.File(); err != nil {
			return fail(err)
		}
		files = append(files, f)
		bound[i] = 1
	}
	return files, bound, nil
}

// setCapture gives a command with Network in a world its slot, and, as
// root, makes its resolver's sockets and carried listeners in the world's
// network; a rootless helper makes them (handOverProxy) on the handover
// whose listeners it sets up here.
func (cmd *Command) setCapture(cfg *helperConfig, ports []int, h *handover) error {
	w := cmd.world
	n := w.takeSlot()
	if n < 0 {
		return nil
	}
	resolver, capture := slotAddrs(n)
	cmd.slot = n
	cfg.Resolver, cfg.Capture, cfg.Carry = resolver.String(), capture.String(), ports
	cmd.Capture = capture
	cmd.Carried = map[int]net.Listener{}
	if h != nil {
		cmd.Resolver = &passedPacketConn{h: h, addr: net.UDPAddrFromAddrPort(netip.AddrPortFrom(resolver, 53))}
		cmd.ResolverTCP = &passedListener{h: h, i: 2, addr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(resolver, 53))}
		for i, port := range ports {
			cmd.Carried[port] = &passedListener{h: h, i: 3 + i, addr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(capture, uint16(port)))}
		}
		return nil
	}
	var cs *captureSet
	err := w.inNetwork(func() error {
		var err error
		cs, err = openCapture(cfg.Resolver, cfg.Capture, ports)
		return err
	})
	if err != nil {
		cmd.freeCapture()
		return fmt.Errorf("sandbox: %w", err)
	}
	cmd.Resolver, cmd.ResolverTCP = cs.udp, cs.tcp
	for i, port := range ports {
		if cs.carried[i] != nil {
			cmd.Carried[port] = cs.carried[i]
		}
	}
	return nil
}

// freeCapture closes the command's resolver and carried listeners and
// gives its slot back.
func (cmd *Command) freeCapture() {
	if cmd.Resolver != nil {
		_ = cmd.Resolver.Close()
	}
	if cmd.ResolverTCP != nil {
		_ = cmd.ResolverTCP.Close()
	}
	for _, l := range cmd.Carried {
		_ = l.Close()
	}
	if cmd.slot >= 0 && cmd.world != nil {
		cmd.world.freeSlot(cmd.slot)
		cmd.slot = -1
	}
}

// inNetwork runs f on a throwaway thread in the world's network namespace
// (root).
func (w *world) inNetwork(f func() error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.netns.Valid() {
		return errors.New("the conversation's world was closed")
	}
	return onThrowawayThread(func() error {
		if err := unix.Setns(w.netns.Int(), unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("setns(world net): %w", err)
		}
		return f()
	})
}

// maskResolvConf bind-mounts, in the calling thread's mount namespace, a
// file reading "nameserver RESOLVER" over /etc/resolv.conf (read-only; no
// search domains), with use-vc: the command's sockets are TCP only
// (seccomp), and glibc's and Go's resolvers then ask over TCP. The file is
// made on a small tmpfs stacked on /tmp for the moment (a memfd cannot be
// bind-mounted), which is then detached: only the bind mount keeps it.
func maskResolvConf(resolver string) error {
	const target, dir = "/etc/resolv.conf", "/tmp"
	if _, err := os.Stat(target); errors.Is(err, os.ErrNotExist) {
		return nil // glibc's default is 127.0.0.1 (slot 0); later slots go without
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=16k,nr_inodes=4,mode=0755"); err != nil {
		return fmt.Errorf("resolv.conf: %w", err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	src := dir + "/resolv.conf"
	if err := os.WriteFile(src, []byte("nameserver "+resolver+"\noptions use-vc\n"), 0o644); err != nil {
		return fmt.Errorf("resolv.conf: %w", err)
	}
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("mask %s: %w", target, err)
	}
	if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mask %s read-only: %w", target, err)
	}
	return nil
}
