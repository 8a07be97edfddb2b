package cluster

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"syscall"
	"time"

	"github.com/bashvisor/bashvisor/cluster/clusterpb"
	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/engine"
)

// errKinds name the sentinel errors that cross the wire, so that
// errors.Is works on the front as it does on the executor.
var errKinds = []struct {
	name string
	err  error
}{
	{"workdir_missing", engine.ErrWorkDirMissing},
	{"bad_input", engine.ErrBadInput},
	{"shutdown", engine.ErrShutdown},
	{"no_such_job", engine.ErrNoSuchJob},
	{"blocked", engine.ErrBlocked},
	{"denied", engine.ErrDenied},
	{"needs_approval", engine.ErrNeedsApproval},
	{"restricted_mode", engine.ErrRestrictedMode},
	{"start", engine.ErrStart},
	{"internal", engine.ErrInternal},
	{"busy", engine.ErrBusy},
	{"no_stdin", engine.ErrNoStdin},
	{"job_ended", engine.ErrJobEnded},
	{"stdin_closed", engine.ErrStdinClosed},
	{"stdin_busy", engine.ErrStdinBusy},
	{"nothing_to_undo", engine.ErrNothingToUndo},
	{"undo_conflict", engine.ErrUndoConflict},
	{"stray", engine.ErrStray},
	{"canceled", context.Canceled},
	{"deadline", context.DeadlineExceeded},
	{"not_exist", fs.ErrNotExist},
	{"conn_refused", syscall.ECONNREFUSED}, // Forward: nothing listens on the port
}

// encodeErr returns the kinds err matches (comma-separated) and its text.
func encodeErr(err error) (kind, text string) {
	if err == nil {
		return "", ""
	}
	var kinds []string
	for _, k := range errKinds {
		if errors.Is(err, k.err) {
			kinds = append(kinds, k.name)
		}
	}
	return strings.Join(kinds, ","), err.Error()
}

// remoteError is an executor's error on the front: the same text, and
// errors.Is matches the same sentinels.
type remoteError struct {
	text  string
	kinds []error
}

func (e *remoteError) Error() string   { return e.text }
func (e *remoteError) Unwrap() []error { return e.kinds }

func decodeErr(kind, text string) error {
	if kind == "" && text == "" {
		return nil
	}
	e := &remoteError{text: text}
	for _, name := range strings.Split(kind, ",") {
		for _, k := range errKinds {
			if k.name == name {
				e.kinds = append(e.kinds, k.err)
			}
		}
	}
	return e
}

// encodeReplyErr sets a query reply's error: its kinds and text, and
// the paths of an *engine.UndoConflictError.
func encodeReplyErr(r *clusterpb.QueryReply, err error) {
	r.ErrKind, r.Err = encodeErr(err)
	var c *engine.UndoConflictError
	if errors.As(err, &c) {
		r.ConflictPaths = c.Paths
	}
}

// decodeReplyErr is a query reply's error on the front: a remoteError
// whose undo refusal is an *engine.UndoConflictError with the executor's
// paths (errors.As finds it, errors.Is matches ErrUndoConflict).
func decodeReplyErr(r *clusterpb.QueryReply) error {
	err := decodeErr(r.ErrKind, r.Err)
	if e, ok := err.(*remoteError); ok && r.ConflictPaths != nil {
		for i, k := range e.kinds {
			if k == engine.ErrUndoConflict {
				e.kinds[i] = &engine.UndoConflictError{Paths: r.ConflictPaths}
			}
		}
	}
	return err
}

// encodeUndo puts an undo's result into a query reply.
func encodeUndo(r *clusterpb.QueryReply, u engine.UndoResult) {
	r.Steps, r.Changes, r.ChangesOmitted, r.Text = int64(u.Steps), encodeChanges(u.Changes), int64(u.ChangesOmitted), u.Report
	r.Turn, r.Redo = u.Turn, u.Redo
	for _, n := range u.StepNumbers {
		r.StepNumbers = append(r.StepNumbers, int64(n))
	}
}

// decodeUndo is encodeUndo's reverse; Changes is never nil, as Undo's.
func decodeUndo(r *clusterpb.QueryReply) engine.UndoResult {
	u := engine.UndoResult{Steps: int(r.Steps), Changes: decodeChanges(r.Changes), ChangesOmitted: int(r.ChangesOmitted), Report: r.Text,
		Turn: r.Turn, Redo: r.Redo}
	for _, n := range r.StepNumbers {
		u.StepNumbers = append(u.StepNumbers, int(n))
	}
	if u.Changes == nil {
		u.Changes = []engine.Change{}
	}
	return u
}

func encodeTC(tc engine.ToolContext, callID string) *clusterpb.ToolContext {
	p := &clusterpb.ToolContext{
		WorkingDir: tc.WorkingDir, ConversationId: tc.ConversationID, Principal: tc.Principal,
		Env: tc.Env, Approved: tc.Approved, Progress: tc.Progress != nil, CallId: callID,
		SandboxProfile: string(tc.Sandbox.Profile), Writable: tc.Sandbox.Writable, AllowNet: tc.Sandbox.Network,
		Turn: tc.Turn, UndoTurn: tc.UndoTurn, UndoPaths: tc.UndoPaths, Redo: tc.Redo, Review: tc.Review,
		OutputMax: int64(tc.OutputMax),
	}
	if l := tc.Limits; l != nil {
		p.Limits = &clusterpb.Limits{Memory: l.Memory, CpuTimeNs: int64(l.CPUTime), Processes: int64(l.Processes)}
	}
	return p
}

// decodeTC rebuilds a ToolContext; an allowlist that does not parse (an
// executor older or newer than the front) is an error, never no network
// where network was asked for or the reverse.
func decodeTC(p *clusterpb.ToolContext) (engine.ToolContext, error) {
	if p == nil {
		return engine.ToolContext{}, nil
	}
	tc := engine.ToolContext{
		WorkingDir: p.WorkingDir, ConversationID: p.ConversationId, Principal: p.Principal,
		Env: p.Env, Approved: p.Approved, CallID: p.CallId,
		Sandbox: engine.Sandbox{Profile: engine.Profile(p.SandboxProfile), Writable: p.Writable},
		Turn:    p.Turn, UndoTurn: p.UndoTurn, UndoPaths: p.UndoPaths, Redo: p.Redo, Review: p.Review,
		OutputMax: int(p.OutputMax),
	}
	tc.Sandbox.Network = p.AllowNet
	if l := p.Limits; l != nil {
		tc.Limits = &config.Limits{Memory: l.Memory, CPUTime: time.Duration(l.CpuTimeNs), Processes: int(l.Processes)}
	}
	return tc, nil
}

func encodeResult(r engine.Result) *clusterpb.Result {
	kind, text := encodeErr(r.Err)
	p := &clusterpb.Result{
		Status: string(r.Status), Signal: r.Signal, Output: r.Output, Truncated: r.Truncated,
		OutputBytes: r.OutputBytes, FullOutputFile: r.FullOutputFile, DurationMs: r.DurationMS,
		QueuedMs: r.QueuedMS, Command: r.Command, Display: r.Display, Pid: int64(r.PID),
		OutputFile: r.OutputFile, JobId: r.JobID, ErrKind: kind, Err: text,
		CpuMs: r.CPUMS, PeakMemoryBytes: r.PeakMemoryBytes, Processes: int64(r.Processes), OomKilled: r.OOMKilled,
		Changes: encodeChanges(r.Changes), ChangesOmitted: int64(r.ChangesOmitted), Refused: encodeRefused(r.Refused),
		Held: encodeHeld(r.Held),
	}
	if r.ExitCode != nil {
		c := int64(*r.ExitCode)
		p.ExitCode = &c
	}
	return p
}

func decodeResult(p *clusterpb.Result) engine.Result {
	if p == nil {
		return engine.Result{Status: engine.StatusError, Output: engine.ErrorText(errors.New("empty result from executor"))}
	}
	r := engine.Result{
		Status: engine.Status(p.Status), Signal: p.Signal, Output: p.Output, Truncated: p.Truncated,
		OutputBytes: p.OutputBytes, FullOutputFile: p.FullOutputFile, DurationMS: p.DurationMs,
		QueuedMS: p.QueuedMs, Command: p.Command, Display: p.Display, PID: int(p.Pid),
		OutputFile: p.OutputFile, JobID: p.JobId, Err: decodeErr(p.ErrKind, p.Err),
		Usage: engine.Usage{CPUMS: p.CpuMs, PeakMemoryBytes: p.PeakMemoryBytes, Processes: int(p.Processes), OOMKilled: p.OomKilled},
		ChangeSet: engine.ChangeSet{Changes: decodeChanges(p.Changes), ChangesOmitted: int(p.ChangesOmitted), Refused: decodeRefused(p.Refused),
			Held: decodeHeld(p.Held)},
	}
	if p.ExitCode != nil {
		c := int(*p.ExitCode)
		r.ExitCode = &c
	}
	return r
}

func encodeJob(j engine.JobInfo) *clusterpb.JobInfo {
	p := &clusterpb.JobInfo{
		JobId: j.JobID, Pid: int64(j.PID), Command: j.Command, Display: j.Display,
		ConversationId: j.ConversationID, Status: string(j.Status), Reason: j.Reason,
		StartedUnixNs: unixNano(j.Started), EndedUnixNs: unixNano(j.Ended), Bytes: j.Bytes, OutputFile: j.OutputFile,
		CpuMs: j.CPUMS, PeakMemoryBytes: j.PeakMemoryBytes, Processes: int64(j.Processes), OomKilled: j.OOMKilled,
		Tty: j.TTY, Changes: encodeChanges(j.Changes), ChangesOmitted: int64(j.ChangesOmitted),
		Refused: encodeRefused(j.Refused), ChangeReport: j.ChangeReport, Held: encodeHeld(j.Held),
	}
	if j.ExitCode != nil {
		c := int64(*j.ExitCode)
		p.ExitCode = &c
	}
	return p
}

func decodeJob(p *clusterpb.JobInfo) engine.JobInfo {
	if p == nil {
		return engine.JobInfo{}
	}
	j := engine.JobInfo{
		JobID: p.JobId, PID: int(p.Pid), Command: p.Command, Display: p.Display,
		ConversationID: p.ConversationId, Status: engine.JobStatus(p.Status), Reason: p.Reason,
		Started: fromUnixNano(p.StartedUnixNs), Ended: fromUnixNano(p.EndedUnixNs), Bytes: p.Bytes, OutputFile: p.OutputFile,
		Usage: engine.Usage{CPUMS: p.CpuMs, PeakMemoryBytes: p.PeakMemoryBytes, Processes: int(p.Processes), OOMKilled: p.OomKilled},
		TTY:   p.Tty, ChangeSet: engine.ChangeSet{Changes: decodeChanges(p.Changes), ChangesOmitted: int(p.ChangesOmitted), Refused: decodeRefused(p.Refused),
			Held: decodeHeld(p.Held)},
		ChangeReport: p.ChangeReport,
	}
	if p.ExitCode != nil {
		c := int(*p.ExitCode)
		j.ExitCode = &c
	}
	return j
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

func encodeChanges(cs []engine.Change) []*clusterpb.Change {
	var out []*clusterpb.Change
	for _, c := range cs {
		out = append(out, &clusterpb.Change{Path: c.Path, Kind: c.Kind, Size: c.Size, Reason: c.Reason})
	}
	return out
}

func decodeChanges(cs []*clusterpb.Change) []engine.Change {
	var out []engine.Change
	for _, c := range cs {
		out = append(out, engine.Change{Path: c.Path, Kind: c.Kind, Size: c.Size, Reason: c.Reason})
	}
	return out
}

func encodeRefused(rs []engine.Refusal) []*clusterpb.Refusal {
	var out []*clusterpb.Refusal
	for _, r := range rs {
		out = append(out, &clusterpb.Refusal{Path: r.Path, Rule: r.Rule, Reason: r.Reason})
	}
	return out
}

func decodeRefused(rs []*clusterpb.Refusal) []engine.Refusal {
	var out []engine.Refusal
	for _, r := range rs {
		out = append(out, engine.Refusal{Path: r.Path, Rule: r.Rule, Reason: r.Reason})
	}
	return out
}

// encodeHeld is a held change set on the wire (nil: none).
func encodeHeld(h *engine.HeldChanges) *clusterpb.Held {
	if h == nil {
		return nil
	}
	return &clusterpb.Held{Id: int64(h.ID), Digest: h.Digest, Command: h.Command, Changes: encodeChanges(h.Changes), ChangesOmitted: int64(h.ChangesOmitted)}
}

// decodeHeld is encodeHeld's reverse; Changes is never nil, as the
// engine's.
func decodeHeld(p *clusterpb.Held) *engine.HeldChanges {
	if p == nil {
		return nil
	}
	h := &engine.HeldChanges{ID: int(p.Id), Digest: p.Digest, Command: p.Command, Changes: decodeChanges(p.Changes), ChangesOmitted: int(p.ChangesOmitted)}
	if h.Changes == nil {
		h.Changes = []engine.Change{}
	}
	return h
}
