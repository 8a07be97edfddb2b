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
