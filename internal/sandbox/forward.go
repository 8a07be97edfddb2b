package sandbox

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"io"
	"net/netip"
	"slices"
	"strconv"
)

// Socket is a TCP socket listening in a world's network (see
// [World.Listening]).
type Socket struct {
	// Port is the port it listens on.
	Port int
	// Addr is the address it is bound to (0.0.0.0 or :: for every
	// address of the world's loopback).
	Addr netip.Addr
	// Pid is a process of the world that holds it, and Pgid that
	// process's group.
	Pid, Pgid int
}

// tcpListen is the state of a listening socket in /proc/net/tcp.
const tcpListen = "0A"

// parseListening reads the listening sockets of a /proc/PID/net/tcp or
// tcp6 table: their address, port and inode. Those on a capture slot's
// addresses (127.0.n.1:53, 127.0.n.2), which the engine makes, are left
// out.
func parseListening(r io.Reader, out map[uint64]Socket) {
	sc := bufio.NewScanner(r)
	sc.Scan() // the header
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 10 || string(f[3]) != tcpListen {
			continue
		}
		host, port, ok := bytes.Cut(f[1], []byte(":"))
		if !ok {
			continue
		}
		p, err1 := strconv.ParseUint(string(port), 16, 16)
		ino, err2 := strconv.ParseUint(string(f[9]), 10, 64)
		addr, ok := procAddr(host)
		if err1 != nil || err2 != nil || !ok || ino == 0 || slotAddr(addr, int(p)) {
			continue
		}
		out[ino] = Socket{Port: int(p), Addr: addr}
	}
}

// procAddr decodes an address of /proc/net/tcp{,6}: the bytes of each
// 32-bit word in host order (little endian here).
func procAddr(h []byte) (netip.Addr, bool) {
	b := make([]byte, hex.DecodedLen(len(h)))
	if _, err := hex.Decode(b, h); err != nil || len(b) != 4 && len(b) != 16 {
		return netip.Addr{}, false
	}
	for i := 0; i < len(b); i += 4 {
		slices.Reverse(b[i : i+4])
	}
	a, ok := netip.AddrFromSlice(b)
	return a.Unmap(), ok
}

// slotAddr reports whether addr:port is one of the sockets the engine
// makes on a capture slot.
func slotAddr(addr netip.Addr, port int) bool {
	if !addr.Is4() {
		return false
	}
	b := addr.As4()
	return b[0] == 127 && b[1] == 0 && (b[3] == 1 && port == 53 || b[3] == 2)
}

// sortSockets orders sockets by port and keeps one per port (the lowest
// pid's).
func sortSockets(s []Socket) []Socket {
	slices.SortFunc(s, func(a, b Socket) int {
		if a.Port != b.Port {
			return a.Port - b.Port
		}
		return a.Pid - b.Pid
	})
	return slices.CompactFunc(s, func(a, b Socket) bool { return a.Port == b.Port })
}
