package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/bashvisor/bashvisor/cluster/clusterpb"
	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/truncate"
)

// Placement: the executors know where conversations run; a front asks
// them and caches the answer (see the package documentation).

// assignment says where a conversation runs, as a front learnt it.
type assignment struct {
	execID, name, addr string
	// gen counts the executors the conversation has had (1 for the
	// first). Job ids from generation 2 on are prefixed "gN." so they
	// cannot be confused with the lost jobs of an earlier executor.
	gen int
}

func (a assignment) pb() *clusterpb.Placement {
	return &clusterpb.Placement{ExecutorId: a.execID, Name: a.name, Address: a.addr, Generation: int64(a.gen)}
}

func fromPB(p *clusterpb.Placement) assignment {
	return assignment{execID: p.GetExecutorId(), name: p.GetName(), addr: p.GetAddress(), gen: int(max(p.GetGeneration(), 1))}
}

// errNotPlaced: no executor holds the conversation (it never ran, or it
// ended).
var errNotPlaced = errors.New("conversation not placed")

// score is conversation conv's rendezvous weight on executor id: every
// front computes the same, so fronts that see the same executors place a
// new conversation on the same one.
func score(conv, id string) uint64 {
	h := sha256.Sum256([]byte(conv + "\x00" + id))
	return binary.BigEndian.Uint64(h[:8])
}

// pickLocked returns the ready, accepting executor with conv's highest
// rendezvous score; c.mu is held.
func (c *Client) pickLocked(conv string) *execState {
	var best *execState
	var bestScore uint64
	for _, st := range c.execs {
		if !st.ready || st.isLost() || st.load == nil || !st.load.Accepting {
			continue
		}
		if s := score(conv, st.id); best == nil || s > bestScore {
			best, bestScore = st, s
		}
	}
	return best
}

// liveLocked lists the ready executors that are not lost; c.mu is held.
func (c *Client) liveLocked() []*execState {
	var out []*execState
	for _, st := range c.execs {
		if st.ready && !st.isLost() {
			out = append(out, st)
		}
	}
	return out
}

// cached returns the front's assignment of conv when its executor is
// live.
func (c *Client) cached(conv string) (*execState, assignment, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.placed[conv]
	if !ok {
		return nil, a, false
	}
	st := c.execs[a.execID]
	return st, a, st != nil && !st.isLost()
}

// learn caches a; forget drops conv's entry if it names execID.
func (c *Client) learn(conv string, a assignment) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.placed[conv] = a
}

func (c *Client) forget(conv, execID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.placed[conv]; ok && a.execID == execID {
		delete(c.placed, conv)
	}
}

// lookup asks every live executor where conv runs. It returns the live
// executor that holds it, or else the latest record of a holder that is
// not live (lost, or not known to this front), or else neither. When
// several executors hold it (two fronts placed its first calls at once
// while they saw different executors), the one with the highest
// rendezvous score wins, on every front.
func (c *Client) lookup(ctx context.Context, conv string) (*execState, assignment, *assignment, error) {
	c.awaitView(ctx)
	c.mu.Lock()
	live := c.liveLocked()
	c.mu.Unlock()
	type answer struct {
		st  *execState
		p   *clusterpb.Placement
		err error
	}
	ch := make(chan answer, len(live))
	for _, st := range live {
		go func() {
			r, err := c.query(ctx, st, &clusterpb.Query{Op: "holds", Tc: &clusterpb.ToolContext{ConversationId: conv}})
			ch <- answer{st, r.GetPlacement(), err}
		}()
	}
	var holder *execState
	var held assignment
	var records []assignment
	var silent []error
	asked := map[string]bool{}
	for range live {
		a := <-ch
		switch {
		case a.err != nil && !errors.Is(a.err, ErrExecutorLost):
			silent = append(silent, fmt.Errorf("executor %s: %w", a.st.name(), a.err))
		case a.err != nil:
		case a.p.GetExecutorId() == a.st.id:
			if holder == nil || score(conv, a.st.id) > score(conv, holder.id) {
				holder, held = a.st, fromPB(a.p)
			}
		default:
			asked[a.st.id] = true
			if a.p != nil {
				records = append(records, fromPB(a.p))
			}
		}
	}
	if holder != nil {
		return holder, held, nil, nil
	}
	// A record of a live executor that was asked and does not hold the
	// conversation is stale (it ended): only records of executors that
	// could not answer count, the latest generation first.
	records = slices.DeleteFunc(records, func(a assignment) bool { return asked[a.execID] })
	if len(records) > 0 {
		latest := slices.MaxFunc(records, func(a, b assignment) int { return a.gen - b.gen })
		return nil, assignment{}, &latest, nil
	}
	if len(silent) > 0 {
		return nil, assignment{}, nil, fmt.Errorf("%w: cannot tell where conversation %q runs: %w", ErrNoExecutor, conv, errors.Join(silent...))
	}
	return nil, assignment{}, nil, nil
}

// awaitView waits, in the front's first LostAfter, until it has heard
// from every executor it knows of (every static address, every member
// of the first topology): a front that just started must not place a
// conversation anew because the executor that holds it has not answered
// it yet. Later, an executor that joins holds nothing yet.
func (c *Client) awaitView(ctx context.Context) {
	t := time.NewTimer(time.Until(c.start.Add(c.o.LostAfter)))
	defer t.Stop()
	for {
		c.mu.Lock()
		complete, ch := c.viewCompleteLocked(), c.changed
		c.mu.Unlock()
		if complete {
			return
		}
		select {
		case <-ch:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// viewCompleteLocked reports whether every executor the front knows of
// answered (or was lost); c.mu is held.
func (c *Client) viewCompleteLocked() bool {
	heard := func(st *execState) bool { return st != nil && (st.ready || st.isLost()) }
	if s, ok := c.o.Membership.(staticMembership); ok {
		for _, addr := range s {
			if !heard(c.byAddr[addr]) {
				return false
			}
		}
		return true
	}
	if c.members == nil {
		return false // no topology yet
	}
	for id := range c.members {
		if !heard(c.execs[id]) {
			return false
		}
	}
	return true
}

// place returns the executor of conv's call: the one that holds it, or,
// for its first call anywhere (or a move when working directories
// survive), a new one; placing reports the latter, which the call tells
// the executor.
func (c *Client) place(ctx context.Context, conv string) (st *execState, a assignment, placing bool, err error) {
	c.mu.Lock()
	stopped := c.stopped
	c.mu.Unlock()
	if stopped {
		return nil, a, false, engine.ErrShutdown
	}
	st, a, ok := c.cached(conv)
	if ok {
		return st, a, false, nil
	}
	cachedLost := a.execID != ""
	holder, held, rec, err := c.lookup(ctx, conv)
	if err != nil {
		return nil, a, false, err
	}
	if holder != nil {
		c.learn(conv, held)
		return holder, held, false, nil
	}
	if rec == nil && cachedLost {
		rec = &a
	}
	gen := 1
	if rec != nil {
		c.mu.Lock()
		st, gone := c.execs[rec.execID], c.goneLocked(*rec)
		c.mu.Unlock()
		switch {
		case !gone:
			return nil, *rec, false, fmt.Errorf("%w: this conversation's executor %s (%s) has not answered this front yet; retry in a few seconds",
				ErrNoExecutor, rec.name, rec.addr)
		case !c.o.SharedDirs:
			return nil, *rec, false, goneError(*rec, st)
		}
		gen = rec.gen + 1
	}
	c.mu.Lock()
	st = c.pickLocked(conv)
	n := len(c.execs)
	c.mu.Unlock()
	if st == nil {
		return nil, a, false, fmt.Errorf("%w: none of the %d known executors is ready", ErrNoExecutor, n)
	}
	return st, assignment{execID: st.id, name: st.name(), addr: st.addr, gen: gen}, true, nil
}

// goneLocked reports whether the executor of a is out of the fleet for
// good: lost, no longer a member, its address answers as another process
// or not at all LostAfter after the front started. An executor this
// front has not heard of yet, in its first LostAfter, is not. c.mu is
// held.
func (c *Client) goneLocked(a assignment) bool {
	if st := c.execs[a.execID]; st != nil {
		return st.isLost()
	}
	if c.members != nil {
		return true // not in the latest topology
	}
	if s, ok := c.o.Membership.(staticMembership); ok && !slices.Contains(s, a.addr) {
		return true
	}
	if st := c.byAddr[a.addr]; st != nil {
		return st.id != a.execID
	}
	return time.Since(c.start) > c.o.LostAfter
}

// settle records that conv now runs on st (its call was accepted there):
// the front caches it and tells every other live executor, so that any
// front learns where it runs even once st is lost. It returns once they
// have all kept the record, before the call's result is out: a front
// that never saw the conversation and asks them next, should st die
// meanwhile, learns it was lost instead of placing it afresh.
func (c *Client) settle(conv string, st *execState, a assignment) {
	c.learn(conv, a)
	c.broadcastRecord(conv, st.id, a.pb())
}

// broadcastRecord gives every live executor other than except a record
// of conv's holder p (nil: it ended) and waits until each has kept it,
// or is lost, or QueryTimeout passed (logged), or the front stops.
func (c *Client) broadcastRecord(conv, except string, p *clusterpb.Placement) {
	c.mu.Lock()
	live := c.liveLocked()
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, st := range live {
		if st.id == except {
			continue
		}
		wg.Go(func() {
			_, err := c.query(c.runCtx, st, &clusterpb.Query{Op: "record", Tc: &clusterpb.ToolContext{ConversationId: conv}, Placement: p})
			if err != nil && !errors.Is(err, ErrExecutorLost) && c.runCtx.Err() == nil {
				c.log.Warn("an executor did not keep a conversation's record", "conversation", conv, "executor", st.name(), "err", err)
			}
		})
	}
	wg.Wait()
}

func goneError(a assignment, st *execState) error {
	if st == nil {
		return fmt.Errorf("%w: this conversation's executor %s is not part of the fleet any more; its working directory was on that machine, so the conversation cannot continue: start a new conversation",
			ErrConversationLost, a.name)
	}
	return fmt.Errorf("%w: this conversation's executor %s stopped answering %s ago (%s); its working directory was on that machine, so the conversation cannot continue: start a new conversation",
		ErrConversationLost, st.name(), time.Since(st.lostAt).Round(time.Second), st.lostWhy)
}

// --- the executors' side ---

// convRecord is what an executor knows of a conversation: which
// executor holds it and, when it is this one, the front that used it
// last.
type convRecord struct {
	holder    *clusterpb.Placement
	lastFront string
	outputs   []string // held here: the full-output files of its truncated results, oldest first
}

// outputsKept is how many full outputs of a conversation an executor
// serves (the engine keeps Config.Output.SpoolKeep files in all).
const outputsKept = 16

// keepOutput records the full-output file of a truncated result of conv.
func (x *Executor) keepOutput(conv, path string) {
	x.convMu.Lock()
	defer x.convMu.Unlock()
	if r := x.convs[conv]; r != nil && r.holder.GetExecutorId() == x.ID() {
		r.outputs = append(r.outputs, path)
		if len(r.outputs) > outputsKept {
			r.outputs = r.outputs[1:]
		}
	}
}

// outputPath returns the file of full output id of conv, if it has it.
func (x *Executor) outputPath(conv, id string) (string, bool) {
	x.convMu.Lock()
	defer x.convMu.Unlock()
	if r := x.convs[conv]; r != nil {
		for _, p := range r.outputs {
			if truncate.SpoolID(p) == id {
				return p, true
			}
		}
	}
	return "", false
}

// hold makes the executor the holder of conv (a front placed it here).
func (x *Executor) hold(conv string, p *clusterpb.Placement, front string) {
	p.ExecutorId = x.ID()
	x.convMu.Lock()
	defer x.convMu.Unlock()
	x.convs[conv] = &convRecord{holder: p, lastFront: front}
}

// touch records a call or query of front in conv and reports whether
// the executor holds conv.
func (x *Executor) touch(conv, front string) bool {
	x.convMu.Lock()
	defer x.convMu.Unlock()
	r := x.convs[conv]
	if r == nil || r.holder.GetExecutorId() != x.ID() {
		return false
	}
	r.lastFront = front
	return true
}

// holderOf returns the holder of conv as the executor knows it.
func (x *Executor) holderOf(conv string) *clusterpb.Placement {
	x.convMu.Lock()
	defer x.convMu.Unlock()
	if r := x.convs[conv]; r != nil {
		return r.holder
	}
	return nil
}

// record keeps a front's record of another executor holding conv (p nil:
// it ended). A conversation held here keeps its holder: its state is in
// this engine.
func (x *Executor) record(conv string, p *clusterpb.Placement) {
	x.convMu.Lock()
	defer x.convMu.Unlock()
	r := x.convs[conv]
	switch {
	case r != nil && r.holder.GetExecutorId() == x.ID():
	case p == nil || p.ExecutorId == "":
		delete(x.convs, conv)
	default:
		x.convs[conv] = &convRecord{holder: p}
	}
}

// release ends the executor's holding of conv for an end asked by front.
// held is false when it did not hold it; kept is true when another front
// used it since front last did (the end is not done: see
// [Client.EndConversation]).
func (x *Executor) release(conv, front string) (held, kept bool) {
	x.convMu.Lock()
	defer x.convMu.Unlock()
	r := x.convs[conv]
	switch {
	case r == nil || r.holder.GetExecutorId() != x.ID():
		return false, false
	case r.lastFront != "" && r.lastFront != front:
		return true, true
	}
	delete(x.convs, conv)
	return true, false
}
