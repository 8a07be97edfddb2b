package mcpserver

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/engine"
)

// toolRedo puts back what the conversation's last bash_undo took back;
// registered with bash_undo.
const toolRedo = "bash_redo"

// addRedo registers bash_redo.
func (s *server) addRedo(ms *mcp.Server, u undoer) {
	yes := true
	s.addTool(ms, toolRedo, "Redo the last undo",
		"Put back what the last bash_undo of this conversation took back (all of it). "+
			"An undo can be redone until the next command changes the workspace. "+
			"It refuses, changing nothing, when a file the undo changed was changed again since, and names the files.",
		redoInputSchema, undoOutputSchema, mcp.ToolAnnotations{DestructiveHint: &yes},
		handle(s, parseRedoArgs, func(c *toolCall, _ struct{}) (*mcp.CallToolResult, error) {
			tc := c.tc
			tc.Redo = true
			r, err := u.Undo(c.ctx, tc, 1)
			if err != nil {
				return nil, err
			}
			return s.reply(c, r.Text(), r), nil
		}))
}

// parseRedoArgs decodes bash_redo's arguments: none.
func parseRedoArgs(raw json.RawMessage) (struct{}, error) {
	_, err := decodeObject(raw)
	return struct{}{}, err
}

const redoInputSchema = `{"type": "object", "properties": {}, "additionalProperties": false}`

// metaTurn is the _meta key of a tool call that names the client's turn
// (engine.ToolContext.Turn): the undo step of a bash call records it,
// and bash_undo {turn} takes back every command of one turn.
const metaTurn = "bashvisor/turn"

// maxTurn bounds a turn's name, in bytes.
const maxTurn = 256

// turnOf returns the turn a call's _meta names ("": none).
func turnOf(m mcp.Meta) (string, error) {
	v, ok := m[metaTurn]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok || len(s) > maxTurn {
		return "", fmt.Errorf("%w: _meta[%q] must be a string of at most %d bytes", engine.ErrBadInput, metaTurn, maxTurn)
	}
	return s, nil
}
