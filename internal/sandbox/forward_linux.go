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
// namespace, on a throwaway thread of the engine (root), or by the
// world's connector, a helper process in its namespaces that hands each
// connected socket over (rootless; see connectArg). The connection then
// belongs to the caller, and outlives the world if it is still open when
// the world closes. Nothing listening is ECONNREFUSED.
func (w *World) Dial(ctx context.Context, port int) (net.Conn, error) {
	if port <= 0 || port > 65535 {
		return nil, fmt.Errorf("sandbox: port %d out of range", port)
	}
	if w.w.rootless {
		c, err := w.w.dialConnector(ctx, port)
		if err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		return c, nil
	}
	var c net.Conn
	err := onThrowawayThread(func() error {
		if err := w.w.joinNetwork(); err != nil {
			return err
		}
		// The socket is made on this thread: in the world's network.
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
// port (one per port), with a process of the world that holds each. The
// kernel is asked (sock_diag, about the listening sockets alone) from a
// socket made in the world's network once and kept with the world: as
// root on a throwaway thread, rootless by the world's connector (see
// connectArg). Where that fails rootless, they are read from
// /proc/PID/net/tcp and tcp6 of a process in the world's network
// namespace, the first of hint that is (the pids of the conversation's
// running commands, say), else one found in /proc (a read that walks
// every TCP socket of the host). The owners are then found by the
// sockets' inodes among the file descriptors of hint's processes and
// their descendants, then, for sockets still without one, of every
// process of the world: only when something listens. The engine's own
// sockets there (the egress proxy's, a resolver's and its carried
// listeners), which no process of the world holds, are not listed.
func (w *World) Listening(hint []int) ([]Socket, error) {
	ino := w.w.netnsIno()
	if ino == 0 {
		return nil, errors.New("sandbox: the conversation's world was closed")
	}
	in := func(pid int) bool { return netnsOf(pid) == ino }
	socks := map[uint64]Socket{}
	var members []int
	var err error
	if err = w.w.withDiag(func(fd int) error { return diagListening(fd, socks) }); err != nil && w.w.rootless {
		// No connector (the helper could not start): read the tables.
		members, err = procListening(in, hint, socks), nil
	}
	if err != nil || len(socks) == 0 {
		return nil, err
	}
	if !ownSockets(descendants(hint), socks) {
		// Some socket's owner left the jobs' trees (a daemon that forked
		// twice), or it is the engine's: look through the whole world.
		if members == nil {
			members = procsWhere(in)
		}
		ownSockets(members, socks)
	}
	out := make([]Socket, 0, len(socks))
	for _, s := range socks {
		if s.Pid != 0 { // else the engine's, or its holder just exited
			out = append(out, s)
		}
	}
	return sortSockets(out), nil
}

// procListening reads the listening sockets from /proc/PID/net/tcp{,6}
// of a process in the world's network (in): the first of hint that is,
// else the first found in /proc, whose processes in the world it then
// returns (nil when it did not scan).
func procListening(in func(int) bool, hint []int, socks map[uint64]Socket) (members []int) {
	pid := 0
	for _, p := range hint {
		if p > 0 && in(p) {
			pid = p
			break
		}
	}
	if pid == 0 {
		if members = procsWhere(in); len(members) == 0 {
			return members
		}
		pid = members[0]
	}
	for _, t := range []string{"tcp", "tcp6"} {
		f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/net/" + t)
		if err != nil {
			continue // no IPv6, or the process just exited
		}
		parseListening(f, socks)
		f.Close()
	}
	return members
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

// maxDescendants bounds the processes descendants walks.
const maxDescendants = 4096

// descendants lists pids and their descendants (read from
// /proc/PID/task/TID/children), at most maxDescendants.
func descendants(pids []int) []int {
	seen := map[int]bool{}
	var out []int
	for queue := pids; len(queue) > 0 && len(out) < maxDescendants; queue = queue[1:] {
		p := queue[0]
		if p <= 0 || seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, p)
		dir := "/proc/" + strconv.Itoa(p) + "/task/"
		d, err := os.Open(dir)
		if err != nil {
			continue
		}
		tids, _ := d.Readdirnames(-1)
		d.Close()
		for _, tid := range tids {
			b, _ := os.ReadFile(dir + tid + "/children")
			for _, f := range bytes.Fields(b) {
				if c, err := strconv.Atoi(string(f)); err == nil {
					queue = append(queue, c)
				}
			}
		}
	}
	return out
}

// ownSockets fills in the owner of each socket of socks (by inode) that
// has none yet: the first of pids with a file descriptor on it, and its
// process group. It reports whether every socket has one.
func ownSockets(pids []int, socks map[uint64]Socket) bool {
	left := 0
	for _, s := range socks {
		if s.Pid == 0 {
			left++
		}
	}
	if left == 0 {
		return true
	}
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
				return true
			}
		}
	}
	return false
}
