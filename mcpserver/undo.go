package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/engine"
)

// toolUndo is the tool that takes back what the last workspace-write
// commands of the conversation changed; [New] registers it when its
// engine.Runner has Engine's Undo method (undoer).
const toolUndo = "bash_undo"

// undoer is a Runner that undoes (engine.Engine, cluster.Client).
type undoer interface {
	Undo(ctx context.Context, tc engine.ToolContext, steps int) (engine.UndoResult, error)
}

// addUndo registers bash_undo and bash_redo.
func (s *server) addUndo(ms *mcp.Server, u undoer) {
	yes := true
	s.addTool(ms, toolUndo, "Undo the last commands' changes",
		"Restore the workspace to before the last `steps` (default 1) sandboxed commands of this conversation "+
			"that changed it (commands that changed nothing do not count; a background job's changes count as it applied them); "+
			"or, with `turn`, every command of that turn (as a change line names it: \"(step 7, turn t3)\"); "+
			"or, with `paths`, only those files of the last command that changed them. "+
			"It refuses, changing nothing, when a file those commands changed was changed again since, and names the files. "+
			"bash_redo puts back what an undo took back, until the next change.",
		undoInputSchema, undoOutputSchema, mcp.ToolAnnotations{DestructiveHint: &yes},
		handle(s, parseUndoArgs, func(c *toolCall, a undoArgs) (*mcp.CallToolResult, error) {
			tc := c.tc
			tc.UndoTurn, tc.UndoPaths = a.turn, a.paths
			r, err := u.Undo(c.ctx, tc, a.steps)
			if err != nil {
				return nil, err
			}
			return s.reply(c, r.Text(), r), nil
		}))
	s.addRedo(ms, u)
}

// undoArgs are bash_undo's arguments: at most one of steps (at least
// 1, default 1), turn and paths.
type undoArgs struct {
	steps int
	turn  string
	paths []string
}

// parseUndoArgs decodes bash_undo's arguments.
func parseUndoArgs(raw json.RawMessage) (undoArgs, error) {
	m, err := decodeObject(raw, "steps", "turn", "paths")
	if err != nil {
		return undoArgs{}, err
	}
	var a undoArgs
	n, hasSteps, err := intField(m, "steps")
	switch {
	case err != nil:
		return a, err
	case hasSteps && (n < 1 || n > maxUndoSteps):
		return a, errors.New(`field "steps" must be from 1 to 1000`)
	}
	a.steps = max(int(n), 1)
	turn, hasTurn, err := stringField(m, "turn")
	switch {
	case err != nil:
		return a, err
	case hasTurn && (turn == "" || len(turn) > maxTurn):
		return a, fmt.Errorf(`field "turn" must be 1 to %d bytes`, maxTurn)
	}
	a.turn = turn
	if raw, ok := m["paths"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &a.paths); err != nil || len(a.paths) == 0 || len(a.paths) > maxUndoPaths || slices.Contains(a.paths, "") {
			return a, fmt.Errorf(`field "paths" must be 1 to %d non-empty strings`, maxUndoPaths)
		}
	}
	if k := btoi(hasSteps) + btoi(hasTurn) + btoi(len(a.paths) > 0); k > 1 {
		return a, errors.New(`give at most one of "steps", "turn" and "paths"`)
	}
	return a, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// maxUndoSteps bounds bash_undo's steps (a store keeps fewer anyway);
// maxUndoPaths its paths.
const (
	maxUndoSteps = 1000
	maxUndoPaths = 1000
)

const undoInputSchema = `{
  "type": "object",
  "properties": {
    "steps": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 1, "description": "How many of the last commands that changed the workspace to take back."},
    "turn": {"type": "string", "minLength": 1, "maxLength": 256, "description": "Take back every command of this turn (all or nothing)."},
    "paths": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1, "maxItems": 1000, "description": "Take back only these files (relative to the working directory; a directory stands for what is below it) of the last command that changed them."}
  },
  "additionalProperties": false
}`

// changeSchema describes [engine.Change] as JSON.
const changeSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "Relative to the working directory when below it, else absolute; a directory's ends in /."},
    "kind": {"type": "string", "enum": ["A", "M", "D", "T"], "description": "A added, M modified, D deleted, T type, permissions or owner changed."},
    "size": {"type": "integer", "minimum": 0, "description": "A regular file's size after the change (before it for D)."},
    "reason": {"type": "string", "description": "Held changes only: why the change is held for review."}
  },
  "required": ["path", "kind"]
}`

// refusalSchema describes [engine.Refusal] as JSON.
const refusalSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string"},
    "rule": {"type": "string", "description": "The policy rule that refused the change (git-config, git-hooks, git-commondir, ...)."},
    "reason": {"type": "string"}
  },
  "required": ["path", "rule", "reason"]
}`

const undoOutputSchema = `{
  "type": "object",
  "properties": {
    "steps": {"type": "integer", "minimum": 1, "description": "Commands whose changes were taken back (put back, for bash_redo)."},
    "step_numbers": {"type": "array", "items": {"type": "integer"}, "description": "Their steps, as change lines name them."},
    "turn": {"type": "string"},
    "redo": {"type": "boolean"},
    "changes": {"type": "array", "items": ` + changeSchema + `, "description": "What the undo changed (an undone addition is D)."},
    "changes_omitted": {"type": "integer", "minimum": 0}
  },
  "required": ["steps", "changes"]
}`
