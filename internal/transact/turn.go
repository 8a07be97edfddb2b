//go:build linux

package transact

import (
	"context"
	"fmt"

	"github.com/bashvisor/bashvisor/internal/layer"
)

// The conversation's turn: its commands' applies, its undos and its
// accepts take turns (each change set is judged against the workspace
// it is applied to). The turn is a token in a channel of one, so that
// a call that waits for it (behind an accept of a big change set, an
// apply that waits for another engine) stops when its context ends.
// What only reads (Steps, Bytes, HeldBytes) reads the view the last
// holder of the turn left, and never waits for one.

// view is what [Conv.Steps], [Conv.Bytes] and [Conv.HeldBytes] return.
type view struct {
	steps []layer.StepInfo // the store's steps
	redo  int64            // what the store keeps for redo
	held  int64            // what the held change sets hold
}

// lock takes c's turn, waiting as long as it takes.
func (c *Conv) lock() { c.turn <- struct{}{} }

// lockCtx takes c's turn, waiting until ctx ends: then it fails with an
// error wrapping layer.ErrLocked and ctx's cause. A free turn is taken
// whatever ctx says (ctx bounds the wait, not the work).
func (c *Conv) lockCtx(ctx context.Context) error {
	select {
	case c.turn <- struct{}{}:
		return nil
	default:
	}
	select {
	case c.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("transact: waiting for another apply, undo or accept of the conversation: %w; stopped waiting: %w", layer.ErrLocked, context.Cause(ctx))
	}
}

// unlock records the store's view and lets the next call take c's
// turn.
func (c *Conv) unlock() {
	var steps []layer.StepInfo
	var redo int64
	if c.store != nil {
		steps, redo = c.store.Steps(), c.store.RedoBytes()
	}
	c.hmu.Lock()
	c.view.steps, c.view.redo = steps, redo
	c.hmu.Unlock()
	<-c.turn
}

// heldChanged records the held change sets' size in the view; c.hmu is
// held.
func (c *Conv) heldChanged() {
	var n int64
	for _, h := range c.held {
		for _, ch := range h.Changes {
			if ch.Kind != layer.Deleted {
				n += ch.Size
			}
		}
	}
	c.view.held = n
}
