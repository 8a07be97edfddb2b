package supervisor

import (
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/bashvisor/bashvisor/internal/jobs"
)

// Admission (see config.Admission for the model): what a principal and a
// conversation run and wait for, the fair queue, and the decisions.

// account is what one principal, or one conversation, runs and waits for.
type account struct {
	running  int // foreground jobs running
	jobs     int // background jobs running
	queued   int // calls waiting
	starting int // jobs not yet measured: each counts as one busy CPU
	units    int // the CPUs its measured busy jobs want
}

// load is the CPUs the account's jobs want, or may want.
func (a *account) load() int { return a.units + a.starting }

func (a *account) empty() bool { return *a == account{} }

// pkey names a principal: a call's Principal, or for a call without one
// its conversation (conv set), which is then its own principal.
type pkey struct {
	name string
	conv bool
}

func principalKey(req jobs.Request) pkey {
	if req.Principal != "" {
		return pkey{name: req.Principal}
	}
	return pkey{name: req.Conversation, conv: true}
}

// principal is the supervisor's bookkeeping of one principal.
type principal struct {
	account
	// startBudget is how many unmeasured jobs it may have at once while
	// the busy jobs want fewer than MaxBusy CPUs: MaxBusy, multiplied by
	// four whenever the jobs it started all turned out idle (a slow start).
	startBudget int
	served      uint64 // when a waiter of its was last admitted
	active      bool   // it runs something that counts, or waits (shares.active)
	// convs counts, per conversation of the principal, its jobs running
	// and calls waiting there: the conversations that share its share.
	convs map[*conversation]int
}

// ref counts a job or waiter of the principal in conversation c (+1), or
// its end (-1).
func (p *principal) ref(c *conversation, n int) {
	if p.convs[c] += n; p.convs[c] <= 0 {
		delete(p.convs, c)
	}
}

// convShare is conversation c's part of the principal's share: an equal
// part for each of its conversations that run or wait, at least 1.
func (p *principal) convShare(c *conversation, share int) int {
	n := len(p.convs)
	if p.convs[c] == 0 {
		n++
	}
	return max(1, share/n)
}

type waiter struct {
	req   jobs.Request
	reply chan<- admitted
	since time.Time
	pk    pkey
	p     *principal
	c     *conversation
}

// shares is the supervisor's admission state.
type shares struct {
	principals map[pkey]*principal
	queue      []waiter // in arrival order
	fg, bg     int      // foreground and background jobs running, engine-wide
	starting   int      // jobs not yet measured, engine-wide
	units      int      // CPUs wanted by the measured busy jobs, engine-wide
	served     uint64   // admissions from the queue so far
	active     int      // principals that run something that counts, or wait
	owed       map[owedKey]*owed
	host       hostState
}

// activity updates whether principal p is among those that share MaxBusy.
func (sv *supervisor) activity(p *principal) {
	if a := p.load() > 0 || p.queued > 0; a != p.active {
		p.active = a
		if a {
			sv.active++
		} else {
			sv.active--
		}
	}
}

func (sv *supervisor) principal(pk pkey) *principal {
	p := sv.principals[pk]
	if p == nil {
		p = &principal{startBudget: sv.s.admission.MaxBusy, convs: map[*conversation]int{}}
		sv.principals[pk] = p
	}
	return p
}

// tidy forgets a principal with nothing running or waiting.
func (sv *supervisor) tidy(pk pkey) {
	if p := sv.principals[pk]; p != nil && p.account.empty() {
		delete(sv.principals, pk)
	}
}

// charge adds (sign +1) or removes (-1) what job e wants of the CPUs to
// its accounts: one busy CPU while it is starting, else its units.
func (sv *supervisor) charge(e *entry, c *conversation, p *principal, sign int) {
	if e.starting {
		c.starting += sign
		p.starting += sign
		sv.starting += sign
		sv.activity(p)
		return
	}
	c.units += sign * e.units
	p.units += sign * e.units
	sv.units += sign * e.units
	sv.activity(p)
}

// admit starts a job now, queues it, or refuses it.
func (sv *supervisor) admit(ctx actor.Context, m *startRequest) {
	if sv.stopping {
		m.reply <- admitted{err: ErrShutdown}
		return
	}
	c := sv.conv(m.req.Conversation)
	c.ending = false // a conversation used again after EndConversation lives on
	pk := principalKey(m.req)
	p := sv.principal(pk)
	if m.req.Background {
		if b := sv.jobsLimit(pk, p, c, true); b != nil {
			sv.tidy(pk)
			m.reply <- admitted{err: b}
			return
		}
		m.reply <- sv.start(ctx, m.req, time.Now())
		return
	}
	held := sv.held(pk, p, c, sv.share(p))
	if held == nil {
		m.reply <- sv.start(ctx, m.req, time.Now())
		return
	}
	if b := sv.queueLimit(pk, p, held); b != nil {
		sv.tidy(pk)
		m.reply <- admitted{err: b}
		return
	}
	sv.queue = append(sv.queue, waiter{req: m.req, reply: m.reply, since: time.Now(), pk: pk, p: p, c: c})
	p.queued++
	c.queued++
	p.ref(c, +1)
	sv.activity(p)
}

// busy is a refusal of the call of principal pk, with the engine's counts.
func (sv *supervisor) busy(l Limit, scope Scope, pk pkey, count, most int) *BusyError {
	b := &BusyError{Limit: l, Scope: scope, Count: count, Max: most, Running: sv.fg, Queued: len(sv.queue)}
	if !pk.conv {
		b.Principal = pk.name
	}
	return b
}

// held says why a foreground call of principal pk in conversation c cannot
// start now, or nil when it can; share is the principal's share of MaxBusy.
func (sv *supervisor) held(pk pkey, p *principal, c *conversation, share int) *BusyError {
	lim := sv.s.admission
	switch {
	case c.running >= lim.MaxRunningPerConversation:
		return sv.busy(LimitRunning, ScopeConversation, pk, c.running, lim.MaxRunningPerConversation)
	case p.running >= lim.MaxRunningPerPrincipal:
		return sv.busy(LimitRunning, ScopePrincipal, pk, p.running, lim.MaxRunningPerPrincipal)
	case sv.fg >= lim.MaxRunning:
		return sv.busy(LimitRunning, ScopeHost, pk, sv.fg, lim.MaxRunning)
	case c.load() < p.convShare(c, share) && p.load() < 2*share:
		// Its share: whatever the others run. (A principal with more
		// conversations than its share gets one command each, up to
		// twice its share.)
		return nil
	case sv.host.memShort:
		return sv.memoryBusy(pk)
	case sv.host.pidsShort:
		return sv.busy(LimitProcesses, ScopeHost, pk, sv.host.tasks, sv.host.taskMax)
	case sv.units+sv.starting < lim.MaxBusy:
		return nil
	case !sv.s.countOnly && sv.units < lim.MaxBusy && p.starting < p.startBudget && (p.load() < 2*share || sv.alone(p)):
		// Its slow start, while the measured busy jobs leave room, and,
		// while another principal runs or waits, up to twice its share:
		// commands too short to be measured (on a starved host, most)
		// stay unmeasured all their life, and a slow start without that
		// bound let 40 of them run where 8 were due, shared by count.
		return nil
	}
	return sv.busy(LimitCPU, ScopeHost, pk, sv.units+sv.starting, lim.MaxBusy)
}

func (sv *supervisor) memoryBusy(pk pkey) *BusyError {
	b := sv.busy(LimitMemory, ScopeHost, pk, sv.host.availMiB, sv.host.floorMiB)
	b.Pressure = sv.host.pressure
	return b
}

// alone reports whether no principal but p runs or waits.
func (sv *supervisor) alone(p *principal) bool {
	others := sv.active
	if p.active {
		others--
	}
	return others == 0
}

// share is the CPUs' worth principal p may use whatever the others do:
// MaxBusy divided among the principals that run or wait (p among them),
// at least 1.
func (sv *supervisor) share(p *principal) int {
	n := sv.active
	if !p.active {
		n++
	}
	return max(1, sv.s.admission.MaxBusy/n)
}

// queueLimit refuses a call that would wait beyond a queue cap: the
// engine's (naming the call's own running cap when that is what held it)
// or its principal's.
func (sv *supervisor) queueLimit(pk pkey, p *principal, held *BusyError) *BusyError {
	lim := sv.s.admission
	switch {
	case len(sv.queue) >= lim.MaxQueue && held.Limit == LimitRunning && held.Scope != ScopeHost:
		return held
	case len(sv.queue) >= lim.MaxQueue:
		return sv.busy(LimitQueue, ScopeHost, pk, len(sv.queue), lim.MaxQueue)
	case p.queued >= lim.MaxQueuePerPrincipal:
		return sv.busy(LimitQueue, ScopePrincipal, pk, p.queued, lim.MaxQueuePerPrincipal)
	}
	return nil
}

// jobsLimit refuses a background job over a jobs cap (or, for a new one,
// not a yield, while the host is short of memory or processes).
func (sv *supervisor) jobsLimit(pk pkey, p *principal, c *conversation, fresh bool) *BusyError {
	lim := sv.s.admission
	switch {
	case c.jobs >= lim.MaxJobsPerConversation:
		return sv.busy(LimitJobs, ScopeConversation, pk, c.jobs, lim.MaxJobsPerConversation)
	case p.jobs >= lim.MaxJobsPerPrincipal:
		return sv.busy(LimitJobs, ScopePrincipal, pk, p.jobs, lim.MaxJobsPerPrincipal)
	case sv.bg >= lim.MaxJobs:
		return sv.busy(LimitJobs, ScopeHost, pk, sv.bg, lim.MaxJobs)
	case fresh && sv.host.memShort:
		return sv.memoryBusy(pk)
	case fresh && sv.host.pidsShort:
		return sv.busy(LimitProcesses, ScopeHost, pk, sv.host.tasks, sv.host.taskMax)
	}
	return nil
}

// dequeue admits waiters while some can start, fairly: first the waiter
// of the principal using the fewest CPUs (among equals, the one served
// least recently), then of its conversation using the fewest, then the
// oldest.
func (sv *supervisor) dequeue(ctx actor.Context) {
	for len(sv.queue) > 0 {
		best := -1
		for i := range sv.queue {
			w := &sv.queue[i]
			if sv.held(w.pk, w.p, w.c, sv.share(w.p)) != nil {
				continue
			}
			if best < 0 || before(w, &sv.queue[best]) {
				best = i
			}
		}
		if best < 0 {
			return
		}
		w := sv.queue[best]
		sv.queue = slices.Delete(sv.queue, best, best+1)
		sv.unqueue(w)
		sv.served++
		w.p.served = sv.served
		w.reply <- sv.start(ctx, w.req, w.since)
	}
}

// before says whether waiter a goes before waiter b, which arrived
// earlier.
func before(a, b *waiter) bool {
	switch {
	case a.p.load() != b.p.load():
		return a.p.load() < b.p.load()
	case a.p != b.p && a.p.served != b.p.served:
		return a.p.served < b.p.served
	}
	return a.c.load() < b.c.load()
}

// unqueue takes a waiter that leaves the queue off its accounts.
func (sv *supervisor) unqueue(w waiter) {
	w.p.queued--
	w.c.queued--
	w.p.ref(w.c, -1)
	sv.activity(w.p)
}

// withdraw takes a waiter whose caller gave up out of the queue; it
// reports whether it was still there.
func (sv *supervisor) withdraw(reply chan<- admitted) bool {
	i := slices.IndexFunc(sv.queue, func(w waiter) bool { return w.reply == reply })
	if i < 0 {
		return false
	}
	w := sv.queue[i]
	sv.queue = slices.Delete(sv.queue, i, i+1)
	sv.unqueue(w)
	sv.tidy(w.pk)
	return true
}

// heldWaiter says what holds a waiter now (nil: it is not waiting).
func (sv *supervisor) heldWaiter(reply chan<- admitted) *BusyError {
	i := slices.IndexFunc(sv.queue, func(w waiter) bool { return w.reply == reply })
	if i < 0 {
		return nil
	}
	w := sv.queue[i]
	if b := sv.held(w.pk, w.p, w.c, sv.share(w.p)); b != nil {
		return b
	}
	// It could start, but others go first.
	return sv.busy(LimitCPU, ScopeHost, w.pk, sv.units+sv.starting, sv.s.admission.MaxBusy)
}

// sampled applies what the watch measured: jobs' CPU use (a principal
// whose new jobs all turned out idle may start four times as many
// unmeasured ones; one that started a busy one, MaxBusy again), and the
// host's state.
func (sv *supervisor) sampled(ctx actor.Context, m *loadSample) {
	lim := sv.s.admission
	idle, busy := map[*principal]bool{}, map[*principal]bool{}
	for _, jl := range m.jobs {
		e := sv.running[jl.k]
		if e == nil {
			continue // ended meanwhile
		}
		c, p := sv.conv(jl.k.conv), sv.principal(e.p)
		if jl.units == unmeasurable { // counted, not measured
			jl.units = 0
			if !e.state.Background {
				jl.units = 1
			}
		}
		if e.starting {
			if jl.units > 0 {
				busy[p] = true
			} else {
				idle[p] = true
			}
		}
		sv.charge(e, c, p, -1)
		e.starting, e.units = false, jl.units
		sv.charge(e, c, p, +1)
	}
	for p := range idle {
		if !busy[p] {
			p.startBudget = min(lim.MaxRunningPerPrincipal, 4*p.startBudget)
		}
	}
	for p := range busy {
		p.startBudget = lim.MaxBusy
	}
	for _, p := range sv.principals {
		if p.starting == 0 && p.queued == 0 && !idle[p] {
			p.startBudget = lim.MaxBusy
		}
	}
	if m.host != nil {
		sv.host = *m.host
	}
	sv.dequeue(ctx)
}

func (sv *supervisor) stats() Stats {
	return Stats{Running: sv.fg, Jobs: sv.bg, Queued: len(sv.queue), Busy: sv.units, Starting: sv.starting,
		MemoryShort: sv.host.memShort, ProcessesShort: sv.host.pidsShort}
}

// The engine's own CPU time spent on a conversation's change sets
// (diffing, judging and applying them: transact.Report.CPU) counts
// against its principal's share: once a job's change set is done, its
// conversation and principal count one more busy CPU (as does the
// engine) for as long as that work took, after what they owe already,
// as a job of theirs that had run that long on one CPU would have. A
// background job's checkpoints are charged when it ends, accepting a
// held change set when it is applied (engineCharge).

// owedKey names who owes the engine's work: a conversation and its
// principal.
type owedKey struct {
	c  *conversation
	pk pkey
}

// owed is a charge for the engine's work: one busy CPU until until.
type owed struct {
	p     *principal
	until time.Time
	timer *time.Timer // sends engineDue at until
}

// engineCharge asks the supervisor actor to charge the engine's CPU
// time cpu to conversation conv of principal pk (an accept's).
type engineCharge struct {
	conv string
	pk   pkey
	cpu  time.Duration
}

// engineDue tells the supervisor actor that charge k may have run out.
type engineDue struct{ k owedKey }

// chargeEngine charges d of the engine's CPU time to conversation c of
// principal pk.
func (sv *supervisor) chargeEngine(ctx actor.Context, c *conversation, pk pkey, d time.Duration) {
	if d <= 0 {
		return
	}
	k, now := owedKey{c: c, pk: pk}, time.Now()
	o := sv.owed[k]
	if o == nil {
		self, root := ctx.Self(), ctx.ActorSystem().Root
		o = &owed{p: sv.principal(pk), until: now, timer: time.AfterFunc(d, func() { root.Send(self, &engineDue{k: k}) })}
		sv.owed[k] = o
		c.units++
		o.p.units++
		sv.units++
		sv.activity(o.p)
	}
	o.until = later(o.until, now).Add(d)
	o.timer.Reset(o.until.Sub(now))
}

// engineDue ends charge k once it ran out, and admits what waited for
// it.
func (sv *supervisor) engineDue(ctx actor.Context, k owedKey) {
	o := sv.owed[k]
	if o == nil {
		return
	}
	if d := time.Until(o.until); d > 0 {
		o.timer.Reset(d)
		return
	}
	delete(sv.owed, k)
	k.c.units--
	o.p.units--
	sv.units--
	sv.activity(o.p)
	sv.tidy(k.pk)
	sv.dequeue(ctx)
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
