package engine

import (
	"fmt"
	"strings"
	"time"

	"mvdan.cc/sh/v3/syntax"

	"github.com/bashvisor/bashvisor/safety"
)

// gate applies the safety rules and the permission profile (SPEC §2.7).
// It returns the result to give instead of running the command, or ok
// when the command may run. A person's approval (ToolContext.Approved)
// turns "ask" into "allow"; it never overrides a block or a deny.
//
// The texts of "denied" and "needs_approval" say in words what the profile
// objected to (the simple command it matched, never the rule's regular
// expression, which the audit log records) and what the agent can do next.
func (e *Engine) gate(res Result, tc ToolContext) (Result, safety.Outcome, bool) {
	g := safety.Gate(res.Command, e.cfg.Permissions)
	switch g.Decision {
	case safety.Block:
		res.Status, res.Err = StatusBlocked, fmt.Errorf("%w: %s", ErrBlocked, g.Message)
		res.Output = blockedText(g.Message)
	case safety.Deny:
		why := e.refusal(res.Command, g)
		res.Status, res.Err = StatusDenied, fmt.Errorf("%w: %s", ErrDenied, why)
		res.Output = deniedText(why)
	case safety.Ask:
		if tc.Approved {
			return res, g, true
		}
		why := e.refusal(res.Command, g)
		res.Status, res.Err = StatusNeedsApproval, fmt.Errorf("%w: %s", ErrNeedsApproval, why)
		res.Output = approvalText(why)
	default:
		return res, g, true
	}
	e.log.Info("command refused", "status", res.Status, "rule", g.Rule, "conversation", tc.ConversationID)
	return res, g, false
}

// refusal says in words why the command was denied or needs approval: the
// safety analyser's reason, or the permission profile and the simple
// command it objected to.
func (e *Engine) refusal(command string, g safety.Outcome) string {
	p := e.cfg.Permissions
	if p == nil || g.Decision == g.Verdict.Decision {
		return g.Message // the analyser decided: "REASON; instead: ALTERNATIVE"
	}
	name := p.Name
	if name == "" {
		name = "custom"
	}
	return profileRefusal(name, decidingPart(command, p, g.Decision), g.Decision == safety.Deny, g.Rule == "default")
}

// decidingPart returns the first simple command of command (with its
// redirections) that p alone answers with d, or the whole command when no
// single part does (a rule written for the whole text, or a command that
// does not parse).
func decidingPart(command string, p *safety.Profile, d safety.Decision) string {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(command), "")
	if err != nil {
		return command
	}
	found := ""
	syntax.Walk(f, func(n syntax.Node) bool {
		s, ok := n.(*syntax.Stmt)
		if found != "" || !ok {
			return found == ""
		}
		if _, ok := s.Cmd.(*syntax.CallExpr); !ok {
			return true
		}
		start, end := int(s.Pos().Offset()), int(s.End().Offset())
		if start < 0 || start > end || end > len(command) {
			return true
		}
		part := strings.TrimRight(command[start:end], " \t;&")
		if got, _ := p.Evaluate(part); got == d {
			found = part
			return false
		}
		return true
	})
	if found == "" {
		return command
	}
	return found
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
