//go:build linux

package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// The kernel's sock_diag answer about listening TCP sockets: a dump of
// the listening hash alone (reading /proc/net/tcp walks every socket of
// the host, about 10 ms on a busy one).
const (
	tcpStateListen       = 10
	sizeofInetDiagReqV2  = 56
	sizeofInetDiagMsg    = 72
	inetDiagMsgInodeOff  = 68
	inetDiagMsgSportOff  = 4
	inetDiagMsgSrcOff    = 8
	diagRequestSizeTotal = unix.SizeofNlMsghdr + sizeofInetDiagReqV2
)

// diagSocket makes a NETLINK_SOCK_DIAG socket in the calling thread's
// network namespace, which its answers are about.
func diagSocket() (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_INET_DIAG)
	if err != nil {
		return -1, fmt.Errorf("sock_diag socket: %w", err)
	}
	return fd, nil
}

// diagListening adds the TCP sockets (IPv4 and IPv6) listening in the
// network namespace of sock_diag socket fd to out, by inode, the engine's
// capture slots left out (see parseListening).
func diagListening(fd int, out map[uint64]Socket) error {
	buf := make([]byte, 16<<10) // NLMSG_GOODSIZE is at most 8 KiB
	for seq, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		req := make([]byte, diagRequestSizeTotal)
		ne := binary.NativeEndian
		ne.PutUint32(req[0:], diagRequestSizeTotal)
		ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
		ne.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
		ne.PutUint32(req[8:], uint32(seq+1))
		r := req[unix.SizeofNlMsghdr:]
		r[0], r[1] = family, unix.IPPROTO_TCP
		ne.PutUint32(r[4:], 1<<tcpStateListen)
		if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			return fmt.Errorf("sock_diag request: %w", err)
		}
		if err := diagReceive(fd, buf, family, out); err != nil {
			return err
		}
	}
	return nil
}

// diagReceive reads one dump's answer into out.
func diagReceive(fd int, buf []byte, family uint8, out map[uint64]Socket) error {
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return fmt.Errorf("sock_diag answer: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return fmt.Errorf("sock_diag answer: %w", err)
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return nil
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
						return fmt.Errorf("sock_diag: %w", syscall.Errno(-e))
					}
				}
				return errors.New("sock_diag: error answer")
			}
			if len(m.Data) < sizeofInetDiagMsg {
				continue
			}
			d := m.Data
			port := int(binary.BigEndian.Uint16(d[inetDiagMsgSportOff:]))
			var addr netip.Addr
			if family == unix.AF_INET {
				addr = netip.AddrFrom4([4]byte(d[inetDiagMsgSrcOff : inetDiagMsgSrcOff+4]))
			} else {
				addr = netip.AddrFrom16([16]byte(d[inetDiagMsgSrcOff : inetDiagMsgSrcOff+16])).Unmap()
			}
			ino := uint64(binary.NativeEndian.Uint32(d[inetDiagMsgInodeOff:]))
			if ino != 0 && !slotAddr(addr, port) {
				out[ino] = Socket{Port: port, Addr: addr}
			}
		}
	}
}
