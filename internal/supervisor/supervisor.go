// Package supervisor owns the jobs and the conversations of one engine:
// it starts jobs, keeps their records, routes cancellation and kills to
// them and shuts them down, through one supervisor actor (protoactor-go)
// whose children are the jobs' actors (package actors), stopped and never
// restarted: a restart would lose the process, and re-running a command is
// not safe. Its record of a conversation owns what the conversation's
// commands run in and change: its world (sandbox.World), its undo store
// and its jobs' transactions (transact.Conv, transact.Tx). The slow work
// on those (making the world, a layer's begin and checkpoints, undo, a
// commit) runs in the caller's goroutine or off the job's actor, never on
// the supervisor actor.
package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/actors"
	"github.com/bashvisor/bashvisor/internal/egress"
	"github.com/bashvisor/bashvisor/internal/jobs"
	"github.com/bashvisor/bashvisor/internal/layer"
	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/render"
	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/secret"
	"github.com/bashvisor/bashvisor/internal/transact"
	"github.com/bashvisor/bashvisor/internal/truncate"
)

// Errors returned by the Supervisor besides those of the job layer
// (package jobs); test them with errors.Is. An error of a layer below
// (proc, sandbox, layer, transact) matches the one here that names it,
// with its own text, so that callers need not import those layers.
var (
	// ErrShutdown: the supervisor is shut down.
	ErrShutdown = errors.New("engine is shut down")
	// ErrNoSuchJob: no background job of that conversation has that id.
	ErrNoSuchJob = errors.New("no such job")
	// ErrBusy: admission control refused a job (see config.Admission);
	// the error is a *BusyError, which says what is full.
	ErrBusy = errors.New("busy")
	// ErrStart: the job's process could not be started (proc.ErrStart).
	ErrStart = errors.New("could not start the command")
	// ErrUnavailable: the sandbox cannot be set up on this host
	// (sandbox.ErrUnavailable), or a workspace-write job cannot have a
	// layer here.
	ErrUnavailable = errors.New("the sandbox is unavailable")
	// ErrNothingToUndo: fewer steps are kept than Undo asked for
	// (layer.ErrNothingToUndo).
	ErrNothingToUndo = errors.New("nothing to undo")
	// ErrUndoLive: the steps to undo were applied from the layer of a
	// background job that still runs (transact.ErrUndoLive).
	ErrUndoLive = errors.New("the changes to undo are still in the layer of a background job that runs")
	// ErrNoHeld: Review named no held change set of the conversation
	// (transact.ErrNoHeld); ErrDigest: the held changes are not those
	// the digest names any more (transact.ErrDigest); ErrStray: the
	// held changes' command left processes that may still write them
	// (transact.ErrStray).
	// ErrConflict: accepting held changes was refused because the
	// workspace changed at held paths since the command ran
	// (transact.ErrConflict); the error is also an *UndoConflictError
	// naming the paths.
	ErrConflict = errors.New("the workspace changed at held paths since the command ran")
	ErrNoHeld   = errors.New("no held change set has that id")
	ErrDigest   = errors.New("the held changes do not match the digest")
	ErrStray    = errors.New("the held changes' command left processes that may still change them")
)

// UndoConflictError is Undo's refusal when something changed the paths
// since (layer.ConflictError): nothing was undone.
type UndoConflictError struct {
	// Paths are the paths changed since, absolute and sorted.
	Paths []string
}

func (e *UndoConflictError) Error() string {
	return "undo refused: changed since: " + strings.Join(e.Paths, ", ")
}

// lowerErrors pair the errors of the layers below with the
// supervisor's.
var lowerErrors = [...]struct{ lower, own error }{
	{proc.ErrStart, ErrStart},
	{sandbox.ErrUnavailable, ErrUnavailable},
	{layer.ErrNothingToUndo, ErrNothingToUndo},
	{layer.ErrNothingToRedo, ErrNothingToUndo},
	{transact.ErrUndoLive, ErrUndoLive},
	{transact.ErrNoHeld, ErrNoHeld},
	{transact.ErrDigest, ErrDigest},
	{transact.ErrStray, ErrStray},
}

// own returns err so that it matches the supervisor's error for the
// lower layer's it wraps (nil: nil).
func own(err error) error {
	var c *layer.ConflictError
	if errors.As(err, &c) {
		u := &UndoConflictError{Paths: c.Paths}
		if errors.Is(err, transact.ErrConflict) {
			return &ownError{err: u, own: ErrConflict}
		}
		return u
	}
	for _, m := range lowerErrors {
		if errors.Is(err, m.lower) {
			return &ownError{err: err, own: m.own}
		}
	}
	return err
}

// ownError is an error of a layer below that matches the supervisor's.
type ownError struct{ err, own error }

func (e *ownError) Error() string   { return e.err.Error() }
func (e *ownError) Unwrap() []error { return []error{e.own, e.err} }

// MaxEnded bounds the ended background jobs remembered; the oldest is
// forgotten together with its output file.
const MaxEnded = 1000

// Config configures a Supervisor: the engine's settings, passed down
// whole, with their defaults filled in (durations positive).
type Config struct {
	// Env is the environment policy of every job.
	Env config.Env
	// Cgroups says where jobs' cgroups are made (Off: the process group
	// is the unit).
	Cgroups config.Cgroups
	// Lifecycle says how a job's processes are ended.
	Lifecycle config.Lifecycle
	// Output configures a foreground job's output buffer (Max,
	// Truncation, SpoolCap, SeparateStreams; SpoolKeep is the engine's).
	Output config.Output
	// Sandbox configures sandboxed jobs.
	Sandbox config.Sandbox
	// Admission bounds what runs at once (admission control).
	Admission config.Admission
	// Broker, when set, holds the secrets the egress proxy puts into
	// sandboxed jobs' requests; each conversation gets its own CA and
	// placeholders from it (egress.Broker.ForConversation).
	Broker *egress.Broker
	// OutputDir holds the conversations' output directories: background
	// jobs' output files (job-N.log) and foreground jobs' full outputs.
	OutputDir string
	// Logger receives warnings; protoactor's own logs go there at Warn and
	// above.
	Logger *slog.Logger

	// countOnly (tests) measures nothing: every running foreground job
	// counts as one busy CPU, a background one for nothing.
	countOnly bool
}

// Supervisor starts and tracks the jobs of one engine. It is safe for
// concurrent use.
type Supervisor struct {
	res       *actors.Resources
	admission config.Admission
	system    *actor.ActorSystem
	pid       *actor.PID
	outDir    string
	sandbox   config.Sandbox
	cacheRoot string         // the conversations' world directories (Sandbox.CacheDir)
	broker    *egress.Broker // Config.Broker
	// tx makes workspace-write jobs' layers (nil: no layers on this
	// host), made on first use (layers); each conversation's record
	// holds its transact.Conv.
	tx        *transact.Manager
	txMu      sync.Mutex // guards tx and txDone
	txDone    bool       // tx decided for good (a probe short of a resource decides nothing)
	txLimits  config.SandboxLimits
	log       *slog.Logger
	closeErr  error         // closing the workspaces, set before done is closed
	closed    atomic.Bool   // Shutdown was called
	done      chan struct{} // closed when the supervisor actor stopped
	final     []jobs.State  // the records when it stopped
	track     *tracker      // the running jobs' cgroups or processes, for admission
	countOnly bool          // Config.countOnly
	stopWatch chan struct{} // ends the watch goroutine
	watching  sync.WaitGroup
}

// New starts a supervisor: the environment policy, the cgroup probe, the
// actor system and the supervisor actor.
func New(cfg Config) (*Supervisor, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		return nil, fmt.Errorf("bashvisor: %w", err)
	}
	if bash, err = filepath.Abs(bash); err != nil {
		return nil, fmt.Errorf("bashvisor: %w", err)
	}
	// The drop (psx: each thread of the process runs it, woken in turn,
	// which on a loaded machine is milliseconds of waiting) runs beside
	// the cgroup probe, which forks nothing; the watchdog, the engine's
	// first child, is started after it. The sandbox's probe runs on
	// first use (Sandbox): an engine whose commands are not sandboxed, as
	// a one-shot `bashvisor run -- true`, never pays it.
	type started struct {
		wd           *proc.Watchdog
		err, protect error
	}
	watchdog := make(chan started, 1)
	go func() {
		if err := proc.ProtectEngine(!cfg.Env.KeepCapabilities); err != nil {
			watchdog <- started{protect: err}
			return
		}
		wd, err := proc.StartWatchdog(bash, nil) // told the cgroups below
		watchdog <- started{wd: wd, err: err}
	}()
	env := proc.NewEnv(cfg.Env)
	trunc := truncate.Config{Strategy: cfg.Output.Truncation, Max: cfg.Output.Max, SpoolCap: cfg.Output.SpoolCap,
		Render: render.Clean, Redactor: env.Redactor()}
	if cfg.Output.Raw {
		trunc.Render = render.Raw
	}
	if cfg.Output.SpoolCap > 0 {
		trunc.SpoolDir = cfg.OutputDir
	}
	res := &actors.Resources{
		Bash: bash, Env: env, Redactor: env.Redactor(), Truncate: trunc, JobFileCap: cfg.Output.JobFileCap,
		Sandbox: cfg.Sandbox, Lifecycle: cfg.Lifecycle,
		SeparateStreams: cfg.Output.SeparateStreams, Log: log,
	}
	if cfg.Cgroups.Off {
		log.Info("cgroups disabled: commands that leave their process group (setsid, double fork) are not tracked or killed")
	} else if res.Cgroups, err = proc.ProbeCgroups(cfg.Cgroups.Parent); err != nil {
		log.Warn("no per-command cgroups; the process group is the unit of termination, so commands that leave it (setsid, double fork) are not tracked or killed", "err", err)
	} else if note := res.Cgroups.ControllersNote(); note != "" {
		log.Warn("no job-wide memory or process limits: memory limits bind each process (rlimits), processes are not limited", "why", note)
	}
	if w := <-watchdog; w.protect != nil {
		if res.Cgroups != nil {
			_ = res.Cgroups.Close()
		}
		return nil, fmt.Errorf("bashvisor: protect the engine's memory from its commands: %w", w.protect)
	} else if w.err == nil {
		res.Watchdog = w.wd
		res.Watchdog.Watch(res.Cgroups)
	} else {
		log.Warn("no watchdog: should the engine's process die without a shutdown, its commands run on", "err", w.err)
	}
	s := &Supervisor{res: res, admission: cfg.Admission.WithDefaults(), outDir: cfg.OutputDir, done: make(chan struct{}),
		track: newTracker(), stopWatch: make(chan struct{}), countOnly: cfg.countOnly, txLimits: cfg.Sandbox.Limits, log: log}
	s.sandbox, s.cacheRoot, s.broker = cfg.Sandbox, cfg.Sandbox.CacheDir, cfg.Broker
	if s.cacheRoot == "" {
		s.cacheRoot = filepath.Join(cfg.OutputDir, "cache")
	}
	if _, err := os.Stat(s.txDir()); err == nil {
		s.layers() // an earlier engine's, with this output directory: removes what it left
	}
	protoLog := slog.New(minLevel{log.Handler(), slog.LevelWarn}).With("lib", "protoactor")
	// Dead letters (a timer or reader message reaching an actor that has
	// just stopped) are expected and harmless; a short throttle interval
	// keeps protoactor's throttle goroutine from outliving Shutdown.
	s.system = actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return protoLog }),
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond),
	)
	// The host's state before the first admission; the watch tells the
	// actor when it changes.
	host := newHostReader(s.admission.MemoryPressure)
	first := host.read()
	s.pid = s.system.Root.Spawn(props(s, first))
	s.watching.Go(func() { s.watch(s.stopWatch, host, first) })
	return s, nil
}

// undoLimits bound a conversation's undo store: the defaults of package
// layer, and at most a quarter of the conversation's quota, which counts
// what the store keeps.
func undoLimits(l config.SandboxLimits) layer.StoreLimits {
	q := l.WithDefaults().ScratchBytes
	return layer.StoreLimits{Bytes: min(layer.DefaultStoreBytes, int64(q/4))}
}

// Layers reports whether workspace-write jobs run over layers here
// (jobs.Profile.Layer): the host has private namespaces and the layers'
// directory could be made.
func (s *Supervisor) Layers() bool { return s.layers() != nil }

// txDir is the layers' directory.
func (s *Supervisor) txDir() string { return filepath.Join(s.outDir, "transact") }

// layers returns the manager of workspace-write jobs' layers, made on
// first use (nil: no layers on this host, or the supervisor finished).
//
// A probe, or a manager's start, that ran out of a resource
// (sandbox.Capabilities.Transient; EMFILE, ENFILE, ENOMEM, EAGAIN from
// transact.New) decides nothing: the next call looks again, so a moment
// short of descriptors does not turn layers off for the supervisor's life
// (TestOutOfDescriptorsSaysSo).
func (s *Supervisor) layers() *transact.Manager {
	s.txMu.Lock()
	defer s.txMu.Unlock()
	if s.txDone {
		return s.tx
	}
	caps := s.Sandbox()
	if caps.Transient != nil {
		return nil
	}
	if !caps.Available() || !caps.Namespaces {
		s.txDone = true
		return nil
	}
	tx, err := transact.New(transact.Options{
		Dir: s.txDir(), UserXattr: caps.Rootless, Limits: undoLimits(s.txLimits),
		Premount: !caps.Rootless, // as root the sandbox mounts layers from a thread of this process (StartDirect and StartHelper)
	})
	if err != nil {
		for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.EAGAIN} {
			if errors.Is(err, e) {
				s.log.Warn("no workspace layer for now: workspace-write calls fail until it can be made", "err", err)
				return nil
			}
		}
		s.txDone = true
		s.log.Warn("no workspace layer: workspace-write calls fail", "err", err)
		return nil
	}
	s.txDone = true
	s.tx = tx
	return tx
}

// Sandbox says what restricted mode enforces on this host: probed once
// per process, on first use (sandbox.Probe).
func (s *Supervisor) Sandbox() sandbox.Capabilities { return sandbox.Probe() }

// PidsLimit reports whether restricted jobs' processes are limited
// (SandboxLimits.Processes): the engine has cgroups and the host offers the
// pids controller.
func (s *Supervisor) PidsLimit() bool { return s.res.Cgroups != nil && s.res.Cgroups.PidsLimit() }

// Cgroups reports whether jobs get cgroups of their own.
func (s *Supervisor) Cgroups() bool { return s.res.Cgroups != nil }

// MemoryLimit reports whether jobs' memory limits are enforced by a
// memory controller (job-wide, with OOM kills and peak memory accounted)
// rather than as RLIMIT_AS per process.
func (s *Supervisor) MemoryLimit() bool { return s.res.Cgroups != nil && s.res.Cgroups.MemoryLimit() }

// Redact replaces in text the values of the secrets the environment
// policy stripped.
func (s *Supervisor) Redact(text string) string { return s.res.Redactor.String(text) }

// Redactor replaces the values of the secrets the environment policy
// stripped (for the audit log).
func (s *Supervisor) Redactor() *secret.Redactor { return s.res.Redactor }

// Job is a started job.
type Job struct {
	// ID names the job: "cmd-N" (foreground) or "job-N" (background, in
	// its conversation).
	ID string
	// Conversation is the conversation that started it.
	Conversation string
	// Queued is how long it waited for a slot.
	Queued time.Duration
	// Pid is the pid and process group id of its shell.
	Pid int
	// OutputFile is a background job's output file.
	OutputFile string

	done <-chan jobs.Outcome
	out  *truncate.Buffer
}

// Done receives a foreground job's outcome, once.
func (j *Job) Done() <-chan jobs.Outcome { return j.done }

// Progress reports a foreground job's output so far: its size and its
// latest line (at most 256 bytes).
func (j *Job) Progress() (bytes int64, lastLine string) {
	if j.out == nil {
		return 0, ""
	}
	return j.out.Total(), j.out.LastLine(256)
}

// OutputSince returns a running foreground job's output from byte offset
// on, at most limit bytes (see truncate.Buffer.Since).
func (j *Job) OutputSince(offset int64, limit int) (text string, skipped, next int64) {
	if j.out == nil {
		return "", 0, offset
	}
	return j.out.Since(offset, limit)
}

// Start starts a job: the supervisor admits it (at once, or after a wait
// in the queue: see Admission), records it and spawns its actor, the process
// is started in the calling goroutine and handed to the actor. A
// foreground job's outcome then arrives on Job.Done; a background job runs
// on its own. Start fails with ErrShutdown after Shutdown, with ErrBusy
// when the job cannot be admitted, with an error wrapping ErrStart or
// ErrSandboxUnavailable when the process could not start, and with ctx's
// error when ctx is done before the job starts.
func (s *Supervisor) Start(ctx context.Context, req jobs.Request) (*Job, error) {
	j, err := s.start(ctx, req)
	return j, own(err)
}

func (s *Supervisor) start(ctx context.Context, req jobs.Request) (*Job, error) {
	if s.closed.Load() {
		return nil, ErrShutdown
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	reply := make(chan admitted, 1)
	s.system.Root.Send(s.pid, &startRequest{req: req, reply: reply})
	var a admitted
	select {
	case a = <-reply:
	case <-s.done:
		return nil, ErrShutdown
	default: // queued: wait for a slot, bounded
		a = s.wait(ctx, reply)
	}
	if a.err != nil {
		return nil, a.err
	}
	// The slow work of the conversation's workspace, off the actor.
	if err := a.ws.prepare(ctx, a.spec); err != nil {
		s.system.Root.Send(a.pid, &actors.LaunchFailed{Err: err})
		return nil, err
	}
	l, err := actors.Launch(a.spec, s.res)
	if err != nil {
		if a.spec.Tx != nil {
			_ = a.spec.Tx.Abort()
		}
		s.system.Root.Send(a.pid, &actors.LaunchFailed{Err: err})
		return nil, err
	}
	if !s.countOnly {
		// Before the actor has its process, so before it can end.
		s.track.add(key{a.spec.Conversation, a.spec.ID}, l.Cgroup(), l.Pid())
	}
	s.system.Root.Send(a.pid, l)
	return &Job{ID: a.spec.ID, Conversation: a.spec.Conversation, Queued: a.spec.Queued,
		Pid: l.Pid(), OutputFile: a.spec.OutputFile, done: a.done, out: l.Output()}, nil
}

// wait waits for a queued call's admission, up to QueueWait or ctx; a call
// that gives up is withdrawn from the queue (or, admitted meanwhile, its
// job is told its process will never come).
func (s *Supervisor) wait(ctx context.Context, reply chan admitted) admitted {
	t := time.NewTimer(s.admission.QueueWait)
	defer t.Stop()
	var giveUp error
	select {
	case a := <-reply:
		return a
	case <-s.done:
		return admitted{err: ErrShutdown}
	case <-ctx.Done():
		giveUp = ctx.Err()
	case <-t.C:
		giveUp = s.held(reply)
	}
	ack := make(chan bool, 1)
	s.system.Root.Send(s.pid, &withdrawRequest{reply: reply, ack: ack})
	select {
	case withdrawn := <-ack:
		if !withdrawn { // admitted meanwhile: free the slot
			if a := <-reply; a.err == nil {
				s.system.Root.Send(a.pid, &actors.LaunchFailed{Err: giveUp})
			}
		}
	case <-s.done:
	}
	return admitted{err: giveUp}
}

// held is the refusal of a call that waited QueueWait: what holds it.
func (s *Supervisor) held(reply chan admitted) error {
	ack := make(chan *BusyError, 1)
	s.system.Root.Send(s.pid, &heldRequest{reply: reply, ack: ack})
	var b *BusyError
	select {
	case b = <-ack:
	case <-s.done:
	}
	if b == nil { // admitted meanwhile, or shut down: the withdrawal sorts it out
		st := s.Stats()
		b = &BusyError{Limit: LimitCPU, Scope: ScopeHost, Running: st.Running, Queued: st.Queued, Count: st.Busy + st.Starting, Max: s.admission.MaxBusy}
	}
	b.Waited = s.admission.QueueWait
	return b
}

// Cancel ends a running job of conversation conv with the grace sequence
// (its outcome says "cancelled"). An ended or unknown job is ignored.
func (s *Supervisor) Cancel(conv, id string) {
	s.system.Root.Send(s.pid, &cancelRequest{conv: conv, id: id, reason: jobs.ReasonCancelled})
}

// Kill ends a background job of conversation conv with the grace sequence
// and returns its final state; an ended job's state is returned
// unchanged. It reports false when conv has no such background job.
func (s *Supervisor) Kill(ctx context.Context, conv, id string) (jobs.State, bool, error) {
	reply := make(chan jobs.State, 1)
	s.system.Root.Send(s.pid, &killRequest{conv: conv, id: id, reply: reply})
	select {
	case st := <-reply:
		return st, st.ID != "", nil
	case <-s.done:
		return jobs.State{}, false, ErrShutdown
	case <-ctx.Done():
		return jobs.State{}, false, ctx.Err()
	}
}

// Write sends data to the stdin of conversation conv's background job id
// (started with Request.Stdin or TTY), then closes it when close is set.
// It returns once the job took the bytes (its pipe or terminal buffer
// did), or with ErrNoSuchJob, ErrNoStdin, ErrEnded, ErrStdinClosed or
// ErrStdinBusy (the job has not read earlier input for a while).
func (s *Supervisor) Write(ctx context.Context, conv, id string, data []byte, close bool) error {
	reply := make(chan error, 1)
	s.system.Root.Send(s.pid, &writeRequest{conv: conv, id: id, data: data, close: close, reply: reply})
	select {
	case err := <-reply:
		return err
	case <-s.done:
		return ErrShutdown
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Jobs returns the records of conversation conv's background jobs, running
// and ended, oldest first; after Shutdown, the final ones.
func (s *Supervisor) Jobs(conv string) []jobs.State { return s.list(&listRequest{conv: conv}) }

// AllJobs returns the records of every conversation's background jobs.
func (s *Supervisor) AllJobs() []jobs.State { return s.list(&listRequest{all: true}) }

func (s *Supervisor) list(m *listRequest) []jobs.State {
	reply := make(chan []jobs.State, 1)
	m.reply = reply
	s.system.Root.Send(s.pid, m)
	select {
	case states := <-reply:
		return states
	case <-s.done:
		var out []jobs.State
		for _, st := range s.final {
			if m.all || st.Conversation == m.conv {
				out = append(out, st)
			}
		}
		return out
	}
}

// EndConversation ends conversation conv: its running jobs are ended with
// the grace sequence (foreground calls answer "cancelled"), its queued
// calls are refused, its ended jobs are forgotten and its output directory
// is removed once its last job is gone; its world is closed and its undo
// store removed, in the calling goroutine. It returns the jobs it ended or
// forgot.
func (s *Supervisor) EndConversation(ctx context.Context, conv string) ([]jobs.State, error) {
	reply := make(chan endedConversation, 1)
	s.system.Root.Send(s.pid, &endConversationRequest{conv: conv, reply: reply})
	select {
	case m := <-reply:
		return m.states, m.ws.close()
	case <-s.done:
		return nil, ErrShutdown
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Stats returns the current load: jobs running and calls waiting.
func (s *Supervisor) Stats() Stats {
	reply := make(chan Stats, 1)
	s.system.Root.Send(s.pid, &statsRequest{reply: reply})
	select {
	case st := <-reply:
		return st
	case <-s.done:
		return Stats{}
	}
}

// Shutdown ends every job (background jobs too, unless leaveJobs: those are
// left running and forgotten) with the grace sequence, then stops the
// supervisor and the actor system and removes the engine's cgroups. It
// waits for that or for ctx; calling it again waits again.
func (s *Supervisor) Shutdown(ctx context.Context, leaveJobs bool) error {
	s.closed.Store(true)
	s.system.Root.Send(s.pid, &shutdownRequest{leaveJobs: leaveJobs})
	select {
	case <-s.done:
		return s.closeErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// finish stops the actor system, closes the conversations' workspaces
// (ws) and removes the cgroups once the supervisor actor has stopped; it
// runs on its own goroutine (the actor system cannot be shut down from
// inside one of its actors).
func (s *Supervisor) finish(ws []*workspace) {
	var errs []error
	for _, w := range ws {
		errs = append(errs, w.close())
	}
	s.txMu.Lock() // none made from now on; one being made is waited for
	s.txDone = true
	if s.tx != nil {
		errs = append(errs, s.tx.Close())
	}
	s.txMu.Unlock()
	s.closeErr = errors.Join(errs...)
	close(s.stopWatch)
	s.watching.Wait()
	s.system.Shutdown()
	// The watchdog is told last: were the engine killed while the cgroups
	// are being removed, it would still end what they hold.
	if s.res.Cgroups != nil {
		if err := s.res.Cgroups.Close(); err != nil {
			s.res.Log.Warn("removing cgroups", "err", err)
		}
	}
	if err := s.res.Watchdog.Close(); err != nil {
		s.res.Log.Warn("the engine's watchdog", "err", err)
	}
	close(s.done)
}

// minLevel drops records below min (protoactor logs dead letters at Info).
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}
func (h minLevel) WithAttrs(a []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(a), h.min}
}
func (h minLevel) WithGroup(n string) slog.Handler { return minLevel{h.Handler.WithGroup(n), h.min} }
