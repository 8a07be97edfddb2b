package egress

import (
	"net"

	"golang.org/x/sys/unix"
)

// TCP states (include/net/tcp_states.h) in which a FIN was sent and
// acknowledged (finAcked) or received (finReceived).
const (
	tcpFinWait2 = 5
	tcpTimeWait = 6
	tcpClose    = 7
	tcpClosWait = 8
	tcpLastAck  = 9
	tcpClosing  = 11
)

// sockBytes is the kernel's count of a dialled TCP connection's data
// bytes: out, those the peer acknowledged; in, those received from it.
// The kernel's counters include the sequence number the SYN takes, and
// each FIN's, which are taken off by the connection's state. A connection
// both sides closed is in state CLOSE once its FINs were exchanged (the
// kernel moves the socket there when it hands the rest to a time-wait
// socket): both FINs are taken off (after a reset, which closes it too
// without FINs, each count is then one short).
func sockBytes(c *net.TCPConn) (out, in int64) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, 0
	}
	_ = rc.Control(func(fd uintptr) {
		info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			return
		}
		out, in = int64(info.Bytes_acked), int64(info.Bytes_received)
		if out > 0 {
			out-- // the SYN
		}
		switch info.State {
		case tcpFinWait2, tcpTimeWait, tcpClose:
			out-- // our FIN, acknowledged
		}
		switch info.State {
		case tcpTimeWait, tcpClosWait, tcpLastAck, tcpClosing, tcpClose:
			in-- // the peer's FIN
		}
		out, in = max(out, 0), max(in, 0)
	})
	return out, in
}
