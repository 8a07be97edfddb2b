//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/vfork"
)

// The rootless probe (is there a user namespace to make worlds in?) and
// the small helper a rootless engine starts instead of its own executable.

// probeRootless checks that this (unprivileged) process can make a
// world: that the kernel gives it a user namespace in which it may make
// network and mount namespaces and mount a file system (probeUserns), and
// picks the helper its worlds and commands start: the small helper next
// to its executable when there is one to trust (adjacentHelper), else its
// own executable. Whether the small helper speaks this engine's protocol
// is found by the first world made with it, which falls back to the
// executable (makeWorld): the probe makes no world of its own, so that a
// one-command engine (`bashvisor run`) makes one world, not two.
func probeRootless() error {
	if !mainCalled.Load() {
		return errors.New("an engine that is not root makes namespaces through its helper: the program must call engine.SandboxMain (sandbox.Main) first in main")
	}
	if err := probeUserns(); err != nil {
		return fmt.Errorf("no user namespaces: %w", err)
	}
	if small := adjacentHelper(filepath.Dir(ownExe())); small != "" {
		smallHelper.Store(small)
	}
	return nil
}

// usernsSpec is what usernsChild's child needs, prepared before the
// clone: it only reads it and makes system calls.
type usernsSpec struct {
	dir, fstype *byte
	sigOld      uint64
}

// probeUserns clones a child into new user, network and mount namespaces
// that mounts a tmpfs and exits, as a world's child would before it
// builds the world. It costs a clone and a namespace teardown, against
// a run of the helper for a world.
func probeUserns() error {
	// On / (always there): the mount is the child's own, in a mount
	// namespace that ends with it.
	s := &usernsSpec{}
	var err error
	if s.dir, err = unix.BytePtrFromString("/"); err != nil {
		return err
	}
	if s.fstype, err = unix.BytePtrFromString("tmpfs"); err != nil {
		return err
	}
	pid, errno := signalsBlocked(&s.sigOld, func() (int, syscall.Errno) { return usernsChild(s) })
	if errno != 0 {
		return fmt.Errorf("clone: %w", errno)
	}
	var status unix.WaitStatus
	for {
		_, err = unix.Wait4(pid, &status, 0, nil)
		if err != unix.EINTR {
			break
		}
	}
	switch {
	case err != nil:
		return fmt.Errorf("wait: %w", err)
	case !status.Exited():
		return fmt.Errorf("the probe's child ended: %v", status)
	case status.ExitStatus() != 0:
		return fmt.Errorf("mount a tmpfs: %w", syscall.Errno(status.ExitStatus()))
	}
	return nil
}

// usernsChild clones as forkRaw does (vforkFlags: the child runs on this
// thread's stack, in the engine's memory, until it exits), in new user,
// network and mount namespaces; the child mounts a tmpfs on s.dir (in its
// own mount namespace: nothing propagates out of one that a new user
// namespace owns) and exits with the mount's errno, 0 when it mounted.
//
//go:norace
//go:nosplit
func usernsChild(s *usernsSpec) (int, syscall.Errno) {
	r1, e := vfork.RawSyscall(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD)|vforkFlags|unix.CLONE_NEWUSER|unix.CLONE_NEWNET|unix.CLONE_NEWNS, 0, 0)
	if e != 0 || r1 != 0 {
		return int(r1), e
	}
	_, _, e = syscall.RawSyscall6(unix.SYS_MOUNT, uintptr(unsafe.Pointer(s.fstype)), uintptr(unsafe.Pointer(s.dir)), uintptr(unsafe.Pointer(s.fstype)), unix.MS_NOSUID|unix.MS_NODEV, 0, 0)
	for {
		syscall.RawSyscall(unix.SYS_EXIT_GROUP, uintptr(e), 0, 0)
	}
}

// helperName is the small helper program (a build of
// ./cmd/bashvisor-sandbox) a rootless engine looks for next to its own
// executable.
const helperName = "bashvisor-sandbox"

// adjacentHelper returns helperName in dir ("": none, or not one to
// trust): a regular executable file, not a symlink, in a directory, that
// nobody but their owners, root or this process's user, may write (so
// that nobody else can put another program there between the probe and a
// later start, which exec it by path). Whether it speaks this engine's
// helper protocol is found when a world is made with it (worldChild
// refuses another version's).
func adjacentHelper(dir string) string {
	if dir == "" {
		return ""
	}
	trusted := func(st *unix.Stat_t, kind uint32) bool {
		return st.Mode&unix.S_IFMT == kind && st.Mode&0o022 == 0 && (st.Uid == 0 || int(st.Uid) == os.Geteuid())
	}
	p := filepath.Join(dir, helperName)
	var st, dst unix.Stat_t
	if unix.Lstat(p, &st) != nil || !trusted(&st, unix.S_IFREG) || st.Mode&0o111 == 0 ||
		unix.Stat(dir, &dst) != nil || !trusted(&dst, unix.S_IFDIR) {
		return ""
	}
	return p
}
