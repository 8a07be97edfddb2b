//go:build linux

package layer

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
)

// Held layers. An engine that is not root cannot make overlays (nor
// clone mounts): its commands' overlays are made by the sandbox's
// helper inside the conversation's user namespace, so [Layer.Premount]
// fails there. A held layer has them handed over instead:
//
//   - the helper of the layer's first command makes the overlays (in
//     the world's mount namespace, before it makes the command's own),
//     sends the detached overlay mounts to the engine over a socket
//     (Spec.Hand; SCM_RIGHTS), and attaches clones of them (open_tree
//     with OPEN_TREE_CLONE), so that the mounts the engine holds stay
//     detached;
//   - the engine keeps them in the layer ([Spec.Exchange]) until
//     [Layer.Unshare] or [Layer.Remove]: they hold the overlays'
//     superblocks, not a mount anyone sees;
//   - [Layer.Share] returns a Join Spec with duplicates of them, which
//     the engine sends to a later command's helper in the same world
//     (same user namespace), which clones and attaches them: one
//     overlayfs per root for both commands, as with Premount.
//
// Measured on Linux 6.18 as an unprivileged user: the engine's own
// open_tree(OPEN_TREE_CLONE) of such a mount fails with EPERM (no
// CAP_SYS_ADMIN over its mount namespace), a helper in the world's
// user namespace clones it, before and after it unshares its mount
// namespace (fs/namespace.c's may_copy_tree and check_anonymous_mnt:
// the anonymous namespace of a mount made by fsmount(2) records no
// origin, so it can be cloned from any mount namespace whose user
// namespace has CAP_SYS_ADMIN; one made by OPEN_TREE_CLONE only from
// the namespace it was made in, which is why the engine holds the
// fsmount originals, never clones), and both helpers see one
// superblock. The helpers make and clone in the world's mount
// namespace anyway, the most conservative order. A command whose
// helper cannot send them (it failed first, or a kernel that refuses
// to clone a detached mount: older ones, not tried here) just leaves
// the layer unshared: later commands get layers of their own. A join
// needs the joining helper in the same user namespace as the one that
// made the overlays: package transact joins commands of one
// conversation, which share a world.
//
// Cost (package sandbox's BenchmarkHeldLayer: `true` in a world over a
// new layer, held and not, alternated, medians of 200, Dir on the
// disk): unprivileged, +0.00 to +0.06 ms per command (ratio 1.000 to
// 1.012, three runs, load 2.0-2.6); as root (held in the engine,
// helper launcher) -0.04 to -0.03 ms, that is nothing measurable
// (three runs, load 2.2-2.6).

// handWait bounds how long either end of Hand waits for the overlays.
const handWait = 10 * time.Second

// Hold makes l's overlays, once made by the process that mounts its
// Spec, held by this process for [Layer.Share], where they cannot be
// made ahead of time ([Layer.Premount] needs CAP_SYS_ADMIN over this
// process's mount namespace): that process hands the overlay mounts
// it made over (see [Spec.Open]; in another process, over [Spec.Hand]
// to [Spec.Exchange]) and attaches clones of them. Call it before
// Spec; it does nothing after Premount.
func (l *Layer) Hold() {
	if l.shared == nil {
		l.shared = &handoff{}
	}
}

// HandsOver reports whether the process that mounts s, when it is not
// this one, must get a socket for the overlays ([Spec.Hand]): s is a
// held layer's Spec ([Layer.Hold]) or a Join Spec.
func (s Spec) HandsOver() bool { return s.hold != nil || s.Join }

// Exchange is the holding process's end of [Spec.Hand] (sock): for a
// Join Spec it sends the overlays held for it (call it before the
// process that mounts s starts, or while it waits), and for a held
// layer's Spec it waits, at most 10 s, for the overlays the mounting
// process made and keeps them for [Layer.Share] (call it once that
// process started; it fails when the process ended without sending
// them, and the layer then cannot be shared). It does nothing for other
// Specs. It does not close sock.
func (s Spec) Exchange(sock int) error {
	switch {
	case s.Join:
		fds := s.pre.take()
		if fds == nil {
			return errors.New("layer: the overlays to join were taken or closed")
		}
		defer closeAll(fds)
		if err := unix.Sendmsg(sock, []byte{0}, unix.UnixRights(ints(fds)...), nil, 0); err != nil {
			return fmt.Errorf("layer: send the overlays to join: %w", err)
		}
	case s.hold != nil:
		fds, err := recvMounts(sock, len(s.Overlays), handWait)
		if err != nil {
			return fmt.Errorf("layer: the overlays of a held layer: %w", err)
		}
		if !s.hold.put(fds, true) {
			closeAll(fds) // unshared meanwhile
		}
	}
	return nil
}

// handOver gives the overlays m made to the layer (held in this
// process) or sends them over Hand, and replaces them in m by clones,
// so that the held ones stay detached. When either fails, m keeps the
// overlays and the layer is not shared.
func (s Spec) handOver(m *Mounts) {
	clones, err := cloneMounts(m.fds)
	if err != nil {
		return
	}
	if s.Hand > 0 {
		err = unix.Sendmsg(s.Hand, []byte{0}, unix.UnixRights(ints(m.fds)...), nil, 0)
		closeAll(m.fds) // sent (the message holds them), or not shared
	} else if !s.hold.put(m.fds, false) {
		closeAll(m.fds)
	}
	m.fds = clones
	_ = err // the command goes on over an overlay of its own
}

// cloned returns Mounts of clones of held overlays fds, which it
// closes.
func (s Spec) cloned(fds []*fd.FD) (*Mounts, error) {
	defer closeAll(fds)
	clones, err := cloneMounts(fds)
	if err != nil {
		return nil, err
	}
	return &Mounts{spec: s, fds: clones}, nil
}

// dupMounts duplicates mount descriptors (close-on-exec).
func dupMounts(fds []*fd.FD) ([]*fd.FD, error) {
	out := make([]*fd.FD, 0, len(fds))
	for _, f := range fds {
		d, err := f.Dup()
		if err != nil {
			closeAll(out)
			return nil, fmt.Errorf("layer: %w", err)
		}
		out = append(out, d)
	}
	return out, nil
}

func closeAll(fds []*fd.FD) {
	for _, f := range fds {
		_ = f.Close()
	}
}

// ints returns the descriptors' numbers (the FDs keep them).
func ints(fds []*fd.FD) []int {
	out := make([]int, len(fds))
	for i, f := range fds {
		out[i] = f.Int()
	}
	return out
}

// recvMounts receives one message carrying n descriptors on the socket
// sock, waiting at most timeout.
func recvMounts(sock, n int, timeout time.Duration) ([]*fd.FD, error) {
	if sock <= 0 {
		return nil, errors.New("no socket to receive them on")
	}
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	_ = unix.SetsockoptTimeval(sock, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	oob := make([]byte, unix.CmsgSpace(n*4))
	_, oobn, _, _, err := unix.Recvmsg(sock, make([]byte, 1), oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("receive: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return nil, fmt.Errorf("receive: %w", err)
	}
	var fds []*fd.FD
	for i := range msgs {
		if got, err := unix.ParseUnixRights(&msgs[i]); err == nil {
			for _, n := range got {
				fds = append(fds, fd.New(n))
			}
		}
	}
	if len(msgs) != 1 || len(fds) != n {
		closeAll(fds) // every descriptor received, however many messages carried them
		return nil, fmt.Errorf("receive: got %d descriptors in %d messages, want %d in one (the other end closed?)", len(fds), len(msgs), n)
	}
	return fds, nil
}
