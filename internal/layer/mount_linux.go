//go:build linux

package layer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
)

// owner returns the uid and gid of fi.
func owner(fi fs.FileInfo) (int, int) {
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid)
}

// Spec returns what mounting l takes.
func (l *Layer) Spec() Spec {
	s := Spec{UserXattr: l.userXattr, pre: l.pre, uses: l.uses}
	if l.pre == nil {
		s.hold = l.shared // Hold: the mounting process hands its overlays over
	}
	for _, r := range l.roots {
		s.Overlays = append(s.Overlays, Overlay{Root: r.path, Upper: r.upper, Work: r.work})
	}
	return s
}

// Mounts are a layer's overlays, made (fsmount(2)) but not yet attached
// to the tree: [Spec.Open] makes them, [Mounts.Attach] puts them over
// the roots. The two steps let a caller make the rest of its mount
// namespace read-only in between (see [Spec.Open]).
type Mounts struct {
	spec Spec
	fds  []*fd.FD
}

// Mount makes the layer's overlays and attaches each over its root, in
// the calling thread's mount namespace: [Spec.Open] and
// [Mounts.Attach]. It needs CAP_SYS_ADMIN over that namespace (root, or
// any user inside a user namespace of its own with Options.UserXattr).
func (s Spec) Mount() error {
	m, err := s.Open()
	if err != nil {
		return err
	}
	defer m.Close()
	return m.Attach()
}

// Open makes the layer's overlays without attaching them: one overlayfs
// per root with the real directory as its only lower layer and the
// layer's upper and work directories, mounted nosuid and nodev. Call it
// in the command's new (private) mount namespace before anything there
// is made read-only: overlayfs refuses an upper directory on a read-only
// mount when the overlay is made, and keeps a private clone of the
// upper and lower mounts afterwards, so read-only flags set later on the
// namespace's mounts do not reach it. The sandbox calls it where it now
// clones its writable roots (open_tree), before mount_setattr makes
// every mount read-only, and attaches the overlays where it now moves
// the clones back.
//
// The overlays are made with redirect_dir=nofollow (renaming a directory
// that exists in the real tree fails with EXDEV, and mv falls back to
// copying: the upper layer then holds plain new directories and
// whiteouts, never redirects), metacopy=off and index=off (every changed
// file is whole in the upper layer), and volatile: overlayfs skips the
// sync of the upper file system that it would otherwise do on every
// fsync(2) and when the last process of the command's namespace exits
// (a syncfs of the whole disk, which would delay the end of every
// command). What a command wrote is as durable as any unsynced write
// once applied; a crash before that loses it, and what is left of a
// crashed engine's layers is removed by [RemoveStale]. A volatile
// overlay leaves a mark in its work directory that makes overlayfs
// refuse to mount it again: a layer is mounted once, for one command.
//
// When the layer was premounted ([Layer.Premount]) and s is that
// layer's Spec in the same process, the first Open returns those
// overlays instead of making new ones. For a held layer ([Layer.Hold])
// it hands the overlays it made over (to the layer in this process, or
// over Hand) and returns clones of them; for a Join Spec it returns
// clones of the overlays held for it (in this process, or received
// over Hand). It closes Hand.
func (s Spec) Open() (*Mounts, error) {
	if s.Hand > 0 {
		defer fd.New(s.Hand).Close() // the number is this process's to close
	}
	if fds := s.pre.take(); fds != nil {
		if s.Join {
			return s.cloned(fds)
		}
		return &Mounts{spec: s, fds: fds}, nil
	}
	if s.Join {
		fds, err := recvMounts(s.Hand, len(s.Overlays), handWait)
		if err != nil {
			return nil, fmt.Errorf("layer: the overlays to join: %w", err)
		}
		return s.cloned(fds)
	}
	m := &Mounts{spec: s}
	for _, o := range s.Overlays {
		f, err := o.make(s.UserXattr)
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("layer: overlay over %s: %w", o.Root, err)
		}
		m.fds = append(m.fds, f)
	}
	if s.hold != nil || s.Hand > 0 {
		s.handOver(m)
	}
	return m, nil
}

// Premount makes the layer's overlays now, in the calling process, as
// [Spec.Open] would (detached, not attached anywhere), so that the
// process that mounts the layer later only attaches them: the
// overlays' setup (overlayfs creates and checks its work directory,
// metadata writes on the upper layer's file system) is then off the
// command's path. It serves a layer mounted from a thread of this
// process: as root the sandbox makes a command's mount namespace on a
// throwaway thread of the engine with either launcher (StartDirect, and
// StartHelper before it starts the helper). A process that gets the
// Spec as JSON (the rootless sandbox helper, in a user namespace) makes
// overlays of its own, with the work directories of the Spec (the
// premade ones have others), and overlayfs then warns in the kernel log
// that the upper directories are in use by another mount (the premade
// overlays, never attached). So premount only layers mounted in this
// process. The premade overlays
// are used by the first [Spec.Open] of this layer's Spec, and closed by
// [Layer.Remove] if none took them. Call it before the command starts;
// rootless it fails with EPERM (overlayfs must be made in the user
// namespace that mounts it): [Layer.Hold] serves there.
func (l *Layer) Premount() error {
	if l.pre != nil {
		return nil
	}
	s := Spec{UserXattr: l.userXattr}
	for i, r := range l.roots {
		work := filepath.Join(l.dir, "p"+strconv.Itoa(i))
		if err := os.Mkdir(work, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("layer: %w", err)
		}
		s.Overlays = append(s.Overlays, Overlay{Root: r.path, Upper: r.upper, Work: work})
	}
	m, err := s.Open()
	if err != nil {
		return err
	}
	clones, err := cloneMounts(m.fds)
	if err != nil {
		m.Close()
		return err
	}
	l.pre, l.shared = &handoff{fds: clones}, &handoff{fds: m.fds}
	return nil
}

// Share returns a Spec that mounts the overlays l's Spec mounts, not
// new ones: its first [Spec.Open] returns clones (open_tree(2) with
// OPEN_TREE_CLONE) of the overlay mounts [Layer.Premount] made (cloned
// here), or that the process that mounted a held layer handed over
// ([Layer.Hold]; cloned by the Open, in the process that mounts the
// Spec: a Join Spec), so that every namespace that attaches them
// shares one overlayfs per root: one upper layer, and one cache of the
// lower directories, so that what one command writes is what another
// sees at once (lookups, inotify events), which two overlays of the
// same directories do not give (overlayfs keeps what it looked up in
// its lower layer). Each call makes new clones. It fails with
// [ErrNotShared] when l was neither premounted nor held, when a held
// layer's overlays were not handed over (yet), or after [Layer.Unshare]
// or [Layer.Remove]. Share is safe for concurrent use with Unshare.
func (l *Layer) Share() (Spec, error) {
	if l.shared == nil {
		return Spec{}, ErrNotShared
	}
	l.shared.mu.Lock()
	defer l.shared.mu.Unlock()
	if l.shared.fds == nil {
		return Spec{}, ErrNotShared
	}
	s := l.Spec()
	s.hold = nil
	if l.shared.foreign {
		// Made in a user namespace where this process cannot mount:
		// the process that mounts s clones them (Spec.Open).
		dups, err := dupMounts(l.shared.fds)
		if err != nil {
			return Spec{}, err
		}
		s.pre, s.own, s.Join = &handoff{fds: dups}, true, true
		return s, nil
	}
	clones, err := cloneMounts(l.shared.fds)
	if err != nil {
		return Spec{}, err
	}
	s.pre, s.own = &handoff{fds: clones}, true
	return s, nil
}

// ErrNotShared is returned by [Layer.Share] for a layer whose overlays
// this process does not hold.
var ErrNotShared = errors.New("layer: the layer's overlays are not held (not premounted, or unshared)")

// Unshare closes what Premount kept for [Layer.Share]: later Share
// calls fail. The overlays stay mounted where they are attached; once
// nothing has them attached, the overlays are gone. Call it when no
// command is to join l any more (before the final [Layer.Diff], so that
// no overlay of l outlives its last command); Remove calls it.
func (l *Layer) Unshare() {
	closeAll(l.shared.take())
}

// cloneMounts clones detached mounts (open_tree(2), OPEN_TREE_CLONE).
func cloneMounts(fds []*fd.FD) ([]*fd.FD, error) {
	out := make([]*fd.FD, 0, len(fds))
	for _, f := range fds {
		c, err := unix.OpenTree(f.Int(), "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
		if err != nil {
			closeAll(out)
			return nil, fmt.Errorf("layer: clone the overlay mount: %w", err)
		}
		out = append(out, fd.New(c))
	}
	return out, nil
}

// Close closes the overlays made ahead of time for s that no [Spec.Open]
// took ([Layer.Share]'s clones): call it when the command that was to
// mount them never started. It does nothing to a Spec without them, nor
// to the overlays of [Layer.Premount] (Layer.Remove closes those).
func (s Spec) Close() {
	if s.pre == nil || !s.own {
		return
	}
	closeAll(s.pre.take())
}

// closePremount closes premade overlays that no Open took, and those
// kept for Share.
func (l *Layer) closePremount() {
	closeAll(l.pre.take())
	l.Unshare()
}

// overlay makes one detached overlay mount.
func (o Overlay) make(userXattr bool) (*fd.FD, error) {
	n, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("fsopen: %w", err)
	}
	fsctx := fd.New(n)
	defer fsctx.Close()
	fsfd := fsctx.Int()
	set := func(key, value string) error {
		if err := unix.FsconfigSetString(fsfd, key, value); err != nil {
			return fmt.Errorf("%s=%s: %w%s", key, value, err, fsError(fsfd))
		}
		return nil
	}
	// lowerdir+ (Linux 6.8) takes one path as it is; lowerdir parses
	// ':' as a separator and needs it escaped.
	if err := unix.FsconfigSetString(fsfd, "lowerdir+", o.Root); err != nil {
		if err := set("lowerdir", escapeLower(o.Root)); err != nil {
			return nil, err
		}
	}
	for _, kv := range [][2]string{
		{"upperdir", o.Upper}, {"workdir", o.Work},
		{"redirect_dir", "nofollow"}, {"metacopy", "off"}, {"index", "off"},
	} {
		if err := set(kv[0], kv[1]); err != nil {
			return nil, err
		}
	}
	flags := []string{"volatile"}
	if userXattr {
		flags = append(flags, "userxattr")
	}
	for _, f := range flags {
		if err := unix.FsconfigSetFlag(fsfd, f); err != nil {
			return nil, fmt.Errorf("%s: %w%s", f, err, fsError(fsfd))
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return nil, fmt.Errorf("create: %w%s", err, fsError(fsfd))
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return nil, fmt.Errorf("fsmount: %w", err)
	}
	return fd.New(mfd), nil
}

// fsError reads the message overlayfs left in its fs context's log
// ("; overlayfs: ...") or returns "".
func fsError(fsfd int) string {
	buf := make([]byte, 512)
	var msgs []string
	for range 8 {
		n, err := unix.Read(fsfd, buf)
		if err != nil || n <= 0 {
			break
		}
		msgs = append(msgs, strings.TrimSpace(string(buf[:n])))
	}
	if len(msgs) == 0 {
		return ""
	}
	return " (" + strings.Join(msgs, "; ") + ")"
}

// escapeLower escapes a path for the lowerdir option.
func escapeLower(p string) string {
	return strings.NewReplacer(`\`, `\\`, `:`, `\:`, `,`, `\,`).Replace(p)
}

// Attach attaches each overlay over its root (move_mount(2)), outer
// roots first. From then on, in this mount namespace, the command sees
// and changes the merged tree; the real directories are unchanged.
//
// Bind mounts made below a root before Attach are hidden by the
// overlay (it shows the real directory, not the mounts on it); bind
// mounts made after it are made on the overlay. The read-only bind
// mounts of the workspace-write profile (Roots.Protected) and its pins
// are not needed with a layer: changes to what they protect are refused
// by policy on the change set instead, and nothing reaches the real
// tree before that. Kept, they would have to be made after Attach,
// from the merged paths, to have any effect.
//
// A working directory at or below a root still refers to the real
// directory after the mount: Attach changes the calling thread's working
// directory to the same path again, so that what the process starts
// there (and relative paths) see the overlay.
func (m *Mounts) Attach() error {
	wd, _ := unix.Getwd()
	again := false
	for i, f := range m.fds {
		p := m.spec.Overlays[i].Root
		if err := unix.MoveMount(f.Int(), "", unix.AT_FDCWD, p, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("layer: attach overlay over %s: %w", p, err)
		}
		again = again || wd == p || below(wd, p)
	}
	if again {
		if err := unix.Chdir(wd); err != nil {
			return fmt.Errorf("layer: enter the working directory again: %w", err)
		}
	}
	return nil
}

// Close closes the mount descriptors. Overlays that were attached stay
// mounted (until the mount namespace ends); the others are gone.
func (m *Mounts) Close() {
	closeAll(m.fds)
	m.fds = nil
}
