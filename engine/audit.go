package engine

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/bashvisor/bashvisor/internal/egress"
	"github.com/bashvisor/bashvisor/safety"
)

// auditRecord is one audit log entry: what ran (or was refused), never its
// output.
type auditRecord struct {
	Conversation string   // conversation id from the ToolContext
	Command      string   // the command as submitted (redacted when logged)
	Redacted     string   // the command already redacted (safety.Analysis.Log); "": redact Command
	Display      string   // the display form (redacted when logged)
	Decision     string   // allow, block, ask, deny, approved, error
	Rule         string   // the safety or permission rule that decided, if any
	Reason       string   // one-line reason for a block/ask/deny (redacted when logged)
	Mode         string   // default, slow, background
	Sandbox      string   // the sandbox profile it ran in (kernelProfile): none, read-only, workspace-write
	Network      []string // hosts the call asked for beyond its allowlist (Input.Network)
	Status       string   // result status: ok, failed, timed_out, blocked, ...
	ExitCode     *int     // the shell's exit code, when it exited
	DurationMS   int64    // wall time in milliseconds
	Bytes        int64    // output bytes produced
	Truncated    bool     // output was truncated
	Killed       []string // what was killed (leftover processes, the group on timeout)
	// The resource report of a command that ran in the foreground (see
	// Result); zero otherwise, and then left out.
	CPUMS, PeakMemory int64
	Processes         int
	OOMKilled         bool
}

// auditor writes the audit log: one JSON line per call through slog's
// JSON handler ("msg":"bash", plus time, conversation, command, display,
// decision, rule, reason, mode, sandbox, network (the hosts a call asked
// for, when it did), status, exit_code,
// duration_ms, bytes, truncated, killed, and for a command that ran in the
// foreground cpu_ms, peak_memory_bytes, processes and oom_killed as in
// Result), one line per decision of the egress proxy ("msg":"egress",
// see Egress), and one per input sent to a job ("msg":"write", see
// Write). The command, display and reason
// are redacted by redact (the values of the secrets the environment policy
// stripped, then what safety.RedactSecrets recognises). It is safe for
// concurrent use; a nil *auditor writes nothing.
type auditor struct {
	log    *slog.Logger // the "egress" and "write" lines
	out    io.Writer    // the "bash" lines (see appendBashLine), and log's
	redact func(string) string
}

// newAuditor returns an auditor writing to w, or nil when w is nil.
func newAuditor(w io.Writer, redact func(string) string) *auditor {
	if w == nil {
		return nil
	}
	out := &lockedWriter{w: w}
	return &auditor{log: slog.New(slog.NewJSONHandler(out, nil)), out: out, redact: redact}
}

// Log writes rec as one JSON line.
func (a *auditor) Log(rec auditRecord) {
	if a == nil {
		return
	}
	command := rec.Redacted
	if command == "" {
		command = a.redact(rec.Command)
	}
	display := command
	if rec.Display != rec.Command {
		display = a.redact(rec.Display)
	}
	reason := ""
	if rec.Reason != "" {
		reason = a.redact(rec.Reason)
	}
	a.writeBashLine(time.Now(), rec, command, display, reason)
}

// audit writes the audit record of one call (nil auditor: nothing). Its
// sandbox is the one enforced, not the one the call asked for: a read a
// permission profile proved runs in the read-only sandbox whatever the
// call's (see kernelProfile).
func (e *Engine) audit(tc ToolContext, in Input, res Result, a safety.Analysis, start time.Time) {
	if e.auditor == nil {
		return
	}
	g := a.Outcome
	decision := string(g.Decision)
	if decision == "" {
		decision = "error" // refused before the analysis: bad input or working directory
	} else if g.Decision == safety.Ask && tc.Approved {
		decision = "approved"
	}
	if len(in.Network) > 0 && g.Decision == safety.Allow { // the hosts asked for were the question
		switch {
		case res.Status == StatusNeedsApproval:
			decision = "ask"
		case tc.Approved:
			decision = "approved"
		}
	}
	mode := string(in.Mode)
	if mode == "" {
		mode = string(ModeDefault)
	}
	e.auditor.Log(auditRecord{
		Conversation: tc.ConversationID,
		Command:      in.Command,
		Redacted:     a.Log,
		Display:      res.Display,
		Decision:     decision,
		Rule:         g.Rule,
		Reason:       g.Message,
		Mode:         mode,
		Sandbox:      profileName(e.kernelProfile(tc, in.Command, a)),
		Network:      in.Network,
		Status:       string(res.Status),
		ExitCode:     res.ExitCode,
		DurationMS:   max(res.DurationMS, time.Since(start).Milliseconds()),
		Bytes:        res.OutputBytes,
		Truncated:    res.Truncated,
		Killed:       res.killed,
		CPUMS:        res.CPUMS,
		PeakMemory:   res.PeakMemoryBytes,
		Processes:    res.Processes,
		OOMKilled:    res.OOMKilled,
	})
}

// Egress writes one decision of a sandboxed command's egress proxy:
// "msg":"egress" with conversation, host, port, method, allowed and
// reason (the address it went to, or why it was refused).
// maxAuditInput bounds the input text a "write" line shows.
const maxAuditInput = 4 << 10

// Write writes one line ("msg":"write") for input sent to a job's stdin:
// conversation, job_id, input (redacted like a command, at most 4 KiB of
// it), bytes, close, and error when the job did not take it.
func (a *auditor) Write(conversation, id string, data []byte, close bool, err error) {
	if a == nil {
		return
	}
	input := data
	if len(input) > maxAuditInput {
		input = input[:maxAuditInput]
	}
	attrs := []slog.Attr{
		slog.String("conversation", conversation),
		slog.String("job_id", id),
		slog.String("input", a.redact(strings.ToValidUTF8(string(input), "\uFFFD"))),
		slog.Int("bytes", len(data)),
		slog.Bool("close", close),
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", a.redact(err.Error())))
	}
	a.log.LogAttrs(context.Background(), slog.LevelInfo, "write", attrs...)
}

func (a *auditor) Egress(conversation string, d egress.Decision) {
	if a == nil {
		return
	}
	a.log.LogAttrs(context.Background(), slog.LevelInfo, "egress",
		slog.String("conversation", conversation),
		slog.String("host", d.Host),
		slog.Int("port", d.Port),
		slog.String("method", d.Method),
		slog.Bool("allowed", d.Allowed),
		slog.String("reason", d.Reason))
}
