package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pacluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/bashvisor/bashvisor/cluster/clusterpb"
)

type execState struct {
	id, addr  string
	nameV     atomic.Value // string: the address until it answers with its name
	pid       *actor.PID
	watcher   *actor.PID
	ready     bool
	load      *clusterpb.Pong
	lastHeard time.Time
	deadline  *time.Timer // LostAfter after lastHeard: see armDeadline
	lost      chan struct{}
	lostAt    time.Time
	lostWhy   string
}

func (s *execState) name() string {
	n, _ := s.nameV.Load().(string)
	return n
}

func (s *execState) isLost() bool {
	select {
	case <-s.lost:
		return true
	default:
		return false
	}
}

// --- membership ---

// topologyLoop turns cluster topology events into executors: members are
// executors (the front is a client, not a member); one that left is lost.
func (c *Client) topologyLoop(topo <-chan *pacluster.ClusterTopology) {
	defer c.pingers.Done()
	for {
		select {
		case <-c.runCtx.Done():
			return
		case t := <-topo:
			live := map[string]bool{}
			for _, m := range t.Members {
				id := memberID(m.Id)
				live[id] = true
				c.mu.Lock()
				_, known := c.execs[id]
				if !known && !c.stopped {
					c.addExec(id, fmt.Sprintf("%s:%d", m.Host, m.Port), "")
					c.pingers.Add(1)
					go c.pinger(fmt.Sprintf("%s:%d", m.Host, m.Port), id)
				}
				c.mu.Unlock()
			}
			c.mu.Lock()
			c.members = live
			var left []*execState
			for id, st := range c.execs {
				if !live[id] && !st.isLost() {
					left = append(left, st)
				}
			}
			c.mu.Unlock()
			for _, st := range left {
				c.markLost(st, "it left the cluster membership")
			}
		}
	}
}

// addExec records an executor; c.mu is held.
func (c *Client) addExec(id, addr, name string) *execState {
	st := &execState{id: id, addr: addr, pid: actor.NewPID(addr, executorActor), lost: make(chan struct{})}
	if name == "" {
		name = addr
	}
	st.nameV.Store(name)
	c.execs[id] = st
	st.watcher = c.node.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &execWatcher{target: st.pid, onLost: func(why string) { go c.markLost(st, why) }}
	}))
	c.notifyLocked()
	return st
}

func (c *Client) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// pinger pings the executor at addr every KeepaliveInterval until the
// client stops (static) or the executor with id wantID is lost
// (provider). Pings do not wait for each other: a frozen executor's
// silence is measured by its deadline (see armDeadline), not by pings
// timing out one after another.
func (c *Client) pinger(addr, wantID string) {
	defer c.pingers.Done()
	pid := actor.NewPID(addr, executorActor)
	t := time.NewTicker(c.o.KeepaliveInterval)
	defer t.Stop()
	for {
		f := c.node.sys.Root.RequestFuture(pid, &clusterpb.Ping{}, c.o.LostAfter)
		c.pingers.Add(1)
		go func() {
			defer c.pingers.Done()
			res, _ := f.Result()
			pong, _ := res.(*clusterpb.Pong)
			c.heard(addr, wantID, pong)
		}()
		select {
		case <-c.runCtx.Done():
			return
		case <-t.C:
		}
		if !c.keepPinging(wantID) {
			return
		}
	}
}

// keepPinging says whether the pinger of member wantID goes on: static
// addresses are pinged for ever (a restart there is a new executor); a
// lost cluster member is pinged for fenceWindow, so that should it come
// back (a frozen process resumed, a partition healed), its answer gets it
// fenced.
func (c *Client) keepPinging(wantID string) bool {
	if wantID == "" {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.execs[wantID]
	return !c.stopped && st != nil && (!st.isLost() || time.Since(st.lostAt) < fenceWindow)
}

// heard handles one keepalive answer (pong nil: none in time, which the
// deadline already accounts for).
func (c *Client) heard(addr, wantID string, pong *clusterpb.Pong) {
	if pong == nil {
		return
	}
	var lose []*execState
	var why string
	var fence *execState
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	var st *execState
	if wantID != "" {
		st = c.execs[wantID]
	} else {
		st = c.byAddr[addr]
	}
	switch {
	case wantID != "" && pong.ExecutorId != wantID:
		if st != nil && !st.isLost() {
			lose, why = append(lose, st), "its address answers as another process "+pong.ExecutorId+" (it restarted)"
		}
	default:
		if st == nil || st.id != pong.ExecutorId {
			if st != nil && !st.isLost() {
				lose, why = append(lose, st), "its address answers as another process "+pong.ExecutorId+" (it restarted)"
			}
			if old := c.execs[pong.ExecutorId]; old != nil {
				st = old // an incarnation declared lost that answers again
			} else {
				st = c.addExec(pong.ExecutorId, addr, pong.Name)
			}
			c.byAddr[addr] = st
		}
		if pong.Name != "" {
			st.nameV.Store(pong.Name)
		}
		switch {
		case st.isLost():
			fence = st // it must not serve under this id again
		case pong.Fenced:
			lose, why = append(lose, st), "it fenced itself"
		default:
			st.lastHeard, st.load = time.Now(), pong
			c.armDeadline(st)
			if !st.ready {
				st.ready = true
				c.notifyLocked()
			}
		}
	}
	c.mu.Unlock()
	for _, l := range lose {
		c.markLost(l, why)
	}
	if fence != nil {
		c.node.sys.Root.Send(fence.pid, &clusterpb.Fence{ExecutorId: fence.id, Reason: fence.lostWhy})
	}
}

// armDeadline (re)arms the executor's keepalive deadline: LostAfter after
// the latest answer it is lost, to the timer's precision, so a frozen
// executor's calls answer lost at most LostAfter after it stopped
// answering. c.mu is held.
func (c *Client) armDeadline(st *execState) {
	if st.deadline != nil {
		st.deadline.Reset(c.o.LostAfter)
		return
	}
	st.deadline = time.AfterFunc(c.o.LostAfter, func() {
		c.mu.Lock()
		silent := time.Since(st.lastHeard)
		late := !c.stopped && !st.isLost() && silent >= c.o.LostAfter
		c.mu.Unlock()
		if late {
			c.markLost(st, fmt.Sprintf("no answer to keepalives for %.1fs", silent.Seconds()))
		}
	})
}

// markLost declares an executor lost: every call on it answers "lost" at
// once, its conversations cannot continue there, and it is told to fence
// itself (should it be alive after all).
func (c *Client) markLost(st *execState, why string) {
	c.mu.Lock()
	if st.isLost() || c.stopped {
		c.mu.Unlock()
		return
	}
	st.lostAt, st.lostWhy = time.Now(), why
	close(st.lost)
	if st.deadline != nil {
		st.deadline.Stop()
	}
	c.notifyLocked()
	c.mu.Unlock()
	c.log.Warn("executor lost", "executor", st.name(), "id", st.id, "address", st.addr, "why", why)
	c.node.sys.Root.Send(st.pid, &clusterpb.Fence{ExecutorId: st.id, Reason: why})
	c.node.sys.Root.Stop(st.watcher)
}

// execWatcher watches one executor's actor: its termination (the process
// died, the connection closed) means the executor is lost.
type execWatcher struct {
	target *actor.PID
	onLost func(string)
}

func (w *execWatcher) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		ctx.Watch(w.target)
	case *actor.Stopping:
		ctx.Unwatch(w.target)
	case *actor.Terminated:
		w.onLost(terminatedWhy(m))
	}
}

func terminatedWhy(t *actor.Terminated) string {
	switch t.Why {
	case actor.TerminatedReason_AddressTerminated:
		return "its connection closed"
	case actor.TerminatedReason_NotFound:
		return "it no longer serves at its address"
	}
	return "its executor actor stopped"
}

// WaitExecutors waits until at least n executors are ready, or ctx ends.
func (c *Client) WaitExecutors(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		ready := 0
		for _, st := range c.execs {
			if st.ready && !st.isLost() {
				ready++
			}
		}
		ch := c.changed
		c.mu.Unlock()
		if ready >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d executors (%d ready: %s): %w", n, ready, c.describeExecutors(), ctx.Err())
		case <-ch:
		}
	}
}

// describeExecutors says what the front knows of each executor, for
// errors.
func (c *Client) describeExecutors() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, st := range c.execs {
		state := "not ready"
		switch {
		case st.isLost():
			state = "lost: " + st.lostWhy
		case st.ready:
			state = "ready"
		}
		out = append(out, fmt.Sprintf("%s at %s %s", st.name(), st.addr, state))
	}
	slices.Sort(out)
	if len(out) == 0 {
		return "none answered"
	}
	return strings.Join(out, "; ")
}
