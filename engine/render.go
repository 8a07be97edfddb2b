package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/bashvisor/bashvisor/internal/egress"
	"github.com/bashvisor/bashvisor/internal/gitpolicy"
	"github.com/bashvisor/bashvisor/internal/jobs"
	"github.com/bashvisor/bashvisor/internal/supervisor"
	"github.com/bashvisor/bashvisor/internal/truncate"
)

// This file writes every text the model reads: results, background
// completion lines, notes about leftovers and cleanup, refusals, the job
// tools' texts and the tool description. The lower layers return data
// (jobs.Outcome, jobs.State); only the truncation header comes
// with the output itself, from package truncate, whose format it is.

// errorResult is the result of a call that ran nothing, or could not start.
func errorResult(res Result, err error) Result {
	res.Status, res.Err = StatusError, err
	res.Output = ErrorText(err)
	return res
}

// ErrorText is the text the model reads for an error: "[error: MESSAGE]".
func ErrorText(err error) string { return "[error: " + err.Error() + "]" }

// JobError is the error a job tool (bash_output, bash_write, bash_kill)
// answers when Job, JobOutput, Kill, Write or WaitOutput fail for job id:
// an ErrNoSuchJob error (which names the job) says where the ids are
// listed; any other names the job. It wraps err.
func JobError(id string, err error) error {
	if errors.Is(err, ErrNoSuchJob) {
		return fmt.Errorf("%w (bash_jobs lists the job ids)", err)
	}
	return fmt.Errorf("job %q: %w", id, err)
}

// busyError is an admission refusal as the model reads it: it matches
// ErrBusy.
type busyError struct{ b *supervisor.BusyError }

func (e *busyError) Error() string   { return busyText(e.b) }
func (e *busyError) Unwrap() []error { return []error{ErrBusy, e.b} }

// busyText words an admission refusal: what is full, whose, the counts,
// and what to do. "busy: this conversation already has 16 background jobs
// running, the most it may; stop one (bash_kill) or wait for one to end".
func busyText(b *supervisor.BusyError) string {
	who := fmt.Sprintf("principal %q", b.Principal)
	if b.Scope == supervisor.ScopePrincipal && b.Principal == "" {
		// A call without a principal: its conversation is its principal.
		c := *b
		c.Scope = supervisor.ScopeConversation
		b = &c
	}
	var why, then string
	then = "try again later"
	switch b.Limit {
	case supervisor.LimitRunning:
		switch b.Scope {
		case supervisor.ScopeConversation:
			why = fmt.Sprintf("this conversation already runs %d commands at once, the most it may", b.Count)
		case supervisor.ScopePrincipal:
			why = fmt.Sprintf("%s already runs %d commands at once in its conversations, the most one principal may", who, b.Count)
		default:
			why = fmt.Sprintf("%d commands are running on this host, the most it runs at once", b.Count)
		}
		if b.Waited == 0 {
			why += fmt.Sprintf(", and %d calls are waiting", b.Queued)
		}
	case supervisor.LimitQueue:
		if b.Scope == supervisor.ScopePrincipal {
			why = fmt.Sprintf("%s already has %d calls waiting to run, the most one principal may", who, b.Count)
			then = "wait for some of them to finish"
		} else {
			why = fmt.Sprintf("%d commands are running on this host and %d more are waiting, the most that may wait", b.Running, b.Count)
		}
	case supervisor.LimitJobs:
		then = "stop one (bash_kill) or wait for one to end"
		switch b.Scope {
		case supervisor.ScopeConversation:
			why = fmt.Sprintf("this conversation already has %d background jobs running, the most it may", b.Count)
		case supervisor.ScopePrincipal:
			why = fmt.Sprintf("%s already has %d background jobs running in its conversations, the most one principal may", who, b.Count)
		default:
			why = fmt.Sprintf("%d background jobs are running on this host, the most it allows", b.Count)
			then = "try again later"
		}
	case supervisor.LimitCPU:
		why = fmt.Sprintf("the host's CPUs are in use (the busy commands want %d CPUs' worth; it runs %d at once)", b.Count, b.Max)
	case supervisor.LimitMemory:
		why = fmt.Sprintf("the host is short of memory (%s available", humanBytes(int64(b.Count)<<20))
		if b.Pressure >= 0 {
			why += fmt.Sprintf(", tasks waiting for memory %.0f%% of the time", b.Pressure)
		}
		why += ")"
	case supervisor.LimitProcesses:
		why = fmt.Sprintf("the host is short of processes (%d tasks, of at most %d)", b.Count, b.Max)
	default:
		why = b.Error()
	}
	if b.Waited > 0 {
		return fmt.Sprintf("busy: waited %s to run (%d commands running, %d waiting), held by: %s; try again later",
			humanDuration(b.Waited), b.Running, b.Queued, why)
	}
	return "busy: " + why + "; " + then
}

// startedText is a background job's result text. Its reminder names the
// job tool, which stops the job with the grace sequence and records why:
// a kill from a later command would bypass that record, and in a sandbox
// the kernel refuses it (each command's processes are out of reach of the
// next command's).
func startedText(pid int, id, outputFile string) string {
	return fmt.Sprintf("<pid>%d</pid>\n<output_file>%s</output_file>\n<reminder>To stop: bash_kill job_id=%s</reminder>",
		pid, outputFile, id)
}

// yieldedText ends the result of a command that moved to the background.
// A job that reads input (stdin "pipe") or keys (tty) says how to send
// them.
func yieldedText(after time.Duration, id string, input bool) string {
	send := ""
	if input {
		send = ", send it input with bash_write"
	}
	return "[command still running after " + humanDuration(after) + ": moved to background as " + id +
		"; read it with bash_output" + send + ", stop it with bash_kill]"
}

// cancelledText is the result text of a call cancelled before it started.
const cancelledText = "[command cancelled]\n"

// rebaseGuard is the GIT_SEQUENCE_EDITOR set for a foreground command
// that contains an interactive rebase: git runs it as
// `$GIT_SEQUENCE_EDITOR "$@"`, and the model reads its message.
const rebaseGuard = `GIT_SEQUENCE_EDITOR=f() { echo "interactive rebase requires mode=background" >&2; exit 1; }; f`

// render turns a finished foreground job's outcome into its result; input
// says that the job reads input (stdin "pipe" or a terminal).
// unappliedLine is the status line of a command that ended well but whose
// changes did not all reach the workspace ("" when they did).
func unappliedLine(c jobs.Changes) string {
	rep := c.Report
	switch {
	case c.Err != nil:
		return "[command failed: its changes to the workspace were not applied]"
	case rep != nil && rep.Discarded && rep.Unheld != "" && rep.NotApplied == "":
		// What policy allowed applied; what needed review could not be kept.
		return "[command failed: not all of its changes to the workspace were applied]"
	case rep != nil && rep.Discarded:
		return "[command failed: its changes to the workspace were not applied]"
	}
	return ""
}

func (e *Engine) render(res Result, tc ToolContext, timeout time.Duration, input bool, o jobs.Outcome) Result {
	res.DurationMS = o.Duration.Milliseconds()
	if o.Err != nil && !errors.Is(o.Err, jobs.ErrActorFailed) {
		return errorResult(res, public(o.Err))
	}
	u := reportOf(o.Usage)
	res.CPUMS, res.PeakMemoryBytes, res.Processes, res.OOMKilled = u.cpuMS, u.peak, u.processes, u.oomKilled
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
	if o.Reason != jobs.ReasonNone {
		res.killed = append(res.killed, "process group ("+string(o.Reason)+")")
	}
	if len(o.Leftovers) > 0 {
		if o.LeftRunning {
			body = appendNote(body, "[left running after the shell exited: "+members(o.Leftovers)+"]")
		} else {
			res.killed = append(res.killed, "leftovers: "+members(o.Leftovers))
			body = appendNote(body, "[killed processes left running after the shell exited: "+members(o.Leftovers)+
				"; use mode=background for processes that should keep running]")
		}
	}
	if len(o.Survivors) > 0 {
		body = appendNote(body, fmt.Sprintf("[cleanup incomplete: still running %s after SIGKILL: %s]",
			humanDuration(e.cfg.Lifecycle.CleanupWait), members(o.Survivors)))
	}
	if o.PipeHeld {
		body = appendNote(body, "[output cut off: the output pipe is held by a process outside the command's process group]")
	}
	if o.Exited {
		code := o.ExitCode
		res.ExitCode, res.Signal = &code, o.Signal
	}
	failed := o.Signal != "" || o.ExitCode != 0
	oom := o.Usage.OOMKills > 0
	if oom && (!failed || o.Reason != jobs.ReasonNone) {
		// The shell carried on (or something else ended it): say so.
		body = appendNote(body, "["+oomNote(o)+"]")
	}
	switch {
	case o.Yielded != nil:
		res.Status, res.JobID, res.OutputFile = StatusStarted, o.Yielded.ID, o.Yielded.OutputFile
		res.Output = appendNote(body, yieldedText(timeout, o.Yielded.ID, input))
	case o.Err != nil:
		res.Status, res.Err = StatusError, public(o.Err)
		res.Output = ErrorText(o.Err) + "\n" + body
	case o.Reason == jobs.ReasonTimeout && o.YieldRefused != nil:
		res.Status = StatusTimedOut
		res.Output = "[command timed out after " + humanDuration(timeout) + "]\n" +
			appendNote(body, "[it could not move to the background: "+public(o.YieldRefused).Error()+"]")
	case o.Reason == jobs.ReasonTimeout:
		res.Status = StatusTimedOut
		res.Output = "[command timed out after " + humanDuration(timeout) + "]\n" + body
	case o.Reason == jobs.ReasonCancelled:
		res.Status, res.Err = StatusCancelled, context.Canceled
		res.Output = cancelledText + body
	case o.Reason == jobs.ReasonShutdown:
		res.Status, res.Err = StatusCancelled, ErrShutdown
		res.Output = cancelledText + appendNote(body, "[the engine is shutting down]")
	case o.Reason == jobs.ReasonCPULimit, cpuRlimitHit(o):
		res.Status = StatusFailed
		res.Output = "[command failed: " + cpuLimitText(o.Limits) + "]\n" + body
	case oom && failed:
		res.Status = StatusFailed
		res.Output = "[command failed: " + oomText(o.Limits) + "]\n" + body
	case o.Signal != "":
		res.Status = StatusFailed
		res.Output = "[command failed: killed by " + o.Signal + "]\n" + body
	case o.ExitCode != 0:
		res.Status = StatusFailed
		res.Output = "[command failed: exit code " + strconv.Itoa(o.ExitCode) + "]\n" + body
	default:
		res.Status, res.Output = StatusOK, body
	}
	if o.Yielded == nil {
		res.Changes, res.ChangesOmitted = changes(o.Changes, tc.WorkingDir)
		res.Refused = refusals(o.Changes, tc.WorkingDir)
		res.Held = heldOfChanges(o.Changes, tc.WorkingDir)
		if notes := changeNotes(o.Changes, tc.WorkingDir); notes != "" {
			res.Output = appendNote(res.Output, notes)
		}
		if line := unappliedLine(o.Changes); res.Status == StatusOK && line != "" { // never lost under ok
			res.Status, res.Output = StatusFailed, line+"\n"+res.Output
		}
	}
	if o.Yielded == nil {
		setNetwork(&res, o.Network)
		if line := o.Network.String(); line != "" {
			res.Output = appendNote(res.Output, line)
		}
	}
	if note := e.sandboxNote(tc, res, o); note != "" {
		res.Output, res.denied = appendNote(res.Output, note), true
	}
	e.listening(tc, &res)
	return res
}

// setNetwork puts a command's egress report into res.Network.
func setNetwork(res *Result, r egress.Report) {
	if r == nil {
		return
	}
	res.Network = slices.Grow(res.Network[:0], len(r))[:len(r)]
	for i, f := range r {
		n := &res.Network[i]
		n.Host, n.Port, n.BytesOut, n.BytesIn, n.Denied = f.Host, f.Port, f.BytesOut, f.BytesIn, f.Denied
	}
}

// changeNotes are the lines of a workspace-write command's change
// report: what it changed ("[changed 3 files: M src/a.go, A b.txt, D
// old.txt]", capped), one line per policy rule that refused changes,
// naming them and saying what to do instead, the changes that could not
// be applied, and why nothing was applied when nothing could be.
func changeNotes(c jobs.Changes, cwd string) string {
	rep := c.Report
	var lines []string
	if c.Err != nil {
		lines = append(lines, "[the command's changes to the workspace were not applied: "+c.Err.Error()+"]")
	}
	if rep == nil {
		return strings.Join(lines, "\n")
	}
	if line := changeLine(c, cwd, false); line != "" {
		lines = append(lines, line+stepNote(c))
	}
	if rep.NotApplied != "" {
		lines = append(lines, notAppliedLine(rep.NotApplied, rep.Discarded))
	}
	for _, l := range gitpolicy.Lines(rep.Refused, cwd) {
		lines = append(lines, "["+l+"]")
	}
	if h := heldNotes(c, cwd); h != "" {
		lines = append(lines, h)
	}
	if n := len(rep.Failed); n > 0 {
		var names []string
		for _, f := range rep.Failed[:min(n, 3)] {
			names = append(names, rel(cwd, f.Change.Path)+" ("+f.Err.Error()+")")
		}
		more := ""
		if n > 3 {
			more = fmt.Sprintf(", and %d more", n-3)
		}
		lines = append(lines, fmt.Sprintf("[%d %s could not be applied (the workspace changed meanwhile, or is full): %s%s]",
			n, plural(n, "change", "changes"), strings.Join(names, ", "), more))
	}
	return strings.Join(lines, "\n")
}

// Text is what the model reads of an undo (Report).
func (r UndoResult) Text() string { return r.Report }

// Error words an undo refusal: the paths (relative to nothing: they are
// absolute), at most five, and what to do.
func (e *UndoConflictError) Error() string {
	names := e.Paths[:min(len(e.Paths), 5)]
	more := ""
	if len(e.Paths) > 5 {
		more = fmt.Sprintf(" and %d more", len(e.Paths)-5)
	}
	return "undo refused: " + strings.Join(names, ", ") + more +
		" changed after the commands to undo (by the user or a later command); nothing was undone. Undo more steps to take back the later commands too, or change the files by hand"
}

// plural picks the word for n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// completionLine is the line appended to a background job's output file
// when it ends, with the egress proxy's refusals in a sandbox.
func (e *Engine) completionLine(tc ToolContext) func(jobs.Outcome) string {
	return func(o jobs.Outcome) string {
		line := completionStatus(o)
		if notes := changeNotes(o.Changes, tc.WorkingDir); notes != "" {
			line += "\n" + notes
		}
		if note := e.sandboxNote(tc, Result{}, o); note != "" {
			line += "\n" + note
		}
		return line
	}
}

// detachedLine is the line written into a background job's output file
// where the engine stopped reading its output (shutdown with jobs left
// running); see jobs.Request.Detached.
func detachedLine(kept int64, lost error) string {
	switch {
	case lost != nil:
		return fmt.Sprintf("[output after the engine stopped is lost: %v]", lost)
	case kept < 0:
		return "[output after the engine stopped is discarded: it could hold secret values the engine can no longer redact]"
	case kept == 0:
		return "[output after the engine stopped is discarded: this file is at its size cap]"
	case kept >= 1<<60:
		return "[the engine stopped here: later output is appended as it comes]"
	}
	return fmt.Sprintf("[the engine stopped here: later output is appended as it comes, up to %s more, then discarded]", truncate.Humanize(kept))
}

func completionStatus(o jobs.Outcome) string {
	st := o.Status()
	switch {
	case st == jobs.Completed:
		if o.Usage.OOMKills > 0 {
			return "[background process completed; " + oomNote(o) + "]"
		}
		return "[background process completed]"
	case o.Reason == jobs.ReasonCPULimit, cpuRlimitHit(o):
		return "[background process killed: " + cpuLimitText(o.Limits) + "]"
	case o.Usage.OOMKills > 0 && o.Reason == jobs.ReasonNone:
		return "[background process failed: " + oomText(o.Limits) + "]"
	case st == jobs.Failed:
		return fmt.Sprintf("[background process failed: exit code %d]", o.ExitCode)
	}
	return "[background process killed: " + killReason(o.Reason, o.Signal) + "]"
}

// oomText says that a command ran out of memory: "out of memory (limit 4
// GiB)". A system-wide shortage kills without a limit of the command's.
func oomText(l jobs.Applied) string {
	if l.Memory > 0 && !l.MemoryPerProcess {
		return "out of memory (limit " + humanBytes(l.Memory) + ")"
	}
	return "out of memory"
}

// oomNote says how many of a command's processes the OOM killer ended.
func oomNote(o jobs.Outcome) string {
	n := o.Usage.OOMKills
	what := "a process"
	if n > 1 {
		what = strconv.Itoa(n) + " processes"
	}
	return "the kernel killed " + what + " of the command: " + oomText(o.Limits)
}

// cpuRlimitHit reports that, without cgroups, the shell was ended by
// RLIMIT_CPU (SIGXCPU), or exited with the status of a process that was
// (128+SIGXCPU).
func cpuRlimitHit(o jobs.Outcome) bool {
	if !o.Limits.CPUPerProcess || o.Reason != jobs.ReasonNone {
		return false
	}
	return o.Signal == "SIGXCPU" || (o.Exited && o.Signal == "" && o.ExitCode == 128+int(syscall.SIGXCPU))
}

// cpuLimitText says that a command used up its CPU time: "CPU time limit
// exceeded (limit 10m)", "... (limit 10s per process)" without cgroups.
func cpuLimitText(l jobs.Applied) string {
	s := "CPU time limit exceeded (limit " + humanDuration(l.CPUTime)
	if l.CPUPerProcess {
		s += " per process"
	}
	return s + ")"
}

// humanBytes prints a limit: "4 GiB", "256 MiB", "1.5 GiB".
func humanBytes(n int64) string {
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + " " + u.name
		}
	}
	return truncate.Humanize(n)
}

// killReason says why a job was killed, in words.
func killReason(r jobs.Reason, signal string) string {
	switch r {
	case jobs.ReasonKilled:
		return "killed by request"
	case jobs.ReasonShutdown:
		return "engine shutdown"
	case jobs.ReasonLifetime:
		return "lifetime limit exceeded"
	case jobs.ReasonCancelled:
		return "cancelled"
	case jobs.ReasonTimeout:
		return "timed out"
	case jobs.ReasonFailed:
		return "command actor failed"
	case jobs.ReasonCPULimit:
		return "CPU time limit exceeded"
	}
	if signal != "" {
		return signal
	}
	return "unknown"
}

// appendNote appends a bracketed note on a line of its own.
func appendNote(body, note string) string {
	if body != "" && !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	return body + note
}

// members names processes: "sleep (pid 42), node (pid 43)".
func members[M fmt.Stringer](ms []M) string {
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

// --- refusals ---

// blockedText, deniedText and approvalText are the texts of commands that
// did not run. why says in words what objected (see Engine.refusal).
func blockedText(why string) string { return "[command blocked: " + why + "]" }

func deniedText(why string) string {
	return "[command denied: " + why + ". Do not retry it or work around it; tell the user what you needed it for.]"
}

func approvalText(why string) string {
	return "[command needs approval: " + why + ". Ask the user: a client with MCP elicitation asks them inline to approve " +
		"the exact command; otherwise they can run it themselves. Do not rephrase the command to get past this check.]"
}

// profileRefusal says in words what a permission profile objected to: the
// simple command it matched, never the rule's regular expression (the
// audit log records the rule).
func profileRefusal(profile, part string, deny, byDefault bool) string {
	part = quoteCommand(part)
	switch {
	case deny && byDefault:
		return fmt.Sprintf("permission profile %q allows only the commands it lists, and %s is not one of them", profile, part)
	case deny:
		return fmt.Sprintf("permission profile %q does not allow %s", profile, part)
	case byDefault:
		return fmt.Sprintf("permission profile %q asks a person before running commands it does not list as safe, such as %s", profile, part)
	default:
		return fmt.Sprintf("permission profile %q asks a person before running %s", profile, part)
	}
}

// quoteCommand shows a command on one line, in backquotes, cut to 160
// bytes.
func quoteCommand(c string) string { return "`" + cutLine(c, 160) + "`" }

// cutLine puts s on one line and cuts it to at most n bytes (plus "…").
func cutLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// --- the job tools ---

// JobsText is the text of a job listing (the bash_jobs tool): one line per
// job, or "no background jobs".
func JobsText(jobs []JobInfo, now time.Time) string {
	if len(jobs) == 0 {
		return "no background jobs"
	}
	var b strings.Builder
	for i, j := range jobs {
		if i > 0 {
			b.WriteByte('\n')
		}
		display := j.Display
		if display == "" {
			display = j.Command
		}
		fmt.Fprintf(&b, "job_id=%s pid=%d %s, started %s ago, %s of output: %s",
			j.JobID, j.PID, j.state(), now.Sub(j.Started).Round(time.Second), truncate.Humanize(j.Bytes), cutLine(display, 200))
	}
	return b.String()
}

// Text is the text of a job's output slice (the bash_output tool): a
// header with the job's state and the bytes shown, the output, and a hint
// when more follows.
func (o JobOutput) Text() string {
	end := o.End
	var b strings.Builder
	fmt.Fprintf(&b, "[job %s %s, pid %d, %s of output; showing bytes %d-%d of %d]\n",
		o.Job.JobID, o.Job.state(), o.Job.PID, truncate.Humanize(o.Job.Bytes), o.Offset, end, o.Size)
	if o.Skipped > 0 {
		fmt.Fprintf(&b, "[%s of output before byte %d were dropped: the job's output file is capped and keeps the first and the newest output (setting: Output.JobFileCap)]\n",
			truncate.Humanize(o.Skipped), o.Offset)
	}
	b.WriteString(o.Data)
	if !o.EOF {
		fmt.Fprintf(&b, "\n[more output: call bash_output with offset=%d]", end)
	}
	if o.Job.ChangeReport != "" && !strings.Contains(o.Data, o.Job.ChangeReport) {
		// An ended job's report is in its output file, on the line
		// after its completion: shown there once.
		what := "[the job's changes so far, applied to the workspace:]\n"
		if o.Job.Status != JobRunning {
			what = ""
		}
		b.WriteString(appendNote("\n", what+o.Job.ChangeReport))
	}
	return b.String()
}

// Text is a job's one-line summary (the bash_kill tool's answer).
func (j JobInfo) Text() string {
	return fmt.Sprintf("[job %s %s, pid %d, %s of output]", j.JobID, j.state(), j.PID, truncate.Humanize(j.Bytes))
}

// state describes a job's status: "running", "completed (exit code 0)",
// "killed (reason)".
func (j JobInfo) state() string {
	st := string(j.Status)
	switch {
	case j.Status == JobRunning:
	case j.Reason != "":
		st += " (" + j.Reason + ")"
	case j.ExitCode != nil:
		st += fmt.Sprintf(" (exit code %d)", *j.ExitCode)
	}
	return st
}

// --- the tool description ---

// Description returns the tool description for the model: how the modes
// differ, that state does not persist between calls, that slow mode is
// required for builds, tests and installs, how to give a job input or a
// terminal and make a call yield, and in a sandbox the sandbox's rules. It ends with
// <pwd>tc.WorkingDir</pwd>.
func (e *Engine) Description(tc ToolContext) string {
	var b strings.Builder
	atTimeout := "is stopped"
	if e.cfg.OnTimeout == OnTimeoutBackground {
		atTimeout = "moves to the background (still running)"
	}
	b.WriteString(`Executes shell commands via bash -c, returning combined stdout/stderr.
Bash state changes (working dir, variables, aliases) don't persist between calls.

Modes:
- default: runs in the foreground and ` + atTimeout + ` after ` + humanDuration(e.cfg.Timeout) + `.
- slow: runs in the foreground and ` + atTimeout + ` after ` + humanDuration(e.cfg.SlowTimeout) + `.
- background: returns immediately with the process id and an output file;
  use it for servers and demos that need to stay running.

MUST use mode=slow for potentially slow commands: builds, downloads,
installs, tests, or any other substantive operation.

Stdin is /dev/null and there is no terminal unless you ask: with mode=background
or yield_ms, stdin="pipe" takes input sent later with bash_write, and tty=true
adds a terminal (REPLs, prompts; bash_write sends keys, "\u0003" is Ctrl-C).
yield_ms returns after that many ms with the output so far; the command runs on as a job.
Editors and pagers do not work. ` + e.outputBudget(tc) + `

IMPORTANT: Keep commands concise. The command input must be less than 60k tokens.
For complex scripts, write them to a file first and then execute the file.
`)
	if tc.Sandbox.On() {
		caps := e.sup.Sandbox()
		if caps.Available() {
			b.WriteString("\n" + e.sandboxDescription(tc) + "\n")
		} else {
			b.WriteString("\nA sandbox was requested but this host cannot enforce it (" + caps.Reason +
				"): every command returns an error.\n")
		}
	}
	b.WriteString("\n<pwd>" + tc.WorkingDir + "</pwd>")
	return b.String()
}

// sandboxDescription states the sandbox profile's rules in two lines:
// where the command may write, and what it may reach.
func (e *Engine) sandboxDescription(tc ToolContext) string {
	c := e.sup.Sandbox()
	lim := e.cfg.Sandbox.Limits.WithDefaults()
	caches := "the build caches (GOCACHE, npm, pip)"
	if len(e.cfg.Sandbox.BaseCaches.Dirs()) > 0 {
		caches = "the user's build caches at their own paths (the conversation's copy: the user's stay unchanged)"
	}
	scratch := "/tmp ($TMPDIR: this conversation's own, kept between its commands; a command run because its result is reviewed writes one of its own, dropped when it ends) and " + caches + ", together at most " +
		truncate.Humanize(int64(lim.ScratchBytes))
	var b strings.Builder
	sbx := tc.Sandbox
	switch sbx.Profile {
	case WorkspaceWrite:
		b.WriteString("Sandbox workspace-write (enforced by the kernel): you can write in " + tc.WorkingDir)
		for _, w := range sbx.Writable {
			b.WriteString(", " + w)
		}
		b.WriteString(", its git directory (add, commit, branch, stash work) and " + scratch +
			"; every other write fails (EROFS, EACCES), setuid bits too. Your changes to the workspace reach it when the command ends " +
			"(a background job's also while it runs), and the result lists them; changes to git's configuration, hooks and other files git would run " +
			"later are refused and named (pass settings with git -c instead); bash_undo takes the last commands' changes back.\n")
	default:
		b.WriteString("Sandbox read-only (enforced by the kernel): you can read and run anything, but writes fail (EROFS, EACCES) except in " + scratch + "; build into $TMPDIR.\n")
	}
	b.WriteString("Loopback is this conversation's own: a server started in the background (mode=background) is reachable from the next commands on localhost, and from nothing else. ")
	if len(sbx.Network) > 0 && c.Namespaces {
		b.WriteString("Network only through the engine's egress proxy (clients connect as usual: allowed names resolve to it), to " + strings.Join(sbx.Network, ", ") +
			"; everything else is refused. Processes outside are out of reach; say what a denied command needs instead of working around it.")
	} else {
		b.WriteString("No other network (downloads and installs fail), processes outside are out of reach; say what a denied command needs instead of working around it.")
	}
	b.WriteString(e.homeDescription(tc))
	return b.String()
}
