//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/fd"
)

// world is a World's state: the descriptors of its namespaces and of its
// file system's root, which hold nothing once closed (nor, for userns,
// as root).
type world struct {
	dir        string
	rootless   bool
	bases      map[string]string // the caches that have a base: name → the base's path, where commands see it
	hide, show []string
	helper     string // the program that starts a rootless world's commands

	mu                         sync.Mutex
	userns, netns, mntns, root *fd.FD
	slots                      [maxSlots]bool // taken by commands with a resolver (see setCapture)
	server                     *worldServer   // a rootless world's command server (nil: none, see server_linux.go)
	serverAt                   serverStart    // when a rootless world starts its server
	commands                   int            // the commands started so far (serveSecond)
	serverTimer                *time.Timer    // starts the server serverDelay after the first command (serveSecond)
	starting                   sync.WaitGroup // a server start of serverTimer's under way
}

// serverStart says when a rootless world starts its command server.
type serverStart int

const (
	// serveNow: as the world is made (the package's tests and benchmarks).
	serveNow serverStart = iota
	// serveSecond: serverDelay after its first command started, or as
	// its second command starts if that is sooner: a world of one short
	// command, such as `bashvisor run`'s, starts none (see startLater).
	serveSecond
	// serveNever: the probe's world, which runs no command.
	serveNever
)

// worldSpec is what building a world's mount namespace takes (JSON: a
// rootless world is built by a child process).
type worldSpec struct {
	Dir      string            `json:"dir"`
	Bytes    uint64            `json:"bytes"`
	Files    uint64            `json:"files"`
	Bases    map[string]string `json:"bases,omitempty"`
	Rootless bool              `json:"rootless,omitempty"`
	// UID and GID are the engine's, which a rootless world's child maps
	// to themselves in its new user namespace (mapSelf).
	UID int `json:"uid,omitempty"`
	GID int `json:"gid,omitempty"`
}

// worldConfig is the part of a command's helperConfig about its world.
type worldConfig struct {
	// Dir is the world's directory: its file system is mounted there in
	// the world's mount namespace, the command's /tmp is Dir/tmp and its
	// caches are Dir/cache.
	Dir  string   `json:"dir"`
	Hide []string `json:"hide,omitempty"`
	Show []string `json:"show,omitempty"`
	// Rootless: the helper, in the world's user namespace, makes the
	// command's mount namespace itself.
	Rootless bool `json:"rootless,omitempty"`
	// Size, when set, is the size the world's file system gets before
	// the command starts (see Options.WorldSize).
	Size uint64 `json:"size,omitempty"`
}

// resize sets the size of the world's file system (a tmpfs), from inside a
// mount namespace that has it (the world's or a command's): never below
// what it holds, which the kernel refuses.
func (c *worldConfig) resize() error {
	if c.Size == 0 {
		return nil
	}
	n, err := unix.Fspick(unix.AT_FDCWD, c.Dir, unix.FSPICK_CLOEXEC|unix.FSPICK_NO_AUTOMOUNT)
	if err != nil {
		return fmt.Errorf("resize the world's file system: %w", err)
	}
	fsctx := fd.New(n)
	defer fsctx.Close()
	var st unix.Statfs_t
	size := c.Size
	if err := unix.Statfs(c.Dir, &st); err == nil {
		size = max(size, (st.Blocks-st.Bfree)*uint64(st.Bsize)+1<<20)
	}
	if err := unix.FsconfigSetString(fsctx.Int(), "size", strconv.FormatUint(size, 10)); err != nil {
		return fmt.Errorf("resize the world's file system: %w", err)
	}
	if err := unix.FsconfigReconfigure(fsctx.Int()); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("resize the world's file system: %w", err)
	}
	return nil
}

// NewWorld makes a conversation's world: its network namespace with
// loopback up, and its mount namespace with the world's file system
// (tmpfs) on opts.Dir and the caches' overlays on their bases. Call
// [World.Close] when the conversation ends. It fails with [ErrUnavailable]
// where namespaces cannot be made (see [Capabilities.Namespaces]).
func NewWorld(opts WorldOptions) (*World, error) {
	caps := Probe()
	if !caps.Namespaces {
		return nil, unavailable("a conversation's world needs private namespaces (root, or user namespaces): " + caps.Reason)
	}
	return makeWorld(opts, caps.Rootless, serveSecond)
}

// newWorld makes a world whose server, when rootless, starts at once.
func newWorld(opts WorldOptions, rootless bool) (*World, error) {
	return makeWorld(opts, rootless, serveNow)
}

func makeWorld(opts WorldOptions, rootless bool, serve serverStart) (*World, error) {
	if !filepath.IsAbs(opts.Dir) {
		return nil, fmt.Errorf("sandbox: world directory must be an absolute path: %q", opts.Dir)
	}
	// The cache directory is made on the host too: paths are resolved
	// there (the world's file system covers it in the world).
	if err := os.MkdirAll(filepath.Join(opts.Dir, "cache"), 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: world directory: %w", err)
	}
	dir, err := filepath.EvalSymlinks(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox: world directory: %w", err)
	}
	def := config.SandboxLimits{}.WithDefaults()
	spec := worldSpec{Dir: dir, Bytes: opts.Bytes, Files: opts.Files, Bases: map[string]string{}, Rootless: rootless, UID: os.Geteuid(), GID: os.Getegid()}
	if spec.Bytes == 0 {
		spec.Bytes = def.ScratchBytes
	}
	if spec.Files == 0 {
		spec.Files = def.ScratchFiles
	}
	for name, base := range opts.BaseCaches.Dirs() {
		// A cache the user's tool has not made yet is made as the tool
		// would (empty), to hold the conversation's at its path. One that
		// cannot be made (HOME=/nonexistent, a file in the way) is taken
		// as no base: the cache starts empty.
		if err := os.MkdirAll(base, 0o755); errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) ||
			errors.Is(err, fs.ErrExist) || errors.Is(err, unix.EROFS) || errors.Is(err, unix.ENOTDIR) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("sandbox: base cache %s: %w", name, err)
		}
		b, err := filepath.EvalSymlinks(base)
		if err != nil {
			return nil, fmt.Errorf("sandbox: base cache %s: %w", name, err)
		}
		spec.Bases[name] = b
	}
	clean := func(paths []string) []string {
		var out []string
		for _, p := range paths {
			if r, err := filepath.EvalSymlinks(p); err == nil {
				out = append(out, r)
			}
		}
		return out
	}
	w := &world{dir: dir, rootless: rootless, hide: clean(opts.Hide), show: opts.Show, bases: spec.Bases, serverAt: serve}
	w.helper = selfExe
	if rootless {
		w.helper = selfPath()
	}
	if opts.Helper != "" {
		w.helper = opts.Helper
	}
	if rootless {
		err = w.makeRootless(spec)
		if small := w.helper; errors.Is(err, errNotHelper) && opts.Helper == "" && small != ownExe() {
			// The small helper next to the executable may not be one
			// that makes this engine's worlds (another version's, or not
			// a helper at all): the executable makes this one and, if it
			// can, every later one (selfPath). A helper that failed short
			// of a resource or at the timeout, or where the executable
			// fails too, is kept.
			w.helper = ownExe()
			if rerr := w.makeRootless(spec); rerr == nil {
				smallHelper.CompareAndSwap(small, "")
				err = nil
			} else {
				w.helper, err = small, errors.Join(err, rerr)
			}
		}
		if err == nil && serve == serveNow {
			w.startServer()
		}
	} else {
		err = w.makeRoot(spec)
	}
	if err != nil {
		w.close()
		return nil, err
	}
	return &World{w: w}, nil
}

// makeRoot makes the world's namespaces on a throwaway thread of the
// engine (root). Its network namespace is an idle one of the pool when
// there is one (the sandbox's probe leaves one there, so a one-command
// engine makes a single network namespace, not two: about 0.6 ms of the
// engine's CPU less, see BenchmarkOneCommandWorld, and one teardown
// fewer in the kernel's workers); the world keeps it and never gives it
// back. An engine's pool holds only the probe's
// (every sandboxed command of an engine runs in a world); one that a
// command without a world gave back has none of its processes left, and
// seccomp kept them from configuring it (connections they closed may
// still be in TIME_WAIT there).
func (w *world) makeRoot(spec worldSpec) error {
	netns, err := getNetns()
	if err != nil {
		return fmt.Errorf("sandbox: world: %w", err)
	}
	defer netns.Close() // the thread's own descriptor of it is kept below
	return onThrowawayThread(func() error {
		if err := unix.Setns(netns.Int(), unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("sandbox: world: setns: %w", err)
		}
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("sandbox: world: unshare: %w", err)
		}
		if err := buildWorld(spec); err != nil {
			return fmt.Errorf("sandbox: world: %w", err)
		}
		fds, err := openWorldFDs(spec.Dir, false)
		if err != nil {
			return fmt.Errorf("sandbox: world: %w", err)
		}
		w.netns, w.mntns, w.root = fd.New(fds[1]), fd.New(fds[2]), fd.New(fds[3])
		return nil
	})
}

// openWorldFDs opens the calling thread's namespaces (user, net, mnt; user
// only when withUser, else -1) and the root of the world's file system.
func openWorldFDs(dir string, withUser bool) ([4]int, error) {
	fds := [4]int{-1, -1, -1, -1}
	paths := [4]string{"/proc/thread-self/ns/user", "/proc/thread-self/ns/net", "/proc/thread-self/ns/mnt", dir}
	for i, p := range paths {
		if i == 0 && !withUser {
			continue
		}
		flags := unix.O_RDONLY | unix.O_CLOEXEC
		if i == 3 {
			flags = unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC
		}
		n, err := unix.Open(p, flags, 0)
		if err != nil {
			for _, f := range fds {
				_ = fd.New(f).Close()
			}
			return fds, fmt.Errorf("open %s: %w", p, err)
		}
		fds[i] = n
	}
	return fds, nil
}

// buildWorld sets up the calling thread's new mount namespace as a world's:
// host mounts propagate into it (slave), the world's tmpfs is mounted on
// spec.Dir with tmp/ (the commands' /tmp, mode 1777) and cache/ in it, and
// each base cache is an overlay on cache/NAME whose upper and work
// directories are in .base/NAME on the tmpfs, bound again over the base's
// own path: the commands find the conversation's cache where the user's
// tools look for theirs.
func buildWorld(spec worldSpec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make mounts slaves: %w", err)
	}
	opts := "mode=0700,uid=" + strconv.Itoa(os.Geteuid()) + ",gid=" + strconv.Itoa(os.Getegid()) +
		",size=" + strconv.FormatUint(spec.Bytes, 10) + ",nr_inodes=" + strconv.FormatUint(spec.Files, 10)
	if err := unix.Mount("tmpfs", spec.Dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount the world's tmpfs: %w", err)
	}
	for _, d := range []string{"tmp", "cache", ".base"} {
		if err := os.Mkdir(filepath.Join(spec.Dir, d), 0o700); err != nil {
			return err
		}
	}
	// unix.Chmod: os.Chmod would drop 0o1000 (the sticky bit is os.ModeSticky).
	if err := unix.Chmod(filepath.Join(spec.Dir, "tmp"), 0o1777); err != nil {
		return err
	}
	names := make([]string, 0, len(spec.Bases))
	for name := range spec.Bases {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		mnt := filepath.Join(spec.Dir, "cache", name)
		upper, work := filepath.Join(spec.Dir, ".base", name, "upper"), filepath.Join(spec.Dir, ".base", name, "work")
		for _, d := range []string{mnt, upper, work} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				return err
			}
		}
		o := "lowerdir=" + overlayEscape(spec.Bases[name]) + ",upperdir=" + overlayEscape(upper) + ",workdir=" + overlayEscape(work) +
			",index=off,metacopy=off,redirect_dir=nofollow"
		if spec.Rootless {
			o += ",userxattr"
		}
		if err := unix.Mount("overlay", mnt, "overlay", unix.MS_NOSUID|unix.MS_NODEV, o); err != nil {
			return fmt.Errorf("mount the %s cache over its base %s: %w", name, spec.Bases[name], err)
		}
		if err := unix.Mount(mnt, spec.Bases[name], "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("mount the %s cache at %s: %w", name, spec.Bases[name], err)
		}
	}
	return nil
}

// overlayEscape escapes a path for overlayfs's mount options, which split
// at commas and (lowerdir) colons.
func overlayEscape(p string) string {
	return strings.NewReplacer(`\`, `\\`, `,`, `\,`, `:`, `\:`).Replace(p)
}

// enter moves the calling (throwaway) thread into the world's mount and
// network namespaces (root): the command's own mount namespace is then
// made from the world's.
func (w *world) enter() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.mntns.Valid() {
		return errors.New("the conversation's world was closed")
	}
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare(CLONE_FS): %w", err)
	}
	if err := unix.Setns(w.mntns.Int(), unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("setns(world mnt): %w", err)
	}
	if err := unix.Setns(w.netns.Int(), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("setns(world net): %w", err)
	}
	return nil
}

// listen makes a TCP listener on 127.0.0.1 in the world's network (root).
func (w *world) listen() (net.Listener, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.netns.Valid() {
		return nil, errors.New("sandbox: the conversation's world was closed")
	}
	return listenIn(w.netns.Int())
}

// Usage returns how many bytes the world's file system holds, and its
// size.
func (w *World) Usage() (used, size uint64, err error) {
	w.w.mu.Lock()
	defer w.w.mu.Unlock()
	if !w.w.root.Valid() {
		return 0, 0, errors.New("sandbox: world closed")
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(w.w.root.Int(), &st); err != nil {
		return 0, 0, fmt.Errorf("sandbox: world: %w", err)
	}
	bs := uint64(st.Bsize)
	return (st.Blocks - st.Bfree) * bs, st.Blocks * bs, nil
}

// closed reports whether the world was closed.
func (w *world) closed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.mntns.Valid()
}

// Close gives the world's namespaces up and removes its directory.
// Commands still running keep what they use until they end (their /tmp
// and loopback); new ones fail.
func (w *World) Close() error {
	w.w.close()
	if err := os.RemoveAll(w.w.dir); err != nil {
		return fmt.Errorf("sandbox: world directory: %w", err)
	}
	return nil
}

func (w *world) close() {
	defer stopConnector(w) // once w.mu is released (see world.entry)
	w.mu.Lock()
	s := w.server
	w.server = nil
	fds := []*fd.FD{w.root, w.userns, w.netns, w.mntns}
	if w.rootless || !closeOnThread(w.mntns, fds) {
		for _, f := range fds {
			_ = f.Close()
		}
	}
	if w.serverTimer != nil && w.serverTimer.Stop() {
		w.starting.Done()
	}
	w.mu.Unlock()
	w.starting.Wait() // a server it started stops itself (see startServer)
	if s != nil {
		s.stop()
	}
}

// closeOnThread closes fds on a throwaway thread that has joined the
// mount namespace mnt (root; mnt is one of fds) and ends once they are
// closed: the last reference to the namespace is then the thread's, and
// the kernel tears it down (unmounts its file systems and waits for an
// RCU grace period, 1–10 ms, see docs/measurements.md) as that thread
// exits, off the caller's path (TestWorldCloseLeavesTeardownToThread).
// The process's exit still waits for that thread: nothing outlives the
// engine's process. It reports false, having closed nothing, when the
// thread could not join mnt.
func closeOnThread(mnt *fd.FD, fds []*fd.FD) bool {
	if !mnt.Valid() {
		return false
	}
	err := onThrowawayThread(func() error {
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			return err
		}
		if err := unix.Setns(mnt.Int(), unix.CLONE_NEWNS); err != nil {
			return err
		}
		for _, f := range fds {
			_ = f.Close()
		}
		return nil
	})
	return err == nil
}

// worldTrees are a command's clones of its world's mounts, made in its
// new mount namespace before everything is made read-only (mountView).
// The world's cache directory is one of the command's writable roots.
type worldTrees struct {
	cfg       *worldConfig
	tmp       *fd.FD
	show      []*fd.FD
	showPaths []string
	masks     []string
}

func cloneTree(path string, recursive bool) (*fd.FD, error) {
	flags := unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC
	if recursive {
		flags |= unix.AT_RECURSIVE
	}
	n, err := unix.OpenTree(unix.AT_FDCWD, path, uint(flags))
	if err != nil {
		return nil, fmt.Errorf("clone mount tree of %s: %w", path, err)
	}
	return fd.New(n), nil
}

// cloneWorld clones the world's tmp directory and the shown directories
// (made read-only).
func cloneWorld(cfg *worldConfig) (*worldTrees, error) {
	t := &worldTrees{cfg: cfg}
	var err error
	if t.tmp, err = cloneTree(cfg.Dir+"/tmp", false); err != nil {
		return t, err
	}
	ro := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	for _, s := range cfg.Show {
		if _, err := os.Stat(s); err != nil {
			continue
		}
		tree, err := cloneTree(s, true)
		if err != nil {
			return t, err
		}
		t.show, t.showPaths = append(t.show, tree), append(t.showPaths, s)
		if err := unix.MountSetattr(tree.Int(), "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, ro); err != nil {
			return t, fmt.Errorf("make %s read-only: %w", s, err)
		}
	}
	return t, nil
}

func (t *worldTrees) close() {
	_ = t.tmp.Close()
	for _, f := range t.show {
		_ = f.Close()
	}
}

// attachTmp puts the world's tmp on /tmp and covers the engine's
// directories that are still in view with empty tmpfs mounts (writable
// until sealMasks, so that mount points can be made in them).
func (t *worldTrees) attachTmp() error {
	if err := moveTree(t.tmp, "/tmp"); err != nil {
		return err
	}
	for _, h := range t.cfg.Hide {
		if fi, err := os.Stat(h); err != nil || !fi.IsDir() {
			continue // gone with the host's /tmp, or not there
		}
		if err := unix.Mount("tmpfs", h, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=64k,nr_inodes=1024"); err != nil {
			return fmt.Errorf("hide %s: %w", h, err)
		}
		t.masks = append(t.masks, h)
	}
	return nil
}

// attachShown puts the shown directories at their paths.
func (t *worldTrees) attachShown() error {
	for i, f := range t.show {
		if err := moveTree(f, t.showPaths[i]); err != nil {
			return err
		}
	}
	return nil
}

// sealMasks makes the hiding mounts read-only.
func (t *worldTrees) sealMasks() error {
	ro := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	for _, h := range t.masks {
		if err := unix.MountSetattr(unix.AT_FDCWD, h, unix.AT_SYMLINK_NOFOLLOW, ro); err != nil {
			return fmt.Errorf("hide %s: %w", h, err)
		}
	}
	return nil
}

// moveTree attaches a cloned tree at path, making the mount point first
// where it is missing (inside the world's /tmp or a hiding mount).
func moveTree(tree *fd.FD, path string) error {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return fmt.Errorf("mount point %s: %w", path, err)
	}
	if err := unix.MoveMount(tree.Int(), "", unix.AT_FDCWD, path, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount %s: %w", path, err)
	}
	_ = tree.Close()
	return nil
}
