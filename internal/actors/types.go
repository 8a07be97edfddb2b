package actors

import (
	"errors"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/bashvisor/bashvisor/egress"
	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/secret"
	"github.com/bashvisor/bashvisor/internal/truncate"
)

// ErrActorFailed is reported when a job's actor stopped unexpectedly (a
// panic), or when the shell's exit status could not be read.
var ErrActorFailed = errors.New("command actor failed")

// Spec is one job: what to run and how it is tracked. The supervisor fills
// in ID and OutputFile.
type Spec struct {
	// ID names the job ("cmd-N" for a foreground command, "job-N" for a
	// background job, numbered per conversation).
	ID string
	// Name is unique among the engine's jobs (it names the job's cgroup);
	// "" means ID.
	Name string
	// Conversation is the conversation that started the job.
	Conversation string
	// Command is the command as submitted, for listings.
	Command string
	// Display is the command as shown (see safety.Display).
	Display string
	// Script is what bash -c runs: Command after the engine's rewrites.
	Script string
	// Dir is the working directory. It must exist.
	Dir string
	// Env holds the caller's environment overrides; they can never re-add a
	// variable the environment policy removed as a secret.
	Env map[string]string
	// ExtraEnv holds NAME=value entries the engine adds (trusted).
	ExtraEnv []string
	// Background makes the job write to OutputFile and outlive its
	// caller; a foreground job's output is kept in a bounded buffer and
	// its outcome is sent on Done.
	Background bool
	// Sandbox, when set, runs the job in the sandbox (package sandbox)
	// with this profile; nil runs it unrestricted.
	Sandbox *Profile
	// Limits are the job's resource limits (see [Limits]).
	Limits Limits
	// Stdin gives the job a pipe as stdin, fed by Write messages; without
	// it stdin is /dev/null, so nothing ever waits for input unknowingly.
	Stdin bool
	// TTY, when set, runs the job on a pseudo-terminal of that size
	// (proc.Spec.TTY): its output is the terminal's byte stream, and Write
	// sends keys (^C is "\x03"); closing its input sends ^D.
	TTY *proc.Winsize
	// Yield, when set, makes a foreground job that reaches Timeout a
	// background job of its conversation instead of ending it: the
	// supervisor gives it a job id and an output file, the caller gets the
	// output so far with Outcome.Yielded, and the rest of the output goes
	// to the file. Over the conversation's or the engine's background job
	// cap it is ended as a timeout (Outcome.YieldRefused says why).
	Yield *Yield
	// Timeout is the foreground timeout, or the background lifetime; 0
	// means none. It bounds the shell: a foreground shell that exited
	// before it is reported with its own status even when ending the
	// processes it left behind runs past it (that phase is bounded by
	// DrainWait and the grace sequence).
	Timeout time.Duration
	// OutputFile receives a background job's output, then its completion
	// line.
	OutputFile string
	// SpoolDir is where a foreground job's complete output is kept when it
	// is truncated ("": Resources.Truncate.SpoolDir).
	SpoolDir string
	// Queued is how long the job waited for a slot before it started.
	Queued time.Duration
	// Done receives a foreground job's outcome, once. It must have room
	// for one value: the actor never blocks on it.
	Done chan<- Outcome
	// Completion renders the line appended to a background job's output
	// file when it ends (two newlines are written before it).
	Completion func(Outcome) string
}

// Yield says what a foreground job becomes when it yields (Spec.Yield).
type Yield struct {
	// Lifetime bounds it as a background job from then on (0: none).
	Lifetime time.Duration
	// Completion renders the line appended to its output file when it
	// ends.
	Completion func(Outcome) string
}

// Yielded says where a yielded job went on.
type Yielded struct {
	// ID is its background job id; OutputFile receives its later output.
	ID, OutputFile string
}

// Resources are what every job of one engine shares.
type Resources struct {
	// Bash is the absolute path of bash.
	Bash string
	// Env is the environment policy applied to every job.
	Env *proc.Env
	// Redactor replaces the values of the secrets Env stripped in every
	// job's output (nil: nothing to replace).
	Redactor *secret.Redactor
	// Cgroups gives every job a cgroup v2 of its own (nil: the process
	// group is the unit). Every descendant stays in it whatever it does
	// with sessions and process groups, so leftovers are the live members
	// of the group and of the cgroup, SIGTERM and SIGCONT go to the group
	// and to every cgroup member outside it, and SIGKILL is cgroup.kill.
	// A job that ended cleanly hands its empty cgroup back for reuse; one
	// that held processes which had to be ended is removed; one whose
	// processes are left running on purpose (KeepLeftovers, Detach) has
	// them moved out first.
	Cgroups *proc.Cgroups
	// Sandbox configures restricted jobs.
	Sandbox Sandbox
	// Truncate configures a foreground job's output buffer.
	Truncate truncate.Config
	// Grace is the time between SIGTERM (with SIGCONT, so stopped
	// processes see it) and SIGKILL.
	Grace time.Duration
	// CleanupWait bounds the wait for the group to be gone after SIGKILL;
	// the job then reports what survived.
	CleanupWait time.Duration
	// DrainWait bounds the wait for the output pipe to close once the
	// shell exited (or, when it was ended, once its group is gone). A pipe
	// still open then is held by a process that escaped the group
	// (setsid): the job stops reading and says so rather than wait for a
	// process it cannot end.
	DrainWait time.Duration
	// KeepLeftovers leaves running the processes a foreground shell left
	// in its group instead of ending them.
	KeepLeftovers bool
	// SeparateStreams gives a foreground job's stderr a buffer of its own.
	SeparateStreams bool
	// Log receives warnings (dropped environment overrides, failed
	// cleanups).
	Log *slog.Logger

	// trace, when set (tests), is told every phase a job enters.
	trace func(id string, p phase)
}

// Limits are a job's resource limits. A zero field means no limit.
type Limits struct {
	// Memory bounds the memory of the job's processes together, in bytes,
	// page cache included (proc.Limits.Memory): over it the kernel's OOM
	// killer ends the process that uses the most. Where the engine's
	// cgroups have no memory controller it is RLIMIT_AS instead, the
	// address space of each process (Applied.MemoryPerProcess):
	// allocations beyond it fail, nothing is OOM-killed, and programs
	// that reserve more address space than they use can fail below it.
	Memory int64
	// CPUTime bounds the CPU time (user and system) of the job's
	// processes together. With a cgroup the job's actor reads the
	// cgroup's CPU time while the job runs, at intervals that shrink as
	// the limit nears (from 1 s down to 10 ms, so a job overshoots it by
	// at most 10 ms per CPU), and ends the job with the grace sequence
	// (ReasonCPULimit), during which it may use up to Grace per CPU
	// more. Without a cgroup it is RLIMIT_CPU of each process
	// (Applied.CPUPerProcess), rounded up to whole seconds: SIGXCPU at the
	// limit, SIGKILL 5 s of CPU time later.
	CPUTime time.Duration
	// Pids bounds the processes and threads alive at once (pids.max).
	// Without a pids controller there is no such limit.
	Pids int
}

// Applied are the limits a job ran under, and how they were enforced. A
// restricted job's pids limit is the lower of Limits.Pids and the
// sandbox's (sandbox.Limits.Processes). Limits the host could not enforce
// (Pids without a pids controller) are zero.
type Applied struct {
	Limits
	// MemoryPerProcess: Memory was each process's RLIMIT_AS.
	MemoryPerProcess bool
	// CPUPerProcess: CPUTime was each process's RLIMIT_CPU.
	CPUPerProcess bool
}

// Usage is what a job's processes used (see proc.Usage). Where the job has
// no cgroup, CPU comes from the shell's own rusage (wait4): the time of the
// shell and of the descendants it waited for (orphans reaped by others are
// missing). What needs a controller the job's cgroup lacks stays 0: the
// rusage's largest resident set is no substitute for PeakMemory, because a
// process forked from the engine (vfork) is charged the engine's own peak
// resident set when it execs.
type Usage = proc.Usage

// Sandbox configures restricted jobs (see package sandbox).
type Sandbox struct {
	// Limits are the resource limits of a restricted job.
	Limits sandbox.Limits
	// Helper starts restricted jobs through the re-executed helper
	// (Command.StartHelper: the program must call sandbox.Main first)
	// instead of from a confined thread (Command.StartDirect).
	Helper bool
	// HelperPath is the helper program ("": the running executable).
	HelperPath string
	// ScratchRoot is where scratch directories are made ("":
	// os.TempDir()).
	ScratchRoot string
}

// Profile is what a restricted job may write and reach.
type Profile struct {
	// Workspace makes the job's working directory and its git
	// directories writable, hooks and config protected (the
	// workspace-write profile, sandbox.WorkspaceRoots); otherwise only the
	// scratch directory, CacheDir and Writable are.
	Workspace bool
	// Writable are more directories the job may write (absolute paths).
	Writable []string
	// CacheDir holds the job's build and package caches ("": they live in
	// its scratch directory and die with it). It must exist.
	CacheDir string
	// Network, when set, lets the job reach what it allows through the
	// egress proxy (package egress) and nothing else; nil: no network.
	Network *egress.Allowlist
	// OnProxy, when set, is told each of the proxy's decisions, from the
	// proxy's goroutines (it must be safe for concurrent use).
	OnProxy func(egress.Decision)
}

// Status is a job's state in the supervisor's records.
type Status string

// The statuses of a job.
const (
	Running   Status = "running"
	Completed Status = "completed" // the shell exited 0
	Failed    Status = "failed"    // the shell exited non-zero
	Killed    Status = "killed"    // ended by the engine or a signal
	Errored   Status = "error"     // it never started
	Detached  Status = "detached"  // left running at engine shutdown
)

// Reason says why the engine ended a job.
type Reason string

// The reasons for ending a job.
const (
	ReasonNone      Reason = ""
	ReasonTimeout   Reason = "timeout"
	ReasonCancelled Reason = "cancelled"
	ReasonKilled    Reason = "killed"         // a Kill request
	ReasonShutdown  Reason = "shutdown"       // engine shutdown
	ReasonLifetime  Reason = "lifetime"       // a background job's lifetime
	ReasonCPULimit  Reason = "cpu time limit" // Limits.CPUTime, job-wide
	// ReasonLeftovers: the shell exited; processes it left in its group
	// were ended. It is internal: the outcome reports ReasonNone (the
	// shell ended on its own) with Leftovers.
	ReasonLeftovers Reason = "leftovers"
	ReasonFailed    Reason = "actor failed" // the job's actor failed
)

// Outcome is what happened to a job, as data; the engine renders it.
type Outcome struct {
	// Err is set when the job could not start, the actor failed, or the
	// shell's exit status could not be read.
	Err error
	// Exited is true when the shell's exit status is known.
	Exited bool
	// ExitCode is the shell's exit code, 128+n when killed by signal n.
	ExitCode int
	// Signal names the signal that killed the shell ("SIGKILL").
	Signal string
	// Reason says why the engine ended the job (ReasonNone: it ended on
	// its own).
	Reason Reason
	// Output is a foreground job's output.
	Output truncate.Output
	// Stderr is a foreground job's stderr with separate streams.
	Stderr *truncate.Output
	// Leftovers were still in the group after the shell exited and were
	// ended, or left running (LeftRunning) with KeepLeftovers.
	Leftovers   []proc.Member
	LeftRunning bool
	// Survivors were still alive after SIGKILL and CleanupWait.
	Survivors []proc.Member
	// PipeHeld: the output pipe was still open after the group was gone.
	PipeHeld bool
	// Duration is the job's wall time, from its start.
	Duration time.Duration
	// Queued is how long the job waited for a slot before it started.
	Queued time.Duration
	// Yielded, for a foreground job with Spec.Yield, says that it reached
	// its timeout and went on as a background job; Output is what it
	// printed until then.
	Yielded *Yielded
	// YieldRefused says why a job that should have yielded was ended
	// instead (a background job cap).
	YieldRefused string
	// Refused lists the destinations ("host:port") the egress proxy
	// refused the job, the first few of them.
	Refused []string
	// Usage is what the job's processes used, read when the job ended
	// (final once its cgroup is empty; a snapshot when processes were
	// kept running or survived). It is zero for a job that never started.
	Usage Usage
	// Limits are the limits the job ran under.
	Limits Applied
}

// Status is the status of a job that ran and ended with this outcome (one
// that never started is Errored).
func (o Outcome) Status() Status {
	switch {
	case o.Reason == ReasonKilled, o.Reason == ReasonShutdown, o.Reason == ReasonLifetime,
		o.Reason == ReasonCancelled, o.Reason == ReasonTimeout, o.Reason == ReasonFailed,
		o.Reason == ReasonCPULimit:
		return Killed
	case o.Signal != "":
		return Killed
	case o.Exited && o.ExitCode == 0:
		return Completed
	case o.Exited:
		return Failed
	}
	return Killed
}

// State is the supervisor's record of a job.
type State struct {
	ID           string
	Conversation string
	Command      string
	Display      string
	Background   bool
	Pid          int
	Status       Status
	// Reason says why the engine ended it (Killed, Detached).
	Reason Reason
	// Signal is the signal that ended it, when it was not the engine.
	Signal string
	// ExitCode is set once the shell's exit status is known.
	ExitCode *int
	// Err says why it never started (Errored).
	Err        error
	Started    time.Time
	Ended      time.Time
	OutputFile string
	// Usage is what the job used, once it ended (see Outcome.Usage);
	// CurrentUsage reads it while the job runs.
	Usage Usage

	live *liveUsage // the running job's cgroup
}

// Running reports whether the job has not ended yet.
func (s State) Running() bool { return s.Status == Running }

// CurrentUsage returns what the job has used so far: Usage once it ended,
// and while it runs what its cgroup has accounted (a few µs: one pread per
// counter; zero without a cgroup, or before the job's actor reported it
// running).
func (s State) CurrentUsage() Usage {
	if !s.Running() || s.live == nil {
		return s.Usage
	}
	return s.live.read()
}

// liveUsage reads a running job's cgroup until the job ends; the job's
// actor detaches it before it hands the cgroup back, so a recycled cgroup
// is never read for the wrong job.
type liveUsage struct {
	mu sync.Mutex
	cg *proc.Cgroup // nil once the job ended
}

func (l *liveUsage) read() Usage {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cg == nil {
		return Usage{}
	}
	u, _ := l.cg.Usage()
	return u
}

func (l *liveUsage) end() {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.cg = nil
	l.mu.Unlock()
}

// Messages a job's actor receives.
type (
	// Cancel asks a job to end with the grace sequence. Reply, when set,
	// receives its final state; it must have room for one value.
	Cancel struct {
		Reason Reason
		Reply  chan<- State
	}
	// Detach ends a job's actor without ending its processes (engine
	// shutdown with jobs left running). Reply, when set, receives its
	// final state.
	Detach struct{ Reply chan<- State }
	// LaunchFailed tells a job in its starting phase that its process could
	// not be started.
	LaunchFailed struct{ Err error }
	// Write sends Data to a job's stdin (Spec.Stdin, Spec.TTY), then
	// closes it when Close is set. Reply receives nil once the bytes were
	// written, or why not (ErrNoStdin, ErrEnded, ErrStdinBusy, a write
	// error); it must have room for one value.
	Write struct {
		Data  []byte
		Close bool
		Reply chan<- error
	}
	// BecomeBackground answers a YieldRequest: the job goes on as
	// background job ID, its later output appended to File (the open
	// OutputFile, which the job owns from then on).
	BecomeBackground struct {
		ID, OutputFile string
		File           *os.File
	}
	// YieldRefused answers a YieldRequest the supervisor cannot grant: the
	// job ends as a timeout, saying why.
	YieldRefused struct{ Err error }
)

// YieldRequest tells the supervisor (the job's parent) that a foreground
// job with Spec.Yield reached its timeout and asks to go on as a
// background job; the answer is BecomeBackground or YieldRefused.
type YieldRequest struct{ Conversation, ID string }

// Errors of Write.
var (
	// ErrNoStdin: the job was started without stdin (Spec.Stdin).
	ErrNoStdin = errors.New(`the job has no stdin to write to: it was started without stdin "pipe" or tty`)
	// ErrEnded: the job's shell has exited; nothing reads its input.
	ErrEnded = errors.New("the job has ended; nothing reads its input")
	// ErrStdinClosed: its stdin was closed by an earlier Write.
	ErrStdinClosed = errors.New("the job's stdin was already closed")
	// ErrStdinBusy: the job stopped reading its input (for 10 s), or four
	// earlier writes still wait for it; the error says how much was sent.
	ErrStdinBusy = errors.New("the job is not reading its input")
)

// Report carries a job's state to its parent, the supervisor: once when a
// background job is running, and once when any job ended (a final state,
// Status != Running). The supervisor stops the actor when it receives the
// final one.
type Report struct{ State State }
