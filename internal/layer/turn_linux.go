//go:build linux

package layer

import (
	"context"
	"fmt"
)

// turn is a mutex whose wait can end with a context: a token in a
// channel of one. A [Store]'s applies and undos take turns by it, so
// that one waiting for another (a long apply of the same conversation)
// stops when its caller's context ends.
type turn chan struct{}

func newTurn() turn { return make(turn, 1) }

// lock takes t, waiting as long as it takes.
func (t turn) lock() { t <- struct{}{} }

// lockCtx takes t, waiting until ctx ends: then it fails with an error
// wrapping ErrLocked and ctx's cause. A free turn is taken whatever ctx
// says (ctx bounds the wait, not the work).
func (t turn) lockCtx(ctx context.Context, what string) error {
	select {
	case t <- struct{}{}:
		return nil
	default:
	}
	select {
	case t <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("layer: waiting for %s: %w; stopped waiting: %w", what, ErrLocked, context.Cause(ctx))
	}
}

func (t turn) unlock() { <-t }
