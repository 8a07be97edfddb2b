//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
	"github.com/bashvisor/bashvisor/internal/layer"
)

// Private namespaces: where the engine may create them (CAP_SYS_ADMIN, in
// practice root), every restricted command gets
//
//   - a network namespace of its own, with only a loopback interface: no
//     route out exists at the kernel level (the seccomp filter closes the
//     network too), and abstract unix socket names bound inside are
//     invisible outside. Creating one costs ~0.4 ms, so they are pooled:
//     a namespace whose command ended with every process gone (the pids
//     cgroup was emptied) is reused, since nothing of the old command can
//     remain in it (sockets die with their processes, and nothing inside
//     can change its configuration: netlink is denied and /proc/sys is
//     read-only);
//   - a fresh IPC namespace: SysV shared memory, semaphores and message
//     queues and POSIX message queues are the command's own and die with
//     it (never reused);
//   - a fresh mount namespace in which the scratch directory is a tmpfs of
//     Limits.ScratchBytes and Limits.ScratchFiles: writes beyond fail with
//     ENOSPC, and the files vanish with the namespace even if the engine is
//     killed. The namespace is private (no propagation to or from the host).
//
// A command in a conversation's World joins the world's network namespace
// and makes its mount namespace from the world's (see World). An engine
// that is not root gets all of these from user namespaces
// (rootless_linux.go). Without namespaces at all the seccomp filter denies
// SysV IPC, POSIX message queues and bind(2) instead, and the scratch
// directory is an ordinary directory with no quota.

// netnsPool holds idle network namespaces (open /proc/thread-self/ns/net
// descriptors), at most maxIdleNetns.
var netnsPool struct {
	sync.Mutex
	idle []*fd.FD
}

const maxIdleNetns = 32

// getNetns returns a network namespace for one command: an idle one, or a
// new one with the loopback interface up.
func getNetns() (*fd.FD, error) {
	netnsPool.Lock()
	if n := len(netnsPool.idle); n > 0 {
		ns := netnsPool.idle[n-1]
		netnsPool.idle = netnsPool.idle[:n-1]
		netnsPool.Unlock()
		return ns, nil
	}
	netnsPool.Unlock()
	var ns *fd.FD
	err := onThrowawayThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
		}
		if err := loopbackUp(); err != nil {
			return err
		}
		var err error
		ns, err = fd.Open("/proc/thread-self/ns/net", unix.O_RDONLY, 0)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox: network namespace: %w", err)
	}
	return ns, nil
}

// putNetns hands a namespace whose processes are all gone back for reuse.
func putNetns(ns *fd.FD) {
	netnsPool.Lock()
	if len(netnsPool.idle) < maxIdleNetns {
		netnsPool.idle = append(netnsPool.idle, ns)
		netnsPool.Unlock()
		return
	}
	netnsPool.Unlock()
	_ = ns.Close()
}

// loopbackUp sets the calling thread's network namespace's lo interface
// up.
func loopbackUp() error {
	n, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	sock := fd.New(n)
	defer sock.Close()
	s := sock.Int()
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	return nil
}

// netnsHandle is a command's hold on a pooled network namespace. If the
// command is dropped without Cleanup (its processes were left running), the
// descriptor is closed when the Command is garbage collected, never
// reused.
type netnsHandle struct {
	mu sync.Mutex
	fd *fd.FD // nil once released
}

func noNetns() *netnsHandle { return &netnsHandle{} }

func newNetnsHandle() (*netnsHandle, error) {
	ns, err := getNetns()
	if err != nil {
		return nil, err
	}
	return &netnsHandle{fd: ns}, nil
}

// release gives the namespace back for reuse, or closes it.
func (h *netnsHandle) release(reuse bool) {
	h.mu.Lock()
	ns := h.fd
	h.fd = nil
	h.mu.Unlock()
	switch {
	case !ns.Valid():
	case reuse:
		putNetns(ns)
	default:
		_ = ns.Close()
	}
}

// enterNamespaces moves the calling (locked, throwaway) thread into the
// command's namespaces: its world's network namespace (or a pooled one),
// a new IPC namespace and a new private mount namespace (see makeView).
// What the thread forks afterwards inherits them.
func (c *Command) enterNamespaces() error {
	if c.world != nil {
		if err := c.world.enter(); err != nil {
			return err
		}
	} else if err := unix.Setns(c.ns.fd.Int(), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("setns(net): %w", err)
	}
	if err := makeView(&c.cfg); err != nil {
		return err
	}
	// The command's mount namespace, for its Freezer: a shell that ends
	// at once may be gone before the Freezer could read it from /proc.
	if ns, err := fd.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY, 0); err == nil {
		_ = c.mntns.Close()
		c.mntns = ns
	}
	return nil
}

// makeView gives the calling thread new IPC and mount namespaces and makes
// the command's view of the file system in the latter: in a world, the
// world's /tmp and caches, the engine's directories hidden, everything
// read-only but the writable roots (mountView); otherwise the same
// without a world where there are writable roots, and a tmpfs on the
// scratch directory. The rootless helper calls it in the world's user
// namespace.
func makeView(cfg *helperConfig) error {
	if err := unix.Unshare(unix.CLONE_NEWIPC | unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare(CLONE_NEWIPC|CLONE_NEWNS): %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if cfg.World != nil {
		if err := cfg.World.resize(); err != nil {
			return err
		}
	}
	masks, err := readMasks(cfg.Masks) // before mountView hides their sources
	if err != nil {
		return err
	}
	var tmp *fd.FD // the throwaway view's upper layers (see throwawayFS)
	if cfg.ThrowawayCaches {
		if tmp, err = throwawayFS(cfg); err != nil {
			return err
		}
		defer tmp.Close() // the overlays keep the tmpfs
		if err := throwawayTmp(cfg, tmp); err != nil {
			return err
		}
	}
	if cfg.readOnlyMounts() {
		if err := mountView(cfg); err != nil {
			return err
		}
	}
	if cfg.ThrowawayCaches {
		if err := throwawayCaches(cfg, tmp); err != nil {
			return err
		}
	}
	if cfg.Resolver != "" {
		if err := maskResolvConf(cfg.Resolver); err != nil {
			return err
		}
	}
	if err := maskFiles(masks); err != nil {
		return err
	}
	if cfg.World != nil {
		return nil
	}
	opts := "mode=0700,uid=" + strconv.Itoa(os.Geteuid()) + ",gid=" + strconv.Itoa(os.Getegid()) +
		",size=" + strconv.FormatUint(cfg.ScratchBytes, 10) + ",nr_inodes=" + strconv.FormatUint(cfg.ScratchFiles, 10)
	if err := unix.Mount("tmpfs", cfg.Scratch, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount scratch tmpfs: %w", err)
	}
	return makeCacheDir(cfg.Scratch)
}

// mountView makes every mount of the command's mount namespace read-only
// except the writable roots, then pins and protects what Roots asks for:
//
//   - each writable root's mount tree is cloned as it is (open_tree),
//     before anything changes, so a root keeps the host's flags: a
//     read-only mount below a writable root (a read-only volume in a
//     workspace) stays read-only; so are the command's cgroup v1
//     directories, which the helper joins from inside;
//   - with a Layer, its overlays are made (layer.Spec.Open) instead of
//     clones of the roots they cover: overlayfs checks that its upper
//     directory is writable when it is made, and keeps private clones of
//     its upper and lower mounts, which the next step does not reach;
//   - every mount is made read-only (mount_setattr, recursively from /):
//     chmod, chown, utimes and xattrs anywhere else now fail with EROFS,
//     which is what lets the seccomp filter allow them (it cannot see
//     paths);
//   - in a world: the world's tmp is attached on /tmp, the engine's
//     directories still in view are covered by empty tmpfs mounts, and
//     the shown directories are attached again, read-only (see World);
//   - the clones are attached over their roots (move_mount), making their
//     mount points first where they are missing (inside the world's /tmp
//     or a hiding mount, which is then made read-only), then the layer's
//     overlays over theirs (layer.Mounts.Attach; the calling thread
//     enters its working directory again, so that it is the overlay's),
//     then the world's caches that lie below an overlay over it (a
//     workspace holding the user's caches: they stay the world's, not
//     the layer's);
//   - without a layer, each pinned directory is bind-mounted onto itself
//     and each protected path onto itself read-only: a mount point can be
//     neither removed nor renamed (EBUSY), and nothing below a read-only
//     one can change.
//
// The namespace is private, so none of it is seen outside. It costs a few
// tens of microseconds without a layer (see the package benchmarks).
func mountView(cfg *helperConfig) error {
	roots := outermost(cfg.Writable)
	var late []string // the world's caches below an overlay: attached over it
	if cfg.Layer != nil {
		// The overlays cover the roots at or below theirs.
		covered := func(r string) bool {
			return slices.ContainsFunc(cfg.Layer.Overlays, func(o layer.Overlay) bool { return within(r, o.Root) })
		}
		roots = slices.DeleteFunc(roots, covered)
		late = slices.DeleteFunc(slices.Clone(cfg.Caches), func(c string) bool { return !covered(c) })
	}
	// The helper joins its cgroups in v1 hierarchies inside the namespace,
	// before Landlock denies the write.
	roots = append(roots, cfg.CgroupDirs...)
	roots = append(roots, late...)
	trees := make([]*fd.FD, 0, len(roots))
	defer func() {
		for _, t := range trees {
			_ = t.Close() // once moved: closed already
		}
	}()
	for _, r := range roots {
		t, err := cloneTree(r, true)
		if err != nil {
			return err
		}
		trees = append(trees, t)
	}
	overlays := cfg.mounts
	if cfg.Layer != nil && overlays == nil {
		var err error
		if overlays, err = cfg.Layer.Open(); err != nil {
			return fmt.Errorf("copy-on-write layer: %w", err)
		}
	}
	if overlays != nil {
		defer overlays.Close()
	}
	var wt *worldTrees
	if cfg.World != nil {
		var err error
		wt, err = cloneWorld(cfg.World)
		defer wt.close()
		if err != nil {
			return err
		}
	}
	ro := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, ro); err != nil {
		return fmt.Errorf("make mounts read-only: %w", err)
	}
	if wt != nil {
		if err := wt.attachTmp(); err != nil {
			return err
		}
	}
	early := len(roots) - len(late)
	for i, r := range roots[:early] {
		if err := moveTree(trees[i], r); err != nil {
			return fmt.Errorf("writable root: %w", err)
		}
	}
	if overlays != nil {
		if err := attachLayer(cfg.Layer, overlays); err != nil {
			return err
		}
	}
	for i, r := range late {
		if err := moveTree(trees[early+i], r); err != nil {
			return fmt.Errorf("cache: %w", err)
		}
	}
	if wt != nil {
		if err := wt.attachShown(); err != nil {
			return err
		}
		if err := wt.sealMasks(); err != nil {
			return err
		}
	}
	if cfg.Layer != nil {
		return nil
	}
	return pinAndProtect(cfg)
}

// attachLayer attaches the layer's overlays over their roots, making the
// mount points first where they are missing (inside the world's /tmp or
// a hiding mount).
func attachLayer(spec *layer.Spec, overlays *layer.Mounts) error {
	for _, o := range spec.Overlays {
		if err := os.MkdirAll(o.Root, 0o700); err != nil {
			return fmt.Errorf("copy-on-write layer: mount point %s: %w", o.Root, err)
		}
	}
	if err := overlays.Attach(); err != nil {
		return fmt.Errorf("copy-on-write layer: %w", err)
	}
	return nil
}

// pinAndProtect bind-mounts each pinned directory onto itself and each
// protected path onto itself read-only (see mountView).
func pinAndProtect(cfg *helperConfig) error {
	ro := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	for _, p := range cfg.Pinned {
		if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("pin %s: %w", p, err)
		}
	}
	for _, p := range cfg.Protected {
		if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("protect %s: %w", p, err)
		}
		if err := unix.MountSetattr(unix.AT_FDCWD, p, unix.AT_RECURSIVE|unix.AT_SYMLINK_NOFOLLOW, ro); err != nil {
			return fmt.Errorf("protect %s: %w", p, err)
		}
	}
	return nil
}

// outermost returns the paths of roots that are not below another one.
func outermost(roots []string) []string {
	var out []string
	for _, r := range roots {
		below := false
		for _, o := range roots {
			if o != r && strings.HasPrefix(r, strings.TrimSuffix(o, "/")+"/") {
				below = true
				break
			}
		}
		if !below {
			out = append(out, r)
		}
	}
	return out
}

// listen makes a TCP listener on 127.0.0.1 inside the namespace: socket(2)
// creates a socket in the network namespace of the calling thread, and the
// socket stays there wherever it is used from.
func (h *netnsHandle) listen() (net.Listener, error) { return listenIn(h.fd.Int()) }

// listenIn makes a TCP listener on 127.0.0.1 in network namespace netns.
func listenIn(netns int) (net.Listener, error) {
	var l net.Listener
	err := onThrowawayThread(func() error {
		if err := unix.Setns(netns, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("setns(net): %w", err)
		}
		var err error
		l, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox: proxy listener: %w", err)
	}
	return l, nil
}

// makeCacheDir creates the cache directory inside the scratch directory.
func makeCacheDir(scratch string) error {
	if err := os.Mkdir(scratch+"/.cache", 0o700); err != nil {
		return fmt.Errorf("create cache dir: %w", err)
	}
	return nil
}

// probeNamespaces checks that this process can give a command private
// network, IPC and mount namespaces with a tmpfs scratch directory.
func probeNamespaces() error {
	dir, err := os.MkdirTemp("", "bashvisor-probe-")
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	ns, err := getNetns()
	if err != nil {
		return err
	}
	c := &Command{Scratch: dir, ns: &netnsHandle{fd: ns}, cfg: helperConfig{Scratch: dir, ScratchBytes: 1 << 20, ScratchFiles: 16}}
	err = onThrowawayThread(func() error {
		if err := c.enterNamespaces(); err != nil {
			return err
		}
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			return err
		}
		if st.Type != unix.TMPFS_MAGIC {
			return errors.New("the scratch tmpfs is not mounted")
		}
		// The thread's own reference is the namespace's last: the kernel
		// tears it down (and waits for an RCU grace period, 1–10 ms) as the
		// thread exits, not in this call (as closeOnThread does a world's).
		_ = c.mntns.Close()
		return nil
	})
	_ = c.mntns.Close()
	if err != nil {
		_ = ns.Close()
		return err
	}
	putNetns(ns)
	// The thread's cache dir is on its tmpfs: the engine must not see it.
	if _, err := os.Stat(dir + "/.cache"); err == nil {
		_ = os.Remove(dir + "/.cache")
		return errors.New("the scratch tmpfs is visible outside its mount namespace")
	}
	return nil
}

// onThrowawayThread runs f on a goroutine locked to an OS thread that is
// terminated afterwards (the goroutine exits without unlocking), so
// whatever f does to the thread (namespaces, confinement) never reaches
// the rest of the process. The main thread is never terminated by the Go
// runtime (it would be kept, changed, forever), so if the goroutine lands
// on it, it keeps the main thread busy and runs f on another goroutine,
// which then cannot land there.
func onThrowawayThread(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			errc <- onThrowawayThread(f)
			runtime.UnlockOSThread() // the main thread was never changed
			return
		}
		errc <- f()
		// Return still locked: the runtime terminates this thread.
	}()
	return <-errc
}
