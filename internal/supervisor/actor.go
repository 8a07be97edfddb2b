package supervisor

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/bashvisor/bashvisor/internal/actors"
	"github.com/bashvisor/bashvisor/internal/jobs"
	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/transact"
	"github.com/bashvisor/bashvisor/internal/truncate"
)

// The supervisor actor: the records of every job, by conversation, and
// admission (shares.go: what may start when; pressure.go: what the jobs
// and the host use). Refusals are *BusyError values, which the engine
// words.

type (
	startRequest struct {
		req   jobs.Request
		reply chan<- admitted
	}
	admitted struct {
		spec *actors.Spec
		pid  *actor.PID
		done <-chan jobs.Outcome
		ws   *workspace // the job's conversation's
		err  error
	}
	// withdrawRequest: a queued caller gives up; ack says whether it was
	// still waiting (false: it was admitted meanwhile, and the admission
	// is in its reply channel).
	withdrawRequest struct {
		reply chan<- admitted
		ack   chan<- bool
	}
	cancelRequest struct {
		conv, id string
		reason   jobs.Reason
	}
	killRequest struct {
		conv, id string
		reply    chan<- jobs.State
	}
	writeRequest struct {
		conv, id string
		data     []byte
		close    bool
		reply    chan<- error
	}
	listRequest struct {
		conv  string
		all   bool
		reply chan<- []jobs.State
	}
	endConversationRequest struct {
		conv  string
		reply chan<- endedConversation
	}
	endedConversation struct {
		states []jobs.State
		ws     *workspace // to close, in the caller's goroutine
	}
	// workspaceRequest asks for a conversation's workspace (nil: no
	// record of it).
	workspaceRequest struct {
		conv  string
		reply chan<- *workspace
	}
	statsRequest struct{ reply chan<- Stats }
	// heldRequest asks why a queued call still waits (nil: it does not).
	heldRequest struct {
		reply chan<- admitted
		ack   chan<- *BusyError
	}
	shutdownRequest struct{ leaveJobs bool }
)

// Stats is a snapshot of the supervisor's load.
type Stats struct {
	// Running is the number of foreground jobs running; Jobs the number of
	// background jobs running; Queued the number of calls waiting.
	Running, Jobs, Queued int
	// Busy is the CPUs wanted by the jobs measured busy, Starting the jobs
	// not yet measured (see config.Admission).
	Busy, Starting int
	// MemoryShort and ProcessesShort say what the host is short of.
	MemoryShort, ProcessesShort bool
}

// key identifies a job: its conversation and its id (background job ids
// are numbered per conversation).
type key struct{ conv, id string }

type entry struct {
	pid   *actor.PID
	state jobs.State
	p     pkey // its principal
	// starting: not yet measured, it counts as one busy CPU; units: the
	// CPUs it wants, once measured (0: idle).
	starting bool
	units    int
	// forgotten: its conversation was ended (EndConversation) while it
	// ran; it is neither listed nor remembered when it ends, even if the
	// conversation is used again meanwhile.
	forgotten bool
	// tx is its transaction (a workspace-write job's), whose last report
	// a listing shows while it runs.
	tx *transact.Tx
}

// conversation is the supervisor's bookkeeping of one conversation.
type conversation struct {
	account
	jobSeq uint64     // its background "job-N" ids
	dir    string     // its 0700 output directory ("" until needed)
	ending bool       // EndConversation: forget it when its last job ends
	ws     *workspace // its world, undo store and layers (nil until needed)
}

type supervisor struct {
	s        *Supervisor
	running  map[key]*entry     // jobs not yet reported final
	ended    map[key]jobs.State // ended background jobs
	order    []key              // ended jobs, oldest first
	children map[string]key     // live job actor id -> job
	killers  map[key][]chan<- jobs.State
	convs    map[string]*conversation
	shares
	yields   map[key]*pendingYield // by the foreground job's key
	cmdSeq   uint64                // foreground "cmd-N" ids, engine-wide
	stopping bool
	stopped  bool
}

// props: the supervisor's children are stopped, never restarted. Like the
// jobs, it runs a message in the sender's goroutine when idle (protoactor's
// synchronized dispatcher); it never blocks in Receive.
func props(s *Supervisor, host hostState) *actor.Props {
	stop := actor.NewOneForOneStrategy(0, time.Second, func(any) actor.Directive { return actor.StopDirective })
	return actor.PropsFromProducer(func() actor.Actor {
		return &supervisor{s: s, running: map[key]*entry{}, ended: map[key]jobs.State{}, children: map[string]key{},
			killers: map[key][]chan<- jobs.State{}, convs: map[string]*conversation{}, yields: map[key]*pendingYield{},
			shares: shares{principals: map[pkey]*principal{}, owed: map[owedKey]*owed{}, host: host}}
	}, actor.WithSupervisor(stop), actor.WithDispatcher(actor.NewSynchronizedDispatcher(300)))
}

func (sv *supervisor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *startRequest:
		sv.admit(ctx, m)
	case *withdrawRequest:
		m.ack <- sv.withdraw(m.reply)
	case *heldRequest:
		m.ack <- sv.heldWaiter(m.reply)
	case *loadSample:
		sv.sampled(ctx, m)
	case *engineDue:
		sv.engineDue(ctx, m.k)
	case *engineCharge:
		if c := sv.convs[m.conv]; c != nil && !sv.stopping {
			sv.chargeEngine(ctx, c, m.pk, m.cpu)
		}
	case *actors.Report:
		sv.update(ctx, m)
	case *workspaceRequest:
		var w *workspace
		if c := sv.convs[m.conv]; c != nil {
			w = sv.workspace(m.conv, c)
		}
		m.reply <- w
	case *actors.YieldRequest:
		sv.yield(ctx, m)
	case *writeRequest:
		sv.write(ctx, m)
	case *cancelRequest:
		if e, ok := sv.running[key{m.conv, m.id}]; ok {
			ctx.Send(e.pid, &actors.Cancel{Reason: m.reason})
		}
	case *killRequest:
		sv.kill(ctx, m)
	case *listRequest:
		m.reply <- sv.list(m.conv, m.all)
	case *endConversationRequest:
		sv.endConversation(ctx, m)
	case *statsRequest:
		m.reply <- sv.stats()
	case *actor.Terminated:
		sv.terminated(ctx, m.Who)
	case *shutdownRequest:
		sv.shutdown(ctx, m.leaveJobs)
	case *actor.Stopped:
		for _, o := range sv.owed {
			o.timer.Stop()
		}
		sv.s.final = sv.list("", true)
		var ws []*workspace
		for _, c := range sv.convs {
			ws = append(ws, c.ws)
		}
		go sv.s.finish(ws)
	}
}

func (sv *supervisor) conv(id string) *conversation {
	c := sv.convs[id]
	if c == nil {
		c = &conversation{}
		sv.convs[id] = c
	}
	return c
}

// workspace returns conversation id's workspace (record c), made on
// first use (cheap: the slow parts wait for their first use too).
func (sv *supervisor) workspace(id string, c *conversation) *workspace {
	if c.ws == nil {
		c.ws = sv.s.newWorkspace(id)
	}
	return c.ws
}

// start records a new job and spawns its actor, which waits for its
// process.
func (sv *supervisor) start(ctx actor.Context, req jobs.Request, queuedSince time.Time) admitted {
	c := sv.conv(req.Conversation)
	pk := principalKey(req)
	p := sv.principal(pk)
	spec := &actors.Spec{Request: req, Queued: time.Since(queuedSince)}
	dir, err := sv.outputDir(req.Conversation, c)
	if err != nil {
		return admitted{err: fmt.Errorf("%w: output directory: %w", proc.ErrStart, err)}
	}
	spec.SpoolDir = dir
	var done chan jobs.Outcome
	if req.Background {
		c.jobSeq++
		c.jobs++
		p.jobs++
		sv.bg++
		spec.ID = "job-" + strconv.FormatUint(c.jobSeq, 10)
		spec.Name = filepath.Base(dir) + "-" + spec.ID
		spec.OutputFile = filepath.Join(dir, spec.ID+".log")
	} else {
		sv.cmdSeq++
		c.running++
		p.running++
		sv.fg++
		spec.ID = "cmd-" + strconv.FormatUint(sv.cmdSeq, 10)
		done = make(chan jobs.Outcome, 1)
		spec.Done = done
	}
	pid := ctx.Spawn(actors.NewProps(spec, sv.s.res))
	k := key{spec.Conversation, spec.ID}
	// Measured (see pressure.go), unless the supervisor counts only: a
	// foreground job then counts as busy while it runs, a background one
	// not at all.
	e := &entry{pid: pid, p: pk, starting: !sv.s.countOnly || !req.Background, state: jobs.State{
		ID: spec.ID, Conversation: spec.Conversation, Command: spec.Command, Display: spec.Display,
		Background: spec.Background, Status: jobs.Running, OutputFile: spec.OutputFile, Started: time.Now(),
		Network: req.Sandbox != nil && req.Sandbox.Network != nil,
	}}
	sv.running[k] = e
	sv.charge(e, c, p, +1)
	p.ref(c, +1)
	sv.children[pid.Id] = k
	return admitted{spec: spec, pid: pid, done: done, ws: sv.workspace(req.Conversation, c)}
}

// outputDir returns the conversation's own 0700 output directory, making
// it on first use. Its name is a hash of the conversation id, so any id is
// safe as a path.
func (sv *supervisor) outputDir(conv string, c *conversation) (string, error) {
	if c.dir != "" {
		return c.dir, nil
	}
	sum := sha256.Sum256([]byte(conv))
	dir := filepath.Join(sv.s.outDir, "conversation-"+hex.EncodeToString(sum[:8]))
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return "", err
	}
	c.dir = dir
	return dir, nil
}

// update records a job's state; a final state stops its actor and frees
// its slot.
func (sv *supervisor) update(ctx actor.Context, m *actors.Report) {
	st := m.State
	if m.Finish != nil {
		m.Finish() // the job's file says it ended: now its state does too
	}
	k := key{st.Conversation, st.ID}
	e, ok := sv.running[k]
	if !ok {
		if st.Running() && st.Background {
			sv.yielded(ctx, k, st, m.Tx)
		}
		return
	}
	if m.Tx != nil {
		e.tx = m.Tx
	}
	if !st.Running() {
		sv.yieldFailed(k) // it ended before it could go on in the background
	}
	if st.Running() {
		e.state = st
		return
	}
	if rep := st.Changes.Report; rep != nil {
		sv.chargeEngine(ctx, sv.conv(k.conv), e.p, rep.CPU)
	}
	sv.release(ctx, k, e)
	if c := sv.convs[k.conv]; st.Background && st.Status != jobs.Errored && !e.forgotten && (c == nil || !c.ending) {
		sv.remember(st)
	}
	// Poison, not Stop: a user message, so a Cancel sent before this point
	// (a Kill crossing the final report) still reaches the actor, which
	// answers it with its final state.
	ctx.Poison(e.pid)
}

// release forgets a running job and gives what it held to the waiters.
func (sv *supervisor) release(ctx actor.Context, k key, e *entry) {
	delete(sv.running, k)
	sv.s.track.remove(k)
	c, p := sv.conv(k.conv), sv.principal(e.p)
	sv.charge(e, c, p, -1)
	p.ref(c, -1)
	if e.state.Background {
		c.jobs--
		p.jobs--
		sv.bg--
	} else {
		c.running--
		p.running--
		sv.fg--
	}
	sv.tidy(e.p)
	sv.dequeue(ctx)
}

func (sv *supervisor) remember(st jobs.State) {
	k := key{st.Conversation, st.ID}
	sv.ended[k] = st
	sv.order = append(sv.order, k)
	if len(sv.order) > MaxEnded {
		// The forgotten job's output file can no longer be reached through
		// the engine: remove it so a long-running server does not fill the
		// disk.
		if f := sv.ended[sv.order[0]].OutputFile; f != "" {
			_ = os.Remove(f)
		}
		delete(sv.ended, sv.order[0])
		sv.order = slices.Delete(sv.order, 0, 1)
	}
}

func (sv *supervisor) kill(ctx actor.Context, m *killRequest) {
	k := key{m.conv, m.id}
	if e, ok := sv.running[k]; ok && e.state.Background {
		// The reply is remembered too: if the actor fails before it
		// answers, terminated answers instead.
		sv.killers[k] = append(sv.killers[k], m.reply)
		ctx.Send(e.pid, &actors.Cancel{Reason: jobs.ReasonKilled, Reply: m.reply})
		return
	}
	m.reply <- sv.ended[k] // the zero State: no such job
}

// endConversation ends a conversation's running jobs (foreground and
// background) with the grace sequence, forgets its ended jobs and removes
// its output directory once they are gone. The reply lists the jobs it
// ended or forgot.
func (sv *supervisor) endConversation(ctx actor.Context, m *endConversationRequest) {
	var out []jobs.State
	for k, e := range sv.running {
		if k.conv == m.conv && !e.forgotten {
			ctx.Send(e.pid, &actors.Cancel{Reason: jobs.ReasonShutdown})
			e.forgotten = true
			out = append(out, e.state)
		}
	}
	sv.order = slices.DeleteFunc(sv.order, func(k key) bool {
		if k.conv != m.conv {
			return false
		}
		out = append(out, sv.ended[k])
		delete(sv.ended, k)
		return true
	})
	sv.queue = slices.DeleteFunc(sv.queue, func(w waiter) bool {
		if w.req.Conversation == m.conv {
			sv.unqueue(w)
			w.reply <- admitted{err: fmt.Errorf("%w: the conversation ended", ErrShutdown)}
			return true
		}
		return false
	})
	var ws *workspace
	if c := sv.convs[m.conv]; c != nil {
		ws, c.ws = c.ws, nil // the caller closes it; a later job gets a new one
	}
	if c := sv.convs[m.conv]; c != nil && c.running == 0 && c.jobs == 0 && c.queued == 0 {
		if c.dir != "" {
			_ = os.RemoveAll(c.dir)
		}
		delete(sv.convs, m.conv)
	} else if c != nil {
		c.ending = true // removed when its last job ends (see terminated)
	}
	m.reply <- endedConversation{states: out, ws: ws}
}

// terminated handles the end of a job's actor: one that stopped without a
// final report failed.
func (sv *supervisor) terminated(ctx actor.Context, who *actor.PID) {
	k, ok := sv.children[who.Id]
	if !ok {
		return
	}
	delete(sv.children, who.Id)
	if e, ok := sv.running[k]; ok {
		sv.release(ctx, k, e)
		if e.state.Background {
			st := e.state
			st.Status, st.Reason, st.Ended = jobs.Killed, jobs.ReasonFailed, time.Now()
			sv.remember(st)
			for _, r := range sv.killers[k] {
				select {
				case r <- st:
				default: // already answered
				}
			}
		}
	}
	delete(sv.killers, k)
	sv.yieldFailed(k)
	if c := sv.convs[k.conv]; c != nil && c.ending && c.running == 0 && c.jobs == 0 {
		if c.dir != "" {
			_ = os.RemoveAll(c.dir)
		}
		if c.ws != nil { // the conversation was used again while it ended
			go c.ws.close()
		}
		delete(sv.convs, k.conv)
	}
	sv.maybeStop(ctx)
}

func (sv *supervisor) shutdown(ctx actor.Context, leaveJobs bool) {
	if sv.stopping {
		return
	}
	sv.stopping = true
	for _, w := range sv.queue {
		sv.unqueue(w)
		w.reply <- admitted{err: ErrShutdown}
	}
	sv.queue = nil
	for _, e := range sv.running {
		if e.state.Background && leaveJobs {
			ctx.Send(e.pid, &actors.Detach{})
			continue
		}
		ctx.Send(e.pid, &actors.Cancel{Reason: jobs.ReasonShutdown})
	}
	sv.maybeStop(ctx)
}

func (sv *supervisor) maybeStop(ctx actor.Context) {
	if sv.stopping && !sv.stopped && len(sv.children) == 0 {
		sv.stopped = true
		ctx.Stop(ctx.Self())
	}
}

// list returns the background jobs of conversation conv (all of them with
// all), running and ended, oldest first.
func (sv *supervisor) list(conv string, all bool) []jobs.State {
	var out []jobs.State
	for k, e := range sv.running {
		if c := sv.convs[k.conv]; e.forgotten || c != nil && c.ending {
			continue // forgotten: being ended
		}
		if e.state.Background && (all || k.conv == conv) {
			st := e.state
			st.Changes = changesOf(e.tx)
			out = append(out, st)
		}
	}
	for _, k := range sv.order {
		if all || k.conv == conv {
			out = append(out, sv.ended[k])
		}
	}
	slices.SortFunc(out, func(a, b jobs.State) int { return a.Started.Compare(b.Started) })
	return out
}

// --- yield and stdin ---

// A yield: a foreground job that reached its timeout asks to go on as a
// background job. The supervisor takes a background slot and a job id for
// it at once (so no other job can take them) and tells the job; the job
// answers with a running background report under the new id (yielded:
// the foreground slot is freed), or ends first (yieldFailed: the slot and,
// when still the last one given, the id are taken back).
type pendingYield struct {
	newKey key
	p      pkey   // the job's principal
	seq    uint64 // the job number taken
	file   string
}

func (sv *supervisor) yield(ctx actor.Context, m *actors.YieldRequest) {
	k := key{m.Conversation, m.ID}
	e, ok := sv.running[k]
	if !ok || e.state.Background || sv.yields[k] != nil {
		return
	}
	c, p := sv.conv(k.conv), sv.principal(e.p)
	var refuse error
	if sv.stopping || c.ending {
		refuse = fmt.Errorf("%w: the engine or the conversation is ending", ErrShutdown)
	} else if b := sv.jobsLimit(e.p, p, c, false); b != nil {
		refuse = b
	}
	var f *truncate.File
	var id, name string
	if refuse == nil {
		dir, err := sv.outputDir(k.conv, c)
		if err == nil {
			id = "job-" + strconv.FormatUint(c.jobSeq+1, 10)
			name = filepath.Join(dir, id+".log")
			f, err = truncate.CreateFile(name, sv.s.res.JobFileCap)
		}
		if err != nil {
			refuse = own(fmt.Errorf("%w: output file: %w", proc.ErrStart, err))
		}
	}
	if refuse != nil {
		ctx.Send(e.pid, &actors.YieldRefused{Err: refuse})
		return
	}
	c.jobSeq++
	c.jobs++
	p.jobs++
	sv.bg++
	sv.yields[k] = &pendingYield{newKey: key{k.conv, id}, p: e.p, seq: c.jobSeq, file: name}
	ctx.Send(e.pid, &actors.BecomeBackground{ID: id, OutputFile: name, File: f})
}

// yielded moves a job that went on in the background (its first report
// under its new id) from the foreground records to the background ones.
func (sv *supervisor) yielded(ctx actor.Context, nk key, st jobs.State, tx *transact.Tx) {
	for old, y := range sv.yields {
		if y.newKey != nk {
			continue
		}
		delete(sv.yields, old)
		e := sv.running[old]
		delete(sv.running, old)
		e.state = st
		if tx != nil {
			e.tx = tx
		}
		sv.running[nk] = e
		sv.children[e.pid.Id] = nk
		sv.s.track.rekey(old, nk)
		if ks, ok := sv.killers[old]; ok {
			sv.killers[nk] = ks
			delete(sv.killers, old)
		}
		c, p := sv.conv(nk.conv), sv.principal(e.p)
		c.running--
		p.running--
		sv.fg--
		if sv.s.countOnly { // unmeasured background jobs count for nothing
			sv.charge(e, c, p, -1)
			e.starting, e.units = false, 0
		}
		sv.dequeue(ctx)
		return
	}
}

// yieldFailed takes back what a yield took for a job that ended first.
func (sv *supervisor) yieldFailed(k key) {
	y := sv.yields[k]
	if y == nil {
		return
	}
	delete(sv.yields, k)
	c := sv.conv(k.conv)
	c.jobs--
	sv.bg--
	sv.principal(y.p).jobs--
	sv.tidy(y.p)
	if c.jobSeq == y.seq {
		c.jobSeq-- // nobody took a later number: the id was never seen
	}
	_ = os.Remove(y.file)
}

// write forwards data to a background job's stdin.
func (sv *supervisor) write(ctx actor.Context, m *writeRequest) {
	k := key{m.conv, m.id}
	if e, ok := sv.running[k]; ok && e.state.Background {
		ctx.Send(e.pid, &actors.Write{Data: m.data, Close: m.close, Reply: m.reply})
		return
	}
	if _, ok := sv.ended[k]; ok {
		m.reply <- jobs.ErrEnded
		return
	}
	m.reply <- ErrNoSuchJob
}
