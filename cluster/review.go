package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/bashvisor/bashvisor/cluster/clusterpb"
	"github.com/bashvisor/bashvisor/engine"
)

// mcpserver's bash_review serves a fleet through these, as a local
// engine's.
var _ interface {
	Held(context.Context, engine.ToolContext) ([]engine.HeldChanges, error)
	Review(context.Context, engine.ToolContext, int, string, bool) (engine.Result, error)
} = (*Client)(nil)

// Held is engine.Engine's Held: the change sets of tc's conversation
// held for review on the executor that holds the conversation (its
// engine keeps them), as they are now. A conversation that runs on no
// executor holds none: one that never ran a command, and one whose
// executor was lost (its held changes went with it).
func (c *Client) Held(ctx context.Context, tc engine.ToolContext) ([]engine.HeldChanges, error) {
	_, r, err := c.convQuery(ctx, tc.ConversationID, "", &clusterpb.Query{Op: "held", Tc: encodeTC(tc, "")})
	switch {
	case errors.Is(err, errNotPlaced):
		return []engine.HeldChanges{}, nil
	case err != nil:
		return nil, err
	}
	out := make([]engine.HeldChanges, 0, len(r.Held))
	for _, h := range r.Held {
		out = append(out, *decodeHeld(h))
	}
	return out, nil
}

// Review is engine.Engine's Review, on the executor that holds tc's
// conversation: its answer and errors reach the caller as the engine
// gave them. A conversation that runs on no executor has no held change
// set to review (an error matching engine.ErrBadInput, and
// ErrExecutorLost when its executor was lost).
func (c *Client) Review(ctx context.Context, tc engine.ToolContext, id int, digest string, accept bool) (engine.Result, error) {
	_, r, err := c.convQuery(ctx, tc.ConversationID, "", &clusterpb.Query{Op: "review", Tc: encodeTC(tc, ""),
		HeldId: int64(id), Digest: digest, Accept: accept})
	switch {
	case errors.Is(err, errNotPlaced):
		if lost := c.lostExecutor(tc.ConversationID); lost != "" {
			return engine.Result{}, fmt.Errorf("%w: no held change set %d in this conversation (executor %s held its changes and stopped answering: %w)",
				engine.ErrBadInput, id, lost, ErrExecutorLost)
		}
		return engine.Result{}, fmt.Errorf("%w: no held change set %d in this conversation (reviewed already, or never held)", engine.ErrBadInput, id)
	case err != nil:
		return engine.Result{}, err
	}
	return decodeResult(r.Result), nil
}

// answerReview runs a held or review query m for tc into reply.
func (x *Executor) answerReview(tc engine.ToolContext, m *clusterpb.Query, reply *clusterpb.QueryReply) error {
	if m.Op == "held" {
		hs, err := x.eng.Held(x.runCtx, tc)
		for i := range hs {
			reply.Held = append(reply.Held, encodeHeld(&hs[i]))
		}
		return err
	}
	res, err := x.eng.Review(x.runCtx, tc, int(m.HeldId), m.Digest, m.Accept)
	if err == nil {
		reply.Result = encodeResult(res)
	}
	return err
}
