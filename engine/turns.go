package engine

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/bashvisor/bashvisor/internal/jobs"
	"github.com/bashvisor/bashvisor/internal/supervisor"
)

// Turns: a client names its turn (ToolContext.Turn); each undo step
// records it, and Undo takes back a turn, one step's paths, or redoes
// (ToolContext.UndoTurn, UndoPaths, Redo).

// selection is what Undo takes back for tc and steps.
func selection(tc ToolContext, steps int) (supervisor.Selection, error) {
	n := 0
	for _, set := range []bool{tc.UndoTurn != "", len(tc.UndoPaths) > 0, tc.Redo} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return supervisor.Selection{}, fmt.Errorf("%w: set at most one of UndoTurn, UndoPaths and Redo", ErrBadInput)
	case tc.UndoTurn != "":
		return supervisor.Selection{Turn: tc.UndoTurn}, nil
	case tc.Redo:
		return supervisor.Selection{Redo: true}, nil
	case len(tc.UndoPaths) > 0:
		var paths []string
		for _, p := range tc.UndoPaths {
			if p == "" {
				return supervisor.Selection{}, fmt.Errorf("%w: an empty path to undo", ErrBadInput)
			}
			if !filepath.IsAbs(p) {
				p = filepath.Join(tc.WorkingDir, p)
			}
			paths = append(paths, filepath.Clean(p))
		}
		return supervisor.Selection{Paths: paths}, nil
	case steps < 1:
		return supervisor.Selection{}, fmt.Errorf("%w: steps must be at least 1", ErrBadInput)
	}
	return supervisor.Selection{Steps: steps}, nil
}

// revertError words Undo's refusals.
func revertError(err error, sel supervisor.Selection, kept int) error {
	switch {
	case errors.Is(err, supervisor.ErrUndoLive):
		return fmt.Errorf("%w: the changes to undo are still in the layer of a background job that runs (it, and the commands that join its layer, would go on seeing them and apply them again): end the job (bash_kill) first", ErrUndoConflict)
	case errors.Is(err, supervisor.ErrNothingToUndo) && sel.Redo:
		return fmt.Errorf("%w: nothing to redo (an undo can be redone until the next change lands)", ErrNothingToUndo)
	case errors.Is(err, supervisor.ErrNothingToUndo) && sel.Turn != "":
		return fmt.Errorf("%w: no kept step of turn %q", ErrNothingToUndo, sel.Turn)
	case errors.Is(err, supervisor.ErrNothingToUndo) && len(sel.Paths) > 0:
		return fmt.Errorf("%w: %s", ErrNothingToUndo, strings.TrimPrefix(err.Error(), "layer: not that many steps to undo: "))
	case errors.Is(err, supervisor.ErrNothingToUndo):
		return fmt.Errorf("%w: %d %s asked for, %d kept", ErrNothingToUndo, sel.Steps, plural(sel.Steps, "step", "steps"), kept)
	}
	return public(err)
}

// stoppedError is err, of an undo or redo that stopped at a path it could
// not restore, with what it restored before (undone) named: each path is
// restored whole or not at all, and what was not restored stays kept, so
// running it again finishes it (layer's Undo).
func stoppedError(err error, undone jobs.Changes, cwd string) error {
	cs, omitted := changes(undone, cwd)
	if len(cs) == 0 {
		return err
	}
	names := make([]string, 0, len(cs))
	for _, c := range cs {
		names = append(names, c.Kind+" "+c.Path)
	}
	if omitted > 0 {
		names = append(names, fmt.Sprintf("and %d more", omitted))
	}
	return fmt.Errorf("%w (it stopped there, after it restored %s; the rest stays kept: run it again to finish)", err, strings.Join(names, ", "))
}

// revertText is the model's text of an undo or redo: "[undid turn t3
// (steps 4, 5, 7): changed 2 files: …]", "[undid a.txt of step 7: …]",
// "[redid step 7: …]".
func revertText(sel supervisor.Selection, ns []int, undone jobs.Changes, cwd string) string {
	what := "the last command"
	switch {
	case sel.Redo:
		what = "redid " + stepsText(ns)
	case sel.Turn != "":
		what = "undid turn " + sel.Turn + " (" + stepsText(ns) + ")"
	case len(sel.Paths) > 0:
		var names []string
		for _, p := range sel.Paths {
			names = append(names, rel(cwd, p))
		}
		what = "undid " + strings.Join(names, ", ") + " of " + stepsText(ns)
	default:
		if sel.Steps > 1 {
			what = fmt.Sprintf("the last %d commands", sel.Steps)
		}
		what = "undid " + what
	}
	line := changeLine(undone, cwd, !sel.Redo)
	if line == "" {
		return "[" + what + ": nothing to put back]"
	}
	return "[" + what + ": " + strings.TrimPrefix(line, "[")
}

// stepsText names steps: "step 7", "steps 4, 5, 7".
func stepsText(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return plural(len(ns), "step ", "steps ") + strings.Join(s, ", ")
}

// stepNote is what a change line adds about its undo step when the
// call named a turn: " (step 7, turn t3)"; "" otherwise (a client that
// names no turns reads the line as before), and when the command made
// no step.
func stepNote(c jobs.Changes) string {
	if c.Report == nil || c.Report.Step == 0 || c.Report.Turn == "" {
		return ""
	}
	return fmt.Sprintf(" (step %d, turn %s)", c.Report.Step, c.Report.Turn)
}
