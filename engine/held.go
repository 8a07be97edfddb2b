package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/bashvisor/bashvisor/internal/jobs"
	"github.com/bashvisor/bashvisor/internal/supervisor"
	"github.com/bashvisor/bashvisor/safety"
)

// What a workspace-write command changed that is not applied is held
// for review, not dropped: what policy refused (package gitpolicy), in
// the hold review mode everything, and the changes of a command that
// left processes running over its layer. The result says which paths
// are held and why (ChangeSet.Held, and a line each in the text) and
// how to review them; Held lists a conversation's held change sets with
// a digest, and Review accepts (applies exactly what the digest names,
// as one undo step) or rejects one. An ended conversation's held
// changes are discarded. A conversation holds at most 64 change sets:
// a command whose changes would be one more is not held, its result
// says so (and is not ok). Accepting never overwrites what changed in
// the workspace since the command ran: it applies nothing then, naming
// the paths.

// HeldChanges is a change set of a workspace-write command held for
// review instead of applied.
type HeldChanges struct {
	// ID names it for Review, in its conversation.
	ID int `json:"id"`
	// Digest is the SHA-256 (hex) of the held changes as listed (their
	// paths, kinds, modes and contents): Review accepts only with it,
	// and refuses once they changed.
	Digest string `json:"digest"`
	// Command is the command that made them.
	Command string `json:"command"`
	// Changes are the held changes, each with its Reason (at most 1000;
	// ChangesOmitted counts the rest).
	Changes        []Change `json:"changes"`
	ChangesOmitted int      `json:"changes_omitted,omitempty"`
}

// The values of Config.Review and ToolContext.Review.
const (
	reviewApply = "apply"
	reviewHold  = "hold"
)

// hold reports whether tc's commands are held in full (the hold review
// mode), or an error for an unknown mode.
func (e *Engine) hold(tc ToolContext) (bool, error) {
	mode := tc.Review
	if mode == "" {
		mode = e.cfg.Review
	}
	switch mode {
	case "", reviewApply:
		return false, nil
	case reviewHold:
		return true, nil
	}
	return false, fmt.Errorf("%w: review mode must be %q or %q, not %q", ErrBadInput, reviewApply, reviewHold, mode)
}

// heldOfChanges converts the held change set of a job's changes for
// the API, paths relative to cwd (nil: none).
func heldOfChanges(c jobs.Changes, cwd string) *HeldChanges {
	if c.Report == nil || c.Report.Held == nil {
		return nil
	}
	h := c.Report.Held
	out := &HeldChanges{ID: h.ID, Digest: h.Digest, Command: h.Label, Changes: []Change{}}
	listed := h.Listed()
	for _, c := range listed[:min(len(listed), maxChanges)] {
		out.Changes = append(out.Changes, Change{Path: c.Display(cwd), Kind: string(c.Kind), Size: c.Size, Reason: h.Reason(c.Path)})
	}
	out.ChangesOmitted = len(listed) - len(out.Changes)
	return out
}

// maxHeldLines bounds the held paths a result's text names.
const maxHeldLines = 20

// heldNotes are the lines of a change report about held changes: one
// per held path (a refused directory is one path) with its reason,
// except the refused ones, whose refused lines name them already, and
// how to review them ("" when none).
func heldNotes(c jobs.Changes, cwd string) string {
	if c.Report != nil && c.Report.Unheld != "" {
		return "[the changes to hold were not held, and are discarded: " + c.Report.Unheld + " (bash_review)]"
	}
	if c.Report == nil || c.Report.Held == nil {
		return ""
	}
	h := c.Report.Held
	// A refused path has its line already, with the rule and what to do.
	named := map[string]bool{}
	for _, r := range c.Report.Refused {
		named[r.Path] = true
	}
	var paths []string
	for _, p := range slices.Sorted(maps.Keys(h.Reasons)) {
		if !named[p] {
			paths = append(paths, p)
		}
	}
	var lines []string
	for i, p := range paths {
		if i == maxHeldLines {
			lines = append(lines, fmt.Sprintf("[held: %d more paths]", len(paths)-i))
			break
		}
		lines = append(lines, "[held: "+rel(cwd, p)+" ("+h.Reasons[p]+")]")
	}
	what := "these changes are"
	if len(named) > 0 {
		what = "the refused changes are"
		if len(paths) > 0 {
			what = "these and the refused changes are"
		}
	}
	lines = append(lines, "["+what+" held, not applied: a person reviews them (bash_review, id "+strconv.Itoa(h.ID)+", digest "+h.Digest+"); accepting applies exactly them]")
	return strings.Join(lines, "\n")
}

// Held lists the change sets of tc's conversation held for review,
// oldest first, as they are now (each digest taken afresh).
func (e *Engine) Held(ctx context.Context, tc ToolContext) ([]HeldChanges, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !e.sup.Layers() {
		return []HeldChanges{}, nil
	}
	hs, err := e.sup.Held(ctx, tc.ConversationID)
	if err != nil {
		return nil, public(err)
	}
	out := make([]HeldChanges, 0, len(hs))
	for _, c := range hs {
		out = append(out, *heldOfChanges(c, tc.WorkingDir))
	}
	return out, nil
}

// ErrStray: [Engine.Review] cannot accept held changes of a command that
// left processes running over its layer (they may still change them):
// reject them, or run the command again. The error matches ErrBadInput
// too.
var ErrStray = errors.New("the held changes' command left processes that may still change them")

// Review accepts or rejects held change set id of tc's conversation.
// Accepting applies exactly the changes digest names (HeldChanges.Digest
// of a listing: when they changed since, it refuses, matching
// ErrBadInput, and applies nothing) as one undo step; the result's
// Changes and text say what it applied. Rejecting discards them. An id
// that names no held change set (reviewed already, or of an ended
// conversation) matches ErrBadInput too, as does accepting the held
// changes of a command that left processes running (they may still
// change: reject them, or run the command again; it matches ErrStray
// too), and accepting held changes whose paths changed in the workspace
// since the command ran (a later edit, which accepting would overwrite:
// nothing is applied; reject them, or put the paths back and accept
// again): that error is also an *UndoConflictError naming the paths,
// and matches ErrUndoConflict, as a refused undo does.
func (e *Engine) Review(ctx context.Context, tc ToolContext, id int, digest string, accept bool) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if !e.sup.Layers() {
		return Result{}, fmt.Errorf("%w: this engine holds no changes", ErrBadInput)
	}
	command := ""
	if hs, err := e.sup.Held(ctx, tc.ConversationID); err == nil {
		for _, c := range hs {
			if c.Report.Held.ID == id {
				command = c.Report.Held.Label
			}
		}
	}
	applied, err := e.sup.Review(ctx, tc.ConversationID, tc.Principal, id, digest, accept)
	var conflict *supervisor.UndoConflictError // the held paths changed since
	switch {
	case errors.Is(err, supervisor.ErrNoHeld):
		return Result{}, fmt.Errorf("%w: no held change set %d in this conversation (reviewed already, or never held)", ErrBadInput, id)
	case errors.Is(err, supervisor.ErrStray):
		return Result{}, &layerError{public: ErrStray, err: fmt.Errorf("%w: held change set %d is of a command that left processes running, which may still change it, so it cannot be accepted: reject it, or run the command again; nothing was applied", ErrBadInput, id)}
	case errors.Is(err, supervisor.ErrDigest):
		return Result{}, fmt.Errorf("%w: held change set %d is not what the digest names any more: list it again and review what it is now; nothing was applied", ErrBadInput, id)
	case errors.As(err, &conflict):
		return Result{}, &layerError{public: &UndoConflictError{Paths: conflict.Paths}, err: fmt.Errorf("%w: held change set %d: the workspace changed since the command ran at %s; accepting would overwrite that, so nothing was applied: reject it (and run the command again if its changes are still wanted)", ErrBadInput, id, conflictNames(conflict.Paths, tc.WorkingDir))}
	case err != nil:
		return Result{}, public(err)
	}
	res := Result{Status: StatusOK, Command: command, Display: command}
	if !accept {
		res.Output = fmt.Sprintf("[rejected held change set %d: its changes are discarded]", id)
		return res, nil
	}
	res.Changes, res.ChangesOmitted = changes(applied, tc.WorkingDir)
	res.Output = fmt.Sprintf("[accepted held change set %d]", id)
	if notes := changeNotes(applied, tc.WorkingDir); notes != "" {
		res.Output += "\n" + notes
	}
	return res, nil
}

// conflictNames names paths relative to cwd, at most five.
func conflictNames(paths []string, cwd string) string {
	var names []string
	for _, p := range paths[:min(len(paths), 5)] {
		names = append(names, rel(cwd, p))
	}
	if len(paths) > 5 {
		names = append(names, fmt.Sprintf("and %d more", len(paths)-5))
	}
	return strings.Join(names, ", ")
}

// onHeld offers a result's held change set to Config.OnHeld, and
// applies it when that accepts; the result then reports it.
func (e *Engine) onHeld(ctx context.Context, tc ToolContext, res *Result) {
	if e.cfg.OnHeld == nil || res.Held == nil {
		return
	}
	h := *res.Held
	if !e.cfg.OnHeld(ctx, tc, h) {
		return
	}
	r, err := e.Review(ctx, tc, h.ID, h.Digest, true)
	if err != nil {
		res.Output = appendNote(res.Output, "[the held changes were accepted but not applied: "+err.Error()+"]")
		return
	}
	res.Held = nil
	res.Changes = append(res.Changes, r.Changes...)
	res.Output = appendNote(res.Output, r.Output)
}

// contained reports whether command, which the analysis asks about,
// may run without asking because whatever it changes is reviewed after
// it ran (approve the result, not the command), and whether all it
// changes is then held for review. It may when every ask is one for what
// the command does in the workspace (safety.Outcome.Contained: the safety
// rules' asks, and a permission profile's Contained rules, such as
// guarded's writes, file operations and the agent's own code) and the
// command runs in workspace-write over a layer with no network
// allowlist (and no job of its conversation with one running: the
// world's network namespace is shared), no writable roots besides the workspace, and signals scoped
// to it (Landlock), so that none of its effects leaves the layer and the
// conversation's world. Such a command (jobs.Profile.Contained) also
// gets no TCP in the world's shared network, so a network job started
// after it gives it nothing, and a throwaway view of /tmp and the caches
// (sandbox.Options.NoTCP, ThrowawayCaches). When a permission profile asked, everything it
// changed is held (the hold review mode for that command): a person
// reviews the result instead of the command. When only the safety rules
// asked, the change set is judged like any other (what policy proves
// inert applies, the rest is held). Everything else asks as before: a
// profile's rule that is not Contained (publishing, deploying, the
// system, privilege), any ask outside workspace-write, a denial, a block.
func (e *Engine) contained(tc ToolContext, a safety.Analysis, command string) (run, hold bool) {
	if a.Outcome.Decision != safety.Ask || !a.Outcome.Contained || tc.Approved {
		return false, false
	}
	s := tc.Sandbox
	if s.Profile != WorkspaceWrite || e.noLayer || len(s.Network) > 0 || len(s.Writable) > 0 || !e.sup.Layers() {
		return false, false
	}
	if caps := e.sup.Sandbox(); !caps.Available() || !caps.Namespaces || !caps.Scoping {
		return false, false
	}
	// The world's network namespace is the conversation's: while a job
	// with a network grant runs, it holds that job's egress proxy,
	// resolver and carried listeners, which a contained command must
	// not reach. It asks instead.
	for _, j := range e.sup.Jobs(tc.ConversationID) {
		if j.Running() && j.Network {
			return false, false
		}
	}
	if p := e.cfg.Permissions; p != nil {
		if d, _ := p.Evaluate(command); d != safety.Allow {
			return true, true
		}
	}
	return true, false
}
