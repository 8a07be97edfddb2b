package engine

import (
	"fmt"
	"time"

	"github.com/bashvisor/bashvisor/safety"
)

// gate applies the safety rules and the permission profile (SPEC §2.7).
// It returns the result to give instead of running the command, or ok
// when the command may run. A person's approval (ToolContext.Approved)
// turns "ask" into "allow"; it never overrides a block or a deny.
func (e *Engine) gate(res Result, tc ToolContext) (Result, safety.Outcome, bool) {
	g := safety.Gate(res.Command, e.cfg.Permissions)
	switch g.Decision {
	case safety.Block:
		res.Status, res.Err = StatusBlocked, fmt.Errorf("%w: %s", ErrBlocked, g.Message)
		res.Output = "[command blocked: " + g.Message + "]"
	case safety.Deny:
		res.Status, res.Err = StatusDenied, fmt.Errorf("%w: %s", ErrDenied, g.Message)
		res.Output = "[command denied: " + g.Message + "]"
	case safety.Ask:
		if tc.Approved {
			return res, g, true
		}
		res.Status, res.Err = StatusNeedsApproval, fmt.Errorf("%w: %s", ErrNeedsApproval, g.Message)
		res.Output = "[command needs approval: " + g.Message + "]"
	default:
		return res, g, true
	}
	e.log.Info("command refused", "status", res.Status, "rule", g.Rule, "conversation", tc.ConversationID)
	return res, g, false
}

// audit writes the audit record of one call (nil auditor: nothing).
func (e *Engine) audit(tc ToolContext, in Input, res Result, g safety.Outcome, start time.Time) {
	if e.auditor == nil {
		return
	}
	decision := string(g.Decision)
	if decision == "" {
		decision = "error"
	} else if g.Decision == safety.Ask && tc.Approved {
		decision = "approved"
	}
	mode := string(in.Mode)
	if mode == "" {
		mode = string(ModeDefault)
	}
	e.auditor.Log(safety.AuditRecord{
		Conversation: tc.ConversationID,
		Command:      in.Command,
		Display:      res.Display,
		Decision:     decision,
		Rule:         g.Rule,
		Reason:       g.Message,
		Mode:         mode,
		Restricted:   tc.Restricted,
		Status:       string(res.Status),
		ExitCode:     res.ExitCode,
		DurationMS:   max(res.DurationMS, time.Since(start).Milliseconds()),
		Bytes:        res.OutputBytes,
		Truncated:    res.Truncated,
		Killed:       res.killed,
	})
}
