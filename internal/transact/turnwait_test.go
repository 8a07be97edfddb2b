//go:build linux

package transact_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/layer"
	"github.com/bashvisor/bashvisor/internal/layer/layertest"
	"github.com/bashvisor/bashvisor/internal/transact"
)

// started begins script as a command of conversation "c" and runs it
// over its layer, leaving it to commit.
func (f *fixture) started(t *testing.T, script string) *transact.Tx {
	t.Helper()
	roots, err := transact.Roots(f.ws)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := f.c.Begin(roots, script)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := layertest.Run(t, tx.Spec(), f.ws, f.env, script); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return tx
}

// stopsWaiting runs call with a context of d and checks that it
// returned once d passed (within generous bounds) with an error
// wrapping the context's and layer.ErrLocked.
func stopsWaiting(t *testing.T, what string, d time.Duration, call func(ctx context.Context) error) {
	t.Helper()
	start := time.Now() // before the deadline is set: it ends d after this
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	err := call(ctx)
	if took := time.Since(start); took < d || took > time.Minute {
		t.Errorf("%s stopped waiting after %v with a %v context", what, took, d)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, layer.ErrLocked) {
		t.Errorf("%s: got %v, want the context's error and layer.ErrLocked", what, err)
	}
}

// TestUndoStopsWaitingWithContext: while another process holds the
// workspace's apply lock (another engine applying), an undo or a revert
// of paths whose context ends (a cancelled bash_undo) stops waiting
// then, long before the 10 minutes it waits at most, having changed
// nothing: the workspace and the kept steps are as they were. Once the
// process lets go, the undo succeeds.
func TestUndoStopsWaitingWithContext(t *testing.T) {
	f := newFixture(t)
	f.run(t, "echo new > new.txt && echo more >> README")
	kept := f.c.Steps()
	release := startHolder(t, f.ws)
	unchanged := func(what string) {
		t.Helper()
		if !f.exists("new.txt") || f.read("README") != "hello\nmore\n" || !reflect.DeepEqual(f.c.Steps(), kept) {
			t.Errorf("after %s: new.txt there %v, README %q, steps %+v (want %+v)", what, f.exists("new.txt"), f.read("README"), f.c.Steps(), kept)
		}
	}
	stopsWaiting(t, "undo", time.Second, func(ctx context.Context) error { _, err := f.c.Undo(ctx, 1); return err })
	unchanged("the undo that stopped waiting")
	stopsWaiting(t, "undo of a path", time.Second, func(ctx context.Context) error {
		_, _, err := f.c.Revert(ctx, transact.Selection{Paths: []string{filepath.Join(f.ws, "README")}})
		return err
	})
	unchanged("the undo of a path that stopped waiting")
	release()
	if _, err := f.c.Undo(context.Background(), 1); err != nil || f.exists("new.txt") || f.read("README") != "hello\n" || len(f.c.Steps()) != 0 {
		t.Fatalf("undo once free: %v; new.txt there %v, README %q, steps %+v", err, f.exists("new.txt"), f.read("README"), f.c.Steps())
	}
}

// TestCallsOfConversationStopWaitingWithContext: a call that waits for
// its conversation's turn behind another call of the conversation (an
// accept, a commit or an undo that holds the turn for long: here it
// waits for another process's apply lock) stops when its context ends
// (200 ms): a commit holds its whole change set for review, applied
// nowhere, an undo changes nothing, an accept or a reject leaves its
// change set held, a listing lists nothing, a checkpoint applies
// nothing and never froze the job. What only reads (Steps, Bytes, HeldBytes) does not wait at all.
// Once the first call is done, each succeeds.
func TestCallsOfConversationStopWaitingWithContext(t *testing.T) {
	const d = 200 * time.Millisecond
	// first starts the call that holds the turn, and returns when it
	// holds it, with what waits for its error.
	first := func(t *testing.T, f *fixture, call func() error) (wait func() error) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- call() }()
		for deadline := time.Now().Add(time.Minute); !transact.Busy(f.c); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the first call never took the conversation's turn")
			}
		}
		return func() error {
			select {
			case err := <-done:
				return err
			case <-time.After(2 * time.Minute):
				t.Fatal("the first call still runs two minutes after the other process let go")
				return nil
			}
		}
	}
	// heldWhole checks that a commit that stopped waiting held script's
	// change set (new.txt), applying nothing, and accepts it.
	heldWhole := func(t *testing.T, f *fixture, rep *transact.Report) *transact.Held {
		t.Helper()
		if rep == nil || rep.Held == nil || len(rep.Applied) > 0 || f.exists("new.txt") {
			t.Fatalf("commit that stopped waiting: report %+v; new.txt there: %v", rep, f.exists("new.txt"))
		}
		if got := kinds(f.ws, rep.Held.Changes); got != "A new.txt" {
			t.Errorf("held %s, want A new.txt", got)
		}
		if reasons := strings.Join(mapValues(rep.Held.Reasons), "; "); !strings.Contains(reasons, "call ended") {
			t.Errorf("held for %q", reasons)
		}
		return rep.Held
	}
	accept := func(t *testing.T, f *fixture, h *transact.Held) {
		t.Helper()
		if _, err := f.c.Accept(context.Background(), h.ID, h.Digest); err != nil || f.read("new.txt") != "new\n" {
			t.Fatalf("accepting the held change set: %v; new.txt %q", err, f.read("new.txt"))
		}
	}

	t.Run("commit behind an accept", func(t *testing.T) {
		f := newFixture(t)
		f.hold = true
		reviewed := f.run(t, "echo reviewed > reviewed.txt").Held
		f.hold = false
		tx := f.started(t, "echo new > new.txt")
		release := startHolder(t, f.ws)
		wait := first(t, f, func() error {
			_, err := f.c.Accept(context.Background(), reviewed.ID, reviewed.Digest)
			return err
		})
		var rep *transact.Report
		stopsWaiting(t, "commit", d, func(ctx context.Context) (err error) {
			rep, err = tx.Commit(ctx, true)
			return err
		})
		h := heldWhole(t, f, rep)
		// What only reads does not wait for the turn either.
		read := make(chan int64, 1)
		go func() { read <- int64(len(f.c.Steps())) + f.c.Bytes() + f.c.HeldBytes() }()
		select {
		case <-read:
		case <-time.After(time.Minute):
			t.Fatal("Steps, Bytes or HeldBytes waited for the accept")
		}
		if got, want := f.c.HeldBytes(), int64(len("reviewed\n")+len("new\n")); got != want {
			t.Errorf("HeldBytes %d, want %d (both held change sets)", got, want)
		}
		release()
		if err := wait(); err != nil || f.read("reviewed.txt") != "reviewed\n" {
			t.Fatalf("the accept: %v; reviewed.txt %q", err, f.read("reviewed.txt"))
		}
		accept(t, f, h)
	})

	t.Run("undo behind a commit", func(t *testing.T) {
		f := newFixture(t)
		f.run(t, "echo one > one.txt")
		kept := f.c.Steps()
		tx := f.started(t, "echo new > new.txt")
		release := startHolder(t, f.ws)
		wait := first(t, f, func() error { _, err := tx.Commit(context.Background(), true); return err })
		stopsWaiting(t, "undo", d, func(ctx context.Context) error { _, err := f.c.Undo(ctx, 1); return err })
		if !f.exists("one.txt") || !reflect.DeepEqual(f.c.Steps(), kept) {
			t.Errorf("the undo that stopped waiting changed something: one.txt there %v, steps %+v (want %+v)", f.exists("one.txt"), f.c.Steps(), kept)
		}
		release()
		if err := wait(); err != nil || f.read("new.txt") != "new\n" {
			t.Fatalf("the commit: %v; new.txt %q", err, f.read("new.txt"))
		}
		if _, err := f.c.Undo(context.Background(), 2); err != nil || f.exists("one.txt") || f.exists("new.txt") {
			t.Fatalf("undo once free: %v; one.txt there %v, new.txt there %v", err, f.exists("one.txt"), f.exists("new.txt"))
		}
	})

	t.Run("commit behind an undo", func(t *testing.T) {
		f := newFixture(t)
		f.run(t, "echo one > one.txt")
		tx := f.started(t, "echo new > new.txt")
		release := startHolder(t, f.ws)
		wait := first(t, f, func() error { _, err := f.c.Undo(context.Background(), 1); return err })
		var rep *transact.Report
		stopsWaiting(t, "commit", d, func(ctx context.Context) (err error) {
			rep, err = tx.Commit(ctx, true)
			return err
		})
		h := heldWhole(t, f, rep)
		release()
		if err := wait(); err != nil || f.exists("one.txt") {
			t.Fatalf("the undo: %v; one.txt there %v", err, f.exists("one.txt"))
		}
		accept(t, f, h)
	})
	t.Run("accept behind a commit", func(t *testing.T) {
		f := newFixture(t)
		f.hold = true
		reviewed := f.run(t, "echo reviewed > reviewed.txt").Held
		f.hold = false
		tx := f.started(t, "echo new > new.txt")
		release := startHolder(t, f.ws)
		wait := first(t, f, func() error { _, err := tx.Commit(context.Background(), true); return err })
		stopsWaiting(t, "accept", d, func(ctx context.Context) error {
			_, err := f.c.Accept(ctx, reviewed.ID, reviewed.Digest)
			return err
		})
		if f.exists("reviewed.txt") {
			t.Error("the accept that stopped waiting applied reviewed.txt")
		}
		stopsWaiting(t, "listing", d, func(ctx context.Context) error { _, err := f.c.Held(ctx); return err })
		stopsWaiting(t, "reject", d, func(ctx context.Context) error { return f.c.Reject(ctx, reviewed.ID) })
		release()
		if err := wait(); err != nil || f.read("new.txt") != "new\n" {
			t.Fatalf("the commit: %v; new.txt %q", err, f.read("new.txt"))
		}
		if _, err := f.c.Accept(context.Background(), reviewed.ID, reviewed.Digest); err != nil || f.read("reviewed.txt") != "reviewed\n" {
			t.Fatalf("accepting once free: %v; reviewed.txt %q", err, f.read("reviewed.txt"))
		}
	})
	t.Run("checkpoint behind an accept", func(t *testing.T) {
		f := newFixture(t)
		f.hold = true
		reviewed := f.run(t, "echo reviewed > reviewed.txt").Held
		f.hold = false
		tx := f.started(t, "echo new > new.txt") // a job's process, exited
		froze := 0
		freeze := func(f func()) bool { froze++; f(); return true }
		release := startHolder(t, f.ws)
		wait := first(t, f, func() error {
			_, err := f.c.Accept(context.Background(), reviewed.ID, reviewed.Digest)
			return err
		})
		stopsWaiting(t, "checkpoint", d, func(ctx context.Context) error {
			rep, err := tx.Checkpoint(ctx, freeze)
			if rep != nil {
				t.Errorf("checkpoint that stopped waiting: report %+v", rep)
			}
			return err
		})
		if rep, err := tx.Last(); froze > 0 || rep != nil || err != nil || f.exists("new.txt") {
			t.Errorf("checkpoint that stopped waiting: froze the job %d times, last %+v %v, new.txt there %v", froze, rep, err, f.exists("new.txt"))
		}
		release()
		if err := wait(); err != nil {
			t.Fatalf("the accept: %v", err)
		}
		if rep, err := tx.Checkpoint(context.Background(), freeze); err != nil || froze != 1 || f.read("new.txt") != "new\n" {
			t.Fatalf("checkpoint once free: %+v %v; froze %d times; new.txt %q", rep, err, froze, f.read("new.txt"))
		}
		if _, err := tx.Commit(context.Background(), true); err != nil {
			t.Fatal(err)
		}
	})
}
