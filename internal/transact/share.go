//go:build linux

package transact

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bashvisor/bashvisor/internal/gitpolicy"
	"github.com/bashvisor/bashvisor/internal/layer"
)

// share is a layer and the commands that run over it: one command, or
// a background job and the commands of its conversation that joined it
// (see the package doc, "Background jobs").
type share struct {
	l   *layer.Layer
	key string // key of its roots ("": never joined)

	mu     sync.Mutex // the members' Commit, Abort and Checkpoint take turns
	live   []*Tx      // the members that have not ended
	joined bool       // a command joined the layer
	stray  bool       // a member ended with processes left: nothing more is applied
	ended  bool       // the last member ended: the layer is being removed
	hold   bool       // its members were begun with BeginHeld (all or none)
}

// notGone and deferred are Report.NotApplied's reasons.
const (
	notGone  = "processes of the command were still running over its layer; run it again so that it leaves nothing running (start servers and watchers with mode=background)"
	deferred = "the command's layer is shared with a command that still runs and cannot be frozen: its changes are applied when that command ends"
	// stoppedShared: the Commit's context ended while it waited for the
	// conversation's turn.
	stoppedShared = "the call ended while another apply to the workspace was under way: the command's changes stay in the layer it shares with a job that runs on, and are applied at the job's next checkpoint or its end"
)

// Background marks t's command as a background job (one that was
// started in the background, or yielded to it): freeze runs its
// argument with every process of the job frozen and reports false when
// it cannot (as Checkpoint's). From then on, while it runs, the
// conversation's later commands over the same roots join its layer
// (Begin), when this process holds the layer's overlays
// (Options.Premount); otherwise they get layers of their own.
func (t *Tx) Background(freeze func(func()) bool) {
	sh := t.sh
	// c.mu before sh.mu (as join): an end that begins meanwhile either
	// finds t listed (and drops it) or is seen done here.
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	sh.mu.Lock()
	if t.done {
		sh.mu.Unlock()
		return
	}
	t.freeze = freeze
	sh.mu.Unlock()
	if !slices.Contains(t.c.bg, t) {
		t.c.bg = append(t.c.bg, t)
	}
	if sh.key != "" && !slices.Contains(t.c.shares, sh) {
		t.c.shares = append(t.c.shares, sh)
	}
}

// join returns a Tx over the layer of a running background job of c
// over the same roots (key k, "": none), nil when there is none to
// join: every command that runs over it must be one that Checkpoint can
// freeze (a background job), and the overlays must be held
// (layer.Layer.Share).
func (m *Manager) join(c *Conv, k, label string, hold bool) *Tx {
	if k == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, sh := range c.shares {
		if sh.key != k {
			continue
		}
		sh.mu.Lock()
		if sh.ended || sh.stray || sh.hold != hold || !sh.joinable() {
			sh.mu.Unlock()
			continue
		}
		spec, err := sh.l.Share()
		if err != nil {
			sh.mu.Unlock()
			continue
		}
		t := &Tx{m: m, c: c, sh: sh, spec: spec, label: label, joined: true, ending: make(chan struct{})}
		sh.live = append(sh.live, t)
		sh.joined = true
		sh.mu.Unlock()
		return t
	}
	return nil
}

// endWait bounds how long a checkpoint waits for a member that could
// not be frozen because it just ended (its cgroup handed back) to reach
// its Commit, which says whether its processes are gone.
const endWait = 5 * time.Second

// freezers returns, for each live member other than t, a function that
// runs its argument with the member's processes frozen, or gone: a
// member that ended (its Commit began, with every process gone) needs
// no freezing. sh.mu is held.
func (sh *share) freezers(t *Tx) []func(func()) bool {
	fs := []func(func()) bool{}
	for _, o := range sh.live {
		if o != t {
			fs = append(fs, o.hold)
		}
	}
	return fs
}

// joinable reports whether every live member can be frozen (a
// background job that has not ended). sh.mu is held.
func (sh *share) joinable() bool {
	for _, o := range sh.live {
		if o.freeze == nil || o.ended() {
			return false
		}
	}
	return len(sh.live) > 0
}

// ended reports whether t's Commit or Abort began.
func (t *Tx) ended() bool {
	select {
	case <-t.ending:
		return true
	default:
		return false
	}
}

// hold runs f with t's processes frozen, or once they are gone: while
// t's job cannot be frozen (it just started, or just ended and its
// cgroup was handed back), it tries again for up to endWait, until it
// can or t's Commit begins. It reports false when neither holds (a
// foreground command that still runs, processes left running). The
// share's mu is held.
func (t *Tx) hold(f func()) bool {
	deadline := time.Now().Add(endWait)
	for t.freeze != nil && !t.ended() {
		if t.freeze(f) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-t.ending:
		case <-time.After(10 * time.Millisecond):
		}
	}
	if !t.ended() || !t.gone {
		return false
	}
	f()
	return true
}

// frozen runs f with every process of each freeze function frozen,
// reporting false (f not run) when one of them could not freeze.
func frozen(fs []func(func()) bool, f func()) bool {
	if len(fs) == 0 {
		f()
		return true
	}
	ran := false
	ok := fs[0](func() { ran = frozen(fs[1:], f) })
	return ok && ran
}

// end ends member t: gone as Commit's; abort when t never started (it
// changed nothing). While other members run, it takes a checkpoint with
// them frozen; the last member applies the rest (what members that
// could not take a checkpoint left) and removes the layer.
func (sh *share) end(ctx context.Context, t *Tx, gone, abort bool) (*Report, error) {
	defer t.c.dropBackground(t) // after t.done is set (see Background)
	defer t.unwalk()
	t.endOnce.Do(func() {
		t.gone = gone
		close(t.ending)
	})
	sh.mu.Lock()
	if t.done {
		sh.mu.Unlock()
		return &Report{}, nil
	}
	t.done = true
	t.spec.Close() // Share's clones, when the command never mounted them
	sh.live = slices.DeleteFunc(sh.live, func(o *Tx) bool { return o == t })
	sh.stray = sh.stray || !gone
	if len(sh.live) > 0 {
		defer sh.mu.Unlock()
		if abort {
			return &Report{}, nil
		}
		return sh.checkpoint(ctx, t)
	}
	sh.ended = true
	sh.l.Unshare()
	sh.mu.Unlock()
	t.c.mu.Lock()
	t.c.shares = slices.DeleteFunc(t.c.shares, func(o *share) bool { return o == sh })
	t.c.mu.Unlock()
	defer sh.forget(t.c)
	var rep *Report
	var err error
	switch {
	case abort && !sh.joined:
		rep = &Report{}
	case sh.stray:
		rep = &Report{Applied: t.checkpoints, NotApplied: notGone, Discarded: true}
		sh.holdStray(t, rep)
	default:
		rep, err = sh.apply(ctx, t)
		if rep != nil && len(t.checkpoints) > 0 {
			rep.Applied = append(t.checkpoints, rep.Applied...)
		}
	}
	switch {
	case rep != nil && rep.Held != nil: // a held change set keeps its layer until reviewed
	case sh.stray:
		t.m.pool.remove(sh.l)
	default: // every process is gone: nothing has its overlays mounted
		t.m.pool.recycle(sh.l)
	}
	return rep, err
}

// holdStray holds what the layer of a command that left processes
// running holds, for review, in rep (nothing held: nothing changed, or
// it could not be computed).
func (sh *share) holdStray(t *Tx, rep *Report) {
	c := t.c
	s, err := sh.l.Diff()
	if err != nil {
		return
	}
	defer s.Close()
	if len(s.Changes) == 0 {
		return
	}
	c.holdAll(rep, sh.l, s, t.label, heldNotGone, true)
}

// checkpoint applies, for member t that just ended, what the layer's
// members changed so far, with those that still run frozen. sh.mu is
// held.
func (sh *share) checkpoint(ctx context.Context, t *Tx) (*Report, error) {
	if sh.stray {
		return &Report{Applied: t.checkpoints, NotApplied: notGone, Discarded: true}, nil
	}
	var rep *Report
	var err error
	ran, werr := sh.frozen(ctx, t, sh.freezers(t), func() { rep, err = sh.applyLive(ctx, t) })
	if werr != nil {
		return &Report{Applied: t.checkpoints, NotApplied: stoppedShared}, werr
	}
	if !ran {
		return &Report{Applied: t.checkpoints, NotApplied: deferred}, nil
	}
	if rep != nil && len(t.checkpoints) > 0 {
		rep.Applied = append(slices.Clone(t.checkpoints), rep.Applied...)
	}
	return rep, err
}

// frozen runs f with the processes of fs frozen, once it holds t's
// conversation's turn (the layer's commands hold: then it takes none,
// as their checkpoints apply nothing), so that no job stays frozen
// while its checkpoint waits for the turn. It reports false, not
// running f, when one of fs could not freeze, and fails, freezing
// nothing, when ctx ended while it waited for the turn. The jobs do stay
// frozen while f waits for the workspace's apply lock (another
// conversation's apply, another engine's): ctx bounds that wait
// (Supervisor.Checkpoint's is short); taking that lock before freezing
// would end it, and needs a layer entry point that locks first.
func (sh *share) frozen(ctx context.Context, t *Tx, fs []func(func()) bool, f func()) (bool, error) {
	if !sh.hold {
		if err := t.c.lockCtx(ctx); err != nil {
			return false, err
		}
		defer t.c.unlock()
	}
	return frozen(fs, f), nil
}

// applyLive is applyTurn for a checkpoint (sh.frozen holds the turn).
// What it applies is credited to the members whose Commit began too
// (see credit).
func (sh *share) applyLive(ctx context.Context, t *Tx) (*Report, error) {
	if sh.hold {
		return &Report{}, nil // held when the layer's last command ends
	}
	rep, err := sh.applyTurn(ctx, t, true)
	if rep != nil {
		sh.credit(t, rep.Applied)
	}
	return rep, err
}

// credit adds applied, which a checkpoint for t applied, to the report
// of each other member whose Commit began (its processes gone: hold) but
// that has not taken sh.mu yet: its own end finds those changes applied
// already (a later Diff does not list them), and its report must still
// name them (TestJoinedCommandReportsWhatAnotherApplyTook). Members
// that run on (frozen) are not credited: what the checkpoint applied is
// t's report. sh.mu is held.
func (sh *share) credit(t *Tx, applied []layer.Change) {
	if len(applied) == 0 {
		return
	}
	for _, o := range sh.live {
		if o != t && o.ended() {
			o.checkpoints = append(o.checkpoints, applied...)
		}
	}
}

// apply is applyTurn for the layer's last command, once it holds the
// conversation's turn. When ctx ends while it waits for it, it applies
// nothing and holds every change (stopped).
func (sh *share) apply(ctx context.Context, t *Tx) (*Report, error) {
	if err := t.c.lockCtx(ctx); err != nil {
		return sh.stopped(t, err)
	}
	defer t.c.unlock()
	return sh.applyTurn(ctx, t, false)
}

// applyTurn diffs the layer, checks the change set and applies what
// policy allows, by copying when live (a command still runs over the
// layer), as one undo step labelled with t's command. The
// conversation's commands take turns (its turn is held): each change
// set is judged against the workspace it is applied to.
func (sh *share) applyTurn(ctx context.Context, t *Tx, live bool) (*Report, error) {
	c := t.c
	s, err := sh.l.Diff()
	if err != nil {
		return nil, fmt.Errorf("transact: %w", err)
	}
	defer s.Close()
	rep := &Report{}
	if len(s.Changes) == 0 {
		return rep, nil
	}
	dropCaches(s, live)
	if !live && sh.hold {
		c.holdAll(rep, sh.l, s, t.label, holdMode, false)
		return rep, nil
	}
	rep.Refused = gitpolicy.Check(s, sh.l.Roots(), s.Changes)
	st, err := c.storeMade()
	if err != nil {
		return nil, err
	}
	var res *layer.Result
	switch {
	case !live && len(rep.Refused) > 0:
		// The refused changes are held: the layer stays as it is for
		// them, the rest applied by copying.
		res, err = s.ApplyCopies(ctx, gitpolicy.Paths(rep.Refused), st, t.label)
		if err == nil {
			c.hold(rep, sh.l, s, t.label, heldReasons(rep.Refused), false)
		}
	case live:
		res, err = s.ApplyCopies(ctx, gitpolicy.Paths(rep.Refused), st, t.label)
	default:
		res, err = s.Apply(ctx, gitpolicy.Paths(rep.Refused), st, t.label)
	}
	if errors.Is(err, layer.ErrLocked) && !live {
		// Nothing was applied: hold it all rather than lose it.
		if ctx.Err() != nil { // the caller stopped waiting: say so
			c.holdAll(rep, sh.l, s, t.label, stoppedReason, false)
			return rep, fmt.Errorf("transact: %w", err)
		}
		c.holdAll(rep, sh.l, s, t.label, lockedReason, false)
		return rep, nil
	}
	if err != nil {
		return nil, fmt.Errorf("transact: %w", err)
	}
	rep.Applied, rep.Failed, rep.Step = res.Applied, res.Failed, res.Step
	if res.Step != 0 && t.turn != "" {
		st.SetTurn(res.Step, t.turn)
		rep.Turn = t.turn
	}
	for _, f := range res.Refused { // the layer's own: forged overlay xattrs, too deep
		rep.Refused = append(rep.Refused, gitpolicy.Refusal{Path: f.Change.Path, Rule: "layer", Reason: strings.TrimPrefix(f.Err.Error(), "layer: ")})
	}
	if live && res.Step != 0 {
		c.hmu.Lock()
		if c.live == nil {
			c.live = map[int]*share{}
		}
		c.live[res.Step] = sh
		c.hmu.Unlock()
	}
	return rep, nil
}

// stopped holds, for review, every change of the layer whose last
// command's Commit stopped waiting for the conversation's turn (err
// says why): nothing is applied, nothing lost (a layer that changed
// nothing returns an empty report and no error). A command of the
// hold mode is held as ever, with no error. It needs no turn.
func (sh *share) stopped(t *Tx, err error) (*Report, error) {
	s, derr := sh.l.Diff()
	if derr != nil {
		return nil, fmt.Errorf("transact: %w", derr)
	}
	defer s.Close()
	rep := &Report{}
	if len(s.Changes) == 0 {
		return rep, nil
	}
	dropCaches(s, false)
	if sh.hold {
		t.c.holdAll(rep, sh.l, s, t.label, holdMode, false)
		return rep, nil
	}
	t.c.holdAll(rep, sh.l, s, t.label, stoppedReason, false)
	return rep, err
}

// forget lets Undo take back the steps applied from sh (its last
// member ended).
func (sh *share) forget(c *Conv) {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	maps.DeleteFunc(c.live, func(_ int, o *share) bool { return o == sh })
}

// dropBackground forgets t as a running background job.
func (c *Conv) dropBackground(t *Tx) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bg = slices.DeleteFunc(c.bg, func(o *Tx) bool { return o == t })
}
