package engine

import (
	"io"
	"log/slog"
	"time"

	"github.com/bashvisor/bashvisor/internal/supervisor"
	"github.com/bashvisor/bashvisor/safety"
)

// Admission bounds the commands and jobs that run at once (admission
// control): MaxRunning (default 4 per CPU) and MaxRunningPerConversation
// (default half of it) foreground commands, MaxQueue calls waiting for a
// slot (default 4 * MaxRunning) for up to QueueWait (default 30s), and
// MaxJobsPerConversation (default 16) and MaxJobs (default 16 per CPU)
// background jobs running.
type Admission = supervisor.Admission

// SandboxLimits are the resource limits of restricted commands: CPU time,
// file size, open files and address space per process, processes per
// command, and the size of the scratch directory. A zero field means its
// default; [Unlimited] switches a limit off.
type SandboxLimits = supervisor.SandboxLimits

// Unlimited, as a [SandboxLimits] field, switches that limit off.
const Unlimited = supervisor.Unlimited

// SandboxMain must be the first statement of main in a program that uses
// [Config.SandboxHelper]: when the engine re-executes the program as the
// sandbox helper, SandboxMain confines the process and execs the command
// (it never returns); otherwise it returns at once.
func SandboxMain() { supervisor.SandboxMain() }

// EnvPolicy names how a command's environment is derived from the engine's.
type EnvPolicy string

// The environment policies.
const (
	// EnvInheritSafe passes the engine's environment minus secrets.
	EnvInheritSafe EnvPolicy = "inherit-safe"
	// EnvAllowlist passes only PATH, HOME, USER, LANG, LC_ALL, TERM, SHELL,
	// TMPDIR and Config.EnvAllow.
	EnvAllowlist EnvPolicy = "allowlist"
)

// OnTimeout says what happens to a foreground command at its timeout.
type OnTimeout string

// The choices of Config.OnTimeout.
const (
	OnTimeoutKill       OnTimeout = "kill"
	OnTimeoutBackground OnTimeout = "background"
)

// Config configures an Engine. The zero value of every field means its
// default; see [DefaultConfig].
type Config struct {
	// Timeout bounds a default-mode command (default 30s).
	Timeout time.Duration
	// SlowTimeout bounds a slow-mode command (default 15m).
	SlowTimeout time.Duration
	// BackgroundLifetime bounds a background job (default 24h). Negative
	// means no limit.
	BackgroundLifetime time.Duration
	// OnTimeout says what happens to a default or slow command that reaches
	// its timeout: OnTimeoutKill (the default) ends it; OnTimeoutBackground
	// moves it to the background instead, as a job of its conversation
	// (see Input.YieldMS), unless the conversation or the engine already
	// runs as many background jobs as Admission allows (then it is ended,
	// and the result says why).
	OnTimeout OnTimeout
	// Grace is the time between SIGTERM and SIGKILL (default 2s).
	Grace time.Duration
	// CleanupWait bounds the wait for exit and pipe close after SIGKILL
	// (default 15s); the call returns regardless and says so.
	CleanupWait time.Duration
	// DrainWait bounds how long a foreground call waits for the output pipe
	// to close after the shell exited (default 250ms).
	DrainWait time.Duration
	// KeepLeftovers leaves processes that outlive a foreground shell running
	// instead of terminating them.
	KeepLeftovers bool
	// NoCgroups turns off the per-command cgroup v2. By default the engine
	// probes once at New whether it can create cgroups under CgroupParent;
	// where it can, every command runs in a cgroup of its own and ending it
	// ends with cgroup.kill, so processes that left the process group
	// (setsid, double fork) are found and killed too. Otherwise the process
	// group is the unit and the limitation is logged once; the memory and
	// CPU time limits then bind each process (rlimits), there is no
	// process limit, and results report only CPU time (see Limits).
	NoCgroups bool
	// CgroupParent is the cgroup v2 directory under which the engine
	// creates its per-command cgroups (default: the engine's own cgroup;
	// it must be writable: root, or a delegated subtree). On a cgroup v2
	// host the memory and pids limits need a parent that holds no process
	// itself (cgroup v2 enables controllers only for the children of such
	// a cgroup), and the engine's own cgroup holds the engine: name the
	// delegated cgroup instead. A systemd unit with Delegate=yes and
	// DelegateSubgroup=engine runs the engine in UNIT/engine, and the
	// parent is the unit's cgroup; a container's entrypoint moves its
	// processes into a leaf (such as /sys/fs/cgroup/init) and the parent
	// is /sys/fs/cgroup. Otherwise commands still get cgroups (killing
	// escapees, CPU time) and the limits fall back to rlimits, which the
	// engine logs once, saying why.
	CgroupParent string
	// Limits are every command's resource limits (see [Limits]; a call
	// can override them with ToolContext.Limits). Zero fields mean the
	// defaults: memory half of the physical memory, at most 16 GiB;
	// 4096 processes and threads; no CPU time limit. Negative ones mean
	// no limit. The defaults let `go build`, `npm install`, `pytest` and
	// `cargo build` of mid-size projects and heavily threaded programs
	// run; they stop memory and fork bombs.
	Limits Limits
	// SeparateStreams keeps stderr apart from stdout: stderr is appended
	// after stdout under a "[stderr]" line instead of interleaved. Only for
	// commands that cannot become background jobs: with OnTimeout
	// "background", a call's yield_ms, and for background jobs, whose
	// output goes to one file, the streams stay interleaved.
	SeparateStreams bool

	// EnvPolicy is the environment policy (default EnvInheritSafe).
	EnvPolicy EnvPolicy
	// EnvKeep lists names kept even though they look like secrets
	// (secret.IsSecret). SSH_AUTH_SOCK is stripped by default, since it
	// lets a command use the user's SSH keys; keep it to allow git over
	// SSH with the agent.
	EnvKeep []string
	// EnvStrip lists names stripped under either policy and treated as
	// secrets although the name rule passes them: connection strings and
	// proxy URLs that may embed credentials (DATABASE_URL, REDIS_URL,
	// HTTPS_PROXY) pass by default because test suites need them. EnvStrip
	// wins over EnvKeep and EnvAllow.
	//
	// The values (8 bytes or more) of every stripped secret are redacted:
	// wherever one appears in a command's output — the result text, the
	// full-output file, a background job's output file, progress — the
	// model sees [REDACTED:NAME] instead. Output sizes (Result.OutputBytes,
	// the truncation header) count the redacted text.
	EnvStrip []string
	// EnvAllow lists extra names passed under EnvAllowlist.
	EnvAllow []string
	// HomeIsWorkDir sets HOME to the working directory (EnvAllowlist only).
	HomeIsWorkDir bool
	// Environ is the environment the policy filters (default os.Environ()
	// at New).
	Environ []string
	// KeepCapabilities leaves the capability bounding set of the engine's
	// process as it is. By default New makes the process non-dumpable and,
	// when it runs as root, drops for good from the bounding set of every
	// thread the capabilities with which a command could read the engine's
	// memory, and with it the secrets the environment policy removed
	// (CAP_SYS_PTRACE, CAP_SYS_ADMIN, CAP_BPF, CAP_PERFMON, CAP_SYS_MODULE,
	// CAP_SYS_RAWIO, CAP_SYS_BOOT): commands, and every other program the
	// embedding process starts afterwards, run without them (no mount, no
	// strace -p of processes they did not start, no ip netns). The engine
	// itself keeps them. Set it only where commands need those
	// capabilities and may read every secret of the engine's process.
	KeepCapabilities bool

	// MaxOutput is the most bytes of output returned (default 131072).
	MaxOutput int
	// Truncation is "middle" (default), "tail" or "head".
	Truncation string
	// SpoolCap bounds the full-output file kept when output is truncated
	// (default 64 MiB; negative disables spooling).
	SpoolCap int64
	// SpoolKeep is how many full-output files are kept; older ones are
	// removed (default 32, so at most 32 x SpoolCap of disk).
	SpoolKeep int
	// OutputDir holds background output files and spooled outputs (default
	// a new directory under os.TempDir, removed at Shutdown unless
	// KeepFiles).
	OutputDir string
	// KeepFiles keeps OutputDir's files at Shutdown.
	KeepFiles bool
	// LeaveJobsRunning leaves background jobs running at Shutdown. When
	// secret values are redacted (see EnvStrip), a job's output reaches its
	// file through the engine; at Shutdown the engine hands the job's
	// output pipe to a `cat` process of its own, which appends the rest of
	// the output to the file unredacted, until the job closes its output.
	LeaveJobsRunning bool
	// ProgressInterval is the period of ToolContext.Progress calls
	// (default 1s).
	ProgressInterval time.Duration

	// CoAuthor, when set ("Name <email>"), adds a Co-authored-by trailer to
	// real git commit invocations (the git subcommand after its global
	// options), once, without changing anything else. Off by default.
	CoAuthor string
	// Permissions is the permission profile checked after the safety rules
	// (nil: none). See safety.Preset.
	Permissions *safety.Profile
	// Audit receives the audit log: one JSON line per call (nil: none).
	Audit io.Writer
	// Sandbox holds the resource limits of restricted commands (zero fields:
	// the defaults; [Unlimited] switches one off).
	Sandbox SandboxLimits
	// SandboxHelper starts restricted commands through the re-executed
	// sandbox helper (the program must call [SandboxMain] first in main)
	// instead of from a confined throwaway thread of the engine. The helper
	// sets the resource limits itself before it execs bash and does not
	// depend on bash reading its start-up file; the default starts about a
	// millisecond faster.
	SandboxHelper bool
	// SandboxHelperPath is the helper program SandboxHelper starts: one
	// whose main calls SandboxMain first, such as a CGO_ENABLED=0 build of
	// ./cmd/bashvisor-sandbox, which starts faster than a large
	// engine binary. Empty means the running executable.
	SandboxHelperPath string
	// ScratchRoot is where restricted commands' scratch directories are made
	// (default os.TempDir()). Where the engine can create namespaces the
	// scratch directory is a tmpfs of its own and only its empty mount point
	// lives here.
	ScratchRoot string
	// CacheDir is the root of the build and package caches sandboxed
	// commands may write (GOCACHE, npm, pip, XDG_CACHE_HOME; GOMODCACHE
	// and CARGO_HOME too when the command has network), one directory per
	// conversation, so that a conversation's second build is warm and no
	// conversation's commands can plant build outputs another's use. It
	// must not be inside a workspace. Empty: a directory in the output
	// directory, removed with it; set it to keep caches across restarts.
	// EndConversation removes the conversation's caches.
	CacheDir string

	// Admission bounds what runs at once: foreground commands engine-wide
	// and per conversation (over them a call waits in a bounded queue, its
	// timeout not yet started, then fails with ErrBusy), and background
	// jobs (over them a job is refused at once). Zero fields take the
	// defaults documented at the fields of [Admission].
	Admission Admission

	// Logger receives the engine's and protoactor's logs (default: discard).
	// Nothing is ever written to stdout.
	Logger *slog.Logger
}

// DefaultConfig returns the defaults: 30 s default timeout, 15 min slow
// timeout, 24 h background lifetime, 2 s grace, 128 KiB of output cut in
// the middle, full outputs up to 64 MiB kept, memory limit half of the
// physical memory (at most 16 GiB), 4096 processes.
func DefaultConfig() Config {
	return Config{
		Timeout:            30 * time.Second,
		SlowTimeout:        15 * time.Minute,
		BackgroundLifetime: 24 * time.Hour,
		Grace:              2 * time.Second,
		CleanupWait:        15 * time.Second,
		DrainWait:          250 * time.Millisecond,
		EnvPolicy:          EnvInheritSafe,
		MaxOutput:          131072,
		Truncation:         "middle",
		SpoolCap:           64 << 20,
		SpoolKeep:          32,
		ProgressInterval:   time.Second,
		Limits:             Limits{}.withDefaults(),
	}
}
