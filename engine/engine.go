package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/bashvisor/bashvisor/actors"
	"github.com/bashvisor/bashvisor/proc"
	"github.com/bashvisor/bashvisor/safety"
	"github.com/bashvisor/bashvisor/sandbox"
	"github.com/bashvisor/bashvisor/secret"
	"github.com/bashvisor/bashvisor/supervisor"
	"github.com/bashvisor/bashvisor/truncate"
)

// Errors carried in [Result.Err] and returned by Engine methods; test them
// with errors.Is.
var (
	ErrWorkDirMissing = errors.New("working directory does not exist")
	ErrWorkDirNotDir  = errors.New("working directory is not a directory")
	ErrBadInput       = errors.New("bad input")
	ErrShutdown       = errors.New("engine is shut down")
	ErrNoSuchJob      = errors.New("no such job")
	ErrBlocked        = errors.New("command blocked")
	ErrDenied         = errors.New("command denied by permission profile")
	ErrNeedsApproval  = errors.New("command needs approval")
	ErrRestrictedMode = errors.New("restricted mode unavailable")
	ErrStart          = proc.ErrStart
	ErrInternal       = actors.ErrActorFailed
)

// MaxCommandBytes is the longest command accepted, in bytes. The command
// reaches bash as one argument of bash -c, and Linux limits one argument to
// MAX_ARG_STRLEN, 131072 bytes including its terminating NUL, so 131071
// bytes is the most that can run at all. [ValidateInput] refuses longer
// commands as bad input instead of letting them fail to start with "argument
// list too long". A Co-authored-by trailer (Config.CoAuthor) is added after
// this check: a git commit within a few bytes of the limit can still fail to
// start.
const MaxCommandBytes = 128<<10 - 1

// Engine runs shell commands for agents. It is safe for concurrent use by
// any number of conversations; it keeps no per-conversation state.
type Engine struct {
	cfg    Config
	log    *slog.Logger
	system *actor.ActorSystem
	sup    *actor.PID
	env    *proc.Env
	bash   string
	outDir string
	ownDir bool
	cg     *proc.Cgroups // nil: the process group is the unit of termination
	trunc  truncate.Config
	// cmdIDs and jobIDs number foreground commands ("cmd-N") and
	// background jobs ("job-N") separately, so job ids count jobs from 1.
	cmdIDs, jobIDs atomic.Uint64
	caps           sandbox.Capabilities
	// auditor writes the audit log; nil when none is configured.
	auditor *safety.Auditor
	// redactor replaces the values of the secrets stripped from the
	// environment in every command's output.
	redactor *secret.Redactor

	spoolMu sync.Mutex
	spools  []string // full-output files, oldest first (at most SpoolKeep)

	mu       sync.RWMutex // guards closed against sends to a stopped supervisor
	closed   bool
	stopOnce sync.Once
	stopped  chan struct{} // closed when Shutdown finished
	final    []actors.JobState
	stopErr  error
}

// New starts an engine: the actor system, the supervisor, the filtered
// environment and the output directory.
func New(cfg Config) (*Engine, error) {
	cfg = withDefaults(cfg)
	bash, err := exec.LookPath("bash")
	if err != nil {
		return nil, fmt.Errorf("bashvisor: %w", err)
	}
	e := &Engine{cfg: cfg, log: cfg.Logger, bash: bash, outDir: cfg.OutputDir, stopped: make(chan struct{})}
	if e.outDir == "" {
		if e.outDir, err = os.MkdirTemp("", "bashvisor-"); err != nil {
			return nil, fmt.Errorf("bashvisor: output directory: %w", err)
		}
		e.ownDir = true
	} else if err := os.MkdirAll(e.outDir, 0o700); err != nil {
		return nil, fmt.Errorf("bashvisor: output directory: %w", err)
	}
	envCfg := proc.EnvConfig{Allowlist: cfg.EnvPolicy == EnvAllowlist, Keep: cfg.EnvKeep, Allow: cfg.EnvAllow, Strip: cfg.EnvStrip}
	e.env = proc.NewEnv(cfg.Environ, envCfg)
	e.redactor = e.env.Redactor()
	e.trunc = truncate.Config{Strategy: truncate.Strategy(cfg.Truncation), Max: cfg.MaxOutput, SpoolCap: cfg.SpoolCap}
	if cfg.SpoolCap > 0 {
		e.trunc.SpoolDir = e.outDir
	}
	if cfg.NoCgroups {
		e.log.Info("cgroups disabled: commands that leave their process group (setsid, double fork) are not tracked or killed")
	} else if e.cg, err = proc.ProbeCgroups(cfg.CgroupParent); err != nil {
		e.log.Warn("no per-command cgroups; the process group is the unit of termination, so commands that leave it (setsid, double fork) are not tracked or killed", "err", err)
	} else {
		e.log.Debug("per-command cgroups", "dir", e.cg.Dir())
	}
	if err := proc.ProtectEngine(!cfg.KeepCapabilities); err != nil {
		return nil, fmt.Errorf("bashvisor: protect the engine's memory from its commands: %w", err)
	}
	protoLog := slog.New(minLevel{cfg.Logger.Handler(), slog.LevelWarn}).With("lib", "protoactor")
	// Dead letters (a timer or reader message reaching an actor that has
	// just stopped) are expected and harmless; a short throttle interval
	// keeps protoactor's throttle goroutine from outliving Shutdown.
	e.system = actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return protoLog }),
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond),
	)
	if cfg.Audit != nil {
		e.auditor = safety.NewAuditor(cfg.Audit, e.redactor)
	}
	if cfg.Permissions != nil {
		if err := cfg.Permissions.Compile(); err != nil {
			return nil, fmt.Errorf("bashvisor: permission profile: %w", err)
		}
	}
	e.caps = sandbox.Probe()
	if e.caps.Available() {
		e.log.Info("restricted mode available", "sandbox", e.caps.String())
	} else {
		e.log.Warn("restricted mode disabled: the kernel cannot enforce it; safety checks still apply", "sandbox", e.caps.String())
	}
	e.sup = e.system.Root.Spawn(supervisor.Props())
	return e, nil
}

func withDefaults(c Config) Config {
	d := DefaultConfig()
	def := func(v *time.Duration, dv time.Duration) {
		if *v <= 0 { // a negative duration would mean no timer, or a panic
			*v = dv
		}
	}
	def(&c.Timeout, d.Timeout)
	def(&c.SlowTimeout, d.SlowTimeout)
	def(&c.Grace, d.Grace)
	def(&c.CleanupWait, d.CleanupWait)
	def(&c.DrainWait, d.DrainWait)
	def(&c.ProgressInterval, d.ProgressInterval)
	switch { // 0 means the default, negative means no lifetime limit
	case c.BackgroundLifetime == 0:
		c.BackgroundLifetime = d.BackgroundLifetime
	case c.BackgroundLifetime < 0:
		c.BackgroundLifetime = 0
	}
	if c.EnvPolicy == "" {
		c.EnvPolicy = d.EnvPolicy
	}
	if c.MaxOutput <= 0 {
		c.MaxOutput = d.MaxOutput
	}
	if c.Truncation == "" {
		c.Truncation = d.Truncation
	}
	if c.SpoolCap == 0 {
		c.SpoolCap = d.SpoolCap
	}
	if c.SpoolKeep <= 0 {
		c.SpoolKeep = d.SpoolKeep
	}
	if c.Environ == nil {
		c.Environ = os.Environ()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Config returns the engine's configuration with defaults applied.
func (e *Engine) Config() Config { return e.cfg }

var interactiveRebase = regexp.MustCompile(`\brebase\b[^\n;&|]*\s(-[a-zA-Z]*i[a-zA-Z]*|--interactive)\b`)

// Run runs one tool call and returns its result; it never panics on bad
// input. The command is checked first (safety rules, then the permission
// profile) and runs only when allowed. Cancelling ctx ends a foreground
// command with the grace sequence (status "cancelled"); a background job is
// not tied to ctx. Every call is written to the audit log when one is
// configured.
func (e *Engine) Run(ctx context.Context, tc ToolContext, in Input) Result {
	start := time.Now()
	res, g := e.run(ctx, tc, in)
	e.audit(tc, in, res, g, start)
	return res
}

func (e *Engine) run(ctx context.Context, tc ToolContext, in Input) (Result, safety.Outcome) {
	res := Result{Command: in.Command, Display: in.Command}
	mode, err := validate(in)
	if err != nil {
		return errorResult(res, err), safety.Outcome{}
	}
	if err := checkDir(tc.WorkingDir); err != nil {
		return errorResult(res, err), safety.Outcome{}
	}
	res.Display = safety.Display(in.Command, tc.WorkingDir)
	res, g, ok := e.gate(res, tc)
	if !ok {
		return res, g
	}
	command := in.Command
	if e.cfg.CoAuthor != "" {
		command = safety.AddCoAuthor(command, e.cfg.CoAuthor)
	}
	var extra []string
	bg := mode == ModeBackground
	if !bg && interactiveRebase.MatchString(command) {
		extra = append(extra, proc.RebaseGuard)
	}
	if e.cfg.HomeIsWorkDir && e.cfg.EnvPolicy == EnvAllowlist {
		extra = append(extra, "HOME="+tc.WorkingDir)
	}
	cmd := &actors.Command{
		Command:        in.Command,
		Display:        res.Display,
		ConversationID: tc.ConversationID,
		Spec: proc.Spec{
			Path: e.bash, Args: []string{"bash", "-c", command},
			Dir: tc.WorkingDir, SeparateStderr: e.cfg.SeparateStreams && !bg, CgroupFD: -1,
		},
		Background:    bg,
		Grace:         e.cfg.Grace,
		CleanupWait:   e.cfg.CleanupWait,
		DrainWait:     e.cfg.DrainWait,
		KeepLeftovers: e.cfg.KeepLeftovers,
		Cgroups:       e.cg,
		Truncate:      e.trunc,
		Redactor:      e.redactor,
	}
	if tc.Restricted {
		senv, err := e.restrict(cmd, command, tc.WorkingDir)
		if err != nil {
			return errorResult(res, err), g
		}
		extra = append(extra, senv...)
	}
	env, dropped := e.env.With(extra, tc.Env)
	if len(dropped) > 0 {
		e.log.Warn("dropped environment overrides", "names", dropped, "conversation", tc.ConversationID)
	}
	cmd.Spec.Env = env
	events := make(chan actors.Event, 2)
	cmd.Events = events
	switch mode {
	case ModeBackground:
		cmd.ID = "job-" + strconv.FormatUint(e.jobIDs.Add(1), 10)
		cmd.Timeout = e.cfg.BackgroundLifetime
		cmd.OutputFile = filepath.Join(e.outDir, cmd.ID+".log")
	case ModeSlow:
		cmd.ID, cmd.Timeout = "cmd-"+strconv.FormatUint(e.cmdIDs.Add(1), 10), e.cfg.SlowTimeout
	default:
		cmd.ID, cmd.Timeout = "cmd-"+strconv.FormatUint(e.cmdIDs.Add(1), 10), e.cfg.Timeout
	}
	// The process starts here, in the caller's goroutine, and the command
	// actor takes it over once the supervisor has spawned it. The read
	// lock spans the check, the start and the send, so Shutdown never
	// races a command that is being handed over.
	e.mu.RLock()
	if e.closed {
		e.mu.RUnlock()
		if cmd.Cleanup != nil {
			cmd.Cleanup()
		}
		return errorResult(res, ErrShutdown), g
	}
	if err := ctx.Err(); err != nil { // the caller gave up before it started
		e.mu.RUnlock()
		if cmd.Cleanup != nil {
			cmd.Cleanup()
		}
		res.Status, res.Err, res.Output = StatusCancelled, err, "[command cancelled]\n"
		return res, g
	}
	if err := actors.Launch(cmd); err != nil {
		e.mu.RUnlock()
		if cmd.Cleanup != nil {
			cmd.Cleanup()
		}
		return errorResult(res, err), g
	}
	out := cmd.Output()
	res.PID = cmd.Pid()
	e.system.Root.Send(e.sup, &supervisor.Spawn{Command: cmd})
	e.mu.RUnlock()
	return e.wait(ctx, tc, cmd, out, events, res), g
}

// RedactCommand returns command text fit for a log: the values of the
// secrets stripped from the environment and the credentials
// safety.RedactSecrets recognises are replaced. A nil *Engine applies only
// the latter.
func (e *Engine) RedactCommand(command string) string {
	var r *secret.Redactor
	if e != nil {
		r = e.redactor
	}
	return safety.RedactSecrets(r.String(command))
}

// LogCommand returns command as a log value that is redacted with
// RedactCommand only when a handler actually logs it, so a disabled debug
// log costs nothing.
func (e *Engine) LogCommand(command string) slog.LogValuer { return logCommand{e, command} }

type logCommand struct {
	e       *Engine
	command string
}

func (l logCommand) LogValue() slog.Value { return slog.StringValue(l.e.RedactCommand(l.command)) }

// send delivers msg to the supervisor unless the engine is shut down.
func (e *Engine) send(msg any) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return false
	}
	e.system.Root.Send(e.sup, msg)
	return true
}

// wait waits for a command's events; out is its live output buffer
// (foreground), read for progress.
func (e *Engine) wait(ctx context.Context, tc ToolContext, cmd *actors.Command, out *truncate.Buffer, events <-chan actors.Event, res Result) Result {
	if cmd.Background {
		switch ev := (<-events).(type) {
		case *actors.Done:
			return e.format(res, cmd, ev.Outcome)
		case *actors.Started:
			res.Status, res.PID, res.JobID, res.OutputFile = StatusStarted, ev.Pid, cmd.ID, cmd.OutputFile
			res.Output = fmt.Sprintf("<pid>%d</pid>\n<output_file>%s</output_file>\n<reminder>To stop: kill -9 -%d</reminder>",
				ev.Pid, cmd.OutputFile, ev.Pid)
			return res
		}
	}
	// A foreground call waits only for Done: the process is already
	// running (Launch); its actor sends no Started.
	var tick <-chan time.Time
	if tc.Progress != nil {
		t := time.NewTicker(e.cfg.ProgressInterval)
		defer t.Stop()
		tick = t.C
	}
	begin := time.Now()
	done := ctx.Done()
	for {
		select {
		case ev := <-events:
			if d, ok := ev.(*actors.Done); ok {
				return e.format(res, cmd, d.Outcome)
			}
		case <-done:
			done = nil
			e.send(&actors.Cancel{ID: cmd.ID, Reason: actors.ReasonCancelled})
		case <-tick:
			tc.Progress(Progress{
				Elapsed:  time.Since(begin),
				Bytes:    out.Total(),
				LastLine: out.LastLine(256),
			})
		}
	}
}

// ValidateInput checks a tool input the way [Engine.Run] does before
// anything runs. The error wraps [ErrBadInput] and says what to fix: the
// command is empty or blank, longer than [MaxCommandBytes], holds a NUL
// byte (which no argument can carry) or invalid UTF-8; or the mode is not
// one of the three. Programs that decode tool input themselves (package
// mcpserver) call it to refuse bad input in the engine's words.
func ValidateInput(in Input) error {
	_, err := validate(in)
	return err
}

func validate(in Input) (Mode, error) {
	if strings.TrimSpace(in.Command) == "" {
		return "", fmt.Errorf("%w: command is empty", ErrBadInput)
	}
	if n := len(in.Command); n > MaxCommandBytes {
		return "", fmt.Errorf("%w: command is %s (%d bytes), over the limit of %d bytes (Linux's limit on one argument); write long scripts to a file in smaller pieces and run the file",
			ErrBadInput, truncate.Humanize(int64(n)), n, MaxCommandBytes)
	}
	if i := strings.IndexByte(in.Command, 0); i >= 0 {
		return "", fmt.Errorf("%w: command contains a NUL byte (at byte %d); a command cannot carry NUL bytes, use printf '\\0' to produce one", ErrBadInput, i)
	}
	if !utf8.ValidString(in.Command) {
		return "", fmt.Errorf("%w: command is not valid UTF-8 (at byte %d)", ErrBadInput, invalidUTF8At(in.Command))
	}
	switch in.Mode {
	case "", ModeDefault:
		return ModeDefault, nil
	case ModeSlow, ModeBackground:
		return in.Mode, nil
	}
	return "", fmt.Errorf("%w: unknown mode %.64q (want default, slow or background)", ErrBadInput, in.Mode)
}

// invalidUTF8At returns the offset of the first byte of s that is not part
// of a valid UTF-8 sequence.
func invalidUTF8At(s string) int {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return i
			}
		}
	}
	return len(s)
}

func checkDir(dir string) error {
	if dir == "" {
		return fmt.Errorf("%w: no working directory given", ErrBadInput)
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%w: %s (conversation may need to be recreated)", ErrWorkDirMissing, dir)
	case err != nil:
		return fmt.Errorf("%w: %s: %w", ErrWorkDirMissing, dir, err)
	case !fi.IsDir():
		return fmt.Errorf("%w: %s", ErrWorkDirNotDir, dir)
	}
	return nil
}

func errorResult(res Result, err error) Result {
	res.Status, res.Err = StatusError, err
	res.Output = "[error: " + err.Error() + "]"
	return res
}

// format turns an outcome into the result text of SPEC §2.5.
func (e *Engine) format(res Result, cmd *actors.Command, o actors.Outcome) Result {
	res.DurationMS = o.Duration.Milliseconds()
	if o.Err != nil && !errors.Is(o.Err, actors.ErrActorFailed) {
		return errorResult(res, o.Err)
	}
	body := o.Output.Text
	if o.Stderr != nil && o.Stderr.Text != "" {
		body = appendNote(body, "[stderr]\n"+o.Stderr.Text)
	}
	res.Truncated = o.Output.Truncated || (o.Stderr != nil && o.Stderr.Truncated)
	res.OutputBytes = o.Output.Total
	if o.Stderr != nil {
		res.OutputBytes += o.Stderr.Total
	}
	res.FullOutputFile = o.Output.SpoolFile
	if res.FullOutputFile != "" {
		e.keepSpool(res.FullOutputFile)
		body = appendNote(body, "[full output: "+res.FullOutputFile+"]")
	}
	if o.Reason != actors.ReasonNone {
		res.killed = append(res.killed, "process group ("+string(o.Reason)+")")
	}
	if len(o.Leftovers) > 0 {
		if !o.LeftRunning {
			res.killed = append(res.killed, "leftovers: "+members(o.Leftovers))
		}
		if o.LeftRunning {
			body = appendNote(body, "[left running after the shell exited: "+members(o.Leftovers)+"]")
		} else {
			body = appendNote(body, "[killed processes left running after the shell exited: "+members(o.Leftovers)+
				"; use mode=background for processes that should keep running]")
		}
	}
	if len(o.Survivors) > 0 {
		body = appendNote(body, fmt.Sprintf("[cleanup incomplete: still running %s after SIGKILL: %s]",
			humanDuration(cmd.CleanupWait), members(o.Survivors)))
	}
	if o.PipeHeld {
		body = appendNote(body, "[output cut off: the output pipe is held by a process outside the command's process group]")
	}
	if o.Exited {
		code := o.ExitCode
		res.ExitCode, res.Signal = &code, o.Signal
	}
	switch {
	case o.Err != nil:
		res.Status, res.Err = StatusError, o.Err
		res.Output = "[error: " + o.Err.Error() + "]\n" + body
	case o.Reason == actors.ReasonTimeout:
		res.Status = StatusTimedOut
		res.Output = "[command timed out after " + humanDuration(cmd.Timeout) + "]\n" + body
	case o.Reason == actors.ReasonCancelled:
		res.Status, res.Err = StatusCancelled, context.Canceled
		res.Output = "[command cancelled]\n" + body
	case o.Reason == actors.ReasonShutdown:
		res.Status, res.Err = StatusCancelled, ErrShutdown
		res.Output = "[command cancelled]\n" + appendNote(body, "[the engine is shutting down]")
	case o.Signal != "":
		res.Status = StatusFailed
		res.Output = "[command failed: killed by " + o.Signal + "]\n" + body
	case o.ExitCode != 0:
		res.Status = StatusFailed
		res.Output = "[command failed: exit code " + strconv.Itoa(o.ExitCode) + "]\n" + body
	default:
		res.Status, res.Output = StatusOK, body
	}
	return res
}

// keepSpool records a full-output file and removes the oldest beyond
// Config.SpoolKeep, so a long-running engine's disk use stays bounded.
func (e *Engine) keepSpool(path string) {
	e.spoolMu.Lock()
	defer e.spoolMu.Unlock()
	e.spools = append(e.spools, path)
	for len(e.spools) > e.cfg.SpoolKeep {
		_ = os.Remove(e.spools[0])
		e.spools = e.spools[1:]
	}
}

// appendNote appends a bracketed note on a line of its own.
func appendNote(body, note string) string {
	if body != "" && !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	return body + note
}

func members(ms []proc.Member) string {
	s := make([]string, 0, len(ms))
	for _, m := range ms {
		s = append(s, m.String())
	}
	return strings.Join(s, ", ")
}

// humanDuration prints 30s, 15m, 1h30m, 1.5s, 250ms.
func humanDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Jobs lists background jobs, running and ended (the most recent
// MaxEnded), oldest first.
func (e *Engine) Jobs() []JobInfo {
	states := e.states()
	out := make([]JobInfo, 0, len(states))
	for _, st := range states {
		if st.Background {
			out = append(out, jobInfo(st))
		}
	}
	slices.SortFunc(out, func(a, b JobInfo) int { return a.Started.Compare(b.Started) })
	return out
}

// states asks the supervisor for its records (the final ones after
// shutdown).
func (e *Engine) states() []actors.JobState {
	reply := make(chan []actors.JobState, 1)
	if !e.send(&supervisor.List{Reply: reply}) {
		<-e.stopped
		return e.final
	}
	return <-reply
}

func jobInfo(st actors.JobState) JobInfo {
	return JobInfo{
		JobID: st.ID, PID: st.Pid, Command: st.Command, Display: st.Display,
		ConversationID: st.ConversationID, Status: JobStatus(st.Status), ExitCode: st.ExitCode,
		Reason: st.Reason, Started: st.Started, Ended: st.Ended, Bytes: st.Size(), OutputFile: st.OutputFile,
	}
}

// Job returns one background job.
func (e *Engine) Job(id string) (JobInfo, error) {
	for _, st := range e.states() {
		if st.ID == id && st.Background {
			return jobInfo(st), nil
		}
	}
	return JobInfo{}, fmt.Errorf("%w: %q", ErrNoSuchJob, id)
}

// Kill ends a background job with the grace sequence and returns its
// final state. Killing an ended job returns its state unchanged.
func (e *Engine) Kill(ctx context.Context, id string) (JobInfo, error) {
	reply := make(chan supervisor.KillReply, 1)
	if !e.send(&supervisor.Kill{ID: id, Reason: actors.ReasonKilled, Reply: reply}) {
		return JobInfo{}, ErrShutdown
	}
	select {
	case r := <-reply:
		if !r.OK {
			return JobInfo{}, fmt.Errorf("%w: %q", ErrNoSuchJob, id)
		}
		return jobInfo(r.State), nil
	case <-ctx.Done():
		return JobInfo{}, ctx.Err()
	}
}

// JobOutput is a slice of a background job's output file plus the job's
// state.
type JobOutput struct {
	Job    JobInfo `json:"job"`
	Offset int64   `json:"offset"` // file offset of Data's first byte
	Data   string  `json:"output"` // valid UTF-8 (invalid bytes replaced)
	Size   int64   `json:"size"`   // current size of the output file
	EOF    bool    `json:"eof"`    // Data reaches the current end of the file
}

// DefaultReadLimit is JobOutput's default and largest read.
const DefaultReadLimit = 128 << 10

// JobOutput reads a job's output: the last tail bytes when tail > 0,
// otherwise up to limit bytes (0 or more than DefaultReadLimit means
// DefaultReadLimit) from offset.
func (e *Engine) JobOutput(id string, tail, offset, limit int64) (JobOutput, error) {
	job, err := e.Job(id)
	if err != nil {
		return JobOutput{}, err
	}
	if offset < 0 || tail < 0 || limit < 0 {
		return JobOutput{}, fmt.Errorf("%w: negative offset, tail or limit", ErrBadInput)
	}
	f, err := os.Open(job.OutputFile)
	if err != nil {
		return JobOutput{}, fmt.Errorf("job %s: %w", id, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return JobOutput{}, fmt.Errorf("job %s: %w", id, err)
	}
	size := fi.Size()
	if limit == 0 || limit > DefaultReadLimit {
		limit = DefaultReadLimit
	}
	if tail > 0 {
		limit = min(tail, DefaultReadLimit)
		offset = max(0, size-limit)
	}
	offset = min(offset, size)
	buf := make([]byte, min(limit, size-offset))
	n, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return JobOutput{}, fmt.Errorf("job %s: %w", id, err)
	}
	buf = buf[:n]
	if tail > 0 { // start on a character boundary
		for i := 0; i < 3 && len(buf) > 0 && !utf8.RuneStart(buf[0]); i++ {
			buf, offset = buf[1:], offset+1
		}
	}
	return JobOutput{
		Job: job, Offset: offset, Data: strings.ToValidUTF8(string(buf), "\uFFFD"),
		Size: size, EOF: offset+int64(n) >= size,
	}, nil
}

// Shutdown stops the engine: new calls fail with ErrShutdown, foreground
// commands are cancelled, background jobs are ended with the grace
// sequence (unless LeaveJobsRunning), then the supervisor and the actor
// system stop and the output directory is removed (unless KeepFiles or
// jobs were left running). It waits for all of that or for ctx; calling it
// again waits again.
func (e *Engine) Shutdown(ctx context.Context) error {
	e.stopOnce.Do(func() {
		e.mu.Lock()
		e.closed = true
		e.mu.Unlock()
		msg := &supervisor.Shutdown{LeaveJobs: e.cfg.LeaveJobsRunning, Done: make(chan struct{})}
		e.system.Root.Send(e.sup, msg)
		go func() {
			<-msg.Done
			e.final = msg.Final
			e.system.Shutdown()
			if e.cg != nil {
				if err := e.cg.Close(); err != nil {
					e.log.Warn("removing cgroups", "err", err)
				}
			}
			if e.ownDir && !e.cfg.KeepFiles && !e.cfg.LeaveJobsRunning {
				e.stopErr = os.RemoveAll(e.outDir)
			}
			close(e.stopped)
		}()
	})
	select {
	case <-e.stopped:
		return e.stopErr
	case <-ctx.Done():
		return ctx.Err()
	}
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
