package engine

import (
	"time"
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

// Input is the tool input the model sends (SPEC §2.1).
type Input struct {
	// Command is the shell code run with bash -c. Required.
	Command string `json:"command"`
	// Mode is "default", "slow" or "background"; empty means "default".
	Mode Mode `json:"mode,omitempty"`
}

// ToolContext is the per-call execution context. The engine keeps no
// per-conversation state: everything a call depends on arrives here.
type ToolContext struct {
	// WorkingDir is the directory the command runs in. It must exist.
	WorkingDir string
	// ConversationID identifies the conversation in logs and the audit log.
	ConversationID string
	// Restricted runs the command in the Landlock sandbox (SPEC §2.8).
	Restricted bool
	// Env holds per-call environment overrides. They apply last, but can
	// never re-add a variable the environment policy removed as a secret.
	Env map[string]string
	// Approved tells the engine that a person approved this exact command,
	// so a permission rule answering "ask" lets it run. Safety blocks and
	// "deny" rules still apply.
	Approved bool
	// Progress, when set, is called about every ProgressInterval while a
	// foreground command runs, from the calling goroutine of [Engine.Run].
	Progress func(Progress)
}

// Progress is a snapshot of a running foreground command.
type Progress struct {
	Elapsed  time.Duration
	Bytes    int64  // bytes of output so far
	LastLine string // the latest complete or partial output line, at most 256 bytes
}

// Status is the outcome class of a call (SPEC §2.5).
type Status string

// The statuses of [Result.Status].
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
)

// Result is the structured result of one call. Output holds the exact text
// the model sees; the other fields describe it for programs.
type Result struct {
	Status         Status `json:"status"`
	ExitCode       *int   `json:"exit_code,omitempty"`
	Signal         string `json:"signal,omitempty"`
	Output         string `json:"output"`
	Truncated      bool   `json:"truncated"`
	OutputBytes    int64  `json:"output_bytes"`
	FullOutputFile string `json:"full_output_file,omitempty"`
	DurationMS     int64  `json:"duration_ms"`
	Command        string `json:"command"`
	Display        string `json:"display"`
	PID            int    `json:"pid,omitempty"`
	OutputFile     string `json:"output_file,omitempty"`
	JobID          string `json:"job_id,omitempty"`

	// Err is the Go error behind a status of "error", "blocked", "denied"
	// or "needs_approval"; test it with errors.Is against the Err* values.
	Err error `json:"-"`

	killed []string // what the engine ended, for the audit log
}

// IsError reports whether the result is an error for the model (MCP
// isError): anything but "ok" and "started".
func (r Result) IsError() bool { return r.Status != StatusOK && r.Status != StatusStarted }

// JobStatus is the state of a background job.
type JobStatus string

// The states of [JobInfo.Status].
const (
	JobRunning   JobStatus = "running"
	JobCompleted JobStatus = "completed"
	JobFailed    JobStatus = "failed"
	JobKilled    JobStatus = "killed"
)

// JobInfo describes a background job, running or ended.
type JobInfo struct {
	JobID          string    `json:"job_id"`
	PID            int       `json:"pid"`
	Command        string    `json:"command"`
	Display        string    `json:"display"`
	ConversationID string    `json:"conversation_id,omitempty"`
	Status         JobStatus `json:"status"`
	ExitCode       *int      `json:"exit_code,omitempty"`
	Reason         string    `json:"reason,omitempty"` // why it was killed
	Started        time.Time `json:"started"`
	Ended          time.Time `json:"ended,omitzero"`
	Bytes          int64     `json:"bytes"`
	OutputFile     string    `json:"output_file"`
}
