package config

// Sandbox configures the sandbox of sandboxed commands (the profiles a
// call chooses with engine.ToolContext.Sandbox).
type Sandbox struct {
	// Limits are the resource limits of a sandboxed command (zero fields:
	// the defaults; [Unlimited] switches one off).
	Limits SandboxLimits
	// Helper starts sandboxed commands through the re-executed sandbox
	// helper (the program must call engine.SandboxMain first in main)
	// instead of from a confined throwaway thread of the engine. The
	// helper sets the resource limits itself before it execs bash and
	// does not depend on bash reading its start-up file; the default
	// starts about a millisecond faster.
	Helper bool
	// HelperPath is the helper program Helper starts: one whose main calls
	// engine.SandboxMain first, such as a CGO_ENABLED=0 build of
	// ./cmd/bashvisor-sandbox, which starts faster than a large engine
	// binary. Empty means the running executable, except for an engine
	// that is not root (which starts every sandboxed command through a
	// helper, Helper or not): it uses bashvisor-sandbox next to its own
	// executable (`make build` and `make install` put it there) when that
	// file is writable by nobody but its owner (root or the engine's
	// user) and makes a world at start-up, else its own executable.
	HelperPath string
	// ScratchRoot is where the sandbox package makes per-command scratch
	// directories for commands without a conversation's world (default
	// os.TempDir()); the engine's commands always have one, whose /tmp is
	// the conversation's.
	ScratchRoot string
	// CacheDir is where each conversation's world directory is made
	// (CacheDir/conversation-KEY): the mount point of its own file system,
	// which holds its /tmp and what its build and package caches add to
	// their bases (see BaseCaches), so that a conversation's second build
	// is warm and no conversation's commands can plant build outputs
	// another's use. The engine sees empty directories there; the caches
	// live in memory (a tmpfs, swappable) and are gone with the
	// conversation. Sandboxed commands see only their own conversation's
	// directory here. It must not be inside a workspace. Empty: a
	// directory in the output directory.
	CacheDir string
	// BaseCaches are read-only starting points of every conversation's
	// build and package caches (see BaseCaches); empty: they start empty.
	BaseCaches BaseCaches
}

// BaseCaches are the user's build and package caches, which sandboxed
// commands find at their own paths: in each conversation the cache at a
// set field's path is an overlay whose lower layer is the user's
// directory and whose upper layer holds what the conversation adds (on
// its file system, within its quota), so its first `go build` finds the
// user's modules and packages compiled at the paths they were compiled
// at (the build cache keys on them), and nothing it writes reaches the
// user's cache or another conversation. The commands' environment is
// the user's: no variable moves a cache that has a base. A cache whose
// field is empty starts empty in the conversation's cache directory,
// named by its variable (GOCACHE, npm_config_cache, PIP_CACHE_DIR; and
// with no base at all XDG_CACHE_HOME; with network GOMODCACHE and
// CARGO_HOME). A base changed while conversations use it (the host
// builds too) is seen by them, file by file, as overlayfs allows; a
// conversation that started before a file appeared may still see its
// older view of a directory. A base below a workspace stays the
// conversation's cache in workspace-write too (mounted over the
// workspace's layer: what a command writes there is no change of the
// workspace's).
type BaseCaches struct {
	// GoBuild is the Go build cache (`go env GOCACHE`).
	GoBuild string
	// GoMod is the Go module cache (`go env GOMODCACHE`).
	GoMod string
	// Npm is the npm cache (`npm config get cache`).
	Npm string
	// Pip is the pip cache (`pip cache dir`).
	Pip string
}

// Dirs lists the bases by the name of the cache directory they start
// (go-build, go-mod, npm, pip), set ones only.
func (b BaseCaches) Dirs() map[string]string {
	m := map[string]string{}
	for name, dir := range map[string]string{"go-build": b.GoBuild, "go-mod": b.GoMod, "npm": b.Npm, "pip": b.Pip} {
		if dir != "" {
			m[name] = dir
		}
	}
	return m
}

// Unlimited, used as a [SandboxLimits] field, switches that limit off entirely
// (RLIM_INFINITY for rlimits, "max" for pids.max).
const Unlimited = ^uint64(0)

// SandboxLimits are the resource limits of one sandboxed command, on top
// of its [Limits]. A zero field means the default; [Unlimited] turns a
// limit off. The defaults are chosen so that `go build`, `node -e`,
// `python3 -c`, git and ordinary shell tools run unchanged: they stop
// runaway commands, not legitimate work. RLIMIT_CORE is always 0 (no core
// dumps).
type SandboxLimits struct {
	// CPUSeconds is the RLIMIT_CPU soft limit per process (default 900,
	// the slow-mode timeout); the hard limit is CPUSeconds+5 so the
	// process gets SIGXCPU before SIGKILL.
	CPUSeconds uint64
	// FileSize is RLIMIT_FSIZE in bytes (default 4 GiB): the largest file
	// a command may write. Larger writes fail with EFBIG or kill the
	// writer with SIGXFSZ.
	FileSize uint64
	// OpenFiles is RLIMIT_NOFILE, soft and hard (default 8192), at most
	// the engine's own hard limit (raising it needs CAP_SYS_RESOURCE).
	OpenFiles uint64
	// AddressSpace is RLIMIT_AS in bytes (default 16 GiB of virtual memory
	// per process). 1 GiB breaks Python and 2 GiB breaks Java; V8 (node)
	// and Go reserve large virtual ranges up front, and a WebAssembly
	// memory reserves ~10 GiB of guard space, so the default is generous:
	// it stops a memory bomb well before it takes the machine's swap, not
	// a compiler.
	AddressSpace uint64
	// Processes is the pids.max of the command's cgroup (default 512):
	// processes and threads at once (RLIMIT_NPROC does not bind root and
	// counts per user system-wide, so it is not used). Negative means no
	// limit. Enforced only when the engine has cgroups and the host offers
	// the pids controller; a lower limit already set on the cgroup stays
	// (the stricter wins).
	Processes int
	// ScratchBytes is each conversation's quota (default 2 GiB): what its
	// /tmp ($TMPDIR), the changes to its build caches and its background
	// jobs' output files hold together. The first two live on one file
	// system of the conversation's (a tmpfs: memory, swappable), whose
	// size, when a sandboxed command starts, is the quota less what the
	// job output files hold on disk (those are bounded each by
	// Output.JobFileCap); writes beyond fail with ENOSPC ("No space left
	// on device"), and the command's result says how the quota is used.
	// (A command started by the sandbox package without a world gets a
	// scratch directory of this size instead.) A command that runs
	// contained or in hold mode writes /tmp and the caches in a view of
	// its own, thrown away when it ends: a tmpfs of this size (and
	// ScratchFiles) per such command, outside the quota, whose pages are
	// charged to the command's memory limit (Limits.Memory, no swap)
	// where the engine has cgroups, and otherwise bounded only by it.
	ScratchBytes uint64
	// ScratchFiles bounds the number of files and directories in the
	// conversation's file system (default 100,000; ENOSPC beyond).
	ScratchFiles uint64
}

// WithDefaults returns l with every zero field set to its default.
func (l SandboxLimits) WithDefaults() SandboxLimits {
	const (
		defaultCPUSeconds   = 900
		defaultFileSize     = 4 << 30
		defaultOpenFiles    = 8192
		defaultAddressSpace = 16 << 30
		defaultProcesses    = 512
		defaultScratchBytes = 2 << 30
		defaultScratchFiles = 100_000
	)
	if l.CPUSeconds == 0 {
		l.CPUSeconds = defaultCPUSeconds
	}
	if l.FileSize == 0 {
		l.FileSize = defaultFileSize
	}
	if l.OpenFiles == 0 {
		l.OpenFiles = defaultOpenFiles
	}
	if l.AddressSpace == 0 {
		l.AddressSpace = defaultAddressSpace
	}
	if l.Processes == 0 {
		l.Processes = defaultProcesses
	}
	if l.ScratchBytes == 0 || l.ScratchBytes == Unlimited {
		l.ScratchBytes = defaultScratchBytes
	}
	if l.ScratchFiles == 0 || l.ScratchFiles == Unlimited {
		l.ScratchFiles = defaultScratchFiles
	}
	return l
}
