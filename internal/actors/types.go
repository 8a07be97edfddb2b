package actors

import (
	"log/slog"
	"time"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/jobs"
	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/secret"
	"github.com/bashvisor/bashvisor/internal/transact"
	"github.com/bashvisor/bashvisor/internal/truncate"
)

// Spec is one job: what to run (the request) and how it is tracked. The
// supervisor fills in ID, Name, OutputFile and Done.
type Spec struct {
	jobs.Request
	// ID names the job ("cmd-N" for a foreground command, "job-N" for a
	// background job, numbered per conversation).
	ID string
	// Name is unique among the engine's jobs (it names the job's cgroup);
	// "" means ID.
	Name string
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
	Done chan<- jobs.Outcome
	// World is a sandboxed job's conversation's world (nil: the job gets
	// a scratch directory and a network namespace of its own, and no
	// caches); WorldSize is what its file system may hold for this
	// job's start (0: as it is). Set before Launch.
	World     *sandbox.World
	WorldSize uint64
	// Masks are files a sandboxed job sees in place of the host's (its
	// conversation's broker CA bundle, placeholders of brokered secret
	// files; see sandbox.Mask). Set before Launch.
	Masks []sandbox.Mask
	// Tx, when set, is the job's transaction (Profile.Layer): the
	// sandbox mounts its layer over the job's writable roots, a
	// background job's freeze handle is given to it at Launch (or when
	// it yields), and it is committed once the job ended, off the actor
	// (Outcome.Changes). Set before Launch.
	Tx *transact.Tx
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
	// Watchdog ends the jobs should the engine's process die without
	// shutting down (nil: none): it knows Cgroups, and is told the
	// process group of each job without a cgroup while the job lives.
	Watchdog *proc.Watchdog
	// Sandbox configures sandboxed jobs (Limits, Helper, HelperPath and
	// ScratchRoot; a job's world comes with its Profile).
	Sandbox config.Sandbox
	// Truncate configures a foreground job's output buffer.
	Truncate truncate.Config
	// JobFileCap bounds a background job's output file (config.Output;
	// <= 0: no bound).
	JobFileCap int64
	// Lifecycle says how a job's processes are ended.
	Lifecycle config.Lifecycle
	// SeparateStreams gives a foreground job's stderr a buffer of its own.
	SeparateStreams bool
	// Log receives warnings (dropped environment overrides, failed
	// cleanups).
	Log *slog.Logger

	// trace, when set (tests), is told every phase a job enters.
	trace func(id string, p phase)
}

// Messages a job's actor receives.
type (
	// Cancel asks a job to end with the grace sequence. Reply, when set,
	// receives its final state; it must have room for one value.
	Cancel struct {
		Reason jobs.Reason
		Reply  chan<- jobs.State
	}
	// Detach ends a job's actor without ending its processes (engine
	// shutdown with jobs left running). Reply, when set, receives its
	// final state.
	Detach struct{ Reply chan<- jobs.State }
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
		File           *truncate.File
	}
	// YieldRefused answers a YieldRequest the supervisor cannot grant: the
	// job ends as a timeout, saying why.
	YieldRefused struct{ Err error }
)

// YieldRequest tells the supervisor (the job's parent) that a foreground
// job with Spec.Yield reached its timeout and asks to go on as a
// background job; the answer is BecomeBackground or YieldRefused.
type YieldRequest struct{ Conversation, ID string }

// Report carries a job's state to its parent, the supervisor: once when a
// background job is running, and once when any job ended (a final state,
// Status != Running). The supervisor stops the actor when it receives the
// final one. Tx is the job's transaction (Spec.Tx), whose last report
// the supervisor lists while the job runs. Finish, set with a final
// state, appends a background job's completion line to its output file:
// the supervisor calls it before it records the state, so that a reader
// never sees the line beside a running state, nor an ended state before
// the line (it may be called again, and after the supervisor stopped).
type Report struct {
	State  jobs.State
	Tx     *transact.Tx
	Finish func()
}
