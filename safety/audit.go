package safety

import (
	"context"
	"io"
	"log/slog"
	"regexp"
	"sort"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/bashvisor/bashvisor/secret"
)

// AuditRecord is one audit log entry: what ran (or was refused), never its
// output. Command and Display are redacted before they are written.
type AuditRecord struct {
	Conversation string   // conversation id from the ToolContext
	Command      string   // the command as submitted (secrets redacted when logged)
	Display      string   // the display form (REQ-BASH-011)
	Decision     string   // allow, block, ask, deny
	Rule         string   // the safety or permission rule that decided, if any
	Reason       string   // one-line reason for a block/ask/deny
	Mode         string   // default, slow, background
	Restricted   bool     // ran in restricted mode
	Status       string   // result status: ok, failed, timed_out, blocked, ...
	ExitCode     *int     // the shell's exit code, when it exited
	DurationMS   int64    // wall time in milliseconds
	Bytes        int64    // output bytes produced
	Truncated    bool     // output was truncated
	Killed       []string // what was killed (leftover processes, the group on timeout)
}

// Auditor writes one JSON line per command through slog's JSON handler. It
// is safe for concurrent use; a nil *Auditor discards everything.
type Auditor struct {
	log *slog.Logger
}

// NewAuditor returns an Auditor writing JSON lines to w, or nil when w is
// nil.
func NewAuditor(w io.Writer) *Auditor {
	if w == nil {
		return nil
	}
	return &Auditor{log: slog.New(slog.NewJSONHandler(w, nil))}
}

// Log writes rec as one JSON line ("msg":"bash", plus time, conversation,
// command, display, decision, rule, reason, mode, restricted, status,
// exit_code, duration_ms, bytes, truncated, killed). Secret values in the
// command and display are redacted (see RedactSecrets).
func (a *Auditor) Log(rec AuditRecord) {
	if a == nil || a.log == nil {
		return
	}
	attrs := make([]slog.Attr, 0, 14)
	attrs = append(attrs,
		slog.String("conversation", rec.Conversation),
		slog.String("command", RedactSecrets(rec.Command)),
		slog.String("display", RedactSecrets(rec.Display)),
		slog.String("decision", rec.Decision))
	if rec.Rule != "" {
		attrs = append(attrs, slog.String("rule", rec.Rule))
	}
	if rec.Reason != "" {
		attrs = append(attrs, slog.String("reason", RedactSecrets(rec.Reason)))
	}
	attrs = append(attrs,
		slog.String("mode", rec.Mode),
		slog.Bool("restricted", rec.Restricted),
		slog.String("status", rec.Status))
	if rec.ExitCode != nil {
		attrs = append(attrs, slog.Int("exit_code", *rec.ExitCode))
	}
	attrs = append(attrs,
		slog.Int64("duration_ms", rec.DurationMS),
		slog.Int64("bytes", rec.Bytes),
		slog.Bool("truncated", rec.Truncated))
	if len(rec.Killed) > 0 {
		attrs = append(attrs, slog.Any("killed", rec.Killed))
	}
	a.log.LogAttrs(context.Background(), slog.LevelInfo, "bash", attrs...)
}

const redacted = "***"

var (
	// NAME=value where NAME is a secret (fallback when parsing fails, and
	// for env NAME=value arguments).
	assignRe = regexp.MustCompile(`\b([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|'[^']*'|[^\s;&|)]*)`)
	// credentials in arguments: Authorization headers, --password=x,
	// URLs with user:password@.
	authHeaderRe = regexp.MustCompile(`(?i)(authorization:\s*(?:bearer|basic|token|bot)?\s*)[^\s"']+`)
	flagSecretRe = regexp.MustCompile(`(?i)(--?(?:password|passwd|token|api[-_]?key|secret|access[-_]?key)(?:=|\s+))("[^"]*"|'[^']*'|[^\s"']+)`)
	urlCredRe    = regexp.MustCompile(`(://[^/\s:@]+:)[^/\s@]+@`)
)

// RedactSecrets returns command with the values of secret-looking
// assignments (`TOKEN=abc cmd`, `export API_KEY=...`, `env GH_TOKEN=x`)
// replaced by ***, as well as Authorization header values, --password=...
// style flags and passwords in URLs. It is used for the audit log; the
// command that runs is never changed.
func RedactSecrets(command string) string {
	if command == "" {
		return command
	}
	out := command
	if f, err := parse(command, false); err == nil && len(command) <= MaxCommandBytes {
		type span struct{ start, end int }
		var spans []span
		syntax.Walk(f, func(n syntax.Node) bool {
			a, ok := n.(*syntax.Assign)
			if !ok || a.Name == nil || a.Value == nil || len(a.Value.Parts) == 0 || !secret.IsSecret(a.Name.Value) {
				return true
			}
			spans = append(spans, span{int(a.Value.Pos().Offset()), int(a.Value.End().Offset())})
			return true
		})
		if len(spans) > 0 {
			sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
			var b strings.Builder
			last := 0
			for _, s := range spans {
				if s.start < last || s.end > len(command) || s.start > s.end {
					continue
				}
				b.WriteString(command[last:s.start])
				b.WriteString(redacted)
				last = s.end
			}
			b.WriteString(command[last:])
			out = b.String()
		}
	}
	// Arguments that are assignments (env NAME=v, docker -e NAME=v) and
	// anything the parser could not see.
	out = assignRe.ReplaceAllStringFunc(out, func(m string) string {
		name, _, _ := strings.Cut(m, "=")
		if !secret.IsSecret(name) {
			return m
		}
		return name + "=" + redacted
	})
	out = authHeaderRe.ReplaceAllString(out, "${1}"+redacted)
	out = flagSecretRe.ReplaceAllString(out, "${1}"+redacted)
	out = urlCredRe.ReplaceAllString(out, "${1}"+redacted+"@")
	return out
}
