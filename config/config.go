// Package config holds the settings that an engine passes down whole to
// the layers that run its commands: the environment policy, the lifecycle
// of a command's processes, its output, its resource limits, the sandbox
// and admission control. Each setting is declared once, here;
// engine.Config groups them, and the engine's internal layers take the
// groups they need as they are.
//
// A zero field means its default everywhere: the engine fills the
// defaults in (engine.DefaultConfig shows them), and the layers below it
// never see a zero that means "default".
package config

import (
	"runtime"
	"time"
)

// Env says how a command's environment is derived from the engine's.
type Env struct {
	// Policy is the environment policy (default InheritSafe).
	Policy EnvPolicy
	// Keep lists names kept even though they look like secrets.
	// SSH_AUTH_SOCK is stripped by default, since it lets a command use the
	// user's SSH keys; keep it to allow git over SSH with the agent.
	Keep []string
	// Strip lists names stripped under either policy and treated as
	// secrets although the name rule passes them: connection strings and
	// proxy URLs that may embed credentials (DATABASE_URL, REDIS_URL,
	// HTTPS_PROXY) pass by default because test suites need them. Strip
	// wins over Keep and Allow.
	//
	// The values (8 bytes or more) of every stripped secret are redacted:
	// wherever one appears in a command's output — the result text, the
	// full-output file, a background job's output file, progress — the
	// model sees [REDACTED:NAME] instead. Output sizes count the redacted
	// text.
	Strip []string
	// Allow lists extra names passed under Allowlist.
	Allow []string
	// HomeIsWorkDir sets HOME to the working directory (Allowlist only).
	HomeIsWorkDir bool
	// Environ is the environment the policy filters (default os.Environ()
	// when the engine starts).
	Environ []string
	// KeepCapabilities leaves the capability bounding set of the engine's
	// process as it is. By default the engine makes its process
	// non-dumpable and, when it runs as root, drops for good from the
	// bounding set of every thread the capabilities with which a command
	// could read the engine's memory, and with it the secrets the policy
	// removed (CAP_SYS_PTRACE, CAP_SYS_ADMIN, CAP_BPF, CAP_PERFMON,
	// CAP_SYS_MODULE, CAP_SYS_RAWIO, CAP_SYS_BOOT): commands, and every
	// other program the embedding process starts afterwards, run without
	// them (no mount, no strace -p of processes they did not start, no ip
	// netns). The engine itself keeps them. Set it only where commands
	// need those capabilities and may read every secret of the engine's
	// process.
	KeepCapabilities bool
}

// EnvPolicy names how a command's environment is derived from the
// engine's.
type EnvPolicy string

// The environment policies.
const (
	// InheritSafe passes the engine's environment minus secrets.
	InheritSafe EnvPolicy = "inherit-safe"
	// Allowlist passes only PATH, HOME, USER, LANG, LC_ALL, TERM, SHELL,
	// TMPDIR and Env.Allow.
	Allowlist EnvPolicy = "allowlist"
)

// Lifecycle says how a command's processes are ended.
type Lifecycle struct {
	// Grace is the time between SIGTERM (with SIGCONT, so stopped
	// processes see it) and SIGKILL (default 2s).
	Grace time.Duration
	// CleanupWait bounds the wait for the processes to be gone and the
	// output pipe closed after SIGKILL (default 15s); the call returns
	// regardless and says what survived.
	CleanupWait time.Duration
	// DrainWait bounds how long a foreground call waits for the output
	// pipe to close after the shell exited (default 250ms). A pipe still
	// open then is held by a process that escaped the process group
	// (setsid): the engine stops reading and says so rather than wait for
	// a process it cannot end.
	DrainWait time.Duration
	// KeepLeftovers leaves the processes that outlive a foreground shell
	// running instead of ending them.
	KeepLeftovers bool
}

// Output says how much of a command's output is returned and kept.
type Output struct {
	// Max is the most bytes of output returned (default 131072); for
	// TruncateTail, the most characters.
	Max int
	// Truncation says which part of a longer output is kept (default
	// TruncateMiddle).
	Truncation Truncation
	// SpoolCap bounds the full-output file kept when output is truncated
	// (default 64 MiB; negative: no full-output file).
	SpoolCap int64
	// SpoolKeep is how many full-output files are kept; older ones are
	// removed (default 32, so at most 32 x SpoolCap of disk).
	SpoolKeep int
	// JobFileCap bounds a background job's output file (default 64 MiB,
	// at least 4 KiB; negative: no bound). Past it the file keeps the
	// first eighth of the cap and the newest output, and drops the oldest
	// output in between, with one line that says how much was dropped
	// where; offsets into the output (bash_output's) keep counting every
	// byte the job printed, so reading on from an earlier offset works.
	JobFileCap int64
	// Raw gives the model a command's output as written. By default (Raw
	// false) what the model reads — results, progress output, bash_output
	// and bash_write answers — is rendered: escape sequences (colours,
	// cursor moves, titles) and control bytes (NUL, BEL, …) are removed,
	// \r and backspace redraw within a line (a progress bar shows its last
	// state), and a terminal job's output is the text of its screen and
	// scrollback, replayed on a terminal emulator. Raw bytes stay in the
	// job's output file and the full-output file either way, and sizes and
	// limits count raw bytes. A model that needs the exact bytes can run
	// `cat -v FILE` or `od -c FILE`, which show them as text (which is why
	// there is no per-call switch). With Raw only invalid UTF-8 is
	// replaced (one U+FFFD per run).
	Raw bool
	// SeparateStreams keeps stderr apart from stdout: stderr is appended
	// after stdout under a "[stderr]" line instead of interleaved. Only
	// for commands that cannot become background jobs: with OnTimeout
	// "background", a call's yield_ms, and for background jobs, whose
	// output goes to one file, the streams stay interleaved.
	SeparateStreams bool
}

// Truncation names the part of a long output that is kept.
type Truncation string

// The truncation strategies.
const (
	// TruncateMiddle keeps the first and last 4 KiB and says how much was
	// cut between them.
	TruncateMiddle Truncation = "middle"
	// TruncateTail keeps the last Output.Max characters.
	TruncateTail Truncation = "tail"
	// TruncateHead keeps the first Output.Max bytes.
	TruncateHead Truncation = "head"
)

// Cgroups says where the engine makes a cgroup per command.
type Cgroups struct {
	// Off turns off the per-command cgroups. By default the engine probes
	// once when it starts whether it can create cgroups under Parent;
	// where it can, every command runs in a cgroup of its own and ending
	// it ends with cgroup.kill, so processes that left the process group
	// (setsid, double fork) are found and killed too. Otherwise the
	// process group is the unit and the limitation is logged once; the
	// memory and CPU time limits then bind each process (rlimits), there
	// is no process limit, and results report only CPU time (see Limits).
	Off bool
	// Parent is the cgroup v2 directory under which the engine creates
	// its per-command cgroups (default: the engine's own cgroup; it must
	// be writable: root, or a delegated subtree). On a cgroup v2 host the
	// memory and pids limits need a parent that holds no process itself
	// (cgroup v2 enables controllers only for the children of such a
	// cgroup), and the engine's own cgroup holds the engine: name the
	// delegated cgroup instead. A systemd unit with Delegate=yes and
	// DelegateSubgroup=engine runs the engine in UNIT/engine, and the
	// parent is the unit's cgroup; a container's entrypoint moves its
	// processes into a leaf (such as /sys/fs/cgroup/init), and the parent
	// is /sys/fs/cgroup. Otherwise commands still get cgroups (killing
	// escapees, CPU time) and the limits fall back to rlimits, which the
	// engine logs once, saying why.
	Parent string
}

// Limits are the resource limits of one command, in every mode: of all
// its processes together where the engine has a cgroup with the
// controller for it (a memory or pids controller on cgroup v2, or a
// cgroup v1 hierarchy on a hybrid host; CPU time needs only the command's
// cgroup v2), otherwise of each process through rlimits, as each field
// says. In the engine's configuration a zero field means the default and
// a negative one no limit; in a call's override a zero field keeps the
// engine's.
//
// A sandboxed command keeps the sandbox's own limits too (SandboxLimits):
// where both bound the same thing, the stricter wins.
type Limits struct {
	// Memory bounds the memory of the command's processes together, in
	// bytes: anonymous memory, the page cache of files they read first or
	// wrote, and their kernel memory (swap counts too). At the limit the
	// kernel first reclaims page cache, then its OOM killer kills the
	// process that uses the most; the result says "[command failed: out
	// of memory (limit 4 GiB)]", with status "failed" and OOMKilled.
	// Default: half of the physical memory, at most 16 GiB (4 GiB if the
	// size cannot be read): it stops a runaway command long before the
	// machine swaps or its OOM killer picks a victim, and leaves `go
	// build`, `npm install`, `pytest` and `cargo build` of mid-size
	// projects room to spare. Without a memory controller it is RLIMIT_AS
	// of each process instead: an allocation beyond it fails (Python's
	// MemoryError, malloc returning NULL), nothing is OOM-killed, and
	// programs that reserve more address space than they use may fail
	// below it.
	Memory int64
	// CPUTime bounds the CPU time (user and system) of the command's
	// processes together. The engine checks it while the command runs,
	// from 1 s down to 10 ms apart as the limit nears (so a command
	// overshoots it by at most 10 ms per CPU), and ends the command like a
	// timeout (SIGTERM, Lifecycle.Grace, SIGKILL): "[command failed: CPU
	// time limit exceeded (limit 10m)]", status "failed". It applies to
	// background jobs too. Default: none. Without a cgroup it is
	// RLIMIT_CPU of each process, rounded up to whole seconds (SIGXCPU,
	// SIGKILL 5 s of CPU time later).
	CPUTime time.Duration
	// Processes bounds the processes and threads alive at once (cgroup
	// pids.max): beyond it fork and thread creation fail with EAGAIN
	// ("Resource temporarily unavailable"). Default: 4096, which a
	// parallel build's compilers and their threads stay far below.
	// Without a pids controller there is no such limit. A sandboxed
	// command's limit is the lower of this and SandboxLimits.Processes
	// (default 512).
	Processes int
}

// defaultProcesses is the default of [Limits.Processes].
const defaultProcesses = 4096

// WithDefaults returns l with its zero fields set to their defaults.
func (l Limits) WithDefaults() Limits {
	if l.Memory == 0 {
		l.Memory = defaultMemoryLimit()
	}
	if l.Processes == 0 {
		l.Processes = defaultProcesses
	}
	return l
}

// Admission says when a command may start (admission control). Zero
// fields take their defaults; a field set explicitly is kept as it is.
//
// A command is admitted by what is scarce, not by a count alone. The
// engine measures what its running commands use, from each command's
// cgroup: its CPU time and its CPU pressure stall (the kernel's PSI, so
// that time spent waiting for a CPU on a loaded host counts as wanting
// one); without cgroups, from its shell's process tree in /proc (the CPU
// time and run delay of every thread, and what they reaped; a process
// that left the tree is missed). It measures first over 50 ms starting
// 100 ms after the command started (its start-up, which every command
// has, does not count), then every 500 ms. A command
// that wanted at least half a CPU is busy and counts as the CPUs it wanted
// (`make -j8` as several); otherwise it is idle (sleeping, waiting for the
// network or a lock, a server between requests) and counts for nothing. A
// command not yet measured counts as one busy CPU. A new foreground
// command starts at once while the busy and unmeasured commands want fewer
// than MaxBusy CPUs; beyond that, while the measured busy ones alone want
// fewer, a principal may have MaxBusy unmeasured commands at once, four
// times as many each time all of its newly measured ones turned out idle
// (a slow start: 100 parallel `sleep 2` all start within half a second, 64
// CPU-bound commands do not); while another principal runs or waits, its
// slow start stops at twice its share (below), since commands too short to
// be measured on a starved host stay unmeasured all their life. Otherwise, or while memory or processes are
// short on the host, the call waits in the queue, its timeout not yet
// started. Memory is short when the host's memory pressure (PSI "some",
// averaged by the kernel over 10 s) reaches MemoryPressure or less than
// 1/32 of its memory is available; processes are short when the host's
// tasks reach 90% of its pid or thread limit.
//
// Shares are fair between principals (engine.ToolContext.Principal; a
// call without one is its conversation's own principal), and between the
// conversations of a principal. Each principal's share is MaxBusy divided
// among the principals that run or wait, and each conversation's part is
// its principal's share divided among the principal's conversations that
// run or wait (at least one command): a conversation using less than its
// part starts at once whatever the others run, as long as its principal
// uses less than twice its share. So a heavy principal, or a
// conversation's build, does not delay another's `echo`. The queue is not
// one FIFO: whenever something ends, the waiter admitted first is that of
// the principal using the fewest CPUs (among equals, the one served least
// recently), then of its conversation using the fewest, then the oldest.
//
// The counts below are hard backstops on top of that, generous by
// default: engine-wide, per principal and per conversation. Over a
// running cap a call waits; over a queue cap, or a background job over a
// jobs cap or while memory or processes are short, it is refused at once
// as busy. Where a command cannot be measured at all (a /proc that hides
// its processes), it counts as one busy CPU while it runs in the
// foreground, and for nothing as a background job.
//
// "busy" therefore means one of: the call's conversation, principal or
// the host reached a count cap (the error names which, with the counts); a
// call waited QueueWait without getting to run (the error says what held
// it: the busy CPUs, or a cap); or memory or processes are short.
type Admission struct {
	// MaxBusy is the CPUs' worth of busy commands (foreground and
	// background, measured as above) the engine runs before new foreground
	// commands wait (default 4 per CPU, at most MaxRunning): the CPUs are
	// then in use, and a queue beyond a few runnable commands per CPU
	// would only make every command slower.
	MaxBusy int
	// MemoryPressure is the host's memory pressure (PSI "some" avg10, in
	// percent of the time some task waited for memory) at which memory
	// counts as short (default 20; negative: memory pressure is not
	// watched, only the available memory).
	MemoryPressure float64
	// MaxRunning bounds the foreground commands running at once,
	// engine-wide, however idle: a backstop far above what the measured
	// load admits (default 1,024 per CPU, at most one per 8 of the
	// process's open-file limit, which a running command uses about 7 of,
	// and at least 256). Over it a call waits.
	MaxRunning int
	// MaxRunningPerPrincipal bounds those of one principal (default
	// three quarters of MaxRunning, rounded up, and at least
	// MaxRunningPerConversation), so that others always find room.
	MaxRunningPerPrincipal int
	// MaxRunningPerConversation bounds those of one conversation
	// (default MaxRunningPerPrincipal).
	MaxRunningPerConversation int
	// MaxQueue bounds the foreground calls waiting, engine-wide (default
	// 4 * MaxRunning). A call beyond it is refused as busy.
	MaxQueue int
	// MaxQueuePerPrincipal bounds the calls of one principal waiting
	// (default three quarters of MaxQueue, rounded up). A call beyond it
	// is refused as busy, naming the principal's cap.
	MaxQueuePerPrincipal int
	// QueueWait bounds how long a call waits before it is refused as busy
	// (default 30s). A command's timeout starts only when it runs.
	QueueWait time.Duration
	// MaxJobsPerConversation bounds one conversation's running background
	// jobs (default 16); a background job over it is refused at once.
	MaxJobsPerConversation int
	// MaxJobsPerPrincipal bounds one principal's running background jobs,
	// over all its conversations (default three quarters of MaxJobs,
	// rounded up, and at least MaxJobsPerConversation); a background job over it is
	// refused at once.
	MaxJobsPerPrincipal int
	// MaxJobs bounds all principals' running background jobs (default 32
	// per CPU, at least 64); a background job over it is refused at once.
	MaxJobs int
}

// WithDefaults returns a with zero fields set to their defaults.
func (a Admission) WithDefaults() Admission {
	cpus := runtime.NumCPU()
	if a.MaxRunning <= 0 {
		a.MaxRunning = max(min(1024*cpus, openFiles()/8), 256)
	}
	if a.MaxRunningPerPrincipal <= 0 {
		a.MaxRunningPerPrincipal = max(threeQuarters(a.MaxRunning), min(a.MaxRunningPerConversation, a.MaxRunning))
	}
	if a.MaxRunningPerConversation <= 0 {
		a.MaxRunningPerConversation = a.MaxRunningPerPrincipal
	}
	if a.MaxBusy <= 0 {
		a.MaxBusy = min(4*cpus, a.MaxRunning)
	}
	if a.MemoryPressure == 0 {
		a.MemoryPressure = 20
	}
	if a.MaxQueue <= 0 {
		a.MaxQueue = 4 * a.MaxRunning
	}
	if a.MaxQueuePerPrincipal <= 0 {
		a.MaxQueuePerPrincipal = threeQuarters(a.MaxQueue)
	}
	if a.QueueWait <= 0 {
		a.QueueWait = 30 * time.Second
	}
	if a.MaxJobsPerConversation <= 0 {
		a.MaxJobsPerConversation = 16
	}
	if a.MaxJobs <= 0 {
		a.MaxJobs = max(32*cpus, 64)
	}
	if a.MaxJobsPerPrincipal <= 0 {
		a.MaxJobsPerPrincipal = max(threeQuarters(a.MaxJobs), min(a.MaxJobsPerConversation, a.MaxJobs))
	}
	return a
}

// threeQuarters is the default of a per-principal cap: three quarters of
// the engine-wide one, rounded up, so that a small cap still lets one
// principal use it.
func threeQuarters(n int) int { return max(1, (3*n+3)/4) }
