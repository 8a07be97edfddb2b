package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/jobs"
	"github.com/bashvisor/bashvisor/internal/supervisor"
	"github.com/bashvisor/bashvisor/internal/truncate"
	"github.com/bashvisor/bashvisor/safety"
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
	sup    *supervisor.Supervisor
	outDir string
	ownDir bool
	// auditor writes the audit log; nil when none is configured.
	auditor *auditor
	metrics *metrics
	// noLayer (benchmarks, export_test.go) runs workspace-write commands
	// the old way: read-only binds of git's hooks and config, no layer.
	noLayer bool

	spoolMu sync.Mutex
	spools  []string // full-output files, oldest first (at most SpoolKeep)

	stopOnce sync.Once
	stopped  chan struct{} // closed when Shutdown finished
	stopErr  error
}

// New starts an engine: the supervisor of its jobs, the environment policy
// and the output directory.
func New(cfg Config) (*Engine, error) {
	cfg = withDefaults(cfg)
	e := &Engine{cfg: cfg, log: cfg.Logger, outDir: cfg.OutputDir, stopped: make(chan struct{})}
	if _, err := e.hold(ToolContext{}); err != nil {
		return nil, fmt.Errorf("bashvisor: Config.Review: %w", err)
	}
	var err error
	if e.outDir == "" {
		if e.outDir, err = os.MkdirTemp("", "bashvisor-"); err != nil {
			return nil, fmt.Errorf("bashvisor: output directory: %w", err)
		}
		e.ownDir = true
	} else if err := os.MkdirAll(e.outDir, 0o700); err != nil {
		return nil, fmt.Errorf("bashvisor: output directory: %w", err)
	}
	if cfg.Permissions != nil {
		if err := cfg.Permissions.Compile(); err != nil {
			return nil, fmt.Errorf("bashvisor: permission profile: %w", err)
		}
	}
	e.dropMissingBases()
	broker, err := newBroker(cfg)
	if err != nil {
		if e.ownDir {
			_ = os.RemoveAll(e.outDir)
		}
		return nil, err
	}
	e.sup, err = supervisor.New(supervisor.Config{
		Env: cfg.Env, Cgroups: cfg.Cgroups, Lifecycle: cfg.Lifecycle, Output: cfg.Output,
		Sandbox: cfg.Sandbox, Admission: cfg.Admission, OutputDir: e.outDir, Logger: cfg.Logger, Broker: broker,
	})
	if err != nil {
		if e.ownDir {
			_ = os.RemoveAll(e.outDir)
		}
		return nil, err
	}
	e.auditor = newAuditor(cfg.Audit, e.RedactCommand)
	e.metrics = newMetrics(e)
	if !e.log.Enabled(context.Background(), slog.LevelWarn) {
		// Nothing to log: the sandbox is probed on first use (a one-shot
		// unrestricted `bashvisor run` never probes it).
	} else if caps := e.sup.Sandbox(); caps.Available() && caps.Namespaces {
		e.log.Info("restricted mode available", "sandbox", caps.String())
	} else if caps.Available() {
		e.log.Warn("restricted mode disabled: the engine is not root and cannot make user namespaces (see /proc/sys/user/max_user_namespaces, kernel.unprivileged_userns_clone, AppArmor's userns restriction), so sandboxed calls fail; safety checks still apply", "sandbox", caps.String())
	} else {
		e.log.Warn("restricted mode disabled: the kernel cannot enforce it; safety checks still apply", "sandbox", caps.String())
	}
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
	def(&c.Lifecycle.Grace, d.Lifecycle.Grace)
	def(&c.Lifecycle.CleanupWait, d.Lifecycle.CleanupWait)
	def(&c.Lifecycle.DrainWait, d.Lifecycle.DrainWait)
	def(&c.ProgressInterval, d.ProgressInterval)
	switch { // 0 means the default, negative means no lifetime limit
	case c.BackgroundLifetime == 0:
		c.BackgroundLifetime = d.BackgroundLifetime
	case c.BackgroundLifetime < 0:
		c.BackgroundLifetime = 0
	}
	if c.Env.Policy == "" {
		c.Env.Policy = d.Env.Policy
	}
	if c.Env.Environ == nil {
		c.Env.Environ = os.Environ()
	}
	if c.Output.Max <= 0 {
		c.Output.Max = d.Output.Max
	}
	if c.Output.Truncation == "" {
		c.Output.Truncation = d.Output.Truncation
	}
	if c.Output.SpoolCap == 0 {
		c.Output.SpoolCap = d.Output.SpoolCap
	}
	if c.Output.JobFileCap == 0 {
		c.Output.JobFileCap = d.Output.JobFileCap
	}
	if c.Output.SpoolKeep <= 0 {
		c.Output.SpoolKeep = d.Output.SpoolKeep
	}
	c.Limits = c.Limits.WithDefaults()
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// interactiveRebase matches an interactive git rebase; compiled on first
// use (a command that mentions "rebase"), not at every program's start.
var interactiveRebase = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\brebase\b[^\n;&|]*\s(-[a-zA-Z]*i[a-zA-Z]*|--interactive)\b`)
})

// Run runs one tool call and returns its result; it never panics on bad
// input. The command is checked first (safety rules, then the permission
// profile) and runs only when allowed. Cancelling ctx ends a foreground
// command with the grace sequence (status "cancelled"); a background job is
// not tied to ctx. Every call is written to the audit log when one is
// configured.
func (e *Engine) Run(ctx context.Context, tc ToolContext, in Input) Result {
	start := time.Now()
	res, a := e.run(ctx, tc, in)
	e.onHeld(ctx, tc, &res)
	e.audit(tc, in, res, a, start)
	e.metrics.observe(tc, in, res)
	return res
}

// run runs one call; it returns the command's analysis with the result
// (the zero Analysis when the input was refused before it).
func (e *Engine) run(ctx context.Context, tc ToolContext, in Input) (Result, safety.Analysis) {
	res := Result{Command: in.Command, Display: in.Command}
	mode, err := validate(in)
	if err != nil {
		return errorResult(res, err), safety.Analysis{}
	}
	yield, err := e.interactive(in, mode)
	if err != nil {
		return errorResult(res, err), safety.Analysis{}
	}
	if err := checkDir(tc.WorkingDir); err != nil {
		return errorResult(res, err), safety.Analysis{}
	}
	// A relative directory is the engine's directory's, for every profile:
	// a sandboxed command starts from its namespaces' root.
	if !filepath.IsAbs(tc.WorkingDir) {
		abs, err := filepath.Abs(tc.WorkingDir)
		if err != nil {
			return errorResult(res, fmt.Errorf("%w: working directory: %w", ErrBadInput, err)), safety.Analysis{}
		}
		tc.WorkingDir = abs
	}
	res, tc, g, holdAll, contained, ok := e.decide(res, tc, in)
	if !ok {
		return res, g
	}
	if tc.Sandbox.On() { // the sandbox is probed on first use: maybe out of a resource now
		if err := e.sup.Sandbox().Transient; err != nil {
			return errorResult(res, fmt.Errorf("%w: the sandbox's probe: %w", ErrStart, err)), g
		}
	}
	if tc.Sandbox.On() && e.sup.Sandbox().Available() && !e.sup.Sandbox().Namespaces {
		return errorResult(res, fmt.Errorf("%w: %s; as a user other than root it needs user namespaces (and a program that calls engine.SandboxMain first); the command did not run",
			ErrRestrictedMode, e.sup.Sandbox().Reason)), g
	}
	if tc.Sandbox.On() && !e.sup.Sandbox().Available() {
		return errorResult(res, fmt.Errorf("%w: %s; restricted mode needs Linux 5.13+ with Landlock enabled (6.7+ for network rules, 6.12+ for signal scoping)",
			ErrRestrictedMode, e.sup.Sandbox().Reason)), g
	}
	profile, err := e.profile(tc)
	if err != nil {
		return errorResult(res, err), g
	}
	if profile != nil {
		profile.Contained = contained // no TCP in the shared network
	}
	if profile != nil && profile.Layer {
		if profile.Hold, err = e.hold(tc); err != nil {
			return errorResult(res, err), g
		}
		profile.Hold = profile.Hold || holdAll
	}
	script := g.Run
	req := jobs.Request{
		Conversation: tc.ConversationID, Principal: tc.Principal, Command: in.Command, Display: res.Display, Script: script,
		Turn: tc.Turn, Dir: tc.WorkingDir, Env: tc.Env, Sandbox: profile, Limits: e.callLimits(tc), Detached: detachedLine,
		OutputMax: tc.OutputMax,
	}
	req.Timeout = e.timeout(mode)
	if mode == ModeBackground {
		req.Background, req.Completion = true, e.completionLine(tc)
	}
	if yield > 0 {
		req.Timeout, req.Yield = yield, e.yieldSpec(tc)
	}
	req.Stdin = in.Stdin == StdinPipe
	if in.TTY {
		size := ttySize()
		req.TTY = size
		req.ExtraEnv = append(req.ExtraEnv, "TERM=xterm-256color", fmt.Sprintf("COLUMNS=%d", size.Cols), fmt.Sprintf("LINES=%d", size.Rows))
	}
	if !req.Background && !in.TTY && strings.Contains(script, "rebase") && interactiveRebase().MatchString(script) {
		req.ExtraEnv = append(req.ExtraEnv, rebaseGuard)
	}
	if e.cfg.Env.HomeIsWorkDir && e.cfg.Env.Policy == config.Allowlist {
		req.ExtraEnv = append(req.ExtraEnv, "HOME="+tc.WorkingDir)
	}
	// The supervisor checkpoints the conversation's background jobs'
	// layers (what they changed so far reaches the workspace before this
	// command starts) and begins this one's.
	job, err := e.sup.Start(ctx, req)
	switch {
	case err == nil:
	case ctx.Err() != nil && errors.Is(err, ctx.Err()): // the caller gave up before it started
		res.Status, res.Err, res.Output = StatusCancelled, err, cancelledText
		return res, g
	default:
		return errorResult(res, public(err)), g
	}
	res.PID, res.QueuedMS = job.Pid, job.Queued.Milliseconds()
	if req.Background {
		res.Status, res.JobID, res.OutputFile = StatusStarted, job.ID, job.OutputFile
		res.Output = startedText(job.Pid, job.ID, job.OutputFile)
		return res, g
	}
	return e.wait(ctx, tc, job, req.Timeout, req.Stdin || req.TTY != nil, res), g
}

// wait waits for a foreground job's outcome, reporting progress and
// cancelling the job when ctx is done.
func (e *Engine) wait(ctx context.Context, tc ToolContext, job *supervisor.Job, timeout time.Duration, input bool, res Result) Result {
	var tick <-chan time.Time
	if tc.Progress != nil {
		t := time.NewTicker(e.cfg.ProgressInterval)
		defer t.Stop()
		tick = t.C
	}
	begin := time.Now()
	done := ctx.Done()
	var sent int64 // output already reported
	progress := func() Progress {
		p := Progress{Elapsed: time.Since(begin)}
		p.Bytes, p.LastLine = job.Progress()
		p.Output, p.Skipped, sent = job.OutputSince(sent, progressOutputMax)
		return p
	}
	for {
		select {
		case o := <-job.Done():
			if tick != nil { // the output since the last report
				if p := progress(); p.Output != "" || p.Skipped > 0 {
					tc.Progress(p)
				}
			}
			return e.render(res, tc, timeout, input, o)
		case <-done:
			done = nil
			e.sup.Cancel(job.Conversation, job.ID)
		case <-tick:
			tc.Progress(progress())
		}
	}
}

// RedactCommand returns command text fit for a log: the values of the
// secrets stripped from the environment and the credentials
// safety.RedactSecrets recognises are replaced. A nil *Engine applies only
// the latter.
func (e *Engine) RedactCommand(command string) string {
	if e != nil {
		command = e.sup.Redact(command)
	}
	return safety.RedactSecrets(command)
}

// ValidateInput checks in as Run does before it runs anything: a command
// that is not empty, at most MaxCommandBytes, without NUL bytes, valid
// UTF-8; a known mode; stdin, tty and yield_ms within their ranges. Its
// errors wrap ErrBadInput and say what to change.
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
	if err := validateInteractive(in); err != nil {
		return "", err
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
		return fmt.Errorf("%w: working directory is not a directory: %s", ErrBadInput, dir)
	}
	return nil
}

// keepSpool records a full-output file and removes the oldest beyond
// Config.Output.SpoolKeep, so a long-running engine's disk use stays bounded.
func (e *Engine) keepSpool(path string) {
	e.spoolMu.Lock()
	defer e.spoolMu.Unlock()
	e.spools = append(e.spools, path)
	for len(e.spools) > e.cfg.Output.SpoolKeep {
		_ = os.Remove(e.spools[0])
		e.spools = e.spools[1:]
	}
}

// Jobs lists the background jobs of tc's conversation, running and ended
// (the most recent supervisor.MaxEnded), oldest first. A conversation sees
// only its own jobs.
func (e *Engine) Jobs(tc ToolContext) []JobInfo {
	return jobInfos(e.sup.Jobs(tc.ConversationID))
}

// AllJobs lists the background jobs of every conversation, for an
// administrator (the tool calls see only their conversation's, through
// Jobs).
func (e *Engine) AllJobs() []JobInfo { return jobInfos(e.sup.AllJobs()) }

func jobInfos(states []jobs.State) []JobInfo {
	out := make([]JobInfo, 0, len(states))
	for _, st := range states {
		out = append(out, jobInfo(st))
	}
	return out
}

// jobInfo maps a job record to the API's, status by status.
func jobInfo(st jobs.State) JobInfo {
	j := JobInfo{
		JobID: st.ID, PID: st.Pid, Command: st.Command, Display: st.Display, ConversationID: st.Conversation,
		ExitCode: st.ExitCode, Started: st.Started, Ended: st.Ended, OutputFile: st.OutputFile, TTY: st.TTY,
	}
	switch st.Status {
	case jobs.Running:
		j.Status = JobRunning
	case jobs.Completed:
		j.Status = JobCompleted
	case jobs.Failed:
		j.Status = JobFailed
	case jobs.Detached:
		j.Status, j.Reason = JobKilled, "left running at engine shutdown"
	default:
		j.Status, j.Reason = JobKilled, killReason(st.Reason, st.Signal)
	}
	if j.output = st.Output; j.output != nil {
		j.Bytes = j.output.Size()
	}
	u := reportOf(st.CurrentUsage())
	j.CPUMS, j.PeakMemoryBytes, j.Processes, j.OOMKilled = u.cpuMS, u.peak, u.processes, u.oomKilled
	if j.Status == JobKilled && j.OOMKilled && st.Reason == jobs.ReasonNone {
		j.Reason = "out of memory" // the OOM killer's SIGKILL
	}
	j.Changes, j.ChangesOmitted = changes(st.Changes, st.Dir)
	j.Refused = refusals(st.Changes, st.Dir)
	j.Held = heldOfChanges(st.Changes, st.Dir)
	j.ChangeReport = changeNotes(st.Changes, st.Dir)
	return j
}

// Job returns one background job of tc's conversation. Another
// conversation's job is "no such job", like one that never existed.
func (e *Engine) Job(tc ToolContext, id string) (JobInfo, error) {
	for _, st := range e.sup.Jobs(tc.ConversationID) {
		if st.ID == id {
			return jobInfo(st), nil
		}
	}
	return JobInfo{}, fmt.Errorf("%w: %q", ErrNoSuchJob, id)
}

// Kill ends a background job of tc's conversation with the grace sequence
// and returns its final state. Killing an ended job returns its state
// unchanged; another conversation's job is "no such job".
func (e *Engine) Kill(ctx context.Context, tc ToolContext, id string) (JobInfo, error) {
	st, ok, err := e.sup.Kill(ctx, tc.ConversationID, id)
	switch {
	case err != nil:
		return JobInfo{}, public(err)
	case !ok:
		return JobInfo{}, fmt.Errorf("%w: %q", ErrNoSuchJob, id)
	}
	return jobInfo(st), nil
}

// Load is how busy an engine is.
type Load struct {
	// Running is the number of foreground commands running.
	Running int `json:"running"`
	// Jobs is the number of background jobs running.
	Jobs int `json:"jobs"`
	// Queued is the number of calls waiting to run.
	Queued int `json:"queued"`
	// BusyCPUs is the CPUs wanted by the commands measured busy (see
	// config.Admission).
	BusyCPUs int `json:"busy_cpus"`
}

// Load returns how busy the engine is now (see Config.Admission). A
// command counts until the engine has recorded its end, which can be
// just after Run returned to its caller (the caller is answered first):
// a Load read right after a Run may still count that command, and so
// may the limits a next call is admitted by, for a few microseconds.
func (e *Engine) Load() Load {
	st := e.sup.Stats()
	return Load{Running: st.Running, Jobs: st.Jobs, Queued: st.Queued, BusyCPUs: st.Busy}
}

// EndConversation ends a conversation: its running commands and jobs are
// ended with the grace sequence, its waiting calls are refused, its job
// records are forgotten and its output directory is removed once its last
// job is gone. An MCP server calls it when a session closes.
func (e *Engine) EndConversation(ctx context.Context, conversationID string) error {
	_, err := e.sup.EndConversation(ctx, conversationID)
	return public(err)
}

// Shutdown stops the engine: new calls fail with ErrShutdown, foreground
// commands are cancelled, background jobs are ended with the grace
// sequence (unless LeaveJobsRunning), then the supervisor stops and the
// output directory is removed (unless KeepFiles or jobs were left
// running). It waits for all of that or for ctx; calling it again waits
// again.
func (e *Engine) Shutdown(ctx context.Context) error {
	e.stopOnce.Do(func() {
		go func() {
			e.stopErr = public(e.sup.Shutdown(context.Background(), e.cfg.LeaveJobsRunning))
			if e.ownDir && !e.cfg.KeepFiles && !e.cfg.LeaveJobsRunning {
				e.stopErr = errors.Join(e.stopErr, os.RemoveAll(e.outDir))
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
