package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/fd"
	"github.com/bashvisor/bashvisor/internal/layer"
	"github.com/bashvisor/bashvisor/internal/proc"
)

// HelperArg is the hidden argv[1] that turns the embedding binary into the
// sandbox helper. [Prepare] puts it into [Command.Args]; [Main] recognises it.
const HelperArg = "__bashvisor_sandbox"

// helperExitCode is the exit status of a helper that could not confine itself
// (the same status a shell uses for "found but cannot execute").
const helperExitCode = 126

// ErrUnavailable is returned (wrapped in an error that explains the kernel
// requirement) when restricted mode cannot be enforced on this machine.
// Test for it with errors.Is.
var ErrUnavailable = errors.New("restricted mode unavailable")

// requirement is the explanation appended to every ErrUnavailable.
const requirement = "restricted mode needs Linux with Landlock enabled: 5.13+ for the filesystem rules, 6.7+ for network rules, 6.12+ for signal and abstract-socket scoping (check CONFIG_SECURITY_LANDLOCK=y and \"landlock\" in the lsm= boot parameter), and seccomp filters on linux/amd64 or linux/arm64"

func unavailable(reason string) error {
	return fmt.Errorf("%w: %s; %s", ErrUnavailable, reason, requirement)
}

// Capabilities says what restricted mode enforces on this machine, as found
// by [Probe].
type Capabilities struct {
	// ABI is the Landlock ABI version of the kernel (0 = no Landlock).
	ABI int
	// Filesystem: writes outside the scratch dir are denied (Landlock ABI 1+;
	// truncate(2) is only covered from ABI 3).
	Filesystem bool
	// Network: no socket except AF_UNIX stream/seqpacket, no connect(2) at
	// all (seccomp), plus Landlock's TCP bind/connect rules from ABI 4.
	Network bool
	// Scoping: signals and abstract unix sockets cannot reach processes
	// outside the sandbox (Landlock ABI 6+).
	Scoping bool
	// Seccomp: the seccomp filter (network, metadata changes, ptrace,
	// io_uring, mount and module syscalls) can be installed.
	Seccomp bool
	// Namespaces: every command gets private network, IPC and mount
	// namespaces, and a scratch directory with a quota, or a [World]
	// (a root engine, or any user where user namespaces are available:
	// Rootless). Without them SysV IPC, POSIX message queues and bind(2)
	// are denied instead, the scratch directory has no quota, and there
	// are no worlds.
	Namespaces bool
	// Rootless: the namespaces come from user namespaces (the engine is
	// not root); commands start through the world's command server, or
	// the helper without one (see [World]).
	Rootless bool
	// Reason explains what is missing, empty when everything is enforced.
	Reason string
	// Transient is set when the probe ran out of a resource (descriptors,
	// memory, processes): the result is no verdict on the host, and
	// [Probe] probes again on its next call. It is that error.
	Transient error
}

// Available reports whether restricted mode can run at all (Landlock
// filesystem rules and the seccomp filter are both enforced).
func (c Capabilities) Available() bool { return c.Filesystem && c.Seccomp }

// String is a one-line summary for the engine to log once at startup.
func (c Capabilities) String() string {
	yn := func(b bool) string {
		if b {
			return "on"
		}
		return "off"
	}
	s := fmt.Sprintf("landlock_abi=%d filesystem=%s network=%s scoping=%s seccomp=%s namespaces=%s",
		c.ABI, yn(c.Filesystem), yn(c.Network), yn(c.Scoping), yn(c.Seccomp), yn(c.Namespaces))
	if c.Rootless {
		s += " (user namespaces)"
	}
	if c.Reason != "" {
		s += " (" + c.Reason + ")"
	}
	return s
}

var (
	probeMu   sync.Mutex
	probeDone bool
	probed    Capabilities
)

// Probe finds out once per process what restricted mode enforces here:
// the Landlock ABI, whether a seccomp filter can be installed and whether
// private namespaces can be created. It logs nothing; the engine logs
// [Capabilities.String] once. An engine probes on first use (the first
// sandboxed command), so the probe may meet a process out of descriptors
// or memory: such a result ([Capabilities.Transient]) is returned but not
// kept, and the next call probes again.
func Probe() Capabilities {
	probeMu.Lock()
	defer probeMu.Unlock()
	if probeDone {
		return probed
	}
	c := probe()
	if c.Transient == nil {
		probed, probeDone = c, true
	}
	return c
}

// Options describe one restricted command.
type Options struct {
	// Limits are its resource limits.
	Limits config.SandboxLimits
	// Bash is the absolute path of bash (no PATH lookup is done).
	Bash string
	// Command is the shell code run with bash -c.
	Command string
	// Cgroup is the command's cgroup, created by the caller (which also
	// starts the command into its cgroup v2, ends what is left in it and
	// removes it): the sandbox lowers its pids.max to Limits.Processes
	// and places the command into its cgroups in v1 hierarchies
	// (proc.Cgroup.V1Dirs) where the host keeps memory or pids limits
	// there. Nil: no process limit.
	Cgroup *proc.Cgroup
	// Helper is the program [Command.StartHelper] starts: one whose main
	// calls [Main] first. Empty means the running executable (through
	// /proc/self/exe, so the engine's own binary even if the file on disk
	// was replaced); for an engine that is not root ([Capabilities.Rootless],
	// which starts every sandboxed command through a helper) it means
	// bashvisor-sandbox next to the running executable where that is
	// usable (a regular file that only its owner, root or the engine's
	// user, may write, built from the same helper protocol: the engine's
	// probe makes a world with it, and falls back to its own executable
	// if that fails), else the running executable. A small
	// static binary such as ./cmd/bashvisor-sandbox starts faster than a
	// large engine.
	Helper string
	// ScratchRoot is the directory under which the per-command scratch
	// directories are made (default os.TempDir()). With private namespaces
	// the scratch directory is a tmpfs and only its empty mount point lives
	// there; without them its files do.
	ScratchRoot string
	// Roots are where the command may write besides its scratch directory
	// (see [WorkspaceRoots] for the workspace-write profile). Empty: the
	// scratch directory only (and CacheDir).
	Roots Roots
	// CacheDir, when set, is a directory the command may write whose
	// subdirectories hold the build and package caches (GOCACHE,
	// npm_config_cache, PIP_CACHE_DIR, XDG_CACHE_HOME; and with Network
	// also GOMODCACHE and CARGO_HOME; in a World only those without a
	// base), so they outlive the command and the next build starts warm. The caller owns it: it must exist, and it
	// should belong to one conversation (a cache shared with commands
	// that should not influence each other lets one poison the other's
	// builds). Empty: the caches live in the scratch directory and die
	// with the command.
	CacheDir string
	// Dir is the command's working directory. In a World it is shown
	// read-only at its path where the world's /tmp or a hidden directory
	// would cover it (a read-only command working below the host's /tmp);
	// "": not needed.
	Dir string
	// WorldSize, in a World, resizes the world's file system before the
	// command starts (0: as it is; never below what it holds): the engine
	// gives it what the conversation's quota leaves after its job output
	// files.
	WorldSize uint64
	// LoopbackViaProxy, with Network in a World, sends HTTP clients to
	// loopback addresses through the proxy too (NO_PROXY empty), for an
	// allowlist that names a server on the engine's loopback; otherwise
	// NO_PROXY names loopback, so that clients reach the world's own
	// servers directly.
	LoopbackViaProxy bool
	// World, when set, runs the command in its conversation's world (see
	// [World]): its /tmp and caches, its loopback network, the engine's
	// directories hidden. Then there is no per-command scratch directory
	// (ScratchRoot, Limits.ScratchBytes and ScratchFiles are not used)
	// and CacheDir must be empty: the world's [World.CacheDir] is used.
	World *World
	// Network gives the command one way to the network: a TCP listener
	// made inside its private network namespace ([Command.Proxy], on
	// 127.0.0.1), to be served by the caller's proxy, whose address the
	// command finds in HTTP_PROXY, HTTPS_PROXY and the package managers'
	// proxy settings (see ProxyEnv). The command may create TCP sockets
	// (not UDP, not AF_UNIX: a unix socket could connect to any socket
	// file of the host) and connect, but its namespace has nothing else to reach, and
	// Landlock (ABI 4+) lets it connect to the proxy's port only. Needs
	// private namespaces ([Capabilities.Namespaces]).
	Network bool
	// Carry, with Network in a World, are the ports to carry for clients
	// that ignore the proxy variables: the command also gets a resolver
	// in the world's network ([Command.Resolver], [Command.ResolverTCP],
	// named by its /etc/resolv.conf) and a listener on [Command.Capture]
	// for each port ([Command.Carried]), for the caller to serve (package
	// egress: Proxy.Resolve, Proxy.Carry). Empty, or outside a World: the
	// proxy only.
	Carry []int
	// ProxyEnv exports the proxy variables (HTTP_PROXY, HTTPS_PROXY, their
	// lower-case forms, NO_PROXY, the npm, pip and cargo settings) to a
	// command that got a resolver (see Carry), whose clients are carried
	// without them. They are always exported to a command without a
	// resolver (outside a World, or when no slot was free) and with
	// LoopbackViaProxy: the proxy is then its only way to the hosts.
	ProxyEnv bool
	// NoTCP, in a World, denies the command TCP bind and connect
	// (Landlock, ABI 4+), as outside one: the world's network is the
	// conversation's, shared with its other commands' proxies, resolvers,
	// carried and local listeners, which a command that runs contained
	// (it asked, and runs because its result is reviewed) must not reach
	// even when such a command starts after it. Its own local servers
	// over TCP fail too (EACCES); UDP and unix sockets are not Landlock's.
	NoTCP bool
	// ThrowawayCaches, in a World, gives the command a view of the
	// world's /tmp (its $TMPDIR) and build and package caches that only
	// it sees: it reads what the conversation's other commands left
	// there (warm hits) and may write them, and what it writes, changes
	// or removes is discarded when it ends (overlays whose upper layers
	// are on a tmpfs of its own mount namespace, of Limits.ScratchBytes
	// and ScratchFiles: outside the conversation's quota, but memory
	// charged to the command's cgroup where there is one). For a command
	// that ran without the person's approval because its result is
	// reviewed, or the read-only sandbox answered its ask (contained),
	// and for one whose every change is reviewed (hold mode): a GOCACHE
	// entry, module-cache file or Jest transform in /tmp it planted would
	// otherwise run in a later ordinary command, unreviewed. What such a
	// command compiles or fetches is compiled or fetched again by the
	// next. Ordinary commands, read-only ones too, write the world's /tmp
	// and caches (no review is skipped: they were allowed as they are).
	ThrowawayCaches bool
	// Masks show the command files of the caller's in place of the
	// host's (see [Mask]); with private namespaces only (without, they
	// are left out).
	Masks []Mask
	// Layer, when set, is the copy-on-write layer of the command's
	// writable roots (package layer, made by the caller with layer.New
	// and mounted once: for one command): in the command's mount
	// namespace its overlays are made before the namespace's mounts are
	// made read-only and attached over their roots afterwards, so the
	// command reads and changes the merged tree at the roots' own paths
	// while everything it writes there lands in the layer's upper
	// directories, and the real directories stay as they were until the
	// caller applies the layer's changes. Roots.Protected and Roots.Pinned
	// are then not used: policy on the change set replaces them.
	//
	// Each overlay's root must be one of Roots.Writable or below one
	// (Landlock lets the command write there); a writable root below an
	// overlay's root is part of the overlay. The layer's upper and work
	// directories must lie outside every writable root (and CacheDir):
	// the command cannot write them (read-only mounts, Landlock); in a
	// World whose Hide covers them it cannot see them either, otherwise
	// it can read them like any file of the engine's user. It needs
	// private namespaces ([Capabilities.Namespaces]; [Prepare] refuses
	// it without). A rootless engine ([Capabilities.Rootless]) mounts the
	// layer inside a user namespace, which needs layer.Options.UserXattr:
	// Prepare refuses a Spec without it.
	Layer *layer.Spec
}

// Command is a prepared restricted command: start it with
// [Command.StartDirect] or [Command.StartHelper] (in a new session, cwd =
// the working directory, env = the engine's env + Env) and call
// [Command.Cleanup] after it ended.
type Command struct {
	// Path is the helper program [Command.StartHelper] starts.
	Path string
	// Args is the helper's full argv: Path, HelperArg, the encoded
	// config, "--", the bash path, "-c", the command.
	Args []string
	// Env holds the additions to the command's environment (TMPDIR, the
	// caches that are not at the user's paths, the proxy; see
	// "Caches" in the package doc). Append them after the engine's env.
	Env []string
	// Scratch is the private per-command scratch directory (0700), the only
	// writable place inside the sandbox besides /dev/null and the roots;
	// "" for a command in a World (its /tmp is the world's).
	Scratch string
	// Resolver and ResolverTCP, with [Options.Carry], are the UDP and TCP
	// sockets on port 53 of the address the command's /etc/resolv.conf
	// names, in its world's network (nil: none); Capture is the address
	// its allowed names should resolve to, and Carried has a listener on
	// it for each port of Options.Carry (but one the conversation already
	// listens on). In a rootless world they are handed over by the helper
	// once it starts: their calls wait for it. Cleanup closes them.
	Resolver    net.PacketConn
	ResolverTCP net.Listener
	Capture     netip.Addr
	Carried     map[int]net.Listener

	slot        int    // the world's slot of Resolver (-1: none)
	world       *world // nil: no world
	cleanupOnce sync.Once
	cleanupErr  error
	cgroup      *proc.Cgroup
	cfg         helperConfig
	bash        string
	command     string
	ns          *netnsHandle // the pooled network namespace (none without Namespaces, or in a world)
	proxy       net.Listener
	proxyChild  *os.File       // a rootless helper's end of passedListener's socket
	hand        *layerHand     // a rootless helper's socket for its layer's overlays (nil: none)
	nsChild     *os.File       // a rootless helper's end of the socket it tells its mount namespace on
	nsSock      *fd.FD         // the engine's end (none, or released to a Freezer)
	mntns       *fd.FD         // as root, the command's mount namespace, until its Freezer takes it
	release     *threadRelease // lets the thread that started the command end (see keep_linux.go)
}

// Proxy is the listener made for [Options.Network] inside the command's
// network namespace (nil without): serve an HTTP proxy on it; Cleanup closes it.
func (c *Command) Proxy() net.Listener { return c.proxy }

// helperConfig is what Prepare hands to the helper in argv[2].
type helperConfig struct {
	Scratch string `json:"scratch"`
	// CgroupDirs are the command's cgroups in cgroup v1 hierarchies
	// (memory, pids), which the helper joins (see proc.Cgroup.V1Dirs).
	CgroupDirs   []string `json:"cgroups,omitempty"`
	CPUSeconds   uint64   `json:"cpu"`
	FileSize     uint64   `json:"fsize"`
	OpenFiles    uint64   `json:"nofile"`
	AddressSpace uint64   `json:"as"`
	ScratchBytes uint64   `json:"scratch_bytes"`
	ScratchFiles uint64   `json:"scratch_files"`
	// Namespaces: the command runs in private network, IPC and mount
	// namespaces (set up by the engine before the helper starts).
	Namespaces bool `json:"ns,omitempty"`
	// Writable are the directories writable besides Scratch (Landlock).
	Writable []string `json:"writable,omitempty"`
	// Protected and Pinned are Roots.Protected and Roots.Pinned (none
	// with a Layer).
	Protected []string `json:"protected,omitempty"`
	Pinned    []string `json:"pinned,omitempty"`
	// Layer is Options.Layer: mounted over its roots in the command's
	// mount namespace (see mountView).
	Layer *layer.Spec `json:"layer,omitempty"`
	// mounts are Layer's overlays, made (or cloned) by the rootless
	// helper in the world's mount namespace before it makes the
	// command's (see layer's "Held layers").
	mounts *layer.Mounts
	// ProxyPort is the port of the proxy listener (0: no network).
	ProxyPort int `json:"proxy,omitempty"`
	// LoopbackDirect: NO_PROXY names loopback (see proxyEnv).
	LoopbackDirect bool `json:"loopback_direct,omitempty"`
	// ProxyEnv: the proxy variables are exported (see Options.ProxyEnv).
	ProxyEnv bool `json:"proxy_env,omitempty"`
	// Masks are Options.Masks (made by makeView).
	Masks []Mask `json:"masks,omitempty"`
	// ProxyFD, in a rootless world with network, is the helper's
	// descriptor on which it hands the engine the proxy listener it made
	// in the world's network (0: none).
	ProxyFD int `json:"proxy_fd,omitempty"`
	// Resolver, Capture and Carry are Command.Resolver's address (masked
	// in as /etc/resolv.conf), Command.Capture and Options.Carry; a
	// rootless helper makes their sockets and hands them over.
	Resolver string `json:"resolver,omitempty"`
	Capture  string `json:"capture,omitempty"`
	Carry    []int  `json:"carry,omitempty"`
	// NamespaceFD, in a rootless world, is the helper's descriptor on
	// which it sends the engine a descriptor of the command's mount
	// namespace once it made it, before it execs bash (0: none; see
	// Command.Freezer).
	NamespaceFD int `json:"ns_fd,omitempty"`
	// World is the command's world (nil: none).
	World *worldConfig `json:"world,omitempty"`
	// NoTCP keeps TCP denied in a World (Options.NoTCP).
	NoTCP bool `json:"no_tcp,omitempty"`
	// ThrowawayCaches: see Options.ThrowawayCaches.
	ThrowawayCaches bool `json:"throwaway_caches,omitempty"`
	// Caches are the paths of the world's caches with a base (writable
	// roots too), which mountView attaches over a Layer's overlays.
	Caches []string `json:"caches,omitempty"`
	// OwnNamespaces: the helper was started in new user and network
	// namespaces of its own (a rootless command without a world): it sets
	// loopback up and makes its mount namespace itself.
	OwnNamespaces bool `json:"own_ns,omitempty"`
	// RuntimeEnv are the command's own values (nil: unset) of the
	// variables StartHelper set for the helper's Go runtime
	// (helperRuntime), which the helper puts back before it execs bash.
	RuntimeEnv map[string]*string `json:"runtime_env,omitempty"`
}

// readOnlyMounts reports whether the command's mount namespace makes every
// mount read-only but the writable roots (see mountView), which lets
// the filter allow changing permissions and times.
func (c helperConfig) readOnlyMounts() bool {
	return c.Namespaces && (len(c.Writable) > 0 || c.World != nil)
}

// filter is the seccomp filter for a command with this configuration. In
// a world every command may use TCP on the world's loopback (and the
// proxy there).
func (c helperConfig) filter() filterOpts {
	return filterOpts{
		denyIPC:  !c.Namespaces,
		denyBind: !c.Namespaces,
		metadata: c.readOnlyMounts(),
		network:  c.ProxyPort != 0 || c.ProxyFD != 0 || c.World != nil,
	}
}

// Prepare builds the command that runs `bash -c opts.Command` confined. It
// creates the private scratch dir (0700) and sets the pids limit on
// opts.Cgroup; the caller must call [Command.Cleanup] after the command
// ended, also when starting it failed. It returns an error wrapping
// [ErrUnavailable] when Landlock or seccomp is missing; it never degrades
// silently. Other errors are the host's (out of descriptors, disk full).
func Prepare(opts Options) (*Command, error) {
	caps := Probe()
	if !caps.Available() {
		return nil, unavailable(caps.Reason)
	}
	if !filepath.IsAbs(opts.Bash) {
		return nil, fmt.Errorf("sandbox: bash path must be absolute: %q", opts.Bash)
	}
	exe, err := opts.helperPath(caps)
	if err != nil {
		return nil, err
	}
	w, err := opts.world()
	if err != nil {
		return nil, err
	}
	if w != nil {
		opts.CacheDir = opts.World.CacheDir()
	}
	lim := opts.Limits.WithDefaults()
	if err := checkWorkspace(w, opts.Dir, opts.Roots.Writable); err != nil {
		return nil, err
	}
	roots, err := opts.roots()
	if err != nil {
		return nil, err
	}
	if err := needNamespaces(caps, roots, opts.Network, opts.Layer != nil); err != nil {
		return nil, err
	}
	if err := checkLayer(opts.Layer, caps.Rootless, roots); err != nil {
		return nil, err
	}
	cfg := helperConfig{
		CPUSeconds:   lim.CPUSeconds,
		FileSize:     lim.FileSize,
		OpenFiles:    lim.OpenFiles,
		AddressSpace: lim.AddressSpace,
		ScratchBytes: lim.ScratchBytes,
		ScratchFiles: lim.ScratchFiles,
		Namespaces:   caps.Namespaces,
		Writable:     roots.Writable,
		Protected:    roots.Protected,
		Pinned:       roots.Pinned,
		Layer:        opts.Layer,
		NoTCP:        opts.NoTCP,

		ThrowawayCaches: opts.ThrowawayCaches && opts.World != nil,
	}
	if caps.Namespaces {
		cfg.Masks = opts.Masks
	}
	if w != nil {
		for _, name := range slices.Sorted(maps.Keys(w.bases)) {
			cfg.Caches = append(cfg.Caches, w.bases[name])
		}
	}
	scratch, err := cfg.setScratch(w, opts, roots)
	if err != nil {
		return nil, err
	}
	cmd := &Command{
		Path: exe, Scratch: scratch, bash: opts.Bash, command: opts.Command,
		ns: noNetns(), cgroup: opts.Cgroup, world: w, slot: -1,
	}
	if err := cfg.setCgroup(opts.Cgroup, lim); err == nil {
		if err = cmd.setNetwork(&cfg, caps, opts); err == nil {
			if err = cmd.setLayerHand(&cfg); err == nil {
				err = cmd.setNamespaceReport(&cfg)
			}
		}
	}
	if err != nil {
		if scratch != "" {
			_ = os.RemoveAll(scratch)
		}
		return nil, err
	}
	cfg.OwnNamespaces = w == nil && caps.Rootless
	cfg.LoopbackDirect = w != nil && !opts.LoopbackViaProxy
	cfg.ProxyEnv = opts.Network && (opts.ProxyEnv || cfg.Resolver == "" || opts.LoopbackViaProxy)
	enc, err := json.Marshal(cfg)
	if err != nil {
		panic(err) // cannot happen: plain strings and integers
	}
	cmd.Args = []string{exe, HelperArg, string(enc), "--", opts.Bash, "-c", opts.Command}
	cmd.cfg = cfg
	var bases map[string]string
	if w != nil {
		bases = w.bases
	}
	proxyPort := cfg.ProxyPort
	if !cfg.ProxyEnv {
		proxyPort = 0 // its clients are carried (see Options.ProxyEnv)
	}
	cmd.Env = environment(cfg.Scratch, opts.CacheDir, opts.Network, proxyPort, cfg.LoopbackDirect, bases)
	// A command dropped without Cleanup (processes left running on purpose)
	// still gives its namespace descriptor back to the kernel.
	runtime.AddCleanup(cmd, func(h *netnsHandle) { h.release(false) }, cmd.ns)
	if cmd.proxy != nil {
		runtime.AddCleanup(cmd, func(l net.Listener) { _ = l.Close() }, cmd.proxy)
	}
	return cmd, nil
}

// helperPath is the program StartHelper starts.
func (opts Options) helperPath(caps Capabilities) (string, error) {
	if opts.Helper != "" {
		if !filepath.IsAbs(opts.Helper) {
			return "", fmt.Errorf("sandbox: helper path must be absolute: %q", opts.Helper)
		}
		return opts.Helper, nil
	}
	if caps.Rootless {
		return selfPath(), nil
	}
	return selfExe, nil
}

// world returns the command's world (nil: none), refusing a closed one.
func (opts Options) world() (*world, error) {
	if opts.World == nil {
		return nil, nil
	}
	if opts.CacheDir != "" {
		return nil, errors.New("sandbox: a command in a world uses the world's caches: CacheDir must be empty")
	}
	if opts.World.w.closed() {
		return nil, errors.New("sandbox: the conversation's world was closed")
	}
	return opts.World.w, nil
}

// needNamespaces refuses what cannot be enforced without namespaces.
func needNamespaces(caps Capabilities, roots Roots, network, layered bool) error {
	switch {
	case caps.Namespaces:
		return nil
	case layered:
		return unavailable("a copy-on-write layer over the workspace needs private mount namespaces (root, or user namespaces): " + caps.Reason)
	case len(roots.Protected) > 0 || len(roots.Pinned) > 0:
		return unavailable("protecting a workspace's git hooks and config needs private mount namespaces (CAP_SYS_ADMIN): " + caps.Reason)
	case network:
		return unavailable("network through the proxy needs private network namespaces (CAP_SYS_ADMIN): " + caps.Reason)
	}
	return nil
}

// checkLayer refuses a layer the command could write around, or one a
// rootless helper cannot mount (see Options.Layer).
func checkLayer(spec *layer.Spec, rootless bool, roots Roots) error {
	if spec == nil {
		return nil
	}
	if len(spec.Overlays) == 0 {
		return errors.New("sandbox: the layer has no overlays")
	}
	if rootless && !spec.UserXattr {
		return errors.New("sandbox: a rootless engine mounts the layer in a user namespace: make it with layer.Options.UserXattr")
	}
	inRoots := func(p string) bool {
		return slices.ContainsFunc(roots.Writable, func(r string) bool { return within(p, r) })
	}
	for _, o := range spec.Overlays {
		if !filepath.IsAbs(o.Root) || !filepath.IsAbs(o.Upper) || !filepath.IsAbs(o.Work) {
			return fmt.Errorf("sandbox: layer: paths must be absolute: %+v", o)
		}
		if !inRoots(o.Root) {
			return fmt.Errorf("sandbox: layer: %s is not a writable root", o.Root)
		}
		for _, d := range []string{o.Upper, o.Work} {
			if inRoots(d) || slices.ContainsFunc(roots.Writable, func(r string) bool { return within(r, d) }) {
				return fmt.Errorf("sandbox: layer: %s must lie outside the writable roots (the command would write its own layer)", d)
			}
		}
	}
	return nil
}

// setScratch sets the command's scratch directory: its world's /tmp (and
// its working directory shown where the world would cover it), or a new
// per-command directory, which it returns.
func (c *helperConfig) setScratch(w *world, opts Options, roots Roots) (string, error) {
	if w != nil {
		c.Scratch = "/tmp"
		c.World = &worldConfig{Dir: w.dir, Hide: w.hide, Show: w.show, Rootless: w.rootless, Size: opts.WorldSize}
		if opts.Dir != "" {
			d, err := filepath.EvalSymlinks(opts.Dir)
			if err != nil {
				return "", fmt.Errorf("sandbox: working directory: %w", err)
			}
			if !slices.ContainsFunc(roots.Writable, func(r string) bool { return within(d, r) }) {
				c.World.Show = append(slices.Clip(c.World.Show), d)
			}
		}
		return "", nil
	}
	removeStaleOnce(opts.ScratchRoot)
	// The engine's pid in the name lets a later engine remove what a
	// killed one left behind (see removeStale).
	scratch, err := os.MkdirTemp(opts.ScratchRoot, scratchPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", fmt.Errorf("sandbox: create scratch dir: %w", err)
	}
	if scratch, err = filepath.EvalSymlinks(scratch); err != nil {
		_ = os.RemoveAll(scratch)
		return "", fmt.Errorf("sandbox: scratch dir: %w", err)
	}
	c.Scratch = scratch
	return scratch, nil
}

// setCgroup lowers cg's pids.max to the sandbox's limit and notes its v1
// directories.
func (c *helperConfig) setCgroup(cg *proc.Cgroup, lim config.SandboxLimits) error {
	if cg == nil {
		return nil
	}
	if _, pids := cg.Controllers(); pids && lim.Processes > 0 {
		l := cg.Limits()
		if l.Pids == 0 || lim.Processes < l.Pids {
			l.Pids = lim.Processes
			if err := cg.SetLimits(l); err != nil {
				return fmt.Errorf("sandbox: %w", err)
			}
		}
	}
	c.CgroupDirs = cg.V1Dirs()
	return nil
}

// setNetwork gives the command its network namespace (a world's, a pooled
// one, or, rootless, one the helper makes) and, with opts.Network, the
// proxy's listener there.
func (cmd *Command) setNetwork(cfg *helperConfig, caps Capabilities, opts Options) error {
	w := cmd.world
	var err error
	switch {
	case (w != nil && w.rootless || w == nil && caps.Rootless) && opts.Network:
		// The helper makes the listener in the command's network and
		// hands it over (see passedListener).
		carry := len(opts.Carry)
		if w == nil {
			carry = 0
		}
		h, fd, err := newHandover(carry)
		if err != nil {
			return err
		}
		cmd.proxy, cmd.proxyChild, cfg.ProxyFD = &passedListener{h: h, addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}}, fd, 3
		if carry > 0 {
			return cmd.setCapture(cfg, opts.Carry, h)
		}
	case w != nil:
		if opts.Network {
			if cmd.proxy, err = w.listen(); err != nil {
				return err
			}
			cfg.ProxyPort = cmd.proxy.Addr().(*net.TCPAddr).Port
			if len(opts.Carry) > 0 {
				return cmd.setCapture(cfg, opts.Carry, nil)
			}
		}
	case caps.Rootless: // the helper makes its namespaces
	case caps.Namespaces:
		// The cache dir is made on the scratch tmpfs when the command
		// starts (enterNamespaces).
		if cmd.ns, err = newNetnsHandle(); err != nil {
			return err
		}
		if opts.Network {
			if cmd.proxy, err = cmd.ns.listen(); err != nil {
				cmd.ns.release(false)
				return err
			}
			cfg.ProxyPort = cmd.proxy.Addr().(*net.TCPAddr).Port
		}
	case opts.CacheDir == "":
		if err := makeCacheDir(cmd.Scratch); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
	}
	return nil
}

// roots returns opts.Roots and CacheDir with absolute, symlink-free
// paths, which Landlock and the bind mounts need, after creating the
// protected paths WorkspaceRoots found missing (none with a Layer: then
// only Writable is returned).
func (opts Options) roots() (Roots, error) {
	clean := func(paths []string) ([]string, error) {
		out := make([]string, 0, len(paths))
		for _, p := range paths {
			if !filepath.IsAbs(p) {
				return nil, fmt.Errorf("sandbox: root must be an absolute path: %q", p)
			}
			r, err := filepath.EvalSymlinks(p)
			if err != nil {
				return nil, fmt.Errorf("sandbox: root: %w", err)
			}
			if !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
		return out, nil
	}
	var r Roots
	var err error
	w := opts.Roots.Writable
	if opts.CacheDir != "" {
		w = append(slices.Clip(w), opts.CacheDir)
	}
	if opts.World != nil {
		// The world's caches at the user's own paths (see World).
		for _, name := range slices.Sorted(maps.Keys(opts.World.w.bases)) {
			w = append(slices.Clip(w), opts.World.w.bases[name])
		}
	}
	if r.Writable, err = clean(w); err != nil {
		return Roots{}, err
	}
	if opts.Layer != nil {
		return r, nil // Protected and Pinned are not used
	}
	if err := opts.Roots.create(); err != nil {
		return Roots{}, err
	}
	if r.Protected, err = clean(opts.Roots.Protected); err != nil {
		return Roots{}, err
	}
	if r.Pinned, err = clean(opts.Roots.Pinned); err != nil {
		return Roots{}, err
	}
	return r, nil
}

// within reports whether path is root or below it.
func within(path, root string) bool {
	return path == root || strings.HasPrefix(path, strings.TrimSuffix(root, "/")+"/")
}

// Cleanup removes the scratch dir and gives up the command's network
// namespace. Call it once the command ended; gone tells that every process
// of the command is known to be gone (its cgroup is empty), which lets the
// namespace be reused. Later calls return the first call's result.
func (c *Command) Cleanup(gone bool) error {
	c.cleanupOnce.Do(func() {
		if c.proxy != nil {
			_ = c.proxy.Close()
		}
		c.freeCapture()
		c.hand.close()
		c.closeNamespaceReport() // and lets the command's thread end
		c.ns.release(gone)
		if c.Scratch != "" {
			c.cleanupErr = removeScratch(c.Scratch)
		}
	})
	return c.cleanupErr
}

// scratchPrefix starts the name of every scratch directory (and of its
// pids cgroup): bashvisor-sbx-ENGINEPID-RANDOM.
const scratchPrefix = "bashvisor-sbx-"

// removeScratch removes the scratch dir (layer.RemoveAll: also what the
// command left without permissions).
func removeScratch(dir string) error {
	if err := layer.RemoveAll(dir); err != nil {
		return fmt.Errorf("sandbox: remove scratch dir: %w", err)
	}
	return nil
}
