package engine

import (
	"time"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/truncate"
)

// Mode selects how a command runs: foreground with the default or the slow
// timeout, or detached in the background.
type Mode string

// The modes of [Input.Mode]. The empty Mode means ModeDefault.
const (
	ModeDefault    Mode = "default"
	ModeSlow       Mode = "slow"
	ModeBackground Mode = "background"
)

// Input is the tool input the model sends; its JSON schema is [InputSchema].
type Input struct {
	// Command is the shell code run with bash -c. Required.
	Command string `json:"command"`
	// Mode is "default", "slow" or "background"; empty means "default".
	Mode Mode `json:"mode,omitempty"`
	// Stdin is "pipe" for a command that reads input sent later with
	// Write (bash_write); empty (or "null") keeps stdin at /dev/null, so
	// nothing ever waits for input unknowingly. Only for commands that can
	// become background jobs: mode background, or a call that yields.
	Stdin string `json:"stdin,omitempty"`
	// TTY runs the command on a pseudo-terminal (its own session, the
	// terminal as its controlling terminal, TERM=xterm-256color, 40 rows
	// by 120 columns) for programs that insist on one; its output is the
	// terminal's byte stream and Write sends keys ("\x03" is Ctrl-C).
	// Only where Stdin "pipe" is allowed.
	TTY bool `json:"tty,omitempty"`
	// YieldMS, for a default or slow command, moves it to the background
	// after this many milliseconds instead of its mode's timeout (the
	// shorter of the two), as Config.OnTimeout "background" does at the
	// timeout: the result has status "started", the output so far and the
	// job's id, and the command runs on as that job.
	YieldMS int64 `json:"yield_ms,omitempty"`
	// Network asks for hosts the call's sandbox allowlist
	// (ToolContext.Sandbox.Network) lacks, as allowlist entries: such a
	// call needs a person's approval (status needs_approval, naming them),
	// and ToolContext.Approved runs it with them added. The engine
	// remembers no grant: a caller granting them for the conversation
	// adds them to its later calls' Sandbox.Network. Entries the allowlist
	// already covers ask nothing. Needs a sandbox; an entry that does not
	// parse fails the call with ErrBadInput.
	Network []string `json:"network,omitempty"`
}

// ToolContext is the per-call execution context. The engine keeps no
// per-conversation state: everything a call depends on arrives here.
type ToolContext struct {
	// WorkingDir is the directory the command runs in. It must exist; a
	// relative one is taken from the engine's working directory.
	WorkingDir string
	// ConversationID identifies the conversation: background jobs belong
	// to it (Jobs, Job, JobOutput and Kill see only its own), its output
	// files live in a directory of its own, its commands count against its
	// share of Config.Admission, and logs and the audit log name it. Calls
	// without one share the conversation "".
	ConversationID string
	// Principal names who makes the call (an authenticated user or
	// client, as mcpserver resolves it from the request's credentials;
	// empty when the caller has no notion of one). A caller serving
	// several principals scopes ConversationID by it, so that one
	// principal can never name another's conversation. Admission control
	// shares the engine fairly between principals, and caps each
	// (config.Admission); a call without a principal counts as its
	// conversation's own. Logs may name it.
	Principal string
	// Sandbox is the sandbox profile the command runs in (the zero value:
	// none, unrestricted). A host that cannot enforce the profile answers
	// the call with ErrRestrictedMode; a sandboxed command is never run
	// with less confinement than asked for.
	Sandbox Sandbox
	// Env holds per-call environment overrides. They apply last, but can
	// never re-add a variable the environment policy removed as a secret.
	Env map[string]string
	// Limits, when set, override Config.Limits for this call: its
	// non-zero fields replace the engine's (negative: no limit), its zero
	// fields keep them.
	Limits *config.Limits
	// Approved tells the engine that a person approved this exact command,
	// so a permission rule answering "ask" lets it run. Safety blocks and
	// "deny" rules still apply.
	Approved bool
	// Review sets the review mode of the conversation's workspace-write
	// commands, from this call on: "apply" (what policy proves harmless
	// is applied, the rest held for review), "hold" (every change set is
	// held until accepted: review everything); "" is Config.Review.
	Review string
	// Progress, when set, is called about every ProgressInterval while a
	// foreground command runs, from the calling goroutine of [Engine.Run].
	Progress func(Progress)
	// Turn names the client's turn: the calls that answer one message of
	// the user (mcpserver takes it from a request's _meta key
	// "bashvisor/turn"). The undo step a workspace-write command makes
	// records it, its change line names it ("(step 7, turn t3)"), and
	// Undo can take back a turn's steps (UndoTurn). Empty: none.
	Turn string
	// UndoTurn, UndoPaths and Redo are read by Engine.Undo only, and
	// choose what it takes back instead of the last steps (at most one of
	// them is set; steps is then ignored). UndoTurn takes back every step
	// of that turn, newest first, as one: all, or nothing when any of
	// their paths changed since. UndoPaths takes back only these paths
	// (relative to WorkingDir, or absolute; a directory stands for what
	// is below it) of the newest step that changed them, all of which it
	// must have changed; the step keeps its other paths. Redo puts back
	// what the conversation's last undo took back (all of its steps, as
	// one); an undo can be redone until the conversation's next change
	// lands, as in an editor.
	UndoTurn  string
	UndoPaths []string
	Redo      bool
	// CallID identifies this tool call for idempotency: the model's
	// tool-use id ("toolu_…", "call_…") or an MCP session plus its
	// request id. A Runner that forwards calls to other machines
	// (cluster.Client) runs a call id at most once: a repeated id attaches
	// to the running call or gets its recorded result. Empty means the
	// Runner makes one up (no idempotency across retries). The local
	// Engine ignores it.
	CallID string
	// OutputMax, when positive and below Config.Output.Max, is the most
	// output this call's result shows, for a client that passes on less
	// than the engine's bound (mcpserver sets it per client): the output
	// is cut as Config.Output.Truncation says, with the head and tail
	// shares of OutputMax, and the header says what is shown. 0 (or
	// more): Config.Output.Max.
	OutputMax int
}

// Progress is a snapshot of a running foreground command.
type Progress struct {
	// Elapsed is the time since the call started.
	Elapsed time.Duration
	// Bytes is the output so far, in bytes.
	Bytes int64
	// LastLine is the latest complete or partial output line ('\r' ends a
	// line too, so a redrawn progress bar shows its latest state), valid
	// UTF-8 and at most 256 bytes.
	LastLine string
	// Output is the output since the previous report (valid UTF-8, at
	// most 16 KiB: the latest, when there was more),
	// rendered like the result (see config.Output.Raw): a line comes
	// once it is complete, or with the last report (so a progress bar
	// redrawn with \r comes once, finished); a terminal's, as the lines
	// of its text that changed.
	// Skipped counts the bytes between the previous report and Output
	// that it leaves out; without skips the reports' Outputs together are
	// the whole output.
	Output  string
	Skipped int64
}

// progressOutputMax bounds Progress.Output.
const progressOutputMax = 16 << 10

// Status is the outcome class of a call.
type Status string

// The statuses of [Result.Status]. Every status but "ok" and "started"
// is an error for the model (MCP isError).
const (
	StatusOK            Status = "ok"
	StatusFailed        Status = "failed"
	StatusTimedOut      Status = "timed_out"
	StatusCancelled     Status = "cancelled"
	StatusBlocked       Status = "blocked"
	StatusDenied        Status = "denied"
	StatusNeedsApproval Status = "needs_approval"
	StatusError         Status = "error"
	StatusStarted       Status = "started"
	// StatusLost: the machine running the command stopped answering
	// (cluster.Client); the outcome is unknown and the command was not
	// re-run (the text: cluster's lostText).
	StatusLost Status = "lost"
)

// Result is the structured result of one call. Output holds the exact text
// the model sees; the other fields describe it for programs. The JSON
// field names are part of the tool contract (MCP structuredContent, demo
// run -json).
type Result struct {
	// Status is the outcome class; see the package documentation for the
	// text each gives.
	Status Status `json:"status"`
	// ExitCode is the shell's exit code when it exited, 128+n when signal
	// n killed it; nil when it never ran or its status is unknown.
	ExitCode *int `json:"exit_code,omitempty"`
	// Signal names the signal that killed the shell ("SIGKILL").
	Signal string `json:"signal,omitempty"`
	// Output is the text the model sees: the status line (for anything
	// but "ok"), the command's output (stdout and stderr as written,
	// truncated in the middle beyond Config.Output.Max, always valid UTF-8)
	// and bracketed notes.
	Output string `json:"output"`
	// Truncated reports that the output was cut; FullOutputFile then
	// holds it (up to Config.Output.SpoolCap).
	Truncated bool `json:"truncated"`
	// OutputBytes is the size of everything the command printed (after
	// secret values were replaced).
	OutputBytes int64 `json:"output_bytes"`
	// FullOutputFile is the file that holds the complete output when it
	// was truncated. The engine keeps the newest Config.Output.SpoolKeep of them.
	FullOutputFile string `json:"full_output_file,omitempty"`
	// DurationMS is the command's wall time in milliseconds, from its
	// start.
	DurationMS int64 `json:"duration_ms"`
	// QueuedMS is how long the call waited for a slot before the command
	// started (Config.Admission); its timeout started only then. Background
	// jobs never wait (over their limit they are refused).
	QueuedMS int64 `json:"queued_ms"`
	// Command is the command as submitted.
	Command string `json:"command"`
	// Display is the command as shown to a person: without a leading
	// `cd WORKDIR &&` that changes nothing.
	Display string `json:"display"`
	// PID is the shell's pid (and process group id) once it started.
	PID int `json:"pid,omitempty"`
	// OutputFile is a background job's output file (status "started").
	OutputFile string `json:"output_file,omitempty"`
	// JobID names a background job (status "started") for Job,
	// JobOutput and Kill.
	JobID string `json:"job_id,omitempty"`

	// The resource report, for a command that ran in the foreground (a
	// background job's is in its JobInfo).
	Usage
	// What a workspace-write command changed in the workspace (applied
	// once its processes were gone) and what policy kept out. A command
	// that yielded to the background reports them in its JobInfo.
	ChangeSet
	// Network is what a sandboxed command with network (allow-net) did
	// through its egress, per destination, the busiest first: the name
	// (or address) and port it asked for, the bytes the destination
	// acknowledged and sent on the proxy's connections (as the kernel
	// counts them, TLS records included; Linux only), and the attempts
	// refused (Port 0: a name the conversation's resolver refused). At
	// most 1025 entries (the rest as Host "(other hosts)"). Nil without
	// network; a command that yielded to the background has none.
	Network []struct {
		Host     string `json:"host"`
		Port     int    `json:"port"`
		BytesOut int64  `json:"bytes_out"`
		BytesIn  int64  `json:"bytes_in"`
		Denied   int    `json:"denied,omitempty"`
	} `json:"network,omitempty"`
	// Listening lists the TCP ports something of the conversation listens
	// on in its sandbox's loopback network (which [Engine.Forward]
	// reaches), by port: a process that holds the socket, and the
	// background job whose process group it is in ("" for none). A
	// sandboxed foreground command's result has it (also one that moved
	// to the background), read when the command ended and only while a
	// command or job of the conversation runs (nothing else can hold a
	// socket there); nil when nothing listens, for a background start
	// and without the sandbox. The text's last line names them: see the
	// package documentation.
	Listening []struct {
		Port int    `json:"port"`
		PID  int    `json:"pid"`
		Job  string `json:"job,omitempty"`
	} `json:"listening,omitempty"`

	// Err is the Go error behind a status of "error", "blocked", "denied"
	// or "needs_approval"; test it with errors.Is against the Err* values.
	Err error `json:"-"`

	killed []string // what the engine ended, for the audit log
	// denied: the result ends with a sandbox note (metrics).
	denied bool
}

// JobStatus is the state of a background job.
type JobStatus string

// The states of [JobInfo.Status].
const (
	JobRunning   JobStatus = "running"
	JobCompleted JobStatus = "completed"
	JobFailed    JobStatus = "failed"
	JobKilled    JobStatus = "killed"
	// JobLost: the executor machine running the job stopped answering
	// (cluster.Client); whether it still runs is unknown.
	JobLost JobStatus = "lost"
)

// JobInfo describes a background job, running or ended.
type JobInfo struct {
	// JobID names the job ("job-N").
	JobID string `json:"job_id"`
	// PID is its shell's pid and process group id.
	PID int `json:"pid"`
	// Command is the command as submitted; Display as shown.
	Command string `json:"command"`
	Display string `json:"display"`
	// ConversationID is the conversation that started it.
	ConversationID string `json:"conversation_id,omitempty"`
	// Status is running, completed (exit 0), failed (other exit),
	// killed, or lost (its executor machine stopped answering). A job lives as long as its process group: it is running
	// while anything it started runs, even after its shell exited.
	Status JobStatus `json:"status"`
	// ExitCode is its shell's exit code, once known.
	ExitCode *int `json:"exit_code,omitempty"`
	// Reason says why a killed job was killed ("killed by request",
	// "lifetime limit exceeded", "engine shutdown", "SIGKILL", ...).
	Reason string `json:"reason,omitempty"`
	// Started and Ended are when it started and ended (zero while
	// running).
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
	// Bytes is how much output it printed so far (its output file may
	// keep less: see config.Output.JobFileCap).
	Bytes int64 `json:"bytes"`
	// OutputFile receives its output, then a completion line when it ends.
	OutputFile string `json:"output_file"`
	// TTY: it runs on a terminal (Input.TTY); its output reads as the
	// terminal's text (see JobOutput).
	TTY bool `json:"tty,omitempty"`
	// Its resource report, as in [Result]: so far while it runs (read
	// from its cgroup at the call; absent without cgroups), final once it
	// ended.
	Usage
	// What a workspace-write job changed in the workspace and what policy
	// kept out, as in [Result]: so far while it runs (applied at
	// checkpoints: before the conversation's next command starts and on
	// JobOutput), all of it once it ended.
	ChangeSet
	// ChangeReport is the text of that report as the model reads it (a
	// line of changes, a line per refused rule), which JobOutput's text
	// ends with; empty when nothing changed.
	ChangeReport string `json:"-"`

	output *truncate.File // reads the output file by output offset
}

// Usage is the resource report of a command or a job, which the engine
// reads from the kernel's accounting of its cgroup where it has one.
type Usage struct {
	// CPUMS is the CPU time (user and system) of the command's
	// processes, in milliseconds, rounded up. With cgroups it is exact
	// and counts every process, also those that left the process group;
	// without, it is the shell's and that of the processes it waited for
	// (rusage). Absent when the command did not run.
	CPUMS int64 `json:"cpu_ms,omitempty"`
	// PeakMemoryBytes is the most memory the command's processes held at
	// once, in bytes, page cache they caused included (what Limits.Memory
	// compares with), to the kernel's granularity of about 256 KiB per
	// CPU; a reused cgroup adds what earlier commands left charged, at
	// most 2 MiB. Absent when the command did not run, and
	// without a memory controller: the kernel then keeps no figure for the
	// whole command, and rusage's largest resident set counts the engine's
	// own for a process it forked.
	PeakMemoryBytes int64 `json:"peak_memory_bytes,omitempty"`
	// Processes is the most processes and threads that were alive at once,
	// the shell included (cgroup pids.peak). It is not a count of the
	// processes started, which the kernel does not keep: a script that
	// ran ten programs one after another reads 2. Where the pids limit
	// lives in a cgroup v1 hierarchy (hybrid hosts) the engine thread that
	// forks the shell counts until it leaves, microseconds after the fork:
	// the value is at least 2 there, and on a busy machine may be one
	// more than the command's own. Absent without a pids controller.
	Processes int `json:"processes,omitempty"`
	// OOMKilled reports that the kernel's OOM killer killed a process of
	// the command (at its memory limit, or in a system-wide shortage).
	// Known only with a memory controller.
	OOMKilled bool `json:"oom_killed,omitempty"`
}

// ChangeSet is what a workspace-write command or job changed in the
// workspace, and what policy kept out.
type ChangeSet struct {
	// Changes are what the command changed in the workspace, at most
	// 1000 (the listed changes: an added directory shows as its files);
	// ChangesOmitted counts the rest.
	Changes        []Change `json:"changes,omitempty"`
	ChangesOmitted int      `json:"changes_omitted,omitempty"`
	// Refused are the changes policy kept out of the workspace (the
	// text says why and what to do).
	Refused []Refusal `json:"refused,omitempty"`
	// Held is what is held for review instead of applied (nil: nothing):
	// see Engine.Held and Engine.Review.
	Held *HeldChanges `json:"held,omitempty"`
}
