package engine

import (
	"context"
	"errors"
)

// Errors carried in [Result.Err] and returned by Engine methods.
var (
	ErrWorkDirMissing = errors.New("working directory does not exist")
	ErrWorkDirNotDir  = errors.New("working directory is not a directory")
	ErrBadInput       = errors.New("bad input")
	ErrShutdown       = errors.New("engine is shut down")
	ErrNoSuchJob      = errors.New("no such job")
	ErrBlocked        = errors.New("command blocked")
	ErrDenied         = errors.New("command denied by permission profile")
	ErrNeedsApproval  = errors.New("command needs approval")
	ErrRestrictedMode = errors.New("restricted mode unavailable")
	ErrStart          = errors.New("cannot start command")
)

// Engine runs shell commands for agents. It is safe for concurrent use by
// any number of conversations.
type Engine struct{}

// New starts an engine.
func New(cfg Config) (*Engine, error) { return nil, errors.New("not implemented") }

// Run runs one tool call.
func (e *Engine) Run(ctx context.Context, tc ToolContext, in Input) Result { return Result{} }

// Jobs lists background jobs, running and ended.
func (e *Engine) Jobs() []JobInfo { return nil }

// Job returns one background job.
func (e *Engine) Job(id string) (JobInfo, error) { return JobInfo{}, ErrNoSuchJob }

// Kill terminates a background job with the grace sequence and returns its
// final state.
func (e *Engine) Kill(ctx context.Context, id string) (JobInfo, error) {
	return JobInfo{}, ErrNoSuchJob
}

// Shutdown stops the engine: jobs are terminated (unless LeaveJobsRunning).
func (e *Engine) Shutdown(ctx context.Context) error { return nil }

// JobOutput is a slice of a background job's output file plus the job's
// state.
type JobOutput struct {
	Job    JobInfo `json:"job"`
	Offset int64   `json:"offset"` // file offset of Data's first byte
	Data   string  `json:"output"` // valid UTF-8 (invalid bytes replaced)
	Size   int64   `json:"size"`   // current size of the output file
	EOF    bool    `json:"eof"`    // Data reaches the current end of the file
}

// JobOutput reads a job's output: the last tail bytes when tail > 0,
// otherwise limit bytes (0 = up to 128 KiB) from offset.
func (e *Engine) JobOutput(id string, tail, offset, limit int64) (JobOutput, error) {
	return JobOutput{}, ErrNoSuchJob
}

// Description is the tool description for the model (SPEC §2.1), ending
// with <pwd>tc.WorkingDir</pwd>; in restricted mode it states the sandbox
// constraints.
func (e *Engine) Description(tc ToolContext) string { return "" }

// InputSchema is the JSON schema of [Input] (SPEC §2.1).
func InputSchema() []byte { return nil }
