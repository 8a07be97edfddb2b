package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/engine"
)

// toolReview is the tool that lists, accepts and rejects the change sets
// of the conversation held for review (engine.Engine's Held and Review);
// [New] registers it when its engine.Runner has them and the sandbox is
// workspace-write.
//
// Accepting is a person's decision, not the model's: a client with
// elicitation asks its user (the held changes and their digest shown)
// before anything is applied, and a decline or a dismissal applies
// nothing; a client without elicitation is trusted to ask its user
// before it runs the tool call (the tool is marked destructive).
const toolReview = "bash_review"

// reviewer is a Runner that holds change sets for review (engine.Engine).
type reviewer interface {
	Held(ctx context.Context, tc engine.ToolContext) ([]engine.HeldChanges, error)
	Review(ctx context.Context, tc engine.ToolContext, id int, digest string, accept bool) (engine.Result, error)
}

// addReview registers bash_review when r holds change sets and opts
// runs workspace-write commands.
func (s *server) addReview(ms *mcp.Server, r engine.Runner, opts Options) {
	rv, ok := r.(reviewer)
	if !ok || opts.Sandbox.Profile != engine.WorkspaceWrite {
		return
	}
	yes := true
	s.addTool(ms, toolReview, "Review held changes",
		"List (action \"list\"), accept or reject the changes of this conversation's commands that are held for review instead of "+
			"applied to the workspace (a command's result names them: what policy does not prove harmless, such as git hooks and "+
			"configuration that runs programs; in the hold review mode everything). Accepting applies exactly the held changes "+
			"the digest names, after the user approves them; it is refused when they changed since they were listed.",
		reviewInputSchema, reviewOutputSchema, mcp.ToolAnnotations{DestructiveHint: &yes},
		handle(s, parseReviewArgs, func(c *toolCall, a reviewArgs) (*mcp.CallToolResult, error) {
			return s.review(c, rv, a)
		}))
}

// reviewArgs are bash_review's decoded arguments.
type reviewArgs struct {
	action string // "list", "accept" or "reject"
	id     int
	digest string
}

// reviewReply is bash_review's structured content.
type reviewReply struct {
	// Held are the held change sets (action "list").
	Held []engine.HeldChanges `json:"held,omitempty"`
	// Status and Output are the accept's or reject's; Changes what an
	// accept applied.
	Status  engine.Status   `json:"status,omitempty"`
	Output  string          `json:"output,omitempty"`
	Changes []engine.Change `json:"changes,omitempty"`
}

// review runs one bash_review call.
func (s *server) review(c *toolCall, rv reviewer, a reviewArgs) (*mcp.CallToolResult, error) {
	if a.action == "list" {
		hs, err := rv.Held(c.ctx, c.tc)
		if err != nil {
			return nil, err
		}
		return s.reply(c, heldText(hs), reviewReply{Held: hs}), nil
	}
	if a.action == "accept" && s.canElicit(c.req) {
		switch res, answer := s.askReview(c, rv, a); {
		case res != nil: // applied, refused, or a multi-round-trip input request
			return res, nil
		case answer != "": // declined, dismissed, or the question failed
			out := "[the user did not accept held change set " + strconv.Itoa(a.id) + "; it stays held]"
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out}}, IsError: true}, nil
		}
	}
	return s.decideReview(c, rv, a)
}

// decideReview accepts or rejects, as a asks.
func (s *server) decideReview(c *toolCall, rv reviewer, a reviewArgs) (*mcp.CallToolResult, error) {
	r, err := rv.Review(c.ctx, c.tc, a.id, a.digest, a.action == "accept")
	if err != nil {
		return nil, err
	}
	return s.reply(c, r.Output, reviewReply{Status: r.Status, Output: r.Output, Changes: r.Changes}), nil
}

// askReview asks the user whether to accept held change set a.id. It
// returns the call's result when it has one (the accept's, a refusal
// when the set cannot be listed or is not the one named, or a
// multi-round-trip input request), or the user's answer.
func (s *server) askReview(c *toolCall, rv reviewer, a reviewArgs) (*mcp.CallToolResult, string) {
	in := engine.Input{Command: toolReview + " accept " + strconv.Itoa(a.id) + " " + a.digest}
	if res, _ := c.req.Params.InputResponses[approvalKey].(*mcp.ElicitResult); res != nil {
		if !s.verify(c.req.Params.RequestState, c.tc, in) {
			return nil, "decline"
		}
		return s.answered(c, rv, a, res.Action)
	}
	// Never accept without the user's answer: a set that cannot be
	// listed, or is not the one named, is refused without asking.
	hs, err := rv.Held(c.ctx, c.tc)
	if err != nil {
		return errorResult(fmt.Errorf("the held change sets could not be listed, so the user was not asked; nothing was applied: %w", err)), "decline"
	}
	var held *engine.HeldChanges
	for i := range hs {
		if hs[i].ID == a.id && hs[i].Digest == a.digest {
			held = &hs[i]
		}
	}
	if held == nil {
		return errorResult(fmt.Errorf("%w: no held change set %d has digest %s (list them again and review what they are now); nothing was applied", engine.ErrBadInput, a.id, a.digest)), "decline"
	}
	params := &mcp.ElicitParams{
		Mode:            "form",
		Message:         "The bash tool's command " + strconv.Quote(held.Command) + " made changes that are held for review:\n\n" + heldText([]engine.HeldChanges{*held}) + "\n\nAccept to apply exactly these changes to the workspace; decline to leave them held.",
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}},
	}
	if usesMultiRoundTrip(c.req) {
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{approvalKey: params},
			RequestState:  s.sign(c.tc, in, time.Now().Add(approvalTTL)),
		}, ""
	}
	res, err := c.req.Session.Elicit(c.ctx, params)
	if err != nil {
		s.log.Warn("elicitation failed; the held changes stay held", "err", err)
		return nil, "decline"
	}
	return s.answered(c, rv, a, res.Action)
}

// answered applies the user's answer to an accept.
func (s *server) answered(c *toolCall, rv reviewer, a reviewArgs, action string) (*mcp.CallToolResult, string) {
	if action != "accept" {
		return nil, action
	}
	res, err := s.decideReview(c, rv, a)
	if err != nil {
		return errorResult(err), action
	}
	return res, action
}

// heldText lists held change sets for the model and the user.
func heldText(hs []engine.HeldChanges) string {
	if len(hs) == 0 {
		return "[nothing is held for review]"
	}
	var b strings.Builder
	for i, h := range hs {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "[held change set %d of %q, digest %s:]", h.ID, h.Command, h.Digest)
		for _, c := range h.Changes {
			fmt.Fprintf(&b, "\n%s %s (%s)", c.Kind, c.Path, c.Reason)
		}
		if h.ChangesOmitted > 0 {
			fmt.Fprintf(&b, "\n... and %d more", h.ChangesOmitted)
		}
	}
	return b.String()
}

// parseReviewArgs decodes bash_review's arguments.
func parseReviewArgs(raw json.RawMessage) (reviewArgs, error) {
	m, err := decodeObject(raw, "action", "id", "digest")
	if err != nil {
		return reviewArgs{}, err
	}
	var a reviewArgs
	a.action, _, err = stringField(m, "action")
	if err != nil {
		return a, err
	}
	switch a.action {
	case "", "list":
		a.action = "list"
		return a, nil
	case "accept", "reject":
	default:
		return a, errors.New(`field "action" must be "list", "accept" or "reject"`)
	}
	id, present, err := intField(m, "id")
	if err != nil {
		return a, err
	}
	if !present || id < 1 {
		return a, errors.New(`field "id" must name a held change set (from "list")`)
	}
	a.id = int(id)
	if a.digest, present, err = stringField(m, "digest"); err != nil {
		return a, err
	}
	if a.action == "accept" && !present {
		return a, errors.New(`field "digest" is required to accept: the digest of the held changes as listed`)
	}
	return a, nil
}

const reviewInputSchema = `{
  "type": "object",
  "properties": {
    "action": {"type": "string", "enum": ["list", "accept", "reject"], "default": "list", "description": "list the held change sets, or accept or reject one."},
    "id": {"type": "integer", "minimum": 1, "description": "accept, reject: the held change set's id, from list or the command's result."},
    "digest": {"type": "string", "description": "accept: the held change set's digest as listed; accepting applies exactly what it names."}
  }
}`

// heldSchema describes [engine.HeldChanges] as JSON.
const heldSchema = `{
  "type": "object",
  "description": "workspace-write: changes held for review instead of applied (bash_review).",
  "properties": {
    "id": {"type": "integer", "minimum": 1},
    "digest": {"type": "string"},
    "command": {"type": "string"},
    "changes": {"type": "array", "items": ` + changeSchema + `},
    "changes_omitted": {"type": "integer", "minimum": 0}
  },
  "required": ["id", "digest", "command", "changes"]
}`

const reviewOutputSchema = `{
  "type": "object",
  "properties": {
    "held": {"type": "array", "items": ` + heldSchema + `},
    "status": {"type": "string"},
    "output": {"type": "string"},
    "changes": {"type": "array", "items": ` + changeSchema + `}
  }
}`
