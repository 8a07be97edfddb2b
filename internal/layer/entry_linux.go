//go:build linux

package layer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
)

// Changing an entry of the real tree. Apply and Undo reach every entry
// through descriptors opened beneath the root's descriptor
// (openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|
// RESOLVE_NO_MAGICLINKS|RESOLVE_NO_XDEV), check that the entry is the
// one the change set was computed from (device, inode and type: [id])
// before they change it, and set permissions, owner and times through
// an O_PATH descriptor of the entry itself (fchmodat2, fchownat and
// utimensat with AT_EMPTY_PATH), never by name: a symlink put in its
// place is never followed. Applies and undos of every conversation on
// one workspace take turns (lockRoots), so no other apply changes an
// entry between the check and the change.

// id identifies a real entry: its device, inode and type. The zero id
// is no entry.
type id struct {
	dev, ino uint64
	typ      uint32
}

// idOf returns st's id, or none when ok is false.
func idOf(st *unix.Stat_t, ok bool) id {
	if !ok {
		return id{}
	}
	return id{dev: st.Dev, ino: st.Ino, typ: st.Mode & unix.S_IFMT}
}

// stamp is the rest of what [Set.ApplyExact] checks a real entry by:
// permissions, owner, and for anything but a directory its size and
// modification and change times (a write in place keeps the inode, and
// changes these); a directory's modification time too when it is to be
// deleted (an entry made or removed in it). The zero stamp is no entry.
type stamp struct {
	mode, uid, gid   uint32
	size, mtim, ctim int64
}

// stampOf returns st's stamp (that of a deleted entry when deleted), or
// none when ok is false.
func stampOf(st *unix.Stat_t, ok, deleted bool) stamp {
	if !ok {
		return stamp{}
	}
	s := stamp{mode: st.Mode, uid: st.Uid, gid: st.Gid}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		s.size, s.ctim = st.Size, st.Ctim.Nano()
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || deleted {
		s.mtim = st.Mtim.Nano()
	}
	return s
}

// errChanged is the failure of a change whose real entry is not the one
// the change set was computed from (another apply, or the user,
// changed it since).
var errChanged = errors.New("it changed after the command's changes were read")

// resolve are the openat2 flags of every lookup in a tree.
const resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// openEntry opens rel (not following it when it is a symlink) with
// O_PATH beneath t, and returns it with its status. rel "" is the
// root.
func (t *tree) openEntry(rel string) (*fd.FD, unix.Stat_t, error) {
	var st unix.Stat_t
	d, name := split(rel)
	if rel == "" {
		d, name = "", "."
	}
	dir, err := t.dir(d)
	if err != nil {
		return nil, st, err
	}
	n, err := unix.Openat2(dir, name, &unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: resolve})
	if err != nil {
		return nil, st, &fs.PathError{Op: "open", Path: t.path(rel), Err: err}
	}
	f := fd.New(n)
	if err := unix.Fstat(f.Int(), &st); err != nil {
		_ = f.Close()
		return nil, st, &fs.PathError{Op: "stat", Path: t.path(rel), Err: err}
	}
	return f, st, nil
}

// openSame is openEntry, failing with errChanged unless the entry is
// want.
func (t *tree) openSame(rel string, want id) (*fd.FD, unix.Stat_t, error) {
	f, st, err := t.openEntry(rel)
	if err != nil {
		if missing(err) {
			return nil, st, &fs.PathError{Op: "open", Path: t.path(rel), Err: errChanged}
		}
		return nil, st, err
	}
	if idOf(&st, true) != want {
		_ = f.Close()
		return nil, st, &fs.PathError{Op: "open", Path: t.path(rel), Err: errChanged}
	}
	return f, st, nil
}

// setAttrs gives the entry rel of t, open as f (an O_PATH descriptor of
// it, not of a symlink's target; its status cur), the permissions,
// owner (when the engine may set it) and times of st.
func (t *tree) setAttrs(rel string, f *fd.FD, cur, st *unix.Stat_t) error {
	if cur.Uid != st.Uid || cur.Gid != st.Gid {
		// Only root may give a file away; an unprivileged engine's files
		// are its own anyway.
		_ = unix.Fchownat(f.Int(), "", int(st.Uid), int(st.Gid), unix.AT_EMPTY_PATH)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		// After chown, which clears setuid and setgid.
		if err := t.chmod(rel, f, cur, st.Mode&0o7777); err != nil {
			return err
		}
	}
	ts := []unix.Timespec{st.Atim, st.Mtim}
	if err := unix.UtimesNanoAt(f.Int(), "", ts, unix.AT_EMPTY_PATH); err != nil {
		return &fs.PathError{Op: "utimes", Path: t.path(rel), Err: err}
	}
	return nil
}

// chmod sets the permissions of the entry rel, open as f (O_PATH; its
// status cur): with fchmodat2(AT_EMPTY_PATH) on f (Linux 6.6), else
// with fchmod on the entry opened again for reading, once it is found
// to be the same entry (opening it needs read permission: a directory
// the engine may not read keeps its mode on older kernels).
func (t *tree) chmod(rel string, f *fd.FD, cur *unix.Stat_t, mode uint32) error {
	err := unix.Fchmodat(f.Int(), "", mode, unix.AT_EMPTY_PATH)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		err = t.fchmod(rel, idOf(cur, true), mode)
	}
	if err != nil {
		return &fs.PathError{Op: "chmod", Path: t.path(rel), Err: err}
	}
	return nil
}

// fchmod opens the entry rel (which must be want) for reading and sets
// its permissions.
func (t *tree) fchmod(rel string, want id, mode uint32) error {
	d, name := split(rel)
	if rel == "" {
		d, name = "", "."
	}
	dir, err := t.dir(d)
	if err != nil {
		return err
	}
	n, err := unix.Openat2(dir, name, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC, Resolve: resolve})
	if err != nil {
		return err
	}
	f := fd.New(n)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(f.Int(), &st); err != nil {
		return err
	}
	if idOf(&st, true) != want {
		return errChanged
	}
	return unix.Fchmod(f.Int(), mode)
}

// Owners an unprivileged engine cannot give. Only root may give a file
// away (chown to another uid) or take another's; a user may chgrp its
// own files to its groups. So an unprivileged engine leaves what it
// makes, and what a sandboxed command makes, the user's, as they would
// be without the sandbox: an upper directory whose root belongs to
// another user (a workspace that is root's but mode 0777, or the
// user's by its group) keeps the user as its owner (and the root's
// group when the user may set it), and Diff does not count that owner
// as a change of the root; setAttrs sets an owner only where it may.

// lchownMay gives p the owner uid:gid where the engine may: as it
// cannot give a file away (EPERM), it keeps the user's, with gid when
// the user may set that group.
func lchownMay(p string, uid, gid int) error {
	err := os.Lchown(p, uid, gid)
	if errors.Is(err, unix.EPERM) && os.Geteuid() != 0 {
		_ = os.Lchown(p, -1, gid)
		return nil
	}
	return err
}

// ownerFits reports whether an upper directory owned by uu:ug has the
// owner of its root (ru:rg) as far as the engine may give it (see
// lchownMay): the same one, or, for an engine that is not root, the
// engine's uid and the root's group or the engine's own. (So a command
// that changes its workspace's group to the user's own is not seen to
// change it: the one owner change of the root it could make.)
func ownerFits(uu, ug, ru, rg int) bool {
	if uu == ru && ug == rg {
		return true
	}
	if os.Geteuid() == 0 {
		return false
	}
	return uu == os.Geteuid() && (ug == rg || ug == os.Getegid())
}

// chownChmod gives the directory rel, open as f (its status cur), an
// owner and permissions (a permission change, and its undo).
func (t *tree) chownChmod(rel string, f *fd.FD, cur *unix.Stat_t, uid, gid, mode uint32) error {
	if err := unix.Fchownat(f.Int(), "", int(uid), int(gid), unix.AT_EMPTY_PATH); err != nil && !errors.Is(err, unix.EPERM) {
		return &fs.PathError{Op: "chown", Path: t.path(rel), Err: err}
	}
	return t.chmod(rel, f, cur, mode&0o7777)
}

// Applies take turns per workspace: a lock per real root, keyed by its
// device and inode, shared by every Set and Store of the process, and
// across processes (two engines, a CLI and an MCP server, on one
// workspace) an abstract unix socket bound at
// "@bashvisor-apply-<dev>:<ino>" of the root directory. Only one socket
// of a network namespace can have that name: every engine of every user
// in the namespace finds the same one without a shared state directory,
// nothing is written into the workspace, and a process that dies
// releases it. Sandboxed commands have network namespaces of their own,
// so none of them can hold it (a flock of the root directory, which was
// the lock before, any command that sees the root can take). Engines in
// different network namespaces (containers sharing a workspace by a
// bind mount) do not take turns. Within the process the root's own
// lock comes first, so one thread at a time waits for the socket. Both
// waits end when the caller's context does.
var roots = struct {
	mu sync.Mutex
	m  map[[2]uint64]*rootLock
}{m: map[[2]uint64]*rootLock{}}

// rootLock is the process's lock of one root: a token in turn, a
// channel so that a wait for it can end with the caller's context.
type rootLock struct {
	turn  chan struct{}
	users int
}

// lock takes l, waiting (unbounded, as the other apply of the process
// is bounded) until ctx ends; a free lock is taken whatever ctx says.
func (l *rootLock) lock(ctx context.Context) error {
	select {
	case l.turn <- struct{}{}:
		return nil
	default:
	}
	select {
	case l.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (l *rootLock) unlock() { <-l.turn }

// lockWait bounds the wait for another process's apply on the same
// workspace (Options.LockWait's default). Any process of the engine's
// network namespace can bind the lock's name; after lockWait the apply
// fails (ErrLocked) instead of waiting for ever. An apply of 300,000 entries takes about
// 20 s.
var lockWait = 10 * time.Minute

// ErrLocked is what an apply or undo fails with, having changed
// nothing, when another process held the workspace's apply lock for
// longer than it waits (Options.LockWait), or while the caller's
// context ended: then the error wraps the context's error too.
var ErrLocked = errors.New("another apply holds the workspace's apply lock")

// lockRoots takes the locks of the directories fds (O_PATH descriptors
// of real roots), in one order, waiting for another's (of this process
// or another) up to wait (0: lockWait) or until ctx ends, and returns
// what releases them. A lock that is free is taken even when ctx has
// ended: only the wait ends with it.
func lockRoots(ctx context.Context, fds []int, wait time.Duration) (func(), error) {
	if wait <= 0 {
		wait = lockWait
	}
	type key = [2]uint64
	seen := map[key]bool{}
	var keys []key
	for _, n := range fds {
		var st unix.Stat_t
		if err := unix.Fstat(n, &st); err != nil {
			return nil, fmt.Errorf("layer: %w", err)
		}
		k := key{st.Dev, st.Ino}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := cmp.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return cmp.Compare(a[1], b[1])
	})
	held := make([]*rootLock, len(keys))
	roots.mu.Lock()
	for i, k := range keys {
		l := roots.m[k]
		if l == nil {
			l = &rootLock{turn: make(chan struct{}, 1)}
			roots.m[k] = l
		}
		l.users++
		held[i] = l
	}
	roots.mu.Unlock()
	var socks []*fd.FD
	locked := 0
	unlock := func() {
		for _, f := range socks {
			_ = f.Close() // releases the name
		}
		for _, l := range held[:locked] {
			l.unlock()
		}
		roots.mu.Lock()
		for i, k := range keys {
			if held[i].users--; held[i].users == 0 {
				delete(roots.m, k)
			}
		}
		roots.mu.Unlock()
	}
	for i, l := range held {
		if err := l.lock(ctx); err != nil {
			unlock()
			return nil, fmt.Errorf("layer: root %d:%d: waiting for another apply of this process: %w; stopped waiting: %w", keys[i][0], keys[i][1], ErrLocked, err)
		}
		locked++
		f, err := bindRoot(ctx, keys[i], wait)
		if err != nil {
			unlock()
			return nil, err
		}
		socks = append(socks, f)
	}
	return unlock, nil
}

// bindRoot binds the abstract unix socket of the root whose device and
// inode are k, which it returns; closing it releases the lock. It waits
// for another process up to wait, or until ctx ends.
func bindRoot(ctx context.Context, k [2]uint64, wait time.Duration) (*fd.FD, error) {
	d, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("layer: a socket to lock the root: %w", err)
	}
	f := fd.New(d)
	addr := &unix.SockaddrUnix{Name: fmt.Sprintf("@bashvisor-apply-%d:%d", k[0], k[1])}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	pause := time.NewTimer(0)
	pause.Stop() // no value left in its channel (Go ≥ 1.23)
	defer pause.Stop()
	for d := time.Millisecond; ; d = min(2*d, 100*time.Millisecond) {
		err := unix.Bind(f.Int(), addr)
		switch {
		case err == nil:
			return f, nil
		case errors.Is(err, unix.EINTR):
			continue
		case !errors.Is(err, unix.EADDRINUSE):
			_ = f.Close()
			return nil, fmt.Errorf("layer: lock the root: %w", err)
		}
		pause.Reset(d)
		select {
		case <-pause.C:
			continue
		case <-deadline.C:
			_ = f.Close()
			return nil, fmt.Errorf("layer: root %d:%d: %w for over %v", k[0], k[1], ErrLocked, wait)
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("layer: root %d:%d: %w; stopped waiting: %w", k[0], k[1], ErrLocked, context.Cause(ctx))
		}
	}
}
