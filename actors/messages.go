package actors

import (
	"os"
	"time"

	"github.com/bashvisor/bashvisor/proc"
	"github.com/bashvisor/bashvisor/secret"
	"github.com/bashvisor/bashvisor/truncate"
)

// Reason says why the engine ended a command.
type Reason string

// The reasons for ending a command.
const (
	ReasonNone      Reason = ""
	ReasonTimeout   Reason = "timeout"
	ReasonCancelled Reason = "cancelled"
	ReasonKilled    Reason = "killed"
	ReasonShutdown  Reason = "shutdown"
	ReasonLifetime  Reason = "lifetime"
	// ReasonLeftovers: the shell exited; processes it left in its group
	// were ended.
	ReasonLeftovers Reason = "leftovers"
)

// Command is everything a command actor needs. The engine fills it in and
// sends it to the supervisor inside a [Spawn].
type Command struct {
	ID             string
	Command        string // the original command text (for listings)
	Display        string
	ConversationID string
	Spec           proc.Spec
	Background     bool
	// Timeout is the foreground timeout or the background lifetime; 0
	// means none.
	Timeout     time.Duration
	Grace       time.Duration
	CleanupWait time.Duration
	DrainWait   time.Duration
	// KeepLeftovers leaves processes that outlive a foreground shell.
	KeepLeftovers bool
	Truncate      truncate.Config
	// OutputFile is the background job's output file.
	OutputFile string
	// Events receives, for a background job, Started or a start-failure
	// Done; for a foreground command, Done (preceded by Started only when
	// the actor started the process itself, i.e. the caller did not call
	// Launch). It must have room for two events.
	Events chan<- Event
	// Cleanup, when set, runs once when the actor finishes: after the
	// process group is gone, unless leftovers were kept (KeepLeftovers) or
	// survived SIGKILL. A job detached at shutdown keeps its resources
	// (its processes still use them), so Cleanup does not run then.
	Cleanup func()
	// Cgroups, when set, gives the command a cgroup v2 of its own: the
	// command starts inside it, leftovers are found through it, and ending
	// the command ends with cgroup.kill, so processes that left the process
	// group (setsid, double fork) end too. The cgroup is removed when the
	// command ends. When creating the cgroup fails, the process group is
	// the unit, as without Cgroups.
	Cgroups *proc.Cgroups
	// Redactor, when it has values, replaces secret values in the output
	// before anything else sees it: the output is read through a
	// secret.StreamWriter into the buffer (result, truncation, full-output
	// file, progress) or, for a background job, into OutputFile, which
	// the job then reaches through a pipe the actor reads instead of
	// directly. Without values, a background job writes to its file
	// itself, at no cost. When the job is detached (Detach) the actor
	// stops reading and hands the pipe to a `cat` process in a session of
	// its own that appends the rest unredacted; if that cannot start, the
	// pipe closes and the job's further writes fail (EPIPE or SIGPIPE).
	Redactor *secret.Redactor

	launched *launched // set by Launch, taken over by the actor
}

// Event is sent on Command.Events: a *Started or a *Done.
type Event any

// Started reports a running command.
type Started struct {
	Pid int
}

// Done reports the end of a foreground command (or a failed start).
type Done struct{ Outcome Outcome }

// Outcome is what happened to a command, before formatting.
type Outcome struct {
	// Err is set when the command could not start or the actor failed.
	Err error
	// Exited is true when the shell's exit status is known.
	Exited   bool
	ExitCode int    // 128+n when killed by signal n
	Signal   string // e.g. "SIGKILL", when killed by a signal
	Reason   Reason
	Output   truncate.Output
	Stderr   *truncate.Output // with separate streams
	// Leftovers were still in the group after the shell exited and were
	// ended (or left running with KeepLeftovers: see LeftRunning).
	Leftovers   []proc.Member
	LeftRunning bool
	// Survivors were still alive after SIGKILL and CleanupWait.
	Survivors []proc.Member
	// PipeHeld: the output pipe was still open after the group was gone.
	PipeHeld bool
	Duration time.Duration
}

// Cancel asks a command to end with the grace sequence. Reply, when set,
// is called from the actor with the command's final state; it must not
// block.
type Cancel struct {
	ID     string
	Reason Reason
	Reply  func(JobState)
}

// JobState is the supervisor's record of a command.
type JobState struct {
	ID             string
	Pid            int
	Command        string
	Display        string
	ConversationID string
	Background     bool
	Running        bool
	Started        time.Time
	Ended          time.Time
	// Status is "running", "completed", "failed" or "killed".
	Status     string
	ExitCode   *int
	Reason     string
	OutputFile string
}

// Size returns the current size of a background job's output file.
func (s JobState) Size() int64 {
	if s.OutputFile == "" {
		return 0
	}
	fi, err := os.Stat(s.OutputFile)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// internal messages
type (
	exited struct {
		state *os.ProcessState
		err   error
	}
	drained  struct{}
	tick     struct{}
	timedOut struct{}
)

// JobUpdate carries a command's state change to its parent, the
// supervisor.
type JobUpdate struct{ State JobState }

// Detach ends a background job's actor without ending its processes
// (engine shutdown with jobs left running).
type Detach struct{}
