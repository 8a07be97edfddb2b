//go:build linux

package sandbox

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
	"github.com/bashvisor/bashvisor/internal/proc"
)

// Freezer returns what finds, stops, continues and signals the started
// command pid's processes when it has no cgroup (proc.Freezer: the
// processes of its mount namespace, which none of them can leave), nil
// for a command without namespaces (it has no mount namespace of its
// own). As root the command is forked into its namespace from a thread
// of the engine, which keeps a descriptor of it for the Freezer
// (tellNamespace), so the namespace is known however quickly the shell
// ends (even once it was reaped). A rootless command's helper starts in its
// world's mount namespace (never taken for the command's) and makes
// the command's own there (makeView): it then sends the engine a
// descriptor of it over a socket (helperConfig.NamespaceFD) before it
// execs bash, which the Freezer receives (proc.Freezer.Told), so the
// namespace is known however quickly the command ends; a helper that
// fails before ends without running the command. Call it once, after
// the command started.
func (c *Command) Freezer(pid int) *proc.Freezer {
	if c.world == nil && (c.ns == nil || !c.ns.fd.Valid()) && !c.cfg.OwnNamespaces {
		return nil
	}
	if c.world == nil || !c.world.rootless {
		z := proc.NewFreezer(pid)
		c.tellNamespace(z)
		return z
	}
	c.world.mu.Lock()
	var st unix.Stat_t
	var err error = unix.EBADF
	if c.world.mntns.Valid() {
		err = unix.Fstat(c.world.mntns.Int(), &st)
	}
	c.world.mu.Unlock()
	if err != nil {
		return nil // closed: the command cannot have started
	}
	z := proc.NewFreezer(pid, st.Ino)
	if c.nsSock.Valid() {
		z.Told(c.nsSock) // z owns it now
		c.nsSock = nil
	}
	return z
}

// setNamespaceReport gives a command in a rootless world the socket its
// helper tells its mount namespace on (see Freezer).
func (c *Command) setNamespaceReport(cfg *helperConfig) error {
	if c.world == nil || !c.world.rootless {
		return nil
	}
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sandbox: namespace socket: %w", err)
	}
	cfg.NamespaceFD = 3 + len(c.extraFiles())
	c.nsSock, c.nsChild = fd.New(sp[0]), os.NewFile(uintptr(sp[1]), "namespace-report")
	return nil
}

// tellNamespace hands z the command's mount namespace, which the
// thread that forked the command (into it) kept (enterNamespaces): one
// message on a socket, as a rootless helper sends it (proc.Freezer.Told),
// so that z knows it however soon the shell ends. Without it, z looks
// it up from the shell's pid while the shell runs.
func (c *Command) tellNamespace(z *proc.Freezer) {
	ns := c.mntns
	c.mntns = nil
	defer ns.Close()
	if !ns.Valid() {
		return
	}
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return
	}
	send, recv := fd.New(sp[0]), fd.New(sp[1])
	defer send.Close()
	if unix.Sendmsg(send.Int(), []byte{0}, unix.UnixRights(ns.Int()), nil, 0) != nil {
		_ = recv.Close()
		return
	}
	z.Told(recv) // z owns it now
}

// closeNamespaceReport closes what is left of the socket, and of the
// command's mount namespace, and lets the thread that started the
// command end (keep_linux.go).
func (c *Command) closeNamespaceReport() {
	c.release.close()
	_ = c.mntns.Close()
	if c.nsChild != nil {
		_ = c.nsChild.Close()
		c.nsChild = nil
	}
	_ = c.nsSock.Close()
}

// reportNamespace, in the helper, sends the engine a descriptor of its
// (the command's) mount namespace (the calling thread's) on fd, and closes fd.
func reportNamespace(n int) error {
	sock := fd.New(n)
	defer sock.Close()
	ns, err := fd.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY, 0) // the server makes it on a thread
	if err != nil {
		return fmt.Errorf("tell the mount namespace: %w", err)
	}
	defer ns.Close()
	if err := unix.Sendmsg(sock.Int(), []byte{0}, unix.UnixRights(ns.Int()), nil, 0); err != nil {
		return fmt.Errorf("tell the mount namespace: %w", err)
	}
	return nil
}
