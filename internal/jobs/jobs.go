// Package jobs holds the data of a job that the engine and the layers
// below it share: what to run (Request), what happened to it (Outcome,
// with its Usage and its Changes), the supervisor's record of it
// (State), their statuses and reasons, and the errors of the job layer.
// It is data: the supervisor (package supervisor) and the job actor
// (package actors) act on it, and the engine renders it. Its only
// functions of a job are the renderers a Request carries (Completion,
// Detached), which the engine supplies.
package jobs

import (
	"errors"
	"fmt"
	"time"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/egress"
	"github.com/bashvisor/bashvisor/internal/transact"
	"github.com/bashvisor/bashvisor/internal/truncate"
)

// Errors of the job layer; test them with errors.Is.
var (
	// ErrActorFailed: a job's actor stopped unexpectedly (a panic), or the
	// shell's exit status could not be read.
	ErrActorFailed = errors.New("command actor failed")
	// ErrNoStdin: the job was started without stdin (Request.Stdin or
	// TTY).
	ErrNoStdin = errors.New(`the job has no stdin to write to: it was started without stdin "pipe" or tty`)
	// ErrEnded: the job's shell has exited; nothing reads its input.
	ErrEnded = errors.New("the job has ended; nothing reads its input")
	// ErrStdinClosed: its stdin was closed by an earlier write.
	ErrStdinClosed = errors.New("the job's stdin was already closed")
	// ErrStdinBusy: the job stopped reading its input (for 10 s), or four
	// earlier writes still wait for it; the error says how much was sent.
	ErrStdinBusy = errors.New("the job is not reading its input")
)

// Request is a job to start: what to run, where and how.
type Request struct {
	// Conversation is the conversation that starts the job.
	Conversation string
	// Principal is who starts it, for fair shares (see config.Admission);
	// "" makes the conversation its own principal.
	Principal string
	// Command is the command as submitted, for listings.
	Command string
	// Display is the command as shown (see safety.Display).
	Display string
	// Turn is the client's turn (engine.ToolContext.Turn), recorded with
	// the undo step of a workspace-write job (transact.Tx.SetTurn).
	Turn string
	// Script is what bash -c runs: Command after the engine's rewrites.
	Script string
	// Dir is the working directory. It must exist.
	Dir string
	// Env holds the caller's environment overrides; they can never re-add
	// a variable the environment policy removed as a secret.
	Env map[string]string
	// ExtraEnv holds NAME=value entries the engine adds (trusted).
	ExtraEnv []string
	// Background makes the job write to an output file and outlive its
	// caller; a foreground job's output is kept in a bounded buffer and
	// its outcome is sent to its caller.
	Background bool
	// OutputMax, when positive and below the engine's Output.Max, is the
	// most bytes of output a foreground job's result shows (the engine's
	// truncation strategy, its head and tail parts of this).
	OutputMax int
	// Sandbox, when set, runs the job in the sandbox (package sandbox)
	// with this profile; nil runs it unrestricted.
	Sandbox *Profile
	// Limits are the job's resource limits (zero or negative fields: no
	// limit). A limit the host cannot enforce job-wide binds each process
	// instead, or not at all (see config.Limits and Applied).
	Limits config.Limits
	// Timeout is the foreground timeout, or the background lifetime; 0
	// means none. It bounds the shell: a foreground shell that exited
	// before it is reported with its own status even when ending the
	// processes it left behind runs past it (that phase is bounded by
	// Lifecycle.DrainWait and the grace sequence).
	Timeout time.Duration
	// Stdin gives the job a pipe as stdin, fed by writes; without it stdin
	// is /dev/null, so nothing ever waits for input unknowingly.
	Stdin bool
	// TTY, when set, runs the job on a pseudo-terminal of that size: its
	// output is the terminal's byte stream, and writes send keys (^C is
	// "\x03"); closing its input sends ^D.
	TTY *Winsize
	// Yield, when set, makes a foreground job that reaches Timeout a
	// background job of its conversation instead of ending it: the
	// supervisor gives it a job id and an output file, the caller gets the
	// output so far with Outcome.Yielded, and the rest of the output goes
	// to the file. Over the conversation's or the engine's background job
	// cap it is ended as a timeout (Outcome.YieldRefused says why).
	Yield *Yield
	// Completion renders the line appended to a background job's output
	// file when it ends (two newlines are written before it).
	Completion func(Outcome) string
	// Detached renders the line appended to a background job's output file
	// when the engine stops reading its output for good while it runs on
	// (shutdown with jobs left running): kept is how many more bytes of
	// its output are appended to the file as they come (0 when the file
	// is full), or -1 when the rest is discarded (there are secret values
	// the engine could no longer redact); lost is set when the output
	// could not be handed over at all. Nil appends nothing.
	Detached func(kept int64, lost error) string
}

// Yield says what a foreground job becomes when it yields.
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

// Profile is what a sandboxed job may write and reach.
type Profile struct {
	// Workspace makes the job's working directory and its git
	// directories writable, hooks and config protected (the
	// workspace-write profile); otherwise only its conversation's world
	// (/tmp and caches: see sandbox.World, which the supervisor keeps
	// per conversation) and Writable are.
	Workspace bool
	// Writable are more directories the job may write (absolute paths).
	Writable []string
	// Layer runs a Workspace job over a copy-on-write layer of its
	// writable roots (package transact), applied to the workspace when
	// it ends (Outcome.Changes) and, for a background job, at
	// checkpoints while it runs; without it the git directories' hooks
	// and config are bound read-only instead.
	Layer bool
	// Hold puts the job in hold mode: every change set of its layer is
	// held for review, none applied until it is accepted
	// (transact.Conv.BeginHeld); false: what policy allows applies, the
	// rest is held. It is the job's own, not its conversation's.
	Hold bool
	// Network, when set, lets the job reach what it allows through the
	// egress proxy (package egress) and nothing else; nil: no network.
	Network *egress.Allowlist
	// ProxyEnv exports the proxy variables to a job whose clients are
	// carried (see sandbox.Options.ProxyEnv).
	ProxyEnv bool
	// Broker, with Network, holds the conversation's brokered secrets:
	// the job's proxy puts them into requests to their hosts, and the job
	// sees their placeholders and trusts the broker's CA (see
	// egress.Broker); nil: none.
	Broker *egress.Broker
	// Contained: the job asked and runs without asking because what it
	// changes is reviewed (or because the read-only sandbox answers the
	// ask): it gets no TCP in its conversation's shared network
	// (sandbox.Options.NoTCP), so that a job with a network grant
	// started while it runs gives it nothing. Its writes to the caches
	// of its conversation's world are its own and discarded when it
	// ends (sandbox.Options.ThrowawayCaches), as a hold-mode job's are.
	// An ordinary job's stay (a read-only go build warms the next one).
	Contained bool
	// OnProxy, when set, is told each of the proxy's decisions, from the
	// proxy's goroutines (it must be safe for concurrent use).
	OnProxy func(egress.Decision)
}

// Applied are the limits a job ran under, and how they were enforced. A
// sandboxed job's process limit is the lower of Limits.Processes and the
// sandbox's (config.SandboxLimits.Processes). Limits the host could not
// enforce (Processes without a pids controller) are zero.
type Applied struct {
	config.Limits
	// MemoryPerProcess: Memory was each process's RLIMIT_AS.
	MemoryPerProcess bool
	// CPUPerProcess: CPUTime was each process's RLIMIT_CPU.
	CPUPerProcess bool
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
	ReasonKilled    Reason = "killed"         // a kill request
	ReasonShutdown  Reason = "shutdown"       // engine shutdown
	ReasonLifetime  Reason = "lifetime"       // a background job's lifetime
	ReasonCPULimit  Reason = "cpu time limit" // Limits.CPUTime, job-wide
	// ReasonLeftovers: the shell exited; processes it left in its group
	// were ended. It is internal to the job actor: the outcome reports
	// ReasonNone (the shell ended on its own) with Leftovers.
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
	Leftovers   []Member
	LeftRunning bool
	// Survivors were still alive after SIGKILL and CleanupWait.
	Survivors []Member
	// PipeHeld: the output pipe was still open after the group was gone.
	PipeHeld bool
	// Duration is the job's wall time, from its start.
	Duration time.Duration
	// Queued is how long the job waited for a slot before it started.
	Queued time.Duration
	// Yielded, for a foreground job with Request.Yield, says that it
	// reached its timeout and went on as a background job; Output is what
	// it printed until then.
	Yielded *Yielded
	// YieldRefused says why a job that should have yielded was ended
	// instead (a background job cap: an admission refusal, which the
	// engine words).
	YieldRefused error
	// Refused lists the destinations ("host:port", or a name the
	// resolver refused) the egress proxy refused the job, the first few
	// of them.
	Refused []string
	// Network is the job's egress report, per destination (nil: the job
	// had no network): final when its proxy closed as it ended, a
	// snapshot when processes were kept running.
	Network egress.Report
	// Usage is what the job's processes used, read when the job ended
	// (final once its cgroup is empty; a snapshot when processes were
	// kept running or survived). It is zero for a job that never started.
	// Where the job has no cgroup, CPU comes from the shell's own rusage
	// (wait4): the time of the shell and of the descendants it waited for.
	Usage Usage
	// Limits are the limits the job ran under.
	Limits Applied
	// Changes is what a workspace-write job's layer did to the workspace
	// (its commit's report), for a job that ran over one.
	Changes Changes
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
	// ID names the job ("cmd-N" or "job-N", numbered per conversation).
	ID string
	// Conversation is the conversation that started it.
	Conversation string
	// Command is the command as submitted; Display as shown.
	Command, Display string
	// Background is set for a background job (or a yielded one).
	Background bool
	// Pid is the pid and process group id of its shell.
	Pid int
	// Status is where it stands.
	Status Status
	// Reason says why the engine ended it (Killed, Detached).
	Reason Reason
	// Signal is the signal that ended it, when it was not the engine.
	Signal string
	// ExitCode is set once the shell's exit status is known.
	ExitCode *int
	// Err says why it never started (Errored).
	Err error
	// Started and Ended are when it started and ended (zero: running).
	Started, Ended time.Time
	// OutputFile is a background job's output file.
	OutputFile string
	// Output reads a background job's output file by output offset (see
	// truncate.File); nil for a foreground job.
	Output *truncate.File
	// TTY: the job runs on a terminal (Request.TTY).
	TTY bool
	// Network: the job may reach the network (its Request.Sandbox's
	// Network is set), so its world's network namespace holds its egress
	// proxy, resolver and carried listeners while it runs.
	Network bool
	// Usage is what the job used, once it ended (see Outcome.Usage);
	// CurrentUsage reads it while the job runs.
	Usage Usage
	// Live reads what the running job has used so far (nil: not yet
	// running).
	Live UsageReader
	// Dir is the job's working directory.
	Dir string
	// Changes is what a workspace-write job's layer did to the workspace
	// so far: its last checkpoint's report while it runs, its commit's
	// once it ended.
	Changes Changes
}

// Changes is what a workspace-write job's layer (package transact) did
// to the workspace. The zero value: nothing reported (no layer, or
// nothing applied yet).
type Changes struct {
	// Report is the last report (transact.Tx.Last; nil: none).
	Report *transact.Report
	// Err says why the change set could not be computed or applied.
	Err error
}

// Running reports whether the job has not ended yet.
func (s State) Running() bool { return s.Status == Running }

// CurrentUsage returns what the job has used so far: Usage once it ended,
// and while it runs what its cgroup has accounted (a few µs: one pread per
// counter; zero without a cgroup, or before the job's actor reported it
// running).
func (s State) CurrentUsage() Usage {
	if !s.Running() || s.Live == nil {
		return s.Usage
	}
	return s.Live.Usage()
}

// UsageReader reads what a running job has used so far (its cgroup's
// counters, a few µs; zero without a cgroup or once the job ended).
type UsageReader interface{ Usage() Usage }

// Usage is what a job's processes used (see proc.Usage, whose counters
// these are).
type Usage struct {
	// CPU is the user and system CPU time of its processes.
	CPU time.Duration
	// PeakMemory is the most memory charged to its cgroup at once, in
	// bytes (0 without a memory controller).
	PeakMemory int64
	// Processes is the most processes and threads alive in its cgroup
	// at once (0 without a pids controller).
	Processes int
	// OOMKills counts its processes killed by the kernel's OOM killer.
	OOMKills int
}

// Member is a process of a job.
type Member struct {
	Pid  int
	Comm string // the kernel's command name, at most 15 bytes
}

// String formats a member as "comm (pid N)".
func (m Member) String() string { return fmt.Sprintf("%s (pid %d)", m.Comm, m.Pid) }

// Winsize is a terminal's size, in characters.
type Winsize struct {
	Rows, Cols uint16
}
