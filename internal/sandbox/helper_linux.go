//go:build linux

package sandbox

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"unsafe"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/fd"
	"github.com/bashvisor/bashvisor/internal/proc"
)

// presets are go-landlock's configurations, index = ABI version - 1. The
// helper picks the one matching the kernel exactly and never uses
// BestEffort, which would silently degrade to no sandbox at all.
var presets = []landlock.Config{
	landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5, landlock.V6,
	landlock.V7, landlock.V8, landlock.V9, landlock.V10, landlock.V11,
}

func landlockABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil || v < 0 {
		return 0
	}
	return v
}

func probe() Capabilities {
	var c Capabilities
	var why []string
	c.ABI = landlockABI()
	switch {
	case c.ABI == 0:
		why = append(why, "Landlock is not available (Linux 5.13+ with Landlock enabled is required)")
	case c.ABI < 3:
		c.Filesystem = true
		why = append(why, fmt.Sprintf("Landlock ABI %d does not cover truncate(2) (needs ABI 3, Linux 6.2)", c.ABI))
	default:
		c.Filesystem = true
	}
	if err := seccompUsable(); err != nil {
		c.Transient = transient(err)
		why = append(why, "seccomp: "+err.Error())
	} else {
		c.Seccomp = true
		c.Network = true // socket() only for AF_UNIX, no connect(2)
	}
	if c.ABI >= 6 {
		c.Scoping = true
	} else if c.ABI > 0 {
		why = append(why, fmt.Sprintf("Landlock ABI %d has no signal/abstract-socket scoping (needs ABI 6, Linux 6.12)", c.ABI))
	}
	// Namespaces as root (CAP_SYS_ADMIN), else from user namespaces (any
	// user, also root without CAP_SYS_ADMIN).
	if err := probeNamespaces(); err == nil {
		c.Namespaces = true
	} else if t := cmp.Or(transient(err), shortOfDescriptors()); t != nil {
		// Out of a resource (descriptors): root's namespaces may well
		// work once it is back, so the rootless probe, which needs none,
		// must not decide the process's mode (see Probe). Asked of the
		// process too: a step of the probe may fail for want of a
		// descriptor with an error that does not say so.
		c.Transient = cmp.Or(c.Transient, t)
		why = append(why, "no private namespaces for now: "+err.Error())
	} else if rerr := probeRootless(); rerr != nil {
		c.Transient = cmp.Or(c.Transient, transient(err, rerr))
		why = append(why, "no private namespaces (SysV IPC, POSIX message queues and bind(2) denied instead; no scratch quota): "+err.Error()+"; "+rerr.Error())
	} else {
		c.Namespaces, c.Rootless = true, true
	}
	c.Reason = strings.Join(why, "; ")
	return c
}

// shortOfDescriptors returns EMFILE or ENFILE when the process cannot
// open a descriptor now, else nil.
func shortOfDescriptors() error {
	n, err := unix.Open("/", unix.O_PATH|unix.O_CLOEXEC, 0)
	if err == nil {
		_ = unix.Close(n)
		return nil
	}
	return transient(err)
}

// transient returns the first of errs that says the process ran out of a
// resource, not that the host lacks a feature.
func transient(errs ...error) error {
	for _, err := range errs {
		for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.EAGAIN} {
			if errors.Is(err, e) {
				return err
			}
		}
	}
	return nil
}

// Main must be the first statement of the embedding program's main (and of
// TestMain in any package whose tests run restricted commands). When
// os.Args[1] is [HelperArg] the process is the sandbox helper: it joins the
// command's cgroups in v1 hierarchies, sets the rlimits, drops capabilities, applies
// Landlock and the seccomp filter to itself and then execs bash, so it never
// returns; if any step fails it prints "bashvisor sandbox: ..." to stderr and
// exits with status 126 (the command never runs unconfined). In every other
// case Main returns at once.
func Main() {
	if len(os.Args) == 2 && os.Args[1] == connectArg {
		os.Exit(connectMain()) // a world's connector (see connectArg)
	}
	if len(os.Args) >= 2 && os.Args[1] == serverArg {
		err := serverMain(os.Args[2:])
		if err == nil {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "bashvisor sandbox: world server: %v\n", err)
		os.Exit(helperExitCode)
	}
	if len(os.Args) >= 2 && os.Args[1] == worldChildArg {
		runtime.LockOSThread()
		err := worldChild(os.Args[2:])
		if err == nil {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "bashvisor sandbox: world: %v\n", err)
		os.Exit(helperExitCode)
	}
	if len(os.Args) < 2 || os.Args[1] != HelperArg {
		if exe, err := os.Executable(); err == nil {
			mainExe.Store(exe)
		}
		mainCalled.Store(true)
		return
	}
	// Per-thread state (capability bounding set, no_new_privs) is set on this
	// thread and execve runs on it too.
	runtime.LockOSThread()
	err := helper(os.Args[2:])
	fmt.Fprintf(os.Stderr, "bashvisor sandbox: %v\n", err)
	os.Exit(helperExitCode)
}

// helper confines the process and execs the command; it only returns on error.
func helper(args []string) error {
	if len(args) < 3 || args[1] != "--" {
		return errors.New("usage: " + HelperArg + " CONFIG -- PROGRAM ARGS...")
	}
	var cfg helperConfig
	if err := json.Unmarshal([]byte(args[0]), &cfg); err != nil {
		return fmt.Errorf("bad config: %w", err)
	}
	// Zero means the default here too, so a hand-written config never ends
	// up with a CPU or file size limit of 0.
	lim := config.SandboxLimits{CPUSeconds: cfg.CPUSeconds, FileSize: cfg.FileSize, OpenFiles: cfg.OpenFiles, AddressSpace: cfg.AddressSpace}.WithDefaults()
	cfg.CPUSeconds, cfg.FileSize, cfg.OpenFiles, cfg.AddressSpace = lim.CPUSeconds, lim.FileSize, lim.OpenFiles, lim.AddressSpace
	argv := args[2:]
	if cfg.Scratch == "" || !strings.HasPrefix(argv[0], "/") {
		return errors.New("bad config: scratch dir and an absolute program path are required")
	}
	if err := restoreRuntimeEnv(cfg.RuntimeEnv); err != nil {
		return fmt.Errorf("environment: %w", err)
	}
	env := os.Environ()
	if cfg.World != nil && cfg.World.Rootless || cfg.OwnNamespaces {
		// Started in the world's user, network and mount namespaces
		// (startInWorld), or in new ones (startOwnNamespaces): the
		// command's own mount namespace is made here.
		if cfg.OwnNamespaces {
			if err := loopbackUp(); err != nil {
				return err
			}
		}
		// The working directory still refers to the mount it was on: go
		// there again once the view is made (a writable root is mounted
		// over it).
		cwd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("working directory: %w", err)
		}
		if cfg.World != nil && cfg.Layer != nil {
			// In the world's mount namespace, where a held layer's
			// overlays are made and cloned (see package layer, "Held
			// layers"); this also closes the layer's socket.
			if cfg.mounts, err = cfg.Layer.Open(); err != nil {
				return fmt.Errorf("copy-on-write layer: %w", err)
			}
		}
		if err := makeView(&cfg); err != nil {
			return err
		}
		if cfg.NamespaceFD != 0 {
			if err := reportNamespace(cfg.NamespaceFD); err != nil {
				return err
			}
		}
		if err := unix.Chdir(cwd); err != nil {
			return fmt.Errorf("working directory: %w", err)
		}
		if cfg.ProxyFD != 0 {
			port, err := handOverProxy(&cfg)
			if err != nil {
				return err
			}
			cfg.ProxyPort = port
			if cfg.ProxyEnv {
				env = withEnv(env, proxyEnv(port, cfg.LoopbackDirect))
			}
		}
	}
	if cfg.Namespaces {
		// The engine entered the command's namespaces before starting the
		// helper (Command.StartHelper); the seccomp filter relies on them.
		var in, parent unix.Stat_t
		if unix.Stat(cfg.Scratch, &in) != nil || unix.Stat(filepath.Dir(cfg.Scratch), &parent) != nil || in.Dev == parent.Dev {
			return errors.New("not started inside the command's namespaces (use Command.StartHelper)")
		}
	}
	// Limits kept in cgroup v1 hierarchies: this thread, which execs bash
	// and so becomes the whole process, joins them (0: the calling thread;
	// the runtime's other threads end at execve).
	for _, dir := range cfg.CgroupDirs {
		if err := os.WriteFile(dir+"/tasks", []byte("0"), 0); err != nil {
			return fmt.Errorf("join cgroup %s: %w", dir, err)
		}
	}
	if err := setRlimits(cfg); err != nil {
		return err
	}
	if err := dropCapabilities(); err != nil {
		return err
	}
	if err := applyLandlock(cfg); err != nil {
		return err
	}
	if err := installSeccomp(cfg.filter()); err != nil {
		return err
	}
	proc.ResetSignalsForExec() // ignored by the engine: bash could not undo it
	return execWithAddressSpace(argv, env, cfg.AddressSpace)
}

// withEnv returns env with the NAME=value entries of add set (replacing
// the names' earlier values).
func withEnv(env, add []string) []string {
	out := make([]string, 0, len(env)+len(add))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(add, func(a string) bool { return strings.HasPrefix(a, name+"=") }) {
			out = append(out, kv)
		}
	}
	return append(out, add...)
}

// execWithAddressSpace sets RLIMIT_AS and execs argv without allocating in
// between: the Go runtime (and the race detector's shadow memory) may need
// more address space than the command is allowed, so the limit can only be
// set at the very last moment. On failure it writes a fixed message and
// exits 126 without touching the heap; it only returns for errors found
// before the limit is set.
func execWithAddressSpace(argv, env []string, as uint64) error {
	path, err := syscall.BytePtrFromString(argv[0])
	if err != nil {
		return err
	}
	argvp, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		return err
	}
	envp, err := syscall.SlicePtrFromStrings(env)
	if err != nil {
		return err
	}
	msg := []byte("bashvisor sandbox: cannot exec " + argv[0] + " (address space limit or exec failure)\n")
	rl := unix.Rlimit{Cur: as, Max: as}
	if as != config.Unlimited {
		if _, _, e := unix.RawSyscall6(unix.SYS_PRLIMIT64, 0, unix.RLIMIT_AS, uintptr(unsafe.Pointer(&rl)), 0, 0, 0); e != 0 {
			return fmt.Errorf("setrlimit RLIMIT_AS=%d: %w", as, e)
		}
	}
	for {
		_, _, e := unix.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(path)),
			uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])))
		if e != unix.EAGAIN && e != unix.EINTR {
			break
		}
	}
	unix.RawSyscall(unix.SYS_WRITE, 2, uintptr(unsafe.Pointer(&msg[0])), uintptr(len(msg)))
	unix.RawSyscall(unix.SYS_EXIT_GROUP, helperExitCode, 0, 0)
	panic("unreachable")
}

type rlimit struct {
	name       string
	res        int
	soft, hard uint64
}

// rlimitsOf lists the rlimits of cfg, RLIMIT_AS excluded (set last, see
// execWithAddressSpace) and unlimited ones left out.
func rlimitsOf(cfg helperConfig) []rlimit {
	cpuHard := cfg.CPUSeconds
	if cpuHard != config.Unlimited {
		cpuHard += 5 // soft < hard: SIGXCPU first, SIGKILL at the hard limit
	}
	files := ownHardLimit(unix.RLIMIT_NOFILE, cfg.OpenFiles)
	var out []rlimit
	for _, l := range []rlimit{
		{"RLIMIT_CORE", unix.RLIMIT_CORE, 0, 0},
		{"RLIMIT_CPU", unix.RLIMIT_CPU, cfg.CPUSeconds, cpuHard},
		{"RLIMIT_FSIZE", unix.RLIMIT_FSIZE, cfg.FileSize, cfg.FileSize},
		{"RLIMIT_NOFILE", unix.RLIMIT_NOFILE, files, files},
	} {
		if l.soft != config.Unlimited || l.hard != config.Unlimited {
			out = append(out, l)
		}
	}
	return out
}

// ownHardLimit is v, or this process's hard limit of resource when that
// is lower: raising a hard limit needs CAP_SYS_RESOURCE, so a command
// cannot be given more descriptors than the engine may have (an engine
// started under `ulimit -Hn 256` would fail every sandboxed command).
func ownHardLimit(resource int, v uint64) uint64 {
	var rl unix.Rlimit
	if v == config.Unlimited || unix.Getrlimit(resource, &rl) != nil || rl.Max == unix.RLIM_INFINITY {
		return v
	}
	return min(v, rl.Max)
}

func setRlimits(cfg helperConfig) error {
	for _, l := range rlimitsOf(cfg) {
		// syscall.Setrlimit (not x/sys) so the runtime knows about NOFILE
		// and does not "restore" its startup value on exec.
		if err := syscall.Setrlimit(l.res, &syscall.Rlimit{Cur: l.soft, Max: l.hard}); err != nil {
			return fmt.Errorf("setrlimit %s=%d/%d: %w", l.name, l.soft, l.hard, err)
		}
	}
	return nil
}

// keptCapabilities are the only capabilities a root command keeps: reading
// (and "writing", which Landlock denies) files regardless of their mode
// bits, so that restricted mode reads everything unrestricted mode reads.
var keptCapabilities = map[uintptr]bool{unix.CAP_DAC_OVERRIDE: true, unix.CAP_DAC_READ_SEARCH: true}

// dropCapabilities removes every other capability from this thread's
// bounding set (root's capabilities after execve are bounded by it) and
// clears the ambient set. Without CAP_SETPCAP (not root) there is nothing
// to drop.
func dropCapabilities() error {
	_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	// Nothing is inherited through exec either (a rootless helper had its
	// mount capabilities inheritable to keep them as ambient ones).
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err == nil && (data[0].Inheritable != 0 || data[1].Inheritable != 0) {
		data[0].Inheritable, data[1].Inheritable = 0, 0
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			return fmt.Errorf("clear inheritable capabilities: %w", err)
		}
	}
	for c := uintptr(0); c < 64; c++ {
		if keptCapabilities[c] {
			continue
		}
		err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0)
		switch {
		case err == nil:
		case errors.Is(err, unix.EINVAL):
			return nil // past the last capability the kernel knows
		case errors.Is(err, unix.EPERM):
			return nil // no CAP_SETPCAP: an unprivileged engine
		default:
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	return nil
}

// applyLandlock makes the filesystem read-only except scratch,
// /dev/null and the command's own terminal, denies TCP bind/connect (ABI 4+) and scopes signals and
// abstract unix sockets (ABI 6+). It handles every access right of the
// kernel's exact ABI (go-landlock's preset for it, never BestEffort, which
// silently degrades to no sandbox at all).
//
// It restricts the calling thread only (plus no_new_privs on it): Main has
// locked the goroutine to this thread and execve runs on it, and execve
// turns the calling thread into the whole new process; the helper's other
// threads run only the Go runtime and die at execve. go-landlock's
// all-threads path (psx signals to every thread on ABI < 8) costs ~0.4 ms
// more per command for no gain here.
func applyLandlock(cfg helperConfig) error {
	abi := landlockABI()
	if abi < 1 {
		return unavailable("Landlock is not available on this kernel")
	}
	preset := presets[min(abi, len(presets))-1]
	handled := uint64(preset.HandledAccessFS)
	attr := ll.RulesetAttr{
		HandledAccessFS:  handled,
		HandledAccessNet: uint64(preset.HandledAccessNet), // no rules: no TCP bind/connect
		Scoped:           uint64(preset.Scoped),           // signals, abstract unix sockets
	}
	if cfg.World != nil && !cfg.NoTCP {
		// TCP anywhere in the world's network, which has nothing but the
		// conversation's loopback (and the proxy there).
		attr.HandledAccessNet = 0
	}
	n, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return fmt.Errorf("landlock_create_ruleset (ABI %d): %w", abi, err)
	}
	ruleset := fd.New(n)
	defer ruleset.Close()
	const (
		read  = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir
		file  = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate
		nodev = ll.AccessFSMakeChar | ll.AccessFSMakeBlock
	)
	type rule struct {
		path     string
		access   uint64
		optional bool
	}
	rules := []rule{
		{"/", read, false},
		// Everything in scratch except creating device nodes (CAP_MKNOD is
		// dropped anyway).
		{cfg.Scratch, handled &^ nodev, false},
		{"/dev/null", file, false},
		{"/dev/zero", file, true},
		{"/dev/full", file, true},
		// The command's own controlling terminal, if it has one (a job on a
		// terminal; otherwise opening it fails with ENXIO): password
		// prompts, less and editors open it rather than use stdin.
		{"/dev/tty", file | ll.AccessFSIoctlDev, true},
	}
	for _, w := range cfg.Writable {
		rules = append(rules, rule{w, handled &^ nodev, false})
	}
	for _, r := range rules {
		parent, err := fd.Open(r.path, unix.O_PATH, 0)
		if err != nil {
			if r.optional && errors.Is(err, unix.ENOENT) {
				continue
			}
			return fmt.Errorf("landlock rule %s: %w", r.path, err)
		}
		err = ll.LandlockAddPathBeneathRule(ruleset.Int(), &ll.PathBeneathAttr{ParentFd: parent.Int(), AllowedAccess: r.access & handled}, 0)
		_ = parent.Close()
		if err != nil {
			return fmt.Errorf("landlock rule %s: %w", r.path, err)
		}
	}
	if cfg.ProxyPort != 0 && attr.HandledAccessNet&ll.AccessNetConnectTCP != 0 {
		// The proxy's port is the only one to connect to (its namespace
		// has nothing else either); binding stays denied.
		err := ll.LandlockAddNetPortRule(ruleset.Int(), &ll.NetPortAttr{AllowedAccess: ll.AccessNetConnectTCP, Port: uint64(cfg.ProxyPort)}, 0)
		if err != nil {
			return fmt.Errorf("landlock rule for port %d: %w", cfg.ProxyPort, err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if err := ll.LandlockRestrictSelf(ruleset.Int(), 0); err != nil {
		return fmt.Errorf("landlock_restrict_self (ABI %d): %w", abi, err)
	}
	return nil
}
