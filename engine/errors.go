package engine

import (
	"errors"

	"github.com/bashvisor/bashvisor/internal/jobs"
	"github.com/bashvisor/bashvisor/internal/supervisor"
)

// Errors carried in [Result.Err] and returned by Engine methods; test them
// with errors.Is.
var (
	ErrWorkDirMissing = errors.New("working directory does not exist")
	ErrBadInput       = errors.New("bad input")
	ErrShutdown       = errors.New("engine is shut down")
	ErrNoSuchJob      = errors.New("no such job")
	ErrBlocked        = errors.New("command blocked")
	ErrDenied         = errors.New("command denied by permission profile")
	ErrNeedsApproval  = errors.New("command needs approval")
	ErrRestrictedMode = errors.New("restricted mode unavailable")
	// ErrStart: the command's process could not be started.
	ErrStart = errors.New("cannot start command")
	// ErrInternal: the command's actor failed, or its exit status could
	// not be read.
	ErrInternal = errors.New("command actor failed")
	// ErrBusy: admission control (Config.Admission) refused the call: a
	// count cap of the call's conversation, of its principal or of the
	// host is reached (the queue is full, or a background job over a jobs
	// cap), the call waited Admission.QueueWait without getting to run, or
	// the host is short of memory or processes. The error's text says
	// which, with the counts, in a sentence for the model.
	ErrBusy = errors.New("busy")
	// Errors of Write: the job was not started with stdin "pipe" or a
	// terminal; its shell has exited; its stdin was closed; it has not
	// read earlier input for a while.
	ErrNoStdin     = errors.New("the job has no stdin to write to")
	ErrJobEnded    = errors.New("the job has ended; nothing reads its input")
	ErrStdinClosed = errors.New("the job's stdin was already closed")
	ErrStdinBusy   = errors.New("the job is not reading its input")
	// Errors of Undo: fewer steps are kept than asked for (commands that
	// changed nothing are no steps; the store keeps the last ones, within
	// its bounds); something changed the paths since (the error is an
	// *UndoConflictError, which names them; Review's refused accept of
	// held changes whose paths changed is one too).
	ErrNothingToUndo = errors.New("nothing to undo")
	ErrUndoConflict  = errors.New("undo refused")
)

// layerErrors map the errors of the engine's layers to the engine's own.
var layerErrors = [...]struct{ layer, public error }{
	{supervisor.ErrShutdown, ErrShutdown},
	{supervisor.ErrNoSuchJob, ErrNoSuchJob},
	{supervisor.ErrBusy, ErrBusy},
	{supervisor.ErrStart, ErrStart},
	{supervisor.ErrUnavailable, ErrRestrictedMode},
	{jobs.ErrActorFailed, ErrInternal},
	{jobs.ErrNoStdin, ErrNoStdin},
	{jobs.ErrEnded, ErrJobEnded},
	{jobs.ErrStdinClosed, ErrStdinClosed},
	{jobs.ErrStdinBusy, ErrStdinBusy},
	{supervisor.ErrNothingToUndo, ErrNothingToUndo},
}

// public returns err as the engine reports it: an error of a lower layer
// also matches the engine's sentinel for it (errors.Is), with the same
// text.
func public(err error) error {
	if err == nil {
		return nil
	}
	var b *supervisor.BusyError
	if errors.As(err, &b) {
		return &busyError{b: b}
	}
	var c *supervisor.UndoConflictError
	if errors.As(err, &c) {
		return &UndoConflictError{Paths: c.Paths}
	}
	for _, m := range layerErrors {
		if errors.Is(err, m.layer) {
			if errors.Is(err, m.public) {
				return err
			}
			return &layerError{err: err, public: m.public}
		}
	}
	return err
}

// layerError is an error of a lower layer that matches a public sentinel.
type layerError struct{ err, public error }

func (e *layerError) Error() string   { return e.err.Error() }
func (e *layerError) Unwrap() []error { return []error{e.public, e.err} }
