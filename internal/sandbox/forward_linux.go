//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/proc"
)

// Dial connects to port on the world's loopback (127.0.0.1), as a
// command of the world would: the socket is made in the world's network
// namespace, on a throwaway thread of the engine (root). The connection
// then belongs to the caller, and outlives the world if it is still open
// when the world closes. A rootless world fails with [ErrUnavailable]:
// the engine cannot join its network namespace.
func (w *World) Dial(ctx context.Context, port int) (net.Conn, error) {
	if port <= 0 || port > 65535 {
		return nil, fmt.Errorf("sandbox: port %d out of range", port)
	}
	if w.w.rootless {
		return nil, unavailable("connecting into a rootless world is not supported")
	}
	var c net.Conn
	err := onThrowawayThread(func() error {
		if err := w.w.joinNetwork(); err != nil {
			return err
		}
		// The socket is made here, in the world's network; connecting
		// may then wait on the poller, off this thread's namespace.
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	return c, nil
}

// joinNetwork moves the calling (throwaway) thread into the world's
// network namespace.
func (w *world) joinNetwork() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.netns.Valid() {
		return errors.New("the conversation's world was closed")
	}
	if err := unix.Setns(w.netns.Int(), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("setns(world net): %w", err)
	}
	return nil
}

// netnsIno is the inode of the world's network namespace (0: closed).
func (w *world) netnsIno() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var st unix.Stat_t
	if !w.netns.Valid() || unix.Fstat(w.netns.Int(), &st) != nil {
		return 0
	}
	return st.Ino
}

// Listening lists the TCP sockets listening in the world's network, by
// port (one per port), with a process of the world that holds each: read
// from /proc/PID/net/tcp and tcp6 of a process in the world's network
// namespace, tried first among hint (the pids of the conversation's
// running commands, say), else found in /proc; the owners are then found
// by the socket inodes in the file descriptors of the world's processes
// (only when something listens). Nothing runs in the world: nil. The
// engine's own sockets there (the egress proxy's, a resolver's and its
// carried listeners) are not listed.
func (w *World) Listening(hint []int) ([]Socket, error) {
	ino := w.w.netnsIno()
	if ino == 0 {
		return nil, errors.New("sandbox: the conversation's world was closed")
	}
	in := func(pid int) bool { return netnsOf(pid) == ino }
	pid := 0
	for _, p := range hint {
		if p > 0 && in(p) {
			pid = p
			break
		}
	}
	var members []int
	if pid == 0 {
		members = procsWhere(in)
		if len(members) == 0 {
			return nil, nil
		}
		pid = members[0]
	}
	socks := map[uint64]Socket{}
	for _, t := range []string{"tcp", "tcp6"} {
		f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/net/" + t)
		if err != nil {
			continue // no IPv6, or the process just exited
		}
		parseListening(f, socks)
		f.Close()
	}
	if len(socks) == 0 {
		return nil, nil
	}
	if members == nil {
		members = procsWhere(in)
	}
	ownSockets(members, socks)
	out := make([]Socket, 0, len(socks))
	for _, s := range socks {
		if s.Pid != 0 { // else the engine's, or its holder just exited
			out = append(out, s)
		}
	}
	return sortSockets(out), nil
}

// netnsOf is the inode of process pid's network namespace (0: unknown).
func netnsOf(pid int) uint64 {
	var st unix.Stat_t
	if unix.Stat("/proc/"+strconv.Itoa(pid)+"/ns/net", &st) != nil {
		return 0
	}
	return st.Ino
}

// procsWhere lists the pids of /proc for which keep is true.
func procsWhere(keep func(pid int) bool) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	var out []int
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil && keep(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// ownSockets fills in the owner of each socket of socks (by inode): the
// first of pids with a file descriptor on it, and its process group.
func ownSockets(pids []int, socks map[uint64]Socket) {
	left := len(socks)
	buf := make([]byte, 64)
	for _, pid := range pids {
		dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
		d, err := os.Open(dir)
		if err != nil {
			continue
		}
		names, _ := d.Readdirnames(-1)
		d.Close()
		for _, n := range names {
			k, err := unix.Readlink(dir+n, buf)
			if err != nil || !bytes.HasPrefix(buf[:k], []byte("socket:[")) {
				continue
			}
			ino, err := strconv.ParseUint(string(buf[8:k-1]), 10, 64)
			s, ok := socks[ino]
			if err != nil || !ok || s.Pid != 0 {
				continue
			}
			s.Pid = pid
			if st, err := proc.ReadStat(pid); err == nil {
				s.Pgid = st.Pgrp
			}
			socks[ino] = s
			if left--; left == 0 {
				return
			}
		}
	}
}
