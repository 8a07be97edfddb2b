package actors

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/proc"
	"github.com/bashvisor/bashvisor/secret"
	"github.com/bashvisor/bashvisor/truncate"
)

// pollInterval is how often a terminating actor checks whether its group
// is gone; backgroundPoll how often a background job whose shell exited
// checks for the rest of its group.
const (
	pollInterval   = 5 * time.Millisecond
	backgroundPoll = time.Second
)

// ErrActorFailed is reported when a command actor stopped unexpectedly.
var ErrActorFailed = errors.New("command actor failed")

// NewProps returns the props of a command actor for cmd.
func NewProps(cmd *Command) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &commandActor{cmd: cmd} })
}

type commandActor struct {
	cmd    *Command
	system *actor.ActorSystem
	self   *actor.PID

	p      *proc.Process
	cg     *proc.Cgroup // nil: the process group is the unit
	out    *truncate.Buffer
	errBuf *truncate.Buffer
	pipes  []*os.File // read ends still open
	open   int        // pipes not yet drained
	// file is a background job's output file when the job's output comes
	// through a pipe (Command.Redactor); readers counts the reader
	// goroutines still running, stopRead asks them to stop early.
	file     *os.File
	readers  sync.WaitGroup
	stopRead atomic.Bool

	start, exitAt time.Time
	exited        bool
	state         *os.ProcessState
	waitErr       error
	// callerLaunched: the process was started by Launch in the caller.
	callerLaunched bool

	timeout *time.Timer
	wakeT   *time.Timer

	terminating   bool
	reason        Reason
	killSent      bool
	graceEnd      time.Time
	cleanupEnd    time.Time
	groupGoneAt   time.Time
	leftovers     []proc.Member
	leftRunning   bool
	survivors     []proc.Member
	pipeHeld      bool
	finished      bool
	waiters       []func(JobState)
	final         *JobState // the final state once reported
	started       bool
	doneSent      bool
	backgroundErr error
}

func (a *commandActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.onStart(ctx)
	case exited:
		a.exited, a.state, a.waitErr, a.exitAt = true, m.state, m.err, time.Now()
		a.advance(ctx)
	case drained:
		a.open--
		a.advance(ctx)
	case tick:
		a.advance(ctx)
	case timedOut:
		switch {
		case a.cmd.Background:
			a.terminate(ctx, ReasonLifetime)
		case !a.exited:
			a.terminate(ctx, ReasonTimeout)
		}
		// A foreground shell that exited before its deadline did not time
		// out: what is left (draining, ending leftovers) is bounded by
		// DrainWait and the grace sequence, and reported as leftovers.
	case *Cancel:
		if a.finished && a.final != nil {
			// A kill that crossed the final report: answer with it.
			if m.Reply != nil {
				m.Reply(*a.final)
			}
			return
		}
		if m.Reply != nil {
			a.waiters = append(a.waiters, m.Reply)
		}
		a.terminate(ctx, m.Reason)
	case *Detach:
		a.detach(ctx)
	case *actor.Stopping:
		a.emergency(ctx)
	}
}

// send delivers msg to the actor from any goroutine.
func (a *commandActor) send(msg any) { a.system.Root.Send(a.self, msg) }

// launched is a command's process started by Launch, waiting for its
// actor to take it over.
type launched struct {
	start  time.Time
	p      *proc.Process
	cg     *proc.Cgroup
	out    *truncate.Buffer
	errBuf *truncate.Buffer
	file   *os.File // background output file read through a pipe
}

// Launch starts cmd's process now, in the calling goroutine: its cgroup,
// its output pipe (or file) and the fork. The engine calls it before
// handing cmd to the supervisor, so the fork does not wait for two actors
// to be scheduled; the command actor takes the process over when it
// starts and owns it from then on, so a launched command must be sent to
// the supervisor. On error nothing is left behind except what Cleanup
// removes (the caller runs it).
func Launch(cmd *Command) error {
	if cmd.launched != nil {
		return nil
	}
	l := &launched{start: time.Now()}
	spec := cmd.Spec
	if cmd.Cgroups != nil {
		if cg, err := cmd.Cgroups.New(cmd.ID); err == nil {
			l.cg, spec.CgroupFD = cg, cg.FD()
		}
	}
	var err error
	if cmd.Background {
		f, ferr := os.OpenFile(cmd.OutputFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if ferr != nil {
			if l.cg != nil {
				l.cg.Remove()
			}
			return fmt.Errorf("%w: output file: %w", proc.ErrStart, ferr)
		}
		if cmd.Redactor.Len() > 0 {
			// Through a pipe the actor reads, so that secret values are
			// replaced before they reach the file.
			if l.p, err = startProc(&l.cg, spec); err == nil {
				l.file = f
			} else {
				f.Close()
			}
		} else {
			spec.Output = f
			l.p, err = startProc(&l.cg, spec)
			f.Close()
		}
	} else {
		l.p, err = startProc(&l.cg, spec)
		if err == nil {
			l.out = truncate.New(cmd.Truncate)
			if l.p.Stderr != nil {
				l.errBuf = truncate.New(cmd.Truncate)
			}
		}
	}
	if err != nil {
		return err
	}
	cmd.launched = l
	return nil
}

// Pid is the pid (and process group id) of a launched command, 0 before
// Launch.
func (cmd *Command) Pid() int {
	if cmd.launched == nil {
		return 0
	}
	return cmd.launched.p.Pid
}

// Output is the live output buffer of a launched foreground command (nil
// before Launch and for background jobs). Call it before handing cmd to
// the supervisor.
func (cmd *Command) Output() *truncate.Buffer {
	if cmd.launched == nil {
		return nil
	}
	return cmd.launched.out
}

func (a *commandActor) onStart(ctx actor.Context) {
	a.system, a.self, a.start = ctx.ActorSystem(), ctx.Self(), time.Now()
	a.callerLaunched = a.cmd.launched != nil
	if err := Launch(a.cmd); err != nil { // not launched by the caller (tests)
		a.failStart(ctx, err)
		return
	}
	l := a.cmd.launched // the actor owns the process from here on
	a.start, a.p, a.cg, a.out, a.errBuf, a.file = l.start, l.p, l.cg, l.out, l.errBuf, l.file
	switch {
	case a.out != nil:
		a.readInto(a.p.Stdout, a.out)
		if a.errBuf != nil {
			a.readInto(a.p.Stderr, a.errBuf)
		}
	case a.file != nil:
		a.readInto(a.p.Stdout, a.file)
	}
	a.started = true
	go func(p *proc.Process) {
		st, err := p.Wait()
		a.send(exited{state: st, err: err})
	}(a.p)
	if a.cmd.Timeout > 0 {
		a.timeout = time.AfterFunc(a.cmd.Timeout-time.Since(a.start), func() { a.send(timedOut{}) })
	}
	// A foreground command launched by its caller needs neither: the caller
	// has its pid and buffer, and the supervisor lists only background
	// jobs. Skipping them saves a wake-up of the caller and a message.
	if a.cmd.Background || !a.callerLaunched {
		a.cmd.Events <- &Started{Pid: a.p.Pid}
		a.report(ctx)
	}
}

// startProc starts spec, inside the cgroup *cg when there is one; if that
// fails it removes the cgroup and tries once more without it.
func startProc(cg **proc.Cgroup, spec proc.Spec) (*proc.Process, error) {
	p, err := proc.Start(spec)
	if *cg == nil || err == nil || errors.Is(err, os.ErrNotExist) {
		return p, err // a missing directory or program has nothing to do with the cgroup
	}
	(*cg).Remove()
	*cg = nil
	spec.CgroupFD = -1
	return proc.Start(spec)
}

// liveMembers lists the live processes of the command: its process group
// and, with a cgroup, every process in the cgroup (escapees included).
func (a *commandActor) liveMembers() []proc.Member {
	members := proc.LiveMembers(a.p.Pid)
	if a.cg == nil || !a.cg.Populated() { // cgroup.events is cheaper than cgroup.procs
		return members
	}
	for _, m := range a.cg.Members() {
		if !slices.ContainsFunc(members, func(x proc.Member) bool { return x.Pid == m.Pid }) {
			members = append(members, m)
		}
	}
	return members
}

// anyAlive reports whether a process of the command is still alive.
func (a *commandActor) anyAlive() bool {
	return (a.cg != nil && a.cg.Populated()) || proc.GroupAlive(a.p.Pid)
}

// signalAll sends sig to the group and to processes of the cgroup outside
// it.
func (a *commandActor) signalAll(sig syscall.Signal) {
	// Once the leader is reaped and its group is empty, the group id may
	// be reused: signal it only while it still has a live member.
	if !a.exited || proc.GroupAlive(a.p.Pid) {
		_ = a.p.SignalGroup(sig)
	}
	if a.cg == nil {
		return
	}
	if sig == syscall.SIGKILL {
		_ = a.cg.Kill()
		return
	}
	a.cg.Signal(sig, a.p.Pid)
}

// removeCgroup removes the command's cgroup; with release, its processes
// are moved out first so they keep running.
func (a *commandActor) removeCgroup(release bool) {
	if a.cg == nil {
		return
	}
	if release {
		_ = a.cg.Release()
	}
	a.cg.Remove()
	a.cg = nil
}

// recycleCgroup hands the cgroup of a command that ended cleanly (nothing
// had to be terminated, released or left behind) back for reuse, and
// removes any other.
func (a *commandActor) recycleCgroup() {
	if a.cg == nil {
		return
	}
	if a.terminating || a.leftRunning || len(a.leftovers) > 0 || len(a.survivors) > 0 || a.pipeHeld {
		a.removeCgroup(a.leftRunning)
		return
	}
	a.cg.RecycleEmpty() // advance saw no member before finishing
	a.cg = nil
}

func (a *commandActor) failStart(ctx actor.Context, err error) {
	a.finished = true
	a.removeCgroup(false)
	a.runCleanup()
	a.cmd.Events <- &Done{Outcome: Outcome{Err: err, Duration: time.Since(a.start)}}
	a.doneSent = true
	st := a.jobState(nil)
	st.Running, st.Status, st.Reason = false, "error", err.Error()
	a.final = &st
	a.report(ctx, st)
	for _, w := range a.waiters {
		w(st)
	}
	a.waiters = nil
}

// A pipe that has carried floodBytes is enlarged to floodPipeSize (from
// the default 64 KiB); quieter commands keep the small default.
const (
	floodBytes    = 256 << 10
	floodPipeSize = 1 << 20
)

// readBufs holds the read buffers; a reader holds one only while data
// flows, never while parked on a quiet pipe.
var readBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// readInto copies r into dst until EOF, until r is closed or until
// stopRead, then sends drained. It reads with raw non-blocking reads
// inside RawConn.Read so that a parked reader holds no buffer. With
// secret values to redact, it writes through a secret.StreamWriter and
// flushes its held-back tail before it counts as done (readers): the
// actor waits for that after closing the pipes, before it reads dst.
func (a *commandActor) readInto(r *os.File, dst io.Writer) {
	a.pipes = append(a.pipes, r)
	a.open++
	a.readers.Add(1)
	w := dst
	var sw *secret.StreamWriter
	if a.cmd.Redactor.Len() > 0 {
		sw = a.cmd.Redactor.Writer(dst)
		w = sw
	}
	go func() {
		defer a.send(drained{})
		defer a.readers.Done()
		if sw != nil {
			defer sw.Close() // errors: a file's are seen by the next write (the completion line)
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
						// A flood: a larger pipe lets the command keep
						// writing while the buffer (and its spool file)
						// takes the previous chunk. Best effort: the
						// kernel may refuse (pipe-max-size, per-user
						// pipe limits).
						_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, floodPipeSize)
					}
					total += n
					w.Write((*bp)[:n])
					if a.stopRead.Load() {
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

// terminate starts the grace sequence on the whole group, once.
func (a *commandActor) terminate(ctx actor.Context, reason Reason) {
	if a.finished || !a.started {
		return
	}
	if a.terminating {
		if a.reason == ReasonLeftovers && reason != ReasonLeftovers {
			a.reason = reason // an explicit request explains better
		}
		return
	}
	a.terminating, a.reason = true, reason
	if a.timeout != nil {
		a.timeout.Stop()
	}
	a.signalAll(syscall.SIGTERM)
	a.signalAll(syscall.SIGCONT)
	a.graceEnd = time.Now().Add(a.cmd.Grace)
	a.advance(ctx)
}

// advance re-evaluates the command's state after any event.
func (a *commandActor) advance(ctx actor.Context) {
	if a.finished || !a.started {
		return
	}
	now := time.Now()
	if !a.terminating {
		if !a.exited {
			return // waiting for exit, timeout or cancellation
		}
		drainEnd := a.exitAt.Add(a.cmd.DrainWait)
		if a.open > 0 && now.Before(drainEnd) {
			a.wake(drainEnd.Sub(now))
			return
		}
		if a.cmd.Background && a.anyAlive() {
			a.wake(backgroundPoll) // the job lives while its group does
			return
		}
		if members := a.liveMembers(); len(members) > 0 {
			switch {
			case a.cmd.KeepLeftovers:
				a.leftovers, a.leftRunning = members, true
			default:
				a.leftovers = members
				a.terminate(ctx, ReasonLeftovers)
				return
			}
		}
		if a.slowReader(now, a.exitAt) {
			a.wake(pollInterval)
			return
		}
		a.pipeHeld = a.open > 0 && !a.leftRunning // a kept leftover may hold it
		a.finish(ctx)
		return
	}
	if a.exited && !a.anyAlive() {
		if a.groupGoneAt.IsZero() {
			a.groupGoneAt = now
		}
		drainEnd := a.groupGoneAt.Add(a.cmd.DrainWait)
		if a.open > 0 && now.Before(drainEnd) {
			a.wake(drainEnd.Sub(now))
			return
		}
		if a.slowReader(now, a.groupGoneAt) {
			a.wake(pollInterval)
			return
		}
		a.pipeHeld = a.open > 0
		a.finish(ctx)
		return
	}
	if !a.killSent && !now.Before(a.graceEnd) {
		a.signalAll(syscall.SIGKILL)
		a.killSent, a.cleanupEnd = true, now.Add(a.cmd.CleanupWait)
	}
	if a.killSent && !now.Before(a.cleanupEnd) {
		a.survivors = a.liveMembers()
		a.finish(ctx)
		return
	}
	a.wake(pollInterval)
}

// slowReader reports whether an output pipe is still being read although
// every writer is gone (POLLHUP): on a loaded machine the reader may not
// have run yet, and it will see EOF shortly, so the actor waits for it
// (up to CleanupWait after since) instead of calling the pipe held.
func (a *commandActor) slowReader(now, since time.Time) bool {
	if a.open == 0 || !now.Before(since.Add(a.cmd.CleanupWait)) {
		return false
	}
	for _, f := range a.pipes {
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

// wake schedules a tick after d, replacing any earlier one.
func (a *commandActor) wake(d time.Duration) {
	if a.wakeT == nil {
		a.wakeT = time.AfterFunc(d, func() { a.send(tick{}) })
		return
	}
	a.wakeT.Reset(d)
}

func (a *commandActor) stopTimers() {
	if a.timeout != nil {
		a.timeout.Stop()
	}
	if a.wakeT != nil {
		a.wakeT.Stop()
	}
}

// closePipes closes read ends still open; their readers return at once.
// It then waits for the readers to have written everything they read
// (the redactor's held-back tail included) and closes a background job's
// output file.
func (a *commandActor) closePipes() {
	for _, f := range a.pipes {
		f.Close()
	}
	a.pipes = nil
	a.readers.Wait()
	if a.file != nil {
		a.file.Close()
		a.file = nil
	}
}

func (a *commandActor) runCleanup() {
	if c := a.cmd.Cleanup; c != nil {
		a.cmd.Cleanup = nil
		c()
	}
}

// finish reports the outcome and stops the actor.
func (a *commandActor) finish(ctx actor.Context) {
	a.finished = true
	a.stopTimers()
	a.closePipes()
	a.recycleCgroup()
	a.runCleanup()
	o := Outcome{
		Reason:      a.reason,
		Leftovers:   a.leftovers,
		LeftRunning: a.leftRunning,
		Survivors:   a.survivors,
		PipeHeld:    a.pipeHeld,
		Duration:    time.Since(a.start),
	}
	if a.state != nil {
		o.Exited = true
		o.ExitCode, o.Signal = exitStatus(a.state)
	} else if a.waitErr != nil { // never report an unknown status as success
		o.Err = fmt.Errorf("%w: waiting for the shell: %w", ErrActorFailed, a.waitErr)
	}
	if a.reason == ReasonLeftovers {
		o.Reason = ReasonNone // the shell itself ended on its own
	}
	if a.out != nil {
		o.Output = a.out.Result()
		a.out.Close()
	}
	if a.errBuf != nil {
		r := a.errBuf.Result()
		o.Stderr = &r
		a.errBuf.Close()
	}
	if a.cmd.Background {
		a.appendCompletion(o)
	}
	st := a.jobState(&o)
	a.final = &st
	// The supervisor hears first: once the caller has its result, no
	// listing shows the command running.
	a.report(ctx, st)
	if !a.cmd.Background {
		a.cmd.Events <- &Done{Outcome: o}
		a.doneSent = true
	}
	for _, w := range a.waiters {
		w(st)
	}
	a.waiters = nil
}

// exitStatus returns the exit code (128+n for signal n) and signal name.
func exitStatus(st *os.ProcessState) (int, string) {
	ws, ok := st.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		return 128 + int(ws.Signal()), SignalName(ws.Signal())
	}
	return st.ExitCode(), ""
}

// SignalName returns "SIGKILL" style names.
func SignalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return fmt.Sprintf("signal %d", int(s))
}

// completionLine is the line appended to a background job's output file.
func completionLine(o Outcome) (line, status string) {
	switch {
	case o.Reason == ReasonKilled:
		return "[background process killed: killed by request]", "killed"
	case o.Reason == ReasonShutdown:
		return "[background process killed: engine shutdown]", "killed"
	case o.Reason == ReasonLifetime:
		return "[background process killed: lifetime limit exceeded]", "killed"
	case o.Reason == ReasonCancelled:
		return "[background process killed: cancelled]", "killed"
	case o.Signal != "":
		return "[background process killed: " + o.Signal + "]", "killed"
	case o.Exited && o.ExitCode == 0:
		return "[background process completed]", "completed"
	case o.Exited:
		return fmt.Sprintf("[background process failed: exit code %d]", o.ExitCode), "failed"
	default:
		return "[background process killed: unknown]", "killed"
	}
}

func (a *commandActor) appendCompletion(o Outcome) {
	line, _ := completionLine(o)
	f, err := os.OpenFile(a.cmd.OutputFile, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		a.backgroundErr = err
		return
	}
	defer f.Close()
	if _, err := f.WriteString("\n\n" + line); err != nil {
		a.backgroundErr = err
	}
}

// jobState builds the supervisor's record; o is nil while running.
func (a *commandActor) jobState(o *Outcome) JobState {
	st := JobState{
		ID:             a.cmd.ID,
		Command:        a.cmd.Command,
		Display:        a.cmd.Display,
		ConversationID: a.cmd.ConversationID,
		Background:     a.cmd.Background,
		Running:        o == nil,
		Started:        a.start,
		Status:         "running",
		OutputFile:     a.cmd.OutputFile,
	}
	if a.p != nil {
		st.Pid = a.p.Pid
	}
	if o != nil {
		st.Ended = time.Now()
		if o.Exited {
			code := o.ExitCode
			st.ExitCode = &code
		}
		var line string
		line, st.Status = completionLine(*o)
		if st.Status == "killed" {
			st.Reason = line[len("[background process killed: ") : len(line)-1]
		}
	}
	return st
}

// report sends the current (or given final) state to the supervisor. The
// supervisor stops the actor when it receives a final state (Running
// false): the actor does not stop itself, so the final report always
// arrives before the Terminated system message.
func (a *commandActor) report(ctx actor.Context, final ...JobState) {
	if ctx.Parent() == nil {
		if len(final) > 0 {
			ctx.Stop(a.self)
		}
		return
	}
	st := a.jobState(nil)
	if len(final) > 0 {
		st = final[0]
	}
	ctx.Send(ctx.Parent(), &JobUpdate{State: st})
}

// detach stops the actor and leaves the processes running.
func (a *commandActor) detach(ctx actor.Context) {
	if a.finished {
		return
	}
	a.finished = true
	a.stopTimers()
	reason := "left running at engine shutdown"
	if err := a.handOver(); err != nil {
		reason += "; its further output fails: " + err.Error()
	}
	a.closePipes()
	a.removeCgroup(true)
	st := a.jobState(nil)
	st.Running, st.Status, st.Reason = false, "detached", reason
	a.final = &st
	a.report(ctx, st)
	for _, w := range a.waiters {
		w(st)
	}
	a.waiters = nil
}

// handOver keeps a detached job's output flowing into its file once the
// actor stops reading it (see Command.Redactor): a duplicate of the read
// end keeps the pipe open while the reader stops and flushes, then a
// `cat` in a session of its own, started through sh so that it is not the
// engine's child (nobody has to reap it), appends the rest. A job that
// writes its file directly has nothing to hand over.
func (a *commandActor) handOver() error {
	if a.file == nil || len(a.pipes) == 0 {
		return nil
	}
	dup := -1
	rc, err := a.pipes[0].SyscallConn()
	if err == nil {
		cerr := rc.Control(func(fd uintptr) { dup, err = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) })
		err = errors.Join(err, cerr)
	}
	if err != nil {
		return fmt.Errorf("output pipe: %w", err)
	}
	a.stopRead.Store(true)
	a.closePipes() // the reader flushed what it read; the rest waits in the pipe
	// O_NONBLOCK is shared with the read end the reader used: clear it
	// only now, for cat.
	if err := unix.SetNonblock(dup, false); err != nil {
		unix.Close(dup)
		return fmt.Errorf("output pipe: %w", err)
	}
	in := os.NewFile(uintptr(dup), "job-output")
	defer in.Close()
	out, err := os.OpenFile(a.cmd.OutputFile, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("output file: %w", err)
	}
	defer out.Close()
	sh, err := exec.LookPath("sh")
	if err == nil {
		var cat string
		if cat, err = exec.LookPath("cat"); err == nil {
			// The pipe is fd 3: an asynchronous list's stdin is /dev/null.
			cmd := exec.Command(sh, "-c", `"$0" <&3 3<&- &`, cat)
			cmd.ExtraFiles, cmd.Stdout, cmd.Dir, cmd.Env = []*os.File{in}, out, "/", []string{}
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			err = cmd.Run()
		}
	}
	if err != nil {
		return fmt.Errorf("output copier: %w", err)
	}
	return nil
}

// emergency runs when the actor is stopped before it finished (a panic or
// a forced stop): end the group at once and answer the caller.
func (a *commandActor) emergency(ctx actor.Context) {
	if a.finished {
		return
	}
	a.finished = true
	a.stopTimers()
	if a.started {
		a.signalAll(syscall.SIGKILL)
	}
	a.closePipes()
	a.removeCgroup(false)
	a.runCleanup()
	o := Outcome{Err: ErrActorFailed, Reason: ReasonKilled, Duration: time.Since(a.start)}
	if a.out != nil {
		o.Output = a.out.Result()
		a.out.Close()
	}
	if !a.doneSent && !a.cmd.Background {
		a.cmd.Events <- &Done{Outcome: o}
		a.doneSent = true
	}
	st := a.jobState(&o)
	a.final = &st
	for _, w := range a.waiters {
		w(st)
	}
	a.waiters = nil
}
