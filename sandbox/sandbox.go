package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/bashvisor/bashvisor/truncate"
)

// HelperArg is the hidden argv[1] that turns the embedding binary into the
// sandbox helper. [Prepare] puts it into [Command.Args]; [Main] recognises it.
const HelperArg = "__bashvisor_sandbox"

// helperExitCode is the exit status of a helper that could not confine itself
// (the same status a shell uses for "found but cannot execute").
const helperExitCode = 126

// Unlimited, used as a [Limits] field, switches that limit off entirely
// (RLIM_INFINITY for rlimits, "max" for pids.max).
const Unlimited = ^uint64(0)

// Default limits, applied when a [Limits] field is zero. They are chosen so
// that `go build`, `node -e`, `python3 -c`, git and ordinary shell tools run
// unchanged: they stop runaway commands, not legitimate work.
const (
	// DefaultCPUSeconds is the RLIMIT_CPU soft limit per process (15 min,
	// the slow-mode timeout). The hard limit is 5 s higher, so a process first
	// gets SIGXCPU and only then SIGKILL.
	DefaultCPUSeconds = 900
	// DefaultFileSize is RLIMIT_FSIZE (4 GiB): the largest file a command may
	// write (only the scratch dir is writable). Larger writes fail with EFBIG
	// or kill the writer with SIGXFSZ.
	DefaultFileSize = 4 << 30
	// DefaultOpenFiles is RLIMIT_NOFILE (soft and hard).
	DefaultOpenFiles = 8192
	// DefaultAddressSpace is RLIMIT_AS (16 GiB of virtual memory per process).
	// 1 GiB breaks Python and 2 GiB breaks Java; V8 (node) and Go reserve
	// large virtual ranges up front, and a WebAssembly memory reserves ~10 GiB
	// of guard space, so the default is generous: it stops a memory bomb well
	// before it takes the machine's swap, not a compiler.
	DefaultAddressSpace = 16 << 30
	// DefaultProcesses is the cgroup pids.max: the number of processes and
	// threads the command may have at once (RLIMIT_NPROC does not bind root
	// and counts per user system-wide, so it is not used).
	DefaultProcesses = 512
	// DefaultScratchBytes is the size of the scratch directory ($TMPDIR),
	// the only writable place (2 GiB).
	DefaultScratchBytes = 2 << 30
	// DefaultScratchFiles bounds the files and directories in the scratch
	// directory (each costs kernel memory).
	DefaultScratchFiles = 100_000
)

// Limits are the resource limits of one restricted command. A zero field
// means the default (see DefaultCPUSeconds and friends); [Unlimited] turns
// a limit off. RLIMIT_CORE is always 0 (no core dumps).
type Limits struct {
	// CPUSeconds is the RLIMIT_CPU soft limit per process; the hard limit is
	// CPUSeconds+5 so the process gets SIGXCPU before SIGKILL.
	CPUSeconds uint64
	// FileSize is RLIMIT_FSIZE in bytes.
	FileSize uint64
	// OpenFiles is RLIMIT_NOFILE (soft and hard).
	OpenFiles uint64
	// AddressSpace is RLIMIT_AS in bytes.
	AddressSpace uint64
	// Processes is the cgroup pids.max of the command (0 = default).
	// Negative means no pids cgroup at all: no process limit, and Cleanup
	// cannot find processes that left the process group (setsid). Only
	// enforced where [Capabilities.Cgroup] is true.
	Processes int
	// ScratchBytes is the size of the scratch directory: writes beyond it
	// fail with ENOSPC ("No space left on device"). Its contents live in
	// memory (a tmpfs, swappable) and count against nothing else. Only
	// enforced where [Capabilities.Namespaces] is true; elsewhere the
	// scratch directory is a plain directory in ScratchRoot with no quota
	// (only FileSize bounds each file).
	ScratchBytes uint64
	// ScratchFiles bounds the number of files and directories in the
	// scratch directory (ENOSPC beyond). Enforced like ScratchBytes.
	ScratchFiles uint64
}

func (l Limits) withDefaults() Limits {
	if l.CPUSeconds == 0 {
		l.CPUSeconds = DefaultCPUSeconds
	}
	if l.FileSize == 0 {
		l.FileSize = DefaultFileSize
	}
	if l.OpenFiles == 0 {
		l.OpenFiles = DefaultOpenFiles
	}
	if l.AddressSpace == 0 {
		l.AddressSpace = DefaultAddressSpace
	}
	if l.Processes == 0 {
		l.Processes = DefaultProcesses
	}
	if l.ScratchBytes == 0 || l.ScratchBytes == Unlimited {
		l.ScratchBytes = DefaultScratchBytes
	}
	if l.ScratchFiles == 0 || l.ScratchFiles == Unlimited {
		l.ScratchFiles = DefaultScratchFiles
	}
	return l
}

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
	// Cgroup: a per-command pids cgroup limits the number of processes.
	Cgroup bool
	// Namespaces: every command gets private network, IPC and mount
	// namespaces, and a scratch directory with a quota (needs
	// CAP_SYS_ADMIN, in practice a root engine). Without them SysV IPC,
	// POSIX message queues and bind(2) are denied instead, and the scratch
	// directory has no quota.
	Namespaces bool
	// Reason explains what is missing, empty when everything is enforced.
	Reason string
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
	s := fmt.Sprintf("landlock_abi=%d filesystem=%s network=%s scoping=%s seccomp=%s cgroup_pids=%s namespaces=%s",
		c.ABI, yn(c.Filesystem), yn(c.Network), yn(c.Scoping), yn(c.Seccomp), yn(c.Cgroup), yn(c.Namespaces))
	if c.Reason != "" {
		s += " (" + c.Reason + ")"
	}
	return s
}

var (
	probeOnce sync.Once
	probed    Capabilities
)

// Probe finds out once per process (sync.Once) what restricted mode
// enforces here: the Landlock ABI, whether a seccomp filter can be installed
// and whether a pids cgroup can be created. It logs nothing; the engine logs
// [Capabilities.String] once.
func Probe() Capabilities {
	probeOnce.Do(func() { probed = probe() })
	return probed
}

// Command is a prepared restricted command: start Path with Args (in a new
// session, cwd = the working directory, env = the engine's env + Env) and
// call Cleanup after it ended.
type Command struct {
	// Path is the program to start: the running executable (/proc/self/exe).
	Path string
	// Args is the full argv: Path, HelperArg, the encoded config, "--",
	// the bash path, "-c", the command.
	Args []string
	// Env holds the additions to the command's environment (TMPDIR, caches
	// pointed into the scratch dir). Append them after the engine's env.
	Env []string
	// Scratch is the private per-command scratch directory (0700), the only
	// writable place inside the sandbox besides /dev/null.
	Scratch string
	// Cgroup is the command's pids cgroup directory ("" without one); its
	// pids.current says how many processes the command has.
	Cgroup string
	// Cleanup kills what is left in the command's pids cgroup, removes the
	// cgroup and the scratch dir. Call it once the command (and the process
	// group) ended; it is safe to call more than once.
	Cleanup func() error

	cfg     config
	bash    string
	command string
	ns      *netnsHandle // the pooled network namespace (none without Namespaces)
}

// config is what Prepare hands to the helper in argv[2].
type config struct {
	Scratch      string `json:"scratch"`
	CgroupDir    string `json:"cgroup,omitempty"`
	CPUSeconds   uint64 `json:"cpu"`
	FileSize     uint64 `json:"fsize"`
	OpenFiles    uint64 `json:"nofile"`
	AddressSpace uint64 `json:"as"`
	ScratchBytes uint64 `json:"scratch_bytes"`
	ScratchFiles uint64 `json:"scratch_files"`
	// Namespaces: the command runs in private network, IPC and mount
	// namespaces (set up by the engine before the helper starts).
	Namespaces bool `json:"ns,omitempty"`
}

// filter is the seccomp filter for a command with this configuration.
func (c config) filter() filterOpts {
	return filterOpts{denyIPC: !c.Namespaces, denyBind: !c.Namespaces}
}

// Prepare builds the command that runs `bash -c command` confined. bashPath
// must be absolute (the helper does no PATH lookup); workdir is where the
// engine starts it (readable like everything else, not writable). It
// creates the private scratch dir (0700, under [ScratchRoot] or
// os.TempDir()) and, where possible, a pids cgroup; the caller must call
// [Command.Cleanup] after the command ended, also when starting it failed. It returns an error wrapping [ErrUnavailable] when
// Landlock or seccomp is missing; it never degrades silently.
func Prepare(lim Limits, bashPath, command, workdir string) (*Command, error) {
	caps := Probe()
	if !caps.Available() {
		return nil, unavailable(caps.Reason)
	}
	if !filepath.IsAbs(bashPath) {
		return nil, fmt.Errorf("sandbox: bash path must be absolute: %q", bashPath)
	}
	exe := selfExe
	if HelperPath != "" {
		if !filepath.IsAbs(HelperPath) {
			return nil, fmt.Errorf("sandbox: HelperPath must be absolute: %q", HelperPath)
		}
		exe = HelperPath
	}
	_ = workdir // the engine sets cwd; the workdir is readable like everything else
	lim = lim.withDefaults()
	// The engine's pid in the name lets a later engine remove what a killed
	// one left behind (see removeStale).
	scratch, err := os.MkdirTemp(ScratchRoot, scratchPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("sandbox: create scratch dir: %w", err)
	}
	if scratch, err = filepath.EvalSymlinks(scratch); err != nil {
		_ = os.RemoveAll(scratch)
		return nil, fmt.Errorf("sandbox: scratch dir: %w", err)
	}
	cfg := config{
		Scratch:      scratch,
		CPUSeconds:   lim.CPUSeconds,
		FileSize:     lim.FileSize,
		OpenFiles:    lim.OpenFiles,
		AddressSpace: lim.AddressSpace,
		ScratchBytes: lim.ScratchBytes,
		ScratchFiles: lim.ScratchFiles,
		Namespaces:   caps.Namespaces,
	}
	fail := func(err error) (*Command, error) {
		_ = removeCgroup(cfg.CgroupDir)
		_ = os.RemoveAll(scratch)
		return nil, err
	}
	if caps.Cgroup && lim.Processes > 0 {
		dir, err := createCgroup(filepath.Base(scratch), lim.Processes)
		if err != nil {
			return fail(fmt.Errorf("sandbox: create pids cgroup: %w", err))
		}
		cfg.CgroupDir = dir
	}
	ns := noNetns()
	if caps.Namespaces {
		// The cache dir is made on the scratch tmpfs when the command
		// starts (enterNamespaces).
		if ns, err = newNetnsHandle(); err != nil {
			return fail(err)
		}
	} else if err := makeCacheDir(scratch); err != nil {
		return fail(fmt.Errorf("sandbox: %w", err))
	}
	enc, err := json.Marshal(cfg)
	if err != nil {
		panic(err) // cannot happen: plain strings and integers
	}
	cache := filepath.Join(scratch, ".cache")
	var once sync.Once
	var cleanupErr error
	cmd := &Command{
		Path:    exe,
		Args:    []string{exe, HelperArg, string(enc), "--", bashPath, "-c", command},
		Scratch: scratch,
		Cgroup:  cfg.CgroupDir,
		Env: []string{
			"TMPDIR=" + scratch,
			"TMP=" + scratch,
			"TEMP=" + scratch,
			"XDG_CACHE_HOME=" + cache,
			"GOCACHE=" + filepath.Join(cache, "go-build"),
			"GOTMPDIR=" + scratch,
			"npm_config_cache=" + filepath.Join(cache, "npm"),
			"PIP_CACHE_DIR=" + filepath.Join(cache, "pip"),
			"PYTHONDONTWRITEBYTECODE=1",
			"CARGO_TARGET_DIR=" + filepath.Join(scratch, "cargo-target"),
			"BASHVISOR_SANDBOX=1",
		},
		cfg:     cfg,
		bash:    bashPath,
		command: command,
		ns:      ns,
	}
	// A command dropped without Cleanup (processes left running on purpose)
	// still gives its namespace descriptor back to the kernel.
	runtime.AddCleanup(cmd, func(h *netnsHandle) { h.release(false) }, ns)
	cmd.Cleanup = func() error {
		once.Do(func() {
			cgErr := removeCgroup(cfg.CgroupDir)
			// The network namespace is reused only when every process of
			// the command is known to be gone: its pids cgroup was emptied
			// and removed.
			ns.release(cfg.CgroupDir != "" && cgErr == nil)
			cleanupErr = errors.Join(cgErr, removeScratch(scratch))
		})
		return cleanupErr
	}
	return cmd, nil
}

// scratchPrefix starts the name of every scratch directory (and of its
// pids cgroup): bashvisor-sbx-ENGINEPID-RANDOM.
const scratchPrefix = "bashvisor-sbx-"

// HelperPath, when set (before the first Prepare), is the absolute path of a
// program whose main calls [Main] first, started instead of the running
// executable. The bashvisor-sandbox command (./sandbox/cmd/bashvisor-sandbox,
// built with CGO_ENABLED=0) is such a program: a small static binary starts
// about 1 ms faster than a large cgo-linked engine binary, which matters when
// restricted commands are frequent. Empty (the default) re-executes the
// running binary through /proc/self/exe.
var HelperPath string

// HelperName is the file name of the standalone helper command
// (./sandbox/cmd/bashvisor-sandbox) that [FindHelper] looks for.
const HelperName = "bashvisor-sandbox"

// FindHelper returns the absolute path of an executable [HelperName] in the
// directory of the running executable, or "" when there is none. An
// embedding program can do `sandbox.HelperPath = sandbox.FindHelper()` at
// startup: a large engine binary spends milliseconds in package init
// functions (≈3-4 ms for cmd/demo here) before [Main] even runs, on every
// restricted command.
func FindHelper() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	p := filepath.Join(filepath.Dir(exe), HelperName)
	st, err := os.Stat(p)
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return ""
	}
	return p
}

// ScratchRoot, when set (before the first Prepare), is the directory under
// which Prepare creates the per-command scratch dirs; empty means
// os.TempDir(). Creating and removing the scratch dir is a fixed cost per
// restricted command: ~35 µs on tmpfs, but 1-3 ms on an ext4 /tmp mounted
// with "discard" (measured on the development VM), so a tmpfs such as
// /dev/shm or $XDG_RUNTIME_DIR is a good choice where commands do not
// write gigabytes (the scratch dir then lives in RAM).
var ScratchRoot string

// selfExe is the program Prepare starts by default. The kernel resolves /proc/self/exe
// in the forked child, which is still a copy of the engine, so this is the
// engine's own binary even if the file on disk was replaced or deleted.
const selfExe = "/proc/self/exe"

// removeScratch removes the scratch dir, first making directories the
// command created without permissions (mkdir -m 000) removable again.
func removeScratch(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("sandbox: remove scratch dir: %w", err)
	}
	return nil
}

// Description states the restricted-mode constraints plainly, for the tool
// description the model reads, with the default [Limits].
func Description() string { return DescriptionWith(Limits{}) }

// DescriptionWith is [Description] for the given limits.
func DescriptionWith(lim Limits) string {
	c := Probe()
	lim = lim.withDefaults()
	var b strings.Builder
	b.WriteString("Restricted mode (enforced by the kernel) is on for this conversation:\n")
	b.WriteString("- The filesystem is read-only. You can read, list, search and run anything, but every write fails with \"Permission denied\" (EACCES) or \"Operation not permitted\" (EPERM), except in $TMPDIR (a private scratch directory, deleted when the command ends")
	if c.Namespaces {
		fmt.Fprintf(&b, ", at most %s", truncate.Humanize(int64(lim.ScratchBytes)))
	}
	b.WriteString(") and /dev/null. Build into $TMPDIR (e.g. `go build -o \"$TMPDIR/app\" .`); caches (XDG_CACHE_HOME, GOCACHE, npm, pip) already point there.\n")
	b.WriteString("- Caches start empty in every command, so the first build in each command is slower.\n")
	b.WriteString("- chmod, chown, touch of existing files and extended attributes are blocked everywhere, including $TMPDIR.\n")
	b.WriteString("- There is no network: no TCP, UDP or other internet sockets, no connections to unix sockets, so package installs and downloads fail.\n")
	if c.Scoping {
		b.WriteString("- Processes outside the sandbox cannot be signalled or inspected (kill, /proc/PID/environ fail). ptrace is blocked (no strace, gdb).\n")
	} else {
		b.WriteString("- ptrace is blocked (no strace, gdb).\n")
	}
	b.WriteString("- Limits per process: ")
	if lim.CPUSeconds != Unlimited {
		fmt.Fprintf(&b, "%d s of CPU time, ", lim.CPUSeconds)
	}
	if lim.FileSize != Unlimited {
		fmt.Fprintf(&b, "files up to %s, ", truncate.Humanize(int64(lim.FileSize)))
	}
	if lim.OpenFiles != Unlimited {
		fmt.Fprintf(&b, "%d open files, ", lim.OpenFiles)
	}
	if lim.AddressSpace != Unlimited {
		fmt.Fprintf(&b, "%s of address space, ", truncate.Humanize(int64(lim.AddressSpace)))
	}
	b.WriteString("no core dumps")
	if c.Cgroup && lim.Processes > 0 {
		fmt.Fprintf(&b, "; at most %d processes per command", lim.Processes)
	}
	b.WriteString(".\n")
	b.WriteString("- A command that fails because of these rules is not retried outside the sandbox; do not work around them, say what you need instead.")
	return b.String()
}
