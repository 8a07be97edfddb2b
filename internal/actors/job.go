package actors

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bashvisor/bashvisor/internal/jobs"

	"github.com/asynkron/protoactor-go/actor"
	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/secret"
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

	exited  bool
	exitAt  time.Time
	state   *proc.Exit
	waitErr error

	timeout, wakeT, cpuT             *time.Timer
	live                             *jobs.LiveUsage // the cgroup, for CurrentUsage
	killSent                         bool
	graceEnd, cleanupEnd, groupGone  time.Time
	leftovers, survivors             []proc.Member
	leftRunning, pipeHeld, detaching bool

	outcome jobs.Outcome
	final   *jobs.State
	waiters []chan<- jobs.State

	// stdin: the queue of the writer goroutine (nil without stdin; closed
	// when the job ends).
	stdin chan writeReq
	// Yield: the foreground output's switchable destinations, and the
	// state of a yield asked for.
	outSW, errSW *switchWriter
	yielding     bool
	yielded      bool // its foreground buffers were handed over (jobs.Outcome.Yielded)
	yieldRefused string
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
	cleaned  struct{ errs error }
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
		// A foreground shell that exited before its deadline did not time
		// out (Spec.Timeout).
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
		j.yielding = false
		j.yieldRefused = m.Err.Error()
		j.terminate(ctx, jobs.ReasonTimeout)
	case cleaned:
		if m.errs != nil && j.res.Log != nil {
			j.res.Log.Warn("job cleanup", "job", j.spec.ID, "err", m.errs)
		}
		j.deliver(ctx)
	case *actor.Stopping:
		j.emergency()
	}
}

// enter moves the job to phase p.
func (j *job) enter(p phase) {
	j.ph = p
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
	go func(p *proc.Process) {
		st, err := p.Wait()
		j.send(exited{state: st, err: err})
	}(l.p)
	if j.spec.Timeout > 0 {
		j.timeout = time.AfterFunc(j.spec.Timeout-time.Since(j.start), func() { j.send(timedOut{}) })
	}
	if l.cg != nil {
		j.live = jobs.NewLiveUsage(l.cg)
		if j.spec.Limits.CPUTime > 0 {
			j.cpuT = time.AfterFunc(cpuCheckAfter(j.spec.Limits.CPUTime), func() { j.send(cpuTick{}) })
		}
	}
	if j.spec.Background {
		j.report(ctx, j.jobState(nil))
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
		// A Cancel that crossed the final report: answer with it.
		if m.Reply != nil {
			m.Reply <- *j.final
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
		Leftovers:    j.leftovers,
		LeftRunning:  j.leftRunning,
		Survivors:    j.survivors,
		PipeHeld:     j.pipeHeld,
		Duration:     time.Since(j.start),
		Queued:       j.spec.Queued,
		Refused:      j.l.refused.get(),
		YieldRefused: j.yieldRefused,
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
	o.Usage, o.Limits = j.usage(), j.l.applied
	if j.spec.Background && j.spec.Completion != nil {
		j.appendLine(j.spec.Completion(o))
	}
	j.outcome = o
	j.live.End()
	gone := j.releaseCgroup()
	if j.l.sbx == nil && !j.leftRunning {
		j.deliver(ctx)
		return
	}
	// Slow parts: removing a scratch directory full of files, moving kept
	// processes out of the cgroup.
	// Kept processes and survivors may still use the scratch directory.
	l, cg, sbx, keep := j.l, j.l.cg, j.l.sbx, j.leftRunning
	cleanSandbox := sbx != nil && !keep && len(j.survivors) == 0
	go func() {
		var errs []error
		if keep && cg != nil {
			errs = append(errs, cg.Release())
			cg.Remove()
		}
		if cleanSandbox {
			l.closeProxy()
			errs = append(errs, sbx.Cleanup(gone))
		}
		j.send(cleaned{errs: errors.Join(errs...)})
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
	}
	j.answer(ctx, st)
}

// answer reports the final state to the supervisor and to the waiters.
func (j *job) answer(ctx actor.Context, st jobs.State) {
	if !j.spec.Background && j.spec.Done != nil && st.Status == jobs.Errored {
		j.spec.Done <- j.outcome
	}
	j.report(ctx, st)
	for _, w := range j.waiters {
		w <- st
	}
	j.waiters = nil
}

// report sends a state to the supervisor. Without a parent (tests), a
// final state stops the actor itself.
func (j *job) report(ctx actor.Context, st jobs.State) {
	if j.parent == nil {
		if !st.Running() {
			ctx.Stop(j.self)
		}
		return
	}
	ctx.Send(j.parent, &Report{State: st})
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
	usage := j.usage()
	j.live.End()
	if j.l.cg != nil {
		_ = j.l.cg.Release()
		j.l.cg.Remove()
	}
	j.enter(done)
	st := j.jobState(nil)
	st.Status, st.Reason, st.Ended, st.Usage = jobs.Detached, jobs.ReasonShutdown, time.Now(), usage
	j.final = &st
	j.answer(ctx, st)
}

// discardRest keeps a detached job that writes through the engine's pipe
// (Launch: secret values to redact) from dying of EPIPE once nobody reads:
// a `cat` in a session of its own, started through sh so that it is not
// the engine's child, drains the pipe into /dev/null. Nothing written
// after the engine stopped reaches the output file, which says so: it
// could hold secret values the engine can no longer redact.
func (j *job) discardRest() {
	if j.l.file == nil || len(j.pipes) == 0 {
		return
	}
	dup := -1
	rc, err := j.pipes[0].SyscallConn()
	if err == nil {
		cerr := rc.Control(func(fd uintptr) { dup, err = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) })
		err = errors.Join(err, cerr)
	}
	note := "\n\n[output after the engine stopped is discarded: it could hold secret values the engine can no longer redact]\n"
	if err == nil {
		j.stopRead.Store(true)
		j.closePipes() // the reader flushed what it read; the rest waits in the pipe
		err = unix.SetNonblock(dup, false)
		in := os.NewFile(uintptr(dup), "job-output")
		if err == nil {
			var sh, cat string
			if sh, err = exec.LookPath("sh"); err == nil {
				if cat, err = exec.LookPath("cat"); err == nil {
					// The pipe is fd 3: an asynchronous list's stdin is
					// /dev/null.
					c := exec.Command(sh, "-c", `"$0" <&3 3<&- >/dev/null &`, cat)
					c.ExtraFiles, c.Dir, c.Env = []*os.File{in}, "/", []string{}
					c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
					err = c.Run()
				}
			}
		}
		in.Close()
	}
	if err != nil {
		note = fmt.Sprintf("\n\n[output after the engine stopped is lost: %v]\n", err)
	}
	j.appendLine(note[2:]) // appendLine adds the blank line itself
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
		j.closePipes()
		j.live.End()
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

// --- the process group and the cgroup ---

// The job's processes: with a cgroup, exactly the cgroup's members (every
// descendant stays in it whatever it does with sessions and process
// groups); without one, the shell's process group. Once the shell is reaped
// and its group is empty, the kernel may give the group's id to a new
// process group (pids wrap quickly on a busy host), so without a cgroup a
// group id is only trusted while it still has a live member, and with one
// it is not consulted after the shell exited.

// liveMembers lists the live processes of the job.
func (j *job) liveMembers() []proc.Member {
	if cg := j.l.cg; cg != nil {
		if !cg.Populated() { // cgroup.events is cheaper than cgroup.procs
			return nil
		}
		return cg.Members()
	}
	return proc.LiveMembers(j.l.p.Pid)
}

// anyAlive reports whether a process of the job is still alive.
func (j *job) anyAlive() bool {
	if cg := j.l.cg; cg != nil {
		return cg.Populated()
	}
	return proc.GroupAlive(j.l.p.Pid)
}

// signalAll sends sig to every process of the job: the process group while
// the shell is not reaped (its id cannot have been reused), and every
// member of the cgroup; SIGKILL is cgroup.kill.
func (j *job) signalAll(sig syscall.Signal) {
	cg := j.l.cg
	switch {
	case !j.exited:
		_ = j.l.p.SignalGroup(sig)
	case cg == nil && proc.GroupAlive(j.l.p.Pid):
		_ = j.l.p.SignalGroup(sig)
	}
	if cg == nil {
		return
	}
	if sig == syscall.SIGKILL {
		_ = cg.Kill()
		return
	}
	skip := j.l.p.Pid // already signalled as a group
	if j.exited {
		skip = 0
	}
	cg.Signal(sig, skip)
}

// --- the output ---

// A pipe that has carried floodBytes is enlarged to floodPipeSize (from
// the default 64 KiB), so a flooding command keeps writing while the
// buffer (and its spool file) takes the previous chunk; quieter commands
// keep the small default.
const (
	floodBytes    = 256 << 10
	floodPipeSize = 1 << 20
)

// readBufs holds the read buffers; a reader holds one only while data
// flows, never while parked on a quiet pipe.
var readBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// readInto copies r into dst until EOF, until r is closed or until
// stopRead, then sends drained. It reads with raw non-blocking reads
// inside RawConn.Read so that a parked reader holds no buffer. The output
// goes through the redactor, whose held-back tail (a possible start of a
// secret value) is flushed at the end; closePipes waits for that.
func (j *job) readInto(r *os.File, dst io.Writer) {
	j.pipes = append(j.pipes, r)
	j.open++
	j.readers.Add(1)
	w := dst
	var sw *secret.StreamWriter
	if j.res.Redactor.Len() > 0 {
		sw = j.res.Redactor.Writer(dst)
		w = sw
	}
	go func() {
		defer j.send(drained{})
		defer j.readers.Done()
		if sw != nil {
			defer sw.Close() // a file's errors show at the next write (the completion line)
		}
		rc, err := r.SyscallConn()
		if err != nil {
			return
		}
		var total int
		_ = rc.Read(func(fd uintptr) bool {
			bp := readBufs.Get().(*[]byte)
			defer readBufs.Put(bp)
			for {
				n, err := unix.Read(int(fd), *bp)
				switch {
				case n > 0:
					if total < floodBytes && total+n >= floodBytes {
						// Best effort: the kernel may refuse (pipe-max-size,
						// per-user pipe limits).
						_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, floodPipeSize)
					}
					total += n
					_, _ = w.Write((*bp)[:n])
					if j.stopRead.Load() {
						return true
					}
				case errors.Is(err, unix.EINTR):
				case errors.Is(err, unix.EAGAIN):
					return false
				default: // EOF or error
					return true
				}
			}
		})
	}()
}

// slowReader reports whether an output pipe is still being read although
// every writer is gone (POLLHUP): on a loaded machine the reader may not
// have run yet, and it will see EOF shortly, so the job waits for it (up
// to CleanupWait after since) instead of calling the pipe held.
func (j *job) slowReader(now, since time.Time) bool {
	if j.open == 0 || !now.Before(since.Add(j.res.Lifecycle.CleanupWait)) {
		return false
	}
	for _, f := range j.pipes {
		rc, err := f.SyscallConn()
		if err != nil {
			return false
		}
		hup := false
		_ = rc.Control(func(fd uintptr) {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(pfd, 0)
			hup = err == nil && n > 0 && pfd[0].Revents&unix.POLLHUP != 0
		})
		if !hup {
			return false
		}
	}
	return true
}

// closePipes closes the read ends still open (their readers return at
// once), waits for the readers to have written everything they read, and
// closes a background job's output file.
func (j *job) closePipes() {
	for _, f := range j.pipes {
		f.Close()
	}
	j.pipes = nil
	j.readers.Wait()
	if j.l != nil && j.l.file != nil {
		j.l.file.Close()
		j.l.file = nil
	}
}

// appendLine appends a line to a background job's output file, after a
// blank line.
func (j *job) appendLine(line string) {
	f, err := os.OpenFile(j.spec.OutputFile, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.WriteString("\n\n" + line)
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

func (j *job) stopTimers() {
	for _, t := range []*time.Timer{j.timeout, j.wakeT, j.cpuT} {
		if t != nil {
			t.Stop()
		}
	}
}

// usage reads what the job used from its cgroup, and its CPU time from the
// shell's rusage without one (see proc.Usage).
func (j *job) usage() proc.Usage {
	var u proc.Usage
	if cg := j.l.cg; cg != nil {
		var err error
		if u, err = cg.Usage(); err != nil && j.res.Log != nil {
			j.res.Log.Warn("reading the job's resource usage", "job", j.spec.ID, "err", err)
		}
	}
	if j.state != nil && u.CPU == 0 {
		ru := &j.state.Rusage
		u.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return u
}

// exitStatus returns the exit code (128+n for signal n) and signal name.
func exitStatus(st *proc.Exit) (int, string) {
	if st.Status.Signaled() {
		return 128 + int(st.Status.Signal()), signalName(st.Status.Signal())
	}
	return st.ExitCode(), ""
}

// signalName returns "SIGKILL" style names.
func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return fmt.Sprintf("signal %d", int(s))
}

// jobState builds the supervisor's record; o is nil while running.
func (j *job) jobState(o *jobs.Outcome) jobs.State {
	st := jobs.State{
		ID: j.spec.ID, Conversation: j.spec.Conversation, Command: j.spec.Command, Display: j.spec.Display,
		Background: j.spec.Background, Started: j.start, Status: jobs.Running, OutputFile: j.spec.OutputFile,
	}
	if j.l != nil {
		st.Pid = j.l.p.Pid
	}
	st.Live = j.live
	if o != nil {
		st.Ended, st.Usage = time.Now(), o.Usage
		if o.Exited {
			code := o.ExitCode
			st.ExitCode = &code
		}
		st.Status, st.Reason, st.Signal = o.Status(), o.Reason, o.Signal
	}
	return st
}

// --- stdin ---

// stdinQueue bounds the writes waiting for a job to read its input.
const stdinQueue = 4

// stdinWriteWait bounds how long a write waits for the job to read more of
// it: a job that reads slowly but steadily takes any amount.
const stdinWriteWait = 10 * time.Second

type writeReq struct {
	data  []byte
	close bool
	reply chan<- error
}

// onWrite queues a write to the job's stdin; the writer goroutine answers.
// The actor never blocks: a job that does not read fills the queue, and
// then a write is refused at once.
func (j *job) onWrite(m *Write) {
	var err error
	switch {
	case j.ph == starting:
		err = jobs.ErrEnded // cannot happen: the job is not listed before it runs
	case j.stdin == nil && (j.l == nil || j.l.stdin == nil):
		err = jobs.ErrNoStdin
	case j.stdin == nil, j.exited, j.ph != running && j.ph != draining:
		err = jobs.ErrEnded
	}
	if err != nil {
		m.Reply <- err
		return
	}
	select {
	case j.stdin <- writeReq{data: m.Data, close: m.Close, reply: m.Reply}:
	default:
		m.Reply <- fmt.Errorf("%w: %d earlier writes still wait for it; nothing was sent", jobs.ErrStdinBusy, stdinQueue)
	}
}

// closeStdin ends the writer goroutine and closes the job's input (which
// also ends a write blocked on it).
func (j *job) closeStdin() {
	if j.stdin == nil {
		return
	}
	close(j.stdin)
	j.stdin = nil
	_ = j.l.stdin.Close()
}

// writeLoop writes the queued data to f in order. Closing a terminal's
// input sends ^D (EOF at the start of a line) rather than hanging up the
// terminal.
func writeLoop(f *os.File, q <-chan writeReq, tty bool) {
	closed := false
	for r := range q {
		var err error
		switch {
		case closed:
			err = jobs.ErrStdinClosed
		default:
			err = writeAll(f, r.data)
			if err == nil && r.close {
				if tty {
					_, err = f.Write([]byte{4}) // ^D
				} else {
					err = f.Close()
				}
				closed = true
			}
		}
		r.reply <- err
	}
	_ = f.Close()
}

// writeAll writes data to f, waiting up to stdinWriteWait each time the
// job stops reading; an error says how much of data it took.
func writeAll(f *os.File, data []byte) error {
	total := len(data)
	progress := time.Now() // when the job last took some
	for len(data) > 0 {
		_ = f.SetWriteDeadline(time.Now().Add(time.Second))
		n, err := f.Write(data)
		data = data[n:]
		if n > 0 {
			progress = time.Now()
		}
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded) && time.Since(progress) < stdinWriteWait:
			// It reads, or may yet: wait on.
		case errors.Is(err, os.ErrDeadlineExceeded) && len(data) == total:
			return fmt.Errorf("%w (waited %s); nothing was sent", jobs.ErrStdinBusy, stdinWriteWait)
		case errors.Is(err, os.ErrDeadlineExceeded):
			return fmt.Errorf("%w (waited %s) after it took %d of %d bytes; the rest was not sent", jobs.ErrStdinBusy, stdinWriteWait, total-len(data), total)
		case errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrClosed) || errors.Is(err, syscall.EIO):
			if len(data) == total {
				return jobs.ErrEnded
			}
			return fmt.Errorf("%w after it took %d of %d bytes", jobs.ErrEnded, total-len(data), total)
		default:
			return err
		}
	}
	return nil
}

// --- yield ---

// switchWriter passes writes to w until switchTo moves them elsewhere;
// a write in progress finishes first, so no byte goes to both or neither.
type switchWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *switchWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *switchWriter) switchTo(w io.Writer) {
	s.mu.Lock()
	s.w = w
	s.mu.Unlock()
}

// onBecomeBackground: a foreground job that reached its timeout goes on
// as a background job (running or draining stays so). Its output from now
// on goes to the file; the caller gets what it printed so far.
func (j *job) onBecomeBackground(ctx actor.Context, m *BecomeBackground) {
	if !j.yielding || j.spec.Background || (j.ph != running && j.ph != draining) {
		// Ended meanwhile (cancelled, or ended on its own): the supervisor
		// takes back the job id when its final report arrives.
		m.File.Close()
		return
	}
	j.yielding = false
	j.outSW.switchTo(m.File)
	if j.errSW != nil {
		j.errSW.switchTo(m.File)
	}
	o := jobs.Outcome{Duration: time.Since(j.start), Queued: j.spec.Queued,
		Yielded: &jobs.Yielded{ID: m.ID, OutputFile: m.OutputFile}, Limits: j.l.applied}
	o.Output = j.l.out.Result()
	_ = j.l.out.Close()
	if j.l.errBuf != nil {
		r := j.l.errBuf.Result()
		o.Stderr = &r
		_ = j.l.errBuf.Close()
	}
	done := j.spec.Done
	sp := *j.spec
	sp.ID, sp.Background, sp.OutputFile, sp.Done = m.ID, true, m.OutputFile, nil
	sp.Timeout, sp.Completion = sp.Yield.Lifetime, sp.Yield.Completion
	j.spec = &sp
	// The caller may still read the buffers (progress): they stay, unused.
	j.yielded, j.l.file = true, m.File
	if sp.Timeout > 0 {
		j.timeout = time.AfterFunc(sp.Timeout, func() { j.send(timedOut{}) })
	}
	// Report first: the supervisor then lists the job under its new id
	// before the caller, who may use the id at once, has the result.
	j.report(ctx, j.jobState(nil))
	done <- o
	j.step(ctx)
}
