package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/bashvisor/bashvisor/internal/jobs"
)

// A workspace-write command runs over a copy-on-write layer of its
// writable roots (package transact): when its processes are gone the
// engine applies what policy allows to the workspace, reports the
// changes (Result.Changes, and a line of the text) and the refusals
// (Result.Refused), and keeps what it replaced for Undo. A background
// job's layer is applied at checkpoints while it runs (with it frozen:
// its cgroup, or without cgroups its processes stopped, see
// proc.Freezer) and when it ends; while it runs, the conversation's
// later workspace-write commands join its layer (root and unprivileged:
// see transact's "Shared layers"), and report what the checkpoint
// taken at their end applied.

// Change is one path a workspace-write command changed in the
// workspace.
type Change struct {
	// Path is relative to the working directory when below it, absolute
	// otherwise; a directory's ends in "/".
	Path string `json:"path"`
	// Kind is "A" (added), "M" (content, times or symlink target
	// changed), "D" (deleted; a deleted directory is one change) or "T"
	// (type, permissions or owner changed).
	Kind string `json:"kind"`
	// Size is a regular file's size in bytes after the change (before it
	// for "D").
	Size int64 `json:"size,omitempty"`
	// Reason says why a held change is held (HeldChanges only): the
	// policy rule and what is wrong, the hold review mode, or processes
	// left running over the command's layer.
	Reason string `json:"reason,omitempty"`
}

// Refusal is a change of a workspace-write command that policy kept out
// of the workspace (package gitpolicy: nothing the command leaves may
// make git run a program later, outside the sandbox).
type Refusal struct {
	// Path is as in Change.
	Path string `json:"path"`
	// Rule names the rule that refused it ("git-config", ...).
	Rule string `json:"rule"`
	// Reason says what is wrong with it.
	Reason string `json:"reason"`
}

// maxChanges bounds Result.Changes and JobInfo.Changes; the rest is
// counted in ChangesOmitted.
const maxChanges = 1000

// changes converts applied changes for the API, relative to cwd, the
// listed ones only (an added directory shows as its files), at most
// maxChanges; it returns how many it left out.
func changes(c jobs.Changes, cwd string) ([]Change, int) {
	listed := listedChanges(c, cwd)
	if len(listed) > maxChanges {
		return listed[:maxChanges], len(listed) - maxChanges
	}
	return listed, 0
}

// refusals converts policy refusals for the API.
func refusals(c jobs.Changes, cwd string) []Refusal {
	if c.Report == nil || len(c.Report.Refused) == 0 {
		return nil
	}
	out := make([]Refusal, 0, len(c.Report.Refused))
	for _, r := range c.Report.Refused {
		out = append(out, Refusal{Path: rel(cwd, r.Path), Rule: string(r.Rule), Reason: r.Reason})
	}
	return out
}

// rel is p relative to base when p is base or below it, p otherwise
// (as the change lines write paths).
func rel(base, p string) string {
	if r, err := filepath.Rel(base, p); err == nil && base != "" && r != ".." && !strings.HasPrefix(r, "../") {
		return r
	}
	return p
}

// UndoResult is what Undo did.
type UndoResult struct {
	// Steps is the number of commands (and background checkpoints)
	// whose changes were taken back (or, for a redo, put back);
	// StepNumbers are their steps' numbers, as change lines name them.
	Steps       int   `json:"steps"`
	StepNumbers []int `json:"step_numbers,omitempty"`
	// Turn is the turn undone (ToolContext.UndoTurn); Redo reports a
	// redo (ToolContext.Redo).
	Turn string `json:"turn,omitempty"`
	Redo bool   `json:"redo,omitempty"`
	// Changes are what the undo changed in the workspace, as in Result
	// (an undone addition is "D", an undone deletion "A").
	Changes        []Change `json:"changes"`
	ChangesOmitted int      `json:"changes_omitted,omitempty"`
	// Report is the text the model reads of the undo, which Text
	// returns ("[undid the last command: changed 2 files: D a.txt, M
	// b.txt]"): Undo sets it, a Runner that forwards Undo to another
	// machine (cluster.Client) carries it over unchanged.
	Report string `json:"-"`
}

// UndoConflictError is Undo's refusal: the paths (absolute, sorted)
// changed after the commands to undo, by the user or by a later command
// that is not undone with them. Nothing was undone. It matches
// ErrUndoConflict.
type UndoConflictError struct {
	Paths []string
}

func (e *UndoConflictError) Unwrap() error { return ErrUndoConflict }

// Undo restores the workspace to before the last steps commands of tc's
// conversation that changed it (workspace-write commands, and the
// checkpoints of its background jobs; commands that changed nothing do
// not count), newest first; with tc.UndoTurn, UndoPaths or Redo set it
// takes back a turn's steps, one step's paths, or the last undo instead
// (see ToolContext). It refuses with an *UndoConflictError, changing
// nothing, when something changed those paths since, and with
// ErrNothingToUndo when fewer steps are kept (the store keeps the last
// ones within its bounds, and is removed with the conversation), or
// there is nothing to redo. It refuses too, matching ErrUndoConflict,
// to undo changes applied from the layer of a background job that
// still runs (its checkpoints, and the commands that joined its layer:
// see transact.ErrUndoLive). ctx bounds its waits for another apply,
// undo or review of the conversation, and for another engine's apply
// to the workspace: when it ends during one, Undo changes nothing (the
// steps stay kept, to undo again) and fails with an error wrapping
// ctx's. An undo that cannot restore a path (an immutable directory, a
// disk error) stops there: its error names the paths it restored
// before, and what it did not restore stays kept, so that Undo again
// finishes it.
func (e *Engine) Undo(ctx context.Context, tc ToolContext, steps int) (UndoResult, error) {
	sel, err := selection(tc, steps)
	if err != nil {
		return UndoResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return UndoResult{}, err
	}
	if !e.sup.Layers() {
		return UndoResult{}, fmt.Errorf("%w: this engine runs no workspace-write commands", ErrNothingToUndo)
	}
	undone, ns, kept, err := e.sup.Revert(ctx, tc.ConversationID, sel)
	if err != nil {
		return UndoResult{}, stoppedError(revertError(err, sel, kept), undone, tc.WorkingDir)
	}
	r := UndoResult{Steps: len(ns), StepNumbers: ns, Turn: sel.Turn, Redo: sel.Redo}
	if r.Changes, r.ChangesOmitted = changes(undone, tc.WorkingDir); r.Changes == nil {
		r.Changes = []Change{}
	}
	r.Report = revertText(sel, ns, undone, tc.WorkingDir)
	return r, nil
}
