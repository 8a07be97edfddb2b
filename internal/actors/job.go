package actors

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/bashvisor/bashvisor/internal/egress"
	"github.com/bashvisor/bashvisor/internal/jobs"
	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/transact"
)

// pollInterval is how often an ending job checks whether its group is
// gone; backgroundPoll how often a background job whose shell exited checks
// for the rest of its group (it lives as long as its group).
const (
	pollInterval   = 5 * time.Millisecond
	backgroundPoll = time.Second
)

// phase is where a job is in its life. Every message moves it by one
// transition (see Receive); settle is the one place that ends it.
type phase uint8

const (
	// starting: the actor exists, its process is being started by the
	// caller (Launch); a Cancel is remembered and applied at once when the
	// process arrives.
	starting phase = iota
	// running: the shell runs.
	running
	// draining: the shell exited on its own; the job waits (bounded) for
	// the output pipe to close, and a background job for its group to
	// empty; processes a foreground shell left behind are then ended
	// (ending) or kept.
	draining
	// ending: the group was sent SIGTERM (and SIGCONT); after Grace it
	// gets SIGKILL, after CleanupWait the job gives up and names the
	// survivors.
	ending
	// cleaning: the job's outcome is known; slow cleanup (the sandbox's
	// scratch directory, moving kept processes out of the cgroup) runs off
	// the actor, which waits for it before it answers.
	cleaning
	// done: the outcome was delivered; the actor waits to be stopped by
	// the supervisor and answers late Cancels with its final state.
	done
)

func (p phase) String() string {
	return [...]string{"starting", "running", "draining", "ending", "cleaning", "done"}[p]
}

// NewProps returns the props of the actor of the job spec. Its dispatcher
// runs a message in the goroutine that sends it when the actor is idle
// (protoactor's synchronized dispatcher), so a job costs no goroutine
// hand-off per message; Receive never blocks, so that is safe.
func NewProps(spec *Spec, res *Resources) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &job{spec: spec, res: res} },
		actor.WithDispatcher(actor.NewSynchronizedDispatcher(300)))
}

// job is the actor of one job.
type job struct {
	spec *Spec
	res  *Resources

	system *actor.ActorSystem
	self   *actor.PID
	parent *actor.PID

	ph     phase
	l      *Launched
	start  time.Time
	reason jobs.Reason // why the engine is ending it (ending), or pending (starting)

	// The output: a reader goroutine per pipe copies it into the buffers
	// (or a background job's file) through the redactor.
	pipes    []*os.File // read ends still open
	open     int        // pipes not yet at EOF
	readers  sync.WaitGroup
	stopRead atomic.Bool
	// waiting is set by whoever waits for the shell's exit (see
	// waitExit).
	waiting atomic.Bool

	exited  bool
	exitAt  time.Time
	state   *proc.Exit
	waitErr error

	timeout, wakeT, cpuT             *time.Timer
	killSent                         bool
	graceEnd, cleanupEnd, groupGone  time.Time
	leftovers, survivors             []proc.Member
	leftRunning, pipeHeld, detaching bool

	outcome jobs.Outcome
	final   *jobs.State
	waiters []chan<- jobs.State
	// line is a background job's completion line, which finish appends to
	// its output file once, when the supervisor records the final state
	// (Report.Finish), so that the file never says the job ended while its
	// state says running, nor the other way round.
	line     string
	finished sync.Once
	// pending finishes the file and answers the waiters of the last final
	// state reported (see answer), once.
	pending func()

	// stdin: the queue of the writer goroutine (nil without stdin; closed
	// when the job ends).
	stdin chan writeReq
	// Yield: the foreground output's switchable destinations, and the
	// state of a yield asked for.
	outSW, errSW *switchWriter
	yielding     bool
	yielded      bool // its foreground buffers were handed over (jobs.Outcome.Yielded)
	yieldRefused error

	// commitCtx bounds the wait of the job's commit (Spec.Tx) for
	// another apply to the workspace: stopCommit ends it when the caller
	// gives up (Cancel with ReasonCancelled); the changes are held then.
	commitCtx  context.Context
	stopCommit context.CancelFunc
}

// commitContext is commitCtx, made on first use.
func (j *job) commitContext() context.Context {
	if j.commitCtx == nil {
		j.commitCtx, j.stopCommit = context.WithCancel(context.Background())
	}
	return j.commitCtx
}

// Internal messages: from the pidfd waiter, the readers, the timers and the
// cleanup goroutine.
type (
	exited struct {
		state *proc.Exit
		err   error
	}
	drained  struct{}
	tick     struct{}
	timedOut struct{}
	cpuTick  struct{}
	cleaned  struct {
		errs    error
		changes jobs.Changes  // the transaction's commit
		network egress.Report // the closed proxy's report (nil: none closed)
		line    string        // the completion line (see job.line)
	}
)

// Receive moves the job through its phases, one transition per message.
func (j *job) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		j.system, j.self, j.parent, j.start = ctx.ActorSystem(), ctx.Self(), ctx.Parent(), time.Now()
	case *Launched:
		j.onLaunched(ctx, m)
	case *LaunchFailed:
		j.onLaunchFailed(ctx, m.Err)
	case exited:
		j.exited, j.state, j.waitErr, j.exitAt = true, m.state, m.err, time.Now()
		if j.ph == running {
			j.enter(draining)
		}
		j.step(ctx)
	case drained:
		j.open--
		j.step(ctx)
	case tick:
		j.step(ctx)
	case timedOut:
		j.onTimeout(ctx)
	case cpuTick:
		j.checkCPU(ctx)
	case *Cancel:
		j.onCancel(ctx, m)
	case *Detach:
		j.onDetach(ctx, m)
	case *Write:
		j.onWrite(m)
	case *BecomeBackground:
		j.onBecomeBackground(ctx, m)
	case *YieldRefused:
		j.onYieldRefused(ctx, m)
	case cleaned:
		if m.errs != nil && j.res.Log != nil {
			j.res.Log.Warn("job cleanup", "job", j.spec.ID, "err", m.errs)
		}
		j.outcome.Changes = m.changes
		if m.network != nil {
			j.outcome.Network = m.network
		}
		j.line = m.line
		j.deliver(ctx)
	case *actor.Stopping:
		if j.ph == done && j.pending != nil {
			j.pending() // the supervisor stopped before it recorded the final state
		}
		j.emergency()
	}
}

// onTimeout: a foreground job reached its timeout (it yields when it
// may, or ends), a background job its lifetime. A foreground shell that
// exited before its deadline did not time out (Request.Timeout).
func (j *job) onTimeout(ctx actor.Context) {
	switch {
	case j.ph == running && !j.spec.Background && j.spec.Yield != nil && j.parent != nil:
		if !j.yielding {
			j.yielding = true
			ctx.Send(j.parent, &YieldRequest{Conversation: j.spec.Conversation, ID: j.spec.ID})
		}
	case j.ph == running && !j.spec.Background:
		j.terminate(ctx, jobs.ReasonTimeout)
	case (j.ph == running || j.ph == draining) && j.spec.Background:
		j.terminate(ctx, jobs.ReasonLifetime)
	}
}

// enter moves the job to phase p.
func (j *job) enter(p phase) {
	j.ph = p
	if p == done && j.l != nil && j.l.cg == nil {
		j.res.Watchdog.Untrack(j.l.p.Pid) // ended, or left running on purpose
	}
	if p == done && j.l != nil {
		j.l.p.Release() // its group is not signalled again
	}
	if j.res.trace != nil {
		j.res.trace(j.spec.ID, p)
	}
}

// send delivers msg to the actor from any goroutine.
func (j *job) send(msg any) { j.system.Root.Send(j.self, msg) }

// onLaunched: starting -> running (or ending, when a Cancel came first).
func (j *job) onLaunched(ctx actor.Context, l *Launched) {
	if j.ph != starting {
		return
	}
	j.l, j.start = l, l.start
	j.enter(running)
	switch {
	case l.out != nil && j.spec.Yield != nil:
		// Output may have to move to a file mid-stream (yield).
		j.outSW = &switchWriter{w: l.out}
		j.readInto(l.p.Stdout, j.outSW)
		if l.errBuf != nil {
			j.errSW = &switchWriter{w: l.errBuf}
			j.readInto(l.p.Stderr, j.errSW)
		}
	case l.out != nil:
		j.readInto(l.p.Stdout, l.out)
		if l.errBuf != nil {
			j.readInto(l.p.Stderr, l.errBuf)
		}
	case l.file != nil:
		j.readInto(l.p.Stdout, l.file)
	}
	if l.stdin != nil {
		j.stdin = make(chan writeReq, stdinQueue)
		go writeLoop(l.stdin, j.stdin, j.spec.TTY != nil)
	}
	if len(j.pipes) == 0 {
		j.startWaiter(l.p)
	}
	if j.spec.Timeout > 0 {
		j.timeout = time.AfterFunc(j.spec.Timeout-time.Since(j.start), func() { j.send(timedOut{}) })
	}
	if l.cg != nil && j.spec.Limits.CPUTime > 0 {
		j.cpuT = time.AfterFunc(cpuCheckAfter(j.spec.Limits.CPUTime), func() { j.send(cpuTick{}) })
	}
	if j.spec.Background {
		j.report(ctx, j.jobState(nil), nil)
	}
	if j.reason != jobs.ReasonNone { // cancelled while starting
		reason := j.reason
		j.reason = jobs.ReasonNone
		j.terminate(ctx, reason)
	}
}

// onLaunchFailed: starting -> done, with the error.
func (j *job) onLaunchFailed(ctx actor.Context, err error) {
	if j.ph != starting {
		return
	}
	j.outcome = jobs.Outcome{Err: err, Duration: time.Since(j.start), Queued: j.spec.Queued}
	st := j.jobState(&j.outcome)
	st.Status, st.Reason, st.Err = jobs.Errored, jobs.ReasonNone, err
	j.final = &st
	j.enter(done)
	j.answer(ctx, st)
}

func (j *job) onCancel(ctx actor.Context, m *Cancel) {
	switch j.ph {
	case done:
		// A Cancel that crossed the final report: answer with it, through
		// the supervisor (after the first report, so once the completion
		// line is written).
		if reply, st := m.Reply, *j.final; reply != nil {
			j.report(ctx, st, func() {
				select {
				case reply <- st:
				default:
				}
			})
		}
		return
	case starting:
		if j.reason == jobs.ReasonNone || m.Reason != jobs.ReasonLeftovers {
			j.reason = m.Reason
		}
	}
	if m.Reply != nil {
		j.waiters = append(j.waiters, m.Reply)
	}
	if m.Reason == jobs.ReasonCancelled {
		j.commitContext()
		j.stopCommit()
	}
	if j.ph != starting {
		j.terminate(ctx, m.Reason)
	}
}

// terminate: running or draining -> ending, sending SIGTERM and SIGCONT to
// the whole group. An explicit request replaces ReasonLeftovers, which
// explains less.
func (j *job) terminate(ctx actor.Context, reason jobs.Reason) {
	switch j.ph {
	case ending:
		if j.reason == jobs.ReasonLeftovers && reason != jobs.ReasonLeftovers {
			j.reason = reason
		}
		return
	case running, draining:
	default:
		return
	}
	j.reason = reason
	j.enter(ending)
	if j.timeout != nil {
		j.timeout.Stop()
	}
	j.signalAll(syscall.SIGTERM)
	j.signalAll(syscall.SIGCONT)
	j.graceEnd = time.Now().Add(j.res.Lifecycle.Grace)
	j.step(ctx)
}

// checkCPU ends a job whose processes used up Limits.CPUTime (their
// cgroup's CPU time), or schedules the next check: after the time the
// remaining CPU time lasts with every CPU busy, between 10 ms and 1 s.
func (j *job) checkCPU(ctx actor.Context) {
	if j.ph != running && j.ph != draining {
		return
	}
	used, err := j.l.cg.CPU()
	if err == nil && used >= j.spec.Limits.CPUTime {
		j.terminate(ctx, jobs.ReasonCPULimit)
		return
	}
	j.cpuT.Reset(cpuCheckAfter(j.spec.Limits.CPUTime - used))
}

// cpuCheckAfter is how long CPU time left lasts at the most with every CPU
// busy, bounded to [10 ms, 1 s].
func cpuCheckAfter(left time.Duration) time.Duration {
	return min(max(left/time.Duration(runtime.NumCPU()), 10*time.Millisecond), time.Second)
}

// step re-evaluates the job after any event, by phase.
func (j *job) step(ctx actor.Context) {
	now := time.Now()
	switch j.ph {
	case draining:
		j.stepDraining(ctx, now)
	case ending:
		j.stepEnding(ctx, now)
	}
}

// stepDraining: the shell exited on its own.
func (j *job) stepDraining(ctx actor.Context, now time.Time) {
	drainEnd := j.exitAt.Add(j.res.Lifecycle.DrainWait)
	if j.open > 0 && now.Before(drainEnd) {
		j.wake(drainEnd.Sub(now))
		return
	}
	if j.spec.Background && j.anyAlive() {
		j.wake(backgroundPoll) // the job lives while its group does
		return
	}
	if members := j.liveMembers(); len(members) > 0 {
		j.leftovers = members
		if !j.res.Lifecycle.KeepLeftovers {
			j.terminate(ctx, jobs.ReasonLeftovers)
			return
		}
		j.leftRunning = true
	}
	if j.slowReader(now, j.exitAt) {
		j.wake(pollInterval)
		return
	}
	j.pipeHeld = j.open > 0 && !j.leftRunning // a kept leftover may hold it
	j.settle(ctx)
}

// stepEnding: the group was told to end.
func (j *job) stepEnding(ctx actor.Context, now time.Time) {
	if j.exited && !j.anyAlive() {
		if j.groupGone.IsZero() {
			j.groupGone = now
		}
		drainEnd := j.groupGone.Add(j.res.Lifecycle.DrainWait)
		if j.open > 0 && now.Before(drainEnd) {
			j.wake(drainEnd.Sub(now))
			return
		}
		if j.slowReader(now, j.groupGone) {
			j.wake(pollInterval)
			return
		}
		j.pipeHeld = j.open > 0
		j.settle(ctx)
		return
	}
	if !j.killSent && !now.Before(j.graceEnd) {
		j.signalAll(syscall.SIGKILL)
		j.killSent, j.cleanupEnd = true, now.Add(j.res.Lifecycle.CleanupWait)
	}
	if j.killSent && !now.Before(j.cleanupEnd) {
		j.survivors = j.liveMembers()
		j.settle(ctx)
		return
	}
	j.wake(pollInterval)
}

// settle ends the job (draining or ending -> cleaning -> done): it stops
// the timers and the readers, builds the outcome, hands the cgroup back,
// and runs the slow cleanup off the actor. deliver answers once that is
// done.
func (j *job) settle(ctx actor.Context) {
	j.enter(cleaning)
	j.stopTimers()
	j.closeStdin()
	j.closePipes()
	o := jobs.Outcome{
		Reason:       j.reason,
		Leftovers:    members(j.leftovers),
		LeftRunning:  j.leftRunning,
		Survivors:    members(j.survivors),
		PipeHeld:     j.pipeHeld,
		Duration:     time.Since(j.start),
		Queued:       j.spec.Queued,
		Refused:      j.l.refused.get(),
		YieldRefused: j.yieldRefused,
		Network:      j.l.network(), // a snapshot: final once the proxy closed (cleaned)
	}
	if o.Reason == jobs.ReasonLeftovers {
		o.Reason = jobs.ReasonNone // the shell itself ended on its own
	}
	if j.state != nil {
		o.Exited = true
		o.ExitCode, o.Signal = exitStatus(j.state)
	} else if j.waitErr != nil { // never report an unknown status as success
		o.Err = fmt.Errorf("%w: waiting for the shell: %w", jobs.ErrActorFailed, j.waitErr)
	}
	if j.l.out != nil && !j.yielded {
		o.Output = j.l.out.Result()
		_ = j.l.out.Close()
	}
	if j.l.errBuf != nil && !j.yielded {
		r := j.l.errBuf.Result()
		o.Stderr = &r
		_ = j.l.errBuf.Close()
	}
	o.Usage, o.Limits = jobs.Usage(j.usage()), j.l.applied
	tx := j.l.tx
	if tx == nil {
		j.line = j.completion(o)
	}
	j.outcome = o
	j.l.live.End()
	if j.l.sbx == nil && !j.leftRunning && tx == nil {
		// The caller first: handing the cgroup back (reading and
		// resetting its counters) is not the command's time.
		j.deliver(ctx)
		j.releaseCgroup()
		j.l.fz.Close()
		return
	}
	gone := j.releaseCgroup()
	if j.l.cg == nil {
		// Leftovers that were ended are gone once nothing of the group or
		// the namespace is alive; kept ones and survivors are not.
		gone = !j.leftRunning && len(j.survivors) == 0 && !j.pipeHeld && !j.anyAlive()
		j.l.fz.Close()
	}
	// Slow parts: removing a scratch directory full of files, moving kept
	// processes out of the cgroup, committing the job's transaction
	// (Spec.Tx).
	// Kept processes and survivors may still use the scratch directory.
	l, cg, sbx, keep := j.l, j.l.cg, j.l.sbx, j.leftRunning
	cleanSandbox := sbx != nil && !keep && len(j.survivors) == 0
	commitCtx, stopCommit := j.commitContext(), j.stopCommit
	go func() {
		defer stopCommit()
		var errs []error
		if keep && cg != nil {
			errs = append(errs, cg.Release())
			cg.Remove()
		}
		var network egress.Report
		if cleanSandbox {
			network = l.closeProxy()
			errs = append(errs, sbx.Cleanup(gone))
		}
		var changes jobs.Changes
		if tx != nil {
			changes.Report, changes.Err = tx.Commit(commitCtx, gone)
			o.Changes = changes
			if network != nil {
				o.Network = network
			}
		}
		j.send(cleaned{errs: errors.Join(errs...), changes: changes, network: network, line: j.completion(o)})
	}()
}

// releaseCgroup hands the cgroup of a job that ended cleanly (nothing had
// to be ended, kept or given up on) back for reuse and removes any other,
// except one whose processes are kept (settle moves them out first). It
// reports whether every process of the job is known to be gone.
func (j *job) releaseCgroup() bool {
	cg := j.l.cg
	if cg == nil {
		return false
	}
	switch {
	case j.leftRunning:
		return false
	case j.reason != jobs.ReasonNone || len(j.leftovers) > 0 || len(j.survivors) > 0 || j.pipeHeld:
		gone := len(j.survivors) == 0 && !cg.Populated()
		cg.Remove()
		return gone
	case cg.Populated(): // a task step did not see as a member: never gone
		cg.Remove()
		return false
	default:
		cg.RecycleEmpty() // step saw no member before settling
		return true
	}
}

// deliver: cleaning -> done. The caller hears first (a foreground caller
// is waiting for exactly this), then the supervisor, then whoever asked to
// cancel.
func (j *job) deliver(ctx actor.Context) {
	st := j.jobState(&j.outcome)
	j.final = &st
	j.enter(done)
	if !j.spec.Background && j.spec.Done != nil {
		j.spec.Done <- j.outcome
		// The caller, woken by the send, waits in this P's run queue
		// behind this goroutine, which has the rest to do (the report
		// to the supervisor, the actor's stop, handing the cgroup back:
		// tens of µs on a loaded machine). Let it run first.
		runtime.Gosched()
	}
	j.answer(ctx, st)
}

// answer reports the final state to the supervisor and to the waiters.
// The waiters hear it once the supervisor recorded it (Report.Finish),
// the completion line written: a Kill's caller finds it in the file.
func (j *job) answer(ctx actor.Context, st jobs.State) {
	if !j.spec.Background && j.spec.Done != nil && st.Status == jobs.Errored {
		j.spec.Done <- j.outcome
	}
	waiters := j.waiters
	j.waiters = nil
	j.pending = sync.OnceFunc(func() {
		j.finish()
		for _, w := range waiters {
			select {
			case w <- st:
			default: // answered already (the supervisor's terminated)
			}
		}
	})
	j.report(ctx, st, j.pending)
}

// report sends a state to the supervisor, with finish (nil: none) for it
// to call as it records a final one. Without a parent (tests), finish runs
// here and a final state stops the actor itself.
func (j *job) report(ctx actor.Context, st jobs.State, finish func()) {
	if j.parent == nil {
		if finish != nil {
			finish()
		}
		if !st.Running() {
			ctx.Stop(j.self)
		}
		return
	}
	var tx *transact.Tx
	if j.l != nil {
		tx = j.l.tx
	}
	ctx.Send(j.parent, &Report{State: st, Tx: tx, Finish: finish})
}

// onDetach: any phase -> done, leaving the processes running.
func (j *job) onDetach(ctx actor.Context, m *Detach) {
	if m.Reply != nil {
		j.waiters = append(j.waiters, m.Reply)
	}
	switch j.ph {
	case done:
		j.answer(ctx, *j.final)
		return
	case cleaning:
		return // about to answer
	case starting:
		j.enter(done)
		st := j.jobState(nil)
		st.Status, st.Reason, st.Ended = jobs.Detached, jobs.ReasonShutdown, time.Now()
		j.final = &st
		j.answer(ctx, st)
		return
	}
	j.stopTimers()
	j.closeStdin()
	j.discardRest()
	j.closePipes()
	j.closeFile()
	usage := j.usage()
	j.l.live.End()
	if j.l.cg != nil {
		_ = j.l.cg.Release()
		j.l.cg.Remove()
	}
	j.enter(done)
	st := j.jobState(nil)
	st.Status, st.Reason, st.Ended, st.Usage = jobs.Detached, jobs.ReasonShutdown, time.Now(), jobs.Usage(usage)
	j.final = &st
	j.answer(ctx, st)
}

// emergency runs when the actor is stopped before it delivered (a panic or
// a forced stop): it ends the group at once (no grace: it cannot wait) and
// answers the caller with ErrActorFailed.
func (j *job) emergency() {
	if j.ph == done {
		return
	}
	j.enter(done)
	j.stopTimers()
	o := jobs.Outcome{Err: jobs.ErrActorFailed, Reason: jobs.ReasonFailed, Duration: time.Since(j.start)}
	j.closeStdin()
	if j.l != nil {
		j.signalAll(syscall.SIGKILL)
		j.l.fz.Close() // the command's mount namespace (settle's, otherwise)
		j.closePipes()
		j.finish() // no completion line: the file just closes
		j.l.live.End()
		if j.l.cg != nil {
			j.l.cg.Remove()
		}
		j.l.closeProxy()
		if j.l.sbx != nil {
			_ = j.l.sbx.Cleanup(false)
		}
		if j.l.out != nil && !j.yielded {
			o.Output = j.l.out.Result()
			_ = j.l.out.Close()
		}
	}
	j.outcome = o
	st := j.jobState(&o)
	j.final = &st
	if !j.spec.Background && j.spec.Done != nil {
		j.spec.Done <- o
	}
	for _, w := range j.waiters {
		w <- st
	}
	j.waiters = nil
}

// --- timers and state ---

// wake schedules a tick after d, replacing any earlier one.
func (j *job) wake(d time.Duration) {
	if j.wakeT == nil {
		j.wakeT = time.AfterFunc(d, func() { j.send(tick{}) })
		return
	}
	j.wakeT.Reset(d)
}

// The shell's exit is waited for once, by a goroutine of its own
// (startWaiter) or by a reader of its output after end of file
// (waitExit), whichever claims it first. A reader starts the waiter
// before it waits for output, and when it reads a full buffer
// (readInto): a shell that is still running, or whose output floods,
// gets one, as a pipe that something else holds (a background process,
// a shell that closed its output) may never reach end of file. A
// command that ended before its reader first ran (a short one: about
// 70% of `bash -c true` on a loaded machine) costs no goroutine for its
// exit.

// startWaiter starts the goroutine that waits for the shell's exit,
// unless the exit is claimed.
func (j *job) startWaiter(p *proc.Process) {
	if j.waiting.CompareAndSwap(false, true) {
		go j.wait(p)
	}
}

// waitExit waits for the shell's exit in the calling goroutine, unless
// it is claimed.
func (j *job) waitExit(p *proc.Process) {
	if j.waiting.CompareAndSwap(false, true) {
		j.wait(p)
	}
}

// wait waits for the shell to exit and tells the actor.
func (j *job) wait(p *proc.Process) {
	st, err := p.Wait()
	j.send(exited{state: st, err: err})
}

func (j *job) stopTimers() {
	for _, t := range []*time.Timer{j.timeout, j.wakeT, j.cpuT} {
		if t != nil {
			t.Stop()
		}
	}
}

// jobState builds the supervisor's record; o is nil while running.
func (j *job) jobState(o *jobs.Outcome) jobs.State {
	st := jobs.State{
		ID: j.spec.ID, Conversation: j.spec.Conversation, Command: j.spec.Command, Display: j.spec.Display,
		Background: j.spec.Background, Started: j.start, Status: jobs.Running, OutputFile: j.spec.OutputFile,
		TTY: j.spec.TTY != nil, Dir: j.spec.Dir, Network: j.spec.Sandbox != nil && j.spec.Sandbox.Network != nil,
	}
	if j.l != nil {
		st.Pid, st.Output, st.Live = j.l.p.Pid, j.l.file, liveUsage{j.l.live}
	}
	if o != nil {
		st.Ended, st.Usage = time.Now(), o.Usage
		if o.Exited {
			code := o.ExitCode
			st.ExitCode = &code
		}
		st.Status, st.Reason, st.Signal, st.Changes = o.Status(), o.Reason, o.Signal, o.Changes
	}
	return st
}
