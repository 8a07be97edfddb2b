// Package supervisor owns the jobs of one engine: it starts them, keeps
// their records, routes cancellation and kills to them and shuts them
// down, through one supervisor actor (protoactor-go) whose children are the
// jobs' actors (package actors), stopped and never restarted: a restart
// would lose the process, and re-running a command is not safe.
package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/bashvisor/bashvisor/actors"
	"github.com/bashvisor/bashvisor/proc"
	"github.com/bashvisor/bashvisor/sandbox"
	"github.com/bashvisor/bashvisor/secret"
	"github.com/bashvisor/bashvisor/truncate"
)

// The data the supervisor hands out is the job layer's.
type (
	// Outcome is what happened to a job.
	Outcome = actors.Outcome
	// State is the record of a job.
	State = actors.State
	// Status is a job's status.
	Status = actors.Status
	// Reason says why the engine ended a job.
	Reason = actors.Reason
	// Limits are a job's resource limits.
	Limits = actors.Limits
	// Applied are the limits a job ran under.
	Applied = actors.Applied
	// Usage is what a job's processes used.
	Usage = actors.Usage
	// SandboxLimits are the resource limits of restricted jobs.
	SandboxLimits = sandbox.Limits
	// SandboxCapabilities say what restricted mode enforces on this host.
	SandboxCapabilities = sandbox.Capabilities
)

// Unlimited, as a SandboxLimits field, switches that limit off.
const Unlimited = sandbox.Unlimited

// SandboxMain turns the process into the sandbox helper when it was
// started as one (see sandbox.Main), and returns at once otherwise.
func SandboxMain() { sandbox.Main() }

// The statuses and reasons of [State] and [Outcome].
const (
	Running   = actors.Running
	Completed = actors.Completed
	Failed    = actors.Failed
	Killed    = actors.Killed
	Errored   = actors.Errored
	Detached  = actors.Detached

	ReasonNone      = actors.ReasonNone
	ReasonTimeout   = actors.ReasonTimeout
	ReasonCancelled = actors.ReasonCancelled
	ReasonKilled    = actors.ReasonKilled
	ReasonShutdown  = actors.ReasonShutdown
	ReasonLifetime  = actors.ReasonLifetime
	ReasonFailed    = actors.ReasonFailed
	ReasonCPULimit  = actors.ReasonCPULimit
)

// Errors returned by the Supervisor; test them with errors.Is.
var (
	// ErrShutdown: the supervisor is shut down.
	ErrShutdown = errors.New("engine is shut down")
	// ErrStart wraps every error that kept a process from starting.
	ErrStart = proc.ErrStart
	// ErrSandboxUnavailable: restricted mode cannot be enforced here.
	ErrSandboxUnavailable = sandbox.ErrUnavailable
	// ErrActorFailed: a job's actor failed.
	ErrActorFailed = actors.ErrActorFailed
)

// MaxEnded bounds the ended background jobs remembered; the oldest is
// forgotten together with its output file.
const MaxEnded = 1000

// Config configures a Supervisor. Durations must be positive.
type Config struct {
	// Environ is the environment the policy filters.
	Environ []string
	// EnvAllowlist passes only the allowlist (proc.AllowlistNames and
	// EnvAllow) instead of everything but secrets.
	EnvAllowlist bool
	// EnvKeep, EnvAllow and EnvStrip refine the policy (proc.EnvConfig).
	EnvKeep, EnvAllow, EnvStrip []string
	// KeepCapabilities leaves the process's capability bounding set alone
	// (see proc.ProtectEngine: by default a root engine's jobs run without
	// the capabilities that read other processes' memory).
	KeepCapabilities bool

	// NoCgroups gives jobs no cgroup: the process group is the unit.
	NoCgroups bool
	// CgroupParent is the cgroup v2 directory under which job cgroups are
	// made ("": the engine's own cgroup).
	CgroupParent string
	// Limits are the resource limits of every job whose Request has none
	// (zero fields: no limit; see actors.Limits for how each is enforced).
	Limits Limits

	// OutputDir holds background jobs' output files (job-N.log).
	OutputDir string
	// Truncate configures a foreground job's output buffer.
	Truncate truncate.Config

	Grace, CleanupWait, DrainWait  time.Duration
	KeepLeftovers, SeparateStreams bool

	// Sandbox configures restricted jobs.
	Sandbox SandboxLimits
	// SandboxHelper, SandboxHelperPath and ScratchRoot: see
	// actors.Sandbox.
	SandboxHelper                  bool
	SandboxHelperPath, ScratchRoot string

	// Logger receives warnings; protoactor's own logs go there at Warn and
	// above.
	Logger *slog.Logger
}

// Supervisor starts and tracks the jobs of one engine. It is safe for
// concurrent use.
type Supervisor struct {
	res    *actors.Resources
	limits Limits
	system *actor.ActorSystem
	pid    *actor.PID
	outDir string
	caps   sandbox.Capabilities
	closed atomic.Bool   // Shutdown was called
	done   chan struct{} // closed when the supervisor actor stopped
	final  []State       // the records when it stopped
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
	if err := proc.ProtectEngine(!cfg.KeepCapabilities); err != nil {
		return nil, fmt.Errorf("bashvisor: protect the engine's memory from its commands: %w", err)
	}
	env := proc.NewEnv(cfg.Environ, proc.EnvConfig{Allowlist: cfg.EnvAllowlist, Keep: cfg.EnvKeep, Allow: cfg.EnvAllow, Strip: cfg.EnvStrip})
	res := &actors.Resources{
		Bash: bash, Env: env, Redactor: env.Redactor(), Truncate: cfg.Truncate,
		Sandbox: actors.Sandbox{
			Limits: cfg.Sandbox, Helper: cfg.SandboxHelper,
			HelperPath: cfg.SandboxHelperPath, ScratchRoot: cfg.ScratchRoot,
		},
		Grace: cfg.Grace, CleanupWait: cfg.CleanupWait, DrainWait: cfg.DrainWait,
		KeepLeftovers: cfg.KeepLeftovers, SeparateStreams: cfg.SeparateStreams, Log: log,
	}
	if cfg.NoCgroups {
		log.Info("cgroups disabled: commands that leave their process group (setsid, double fork) are not tracked or killed")
	} else if res.Cgroups, err = proc.ProbeCgroups(cfg.CgroupParent); err != nil {
		log.Warn("no per-command cgroups; the process group is the unit of termination, so commands that leave it (setsid, double fork) are not tracked or killed", "err", err)
	}
	s := &Supervisor{res: res, limits: cfg.Limits, outDir: cfg.OutputDir, caps: sandbox.Probe(), done: make(chan struct{})}
	protoLog := slog.New(minLevel{log.Handler(), slog.LevelWarn}).With("lib", "protoactor")
	// Dead letters (a timer or reader message reaching an actor that has
	// just stopped) are expected and harmless; a short throttle interval
	// keeps protoactor's throttle goroutine from outliving Shutdown.
	s.system = actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return protoLog }),
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond),
	)
	s.pid = s.system.Root.Spawn(props(s))
	return s, nil
}

// Sandbox says what restricted mode enforces on this host.
func (s *Supervisor) Sandbox() SandboxCapabilities { return s.caps }

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

// Request is a job to start.
type Request struct {
	Conversation string
	// Command is the command as submitted; Display as shown; Script what
	// bash -c runs (Command after the engine's rewrites).
	Command, Display, Script string
	// Dir is the working directory.
	Dir string
	// Env holds environment overrides; ExtraEnv trusted NAME=value
	// additions.
	Env      map[string]string
	ExtraEnv []string
	// Background runs the job detached, with its output in a file.
	Background bool
	// Restricted runs it in the sandbox.
	Restricted bool
	// Timeout is the foreground timeout or the background lifetime (0:
	// none).
	Timeout time.Duration
	// Limits, when set, replace Config.Limits for this job.
	Limits *Limits
	// Completion renders the line appended to a background job's output
	// file when it ends.
	Completion func(Outcome) string
}

// Job is a started job.
type Job struct {
	// ID names the job: "cmd-N" (foreground) or "job-N" (background).
	ID string
	// Pid is the pid and process group id of its shell.
	Pid int
	// OutputFile is a background job's output file.
	OutputFile string

	done <-chan Outcome
	out  *truncate.Buffer
}

// Done receives a foreground job's outcome, once.
func (j *Job) Done() <-chan Outcome { return j.done }

// Progress reports a foreground job's output so far: its size and its
// latest line (at most 256 bytes).
func (j *Job) Progress() (bytes int64, lastLine string) {
	if j.out == nil {
		return 0, ""
	}
	return j.out.Total(), j.out.LastLine(256)
}

// Start starts a job: the supervisor records it and spawns its actor, the
// process is started in the calling goroutine and handed to the actor. A
// foreground job's outcome then arrives on Job.Done; a background job runs
// on its own. Start fails with ErrShutdown after Shutdown, with an error
// wrapping ErrStart or ErrSandboxUnavailable when the process could not
// start, and with ctx's error when ctx is done before the job starts.
func (s *Supervisor) Start(ctx context.Context, req Request) (*Job, error) {
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
	}
	if a.err != nil {
		return nil, a.err
	}
	l, err := actors.Launch(a.spec, s.res)
	if err != nil {
		s.system.Root.Send(a.pid, &actors.LaunchFailed{Err: err})
		return nil, err
	}
	s.system.Root.Send(a.pid, l)
	return &Job{ID: a.spec.ID, Pid: l.Pid(), OutputFile: a.spec.OutputFile, done: a.done, out: l.Output()}, nil
}

// Cancel ends a running job with the grace sequence (its outcome says
// "cancelled"). An ended or unknown job is ignored.
func (s *Supervisor) Cancel(id string) {
	s.system.Root.Send(s.pid, &cancelRequest{id: id, reason: actors.ReasonCancelled})
}

// Kill ends a background job with the grace sequence and returns its final
// state; an ended job's state is returned unchanged. It reports false when
// there is no such background job.
func (s *Supervisor) Kill(ctx context.Context, id string) (State, bool, error) {
	reply := make(chan State, 1)
	s.system.Root.Send(s.pid, &killRequest{id: id, reply: reply})
	select {
	case st := <-reply:
		return st, st.ID != "", nil
	case <-s.done:
		return State{}, false, ErrShutdown
	case <-ctx.Done():
		return State{}, false, ctx.Err()
	}
}

// Jobs returns the records of the background jobs, running and ended (the
// most recent MaxEnded), oldest first; after Shutdown, the final ones.
func (s *Supervisor) Jobs() []State {
	reply := make(chan []State, 1)
	s.system.Root.Send(s.pid, &listRequest{reply: reply})
	select {
	case states := <-reply:
		return states
	case <-s.done:
		return s.final
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
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// --- the supervisor actor ---

type (
	startRequest struct {
		req   Request
		reply chan<- admitted
	}
	admitted struct {
		spec *actors.Spec
		pid  *actor.PID
		done <-chan Outcome
		err  error
	}
	cancelRequest struct {
		id     string
		reason Reason
	}
	killRequest struct {
		id    string
		reply chan<- State
	}
	listRequest     struct{ reply chan<- []State }
	shutdownRequest struct{ leaveJobs bool }
)

type entry struct {
	pid   *actor.PID
	state State
}

type supervisor struct {
	s        *Supervisor
	running  map[string]*entry // jobs not yet reported final, by id
	ended    map[string]State  // ended background jobs, by id
	order    []string          // ended ids, oldest first
	children map[string]string // live job actor id -> job id
	killers  map[string][]chan<- State
	cmdSeq   uint64 // foreground "cmd-N" ids
	jobSeq   uint64 // background "job-N" ids
	stopping bool
	stopped  bool
}

// props: the supervisor's children are stopped, never restarted. Like the
// jobs, it runs a message in the sender's goroutine when idle (protoactor's
// synchronized dispatcher); it never blocks in Receive.
func props(s *Supervisor) *actor.Props {
	stop := actor.NewOneForOneStrategy(0, time.Second, func(any) actor.Directive { return actor.StopDirective })
	return actor.PropsFromProducer(func() actor.Actor {
		return &supervisor{s: s, running: map[string]*entry{}, ended: map[string]State{},
			children: map[string]string{}, killers: map[string][]chan<- State{}}
	}, actor.WithSupervisor(stop), actor.WithDispatcher(actor.NewSynchronizedDispatcher(300)))
}

func (sv *supervisor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *startRequest:
		m.reply <- sv.start(ctx, m.req)
	case *actors.Report:
		sv.update(ctx, m.State)
	case *cancelRequest:
		if e, ok := sv.running[m.id]; ok {
			ctx.Send(e.pid, &actors.Cancel{Reason: m.reason})
		}
	case *killRequest:
		sv.kill(ctx, m)
	case *listRequest:
		m.reply <- sv.list()
	case *actor.Terminated:
		sv.terminated(ctx, m.Who)
	case *shutdownRequest:
		sv.shutdown(ctx, m.leaveJobs)
	case *actor.Stopped:
		sv.s.final = sv.list()
		go sv.s.finish()
	}
}

// start records a new job and spawns its actor, which waits for its
// process.
func (sv *supervisor) start(ctx actor.Context, req Request) admitted {
	if sv.stopping {
		return admitted{err: ErrShutdown}
	}
	spec := &actors.Spec{
		Conversation: req.Conversation, Command: req.Command, Display: req.Display, Script: req.Script,
		Dir: req.Dir, Env: req.Env, ExtraEnv: req.ExtraEnv, Background: req.Background,
		Restricted: req.Restricted, Timeout: req.Timeout, Completion: req.Completion,
		Limits: sv.s.limits,
	}
	if req.Limits != nil {
		spec.Limits = *req.Limits
	}
	var done chan Outcome
	if req.Background {
		sv.jobSeq++
		spec.ID = "job-" + strconv.FormatUint(sv.jobSeq, 10)
		spec.OutputFile = filepath.Join(sv.s.outDir, spec.ID+".log")
	} else {
		sv.cmdSeq++
		spec.ID = "cmd-" + strconv.FormatUint(sv.cmdSeq, 10)
		done = make(chan Outcome, 1)
		spec.Done = done
	}
	pid := ctx.Spawn(actors.NewProps(spec, sv.s.res))
	sv.running[spec.ID] = &entry{pid: pid, state: State{
		ID: spec.ID, Conversation: spec.Conversation, Command: spec.Command, Display: spec.Display,
		Background: spec.Background, Status: Running, OutputFile: spec.OutputFile, Started: time.Now(),
	}}
	sv.children[pid.Id] = spec.ID
	return admitted{spec: spec, pid: pid, done: done}
}

// update records a job's state; a final state stops its actor.
func (sv *supervisor) update(ctx actor.Context, st State) {
	e, ok := sv.running[st.ID]
	if !ok {
		return
	}
	if st.Running() {
		e.state = st
		return
	}
	delete(sv.running, st.ID)
	if st.Background && st.Status != Errored {
		sv.remember(st)
	}
	// Poison, not Stop: a user message, so a Cancel sent before this point
	// (a Kill crossing the final report) still reaches the actor, which
	// answers it with its final state.
	ctx.Poison(e.pid)
}

func (sv *supervisor) remember(st State) {
	sv.ended[st.ID] = st
	sv.order = append(sv.order, st.ID)
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
	if e, ok := sv.running[m.id]; ok && e.state.Background {
		// The reply is remembered too: if the actor fails before it
		// answers, terminated answers instead.
		sv.killers[m.id] = append(sv.killers[m.id], m.reply)
		ctx.Send(e.pid, &actors.Cancel{Reason: actors.ReasonKilled, Reply: m.reply})
		return
	}
	m.reply <- sv.ended[m.id] // the zero State: no such job
}

// terminated handles the end of a job's actor: one that stopped without a
// final report failed.
func (sv *supervisor) terminated(ctx actor.Context, who *actor.PID) {
	id, ok := sv.children[who.Id]
	if !ok {
		return
	}
	delete(sv.children, who.Id)
	if e, ok := sv.running[id]; ok {
		delete(sv.running, id)
		if e.state.Background {
			st := e.state
			st.Status, st.Reason, st.Ended = Killed, actors.ReasonFailed, time.Now()
			sv.remember(st)
			for _, r := range sv.killers[id] {
				select {
				case r <- st:
				default: // already answered
				}
			}
		}
	}
	delete(sv.killers, id)
	sv.maybeStop(ctx)
}

func (sv *supervisor) shutdown(ctx actor.Context, leaveJobs bool) {
	if sv.stopping {
		return
	}
	sv.stopping = true
	for _, e := range sv.running {
		if e.state.Background && leaveJobs {
			ctx.Send(e.pid, &actors.Detach{})
			continue
		}
		ctx.Send(e.pid, &actors.Cancel{Reason: actors.ReasonShutdown})
	}
	sv.maybeStop(ctx)
}

func (sv *supervisor) maybeStop(ctx actor.Context) {
	if sv.stopping && !sv.stopped && len(sv.children) == 0 {
		sv.stopped = true
		ctx.Stop(ctx.Self())
	}
}

func (sv *supervisor) list() []State {
	out := make([]State, 0, len(sv.running)+len(sv.ended))
	for _, e := range sv.running {
		if e.state.Background {
			out = append(out, e.state)
		}
	}
	for _, id := range sv.order {
		out = append(out, sv.ended[id])
	}
	slices.SortFunc(out, func(a, b State) int { return a.Started.Compare(b.Started) })
	return out
}

// finish stops the actor system and removes the cgroups once the
// supervisor actor has stopped; it runs on its own goroutine (the actor
// system cannot be shut down from inside one of its actors).
func (s *Supervisor) finish() {
	s.system.Shutdown()
	if s.res.Cgroups != nil {
		if err := s.res.Cgroups.Close(); err != nil {
			s.res.Log.Warn("removing cgroups", "err", err)
		}
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
