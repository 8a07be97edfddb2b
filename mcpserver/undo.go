package mcpserver

import (
	"context"
	"encoding/json"
	"errors"

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

// addUndo registers bash_undo.
func (s *server) addUndo(ms *mcp.Server, u undoer) {
	yes := true
	s.addTool(ms, toolUndo, "Undo the last commands' changes",
		"Restore the workspace to before the last `steps` (default 1) sandboxed commands of this conversation "+
			"that changed it (commands that changed nothing do not count; a background job's changes count as it applied them). "+
			"It refuses, changing nothing, when a file those commands changed was changed again since, and names the files.",
		undoInputSchema, undoOutputSchema, mcp.ToolAnnotations{DestructiveHint: &yes},
		handle(s, parseUndoArgs, func(c *toolCall, steps int) (*mcp.CallToolResult, error) {
			r, err := u.Undo(c.ctx, c.tc, steps)
			if err != nil {
				return nil, err
			}
			return s.reply(c, r.Text(), r), nil
		}))
}

// parseUndoArgs decodes bash_undo's arguments: steps, at least 1
// (default 1).
func parseUndoArgs(raw json.RawMessage) (int, error) {
	m, err := decodeObject(raw, "steps")
	if err != nil {
		return 0, err
	}
	n, present, err := intField(m, "steps")
	switch {
	case err != nil:
		return 0, err
	case !present:
		return 1, nil
	case n < 1 || n > maxUndoSteps:
		return 0, errors.New(`field "steps" must be from 1 to 1000`)
	}
	return int(n), nil
}

// maxUndoSteps bounds bash_undo's steps (a store keeps fewer anyway).
const maxUndoSteps = 1000

const undoInputSchema = `{
  "type": "object",
  "properties": {
    "steps": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 1, "description": "How many of the last commands that changed the workspace to take back."}
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
    "steps": {"type": "integer", "minimum": 1, "description": "Commands whose changes were taken back."},
    "changes": {"type": "array", "items": ` + changeSchema + `, "description": "What the undo changed (an undone addition is D)."},
    "changes_omitted": {"type": "integer", "minimum": 0}
  },
  "required": ["steps", "changes"]
}`
