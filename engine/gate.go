package engine

import (
	"fmt"

	"github.com/bashvisor/bashvisor/safety"
)

// analyze analyses in's command: one parse answers everything (display,
// safety rules, permission profile, co-author trailer, log text). A read
// the profile allows only in the read-only sandbox is not allowed where
// the engine cannot start it (see withoutKernel).
func (e *Engine) analyze(tc ToolContext, in Input) safety.Analysis {
	a := safety.Analyze(in.Command, safety.Options{
		WorkDir: tc.WorkingDir, Profile: e.cfg.Permissions, CoAuthor: e.cfg.CoAuthor, Secrets: e.sup.Redactor(),
		StdinFed: in.Stdin == StdinPipe || in.TTY, Terminal: in.TTY, Log: e.auditor != nil,
	})
	if p := e.cfg.Permissions; p == nil || p.Default == safety.Allow || p.Default == "" || tc.Sandbox.On() {
		return a // as withoutKernel would: the sandbox need not be probed for it
	}
	caps := e.sup.Sandbox()
	return withoutKernel(e.cfg.Permissions, caps.Available() && caps.Namespaces, caps.String(), tc, in.Command, a)
}

// decide is what Run decides about a call before starting its command:
// one parse of the command answers everything (display, safety rules,
// permission profile, co-author trailer, log text; see analyze), then the
// network the call asks for, the gate, and the sandbox the command runs
// in (kernelProfile). ok reports that it runs, under the returned tool
// context (its Sandbox the one enforced), contained when it runs because
// its result is reviewed or the read-only sandbox answers its ask (it gets
// no TCP in the world's shared network); otherwise res is the refusal.
// Its cost is the engine's analysis path (BenchmarkGateLarge).
func (e *Engine) decide(res Result, tc ToolContext, in Input) (_ Result, _ ToolContext, a safety.Analysis, holdAll, contained, ok bool) {
	a = e.analyze(tc, in)
	if res, ok = e.askNetwork(res, &tc, in, a); !ok {
		return res, tc, a, false, false, false
	}
	run, _ := e.contained(tc, a, in.Command)
	contained = run || e.keptReadOnly(tc, a)
	if res, holdAll, ok = e.admit(res, tc, in, a); !ok {
		return res, tc, a, false, false, false
	}
	tc.Sandbox = e.kernelProfile(tc, in.Command, a)
	return res, tc, a, holdAll, contained, true
}

// admit decides whether in's command, analysed as a, runs: an ask that
// contained answers runs without asking (the result is reviewed instead
// of the command; holdAll says its changes are all held), and so does one
// the read-only sandbox answers (see keptReadOnly); then gate.
func (e *Engine) admit(res Result, tc ToolContext, in Input, a safety.Analysis) (_ Result, holdAll, ok bool) {
	res.Display = a.Display
	run, holdAll := e.contained(tc, a, in.Command)
	if run || e.keptReadOnly(tc, a) {
		tc.Approved = true
	}
	res, ok = e.gate(res, tc, a)
	return res, holdAll && ok, ok
}

// keptReadOnly reports whether an ask is one the kernel answers: a
// contained ask (safety.Outcome.Contained: asked only for what the command
// does in the workspace or for running code the agent wrote) of a call in
// the read-only sandbox. Approving it would change nothing the kernel lets
// it do: a person's approval does not lift the call's sandbox, so its
// writes fail whether asked or not (only its scratch $TMPDIR and the build
// caches are writable), and what it reads it could read as an allowed
// read. It runs without asking, as a contained ask in workspace-write
// does, under the same conditions: no network grant, Landlock signal
// scoping, and no job of the conversation with a network grant running
// (the world's network namespace is shared). An unsandboxed call still
// asks: running such a command in the read-only sandbox instead would
// make the write the agent meant fail, with no way left to approve it.
func (e *Engine) keptReadOnly(tc ToolContext, a safety.Analysis) bool {
	s := tc.Sandbox
	if a.Outcome.Decision != safety.Ask || !a.Outcome.Contained || tc.Approved || s.Profile != ReadOnly || len(s.Network) > 0 {
		return false
	}
	if caps := e.sup.Sandbox(); !caps.Available() || !caps.Namespaces || !caps.Scoping {
		return false
	}
	for _, j := range e.sup.Jobs(tc.ConversationID) {
		if j.Running() && j.Network {
			return false
		}
	}
	return true
}

// gate applies the analysis's decision: the safety rules, then the
// permission profile. It returns the result to give instead of running the
// command, or ok when the command may run. A person's approval
// (ToolContext.Approved) turns "ask" into "allow"; it never overrides a
// block or a deny.
//
// The texts of "denied" and "needs_approval" say in words what the profile
// objected to (the simple command it matched, never the rule's regular
// expression, which the audit log records) and what the agent can do next.
func (e *Engine) gate(res Result, tc ToolContext, a safety.Analysis) (Result, bool) {
	g := a.Outcome
	switch g.Decision {
	case safety.Block:
		res.Status, res.Err = StatusBlocked, fmt.Errorf("%w: %s", ErrBlocked, g.Message)
		res.Output = blockedText(g.Message)
	case safety.Deny:
		why := e.refusal(a)
		res.Status, res.Err = StatusDenied, fmt.Errorf("%w: %s", ErrDenied, why)
		res.Output = deniedText(why)
	case safety.Ask:
		if tc.Approved {
			return res, true
		}
		why := e.refusal(a)
		res.Status, res.Err = StatusNeedsApproval, fmt.Errorf("%w: %s", ErrNeedsApproval, why)
		res.Output = approvalText(why)
	default:
		return res, true
	}
	e.log.Info("command refused", "status", res.Status, "rule", g.Rule, "conversation", tc.ConversationID)
	return res, false
}

// refusal says in words why the command was denied or needs approval: the
// safety analyser's reason, or the permission profile and the simple
// command it objected to.
func (e *Engine) refusal(a safety.Analysis) string {
	p := e.cfg.Permissions
	if p == nil || a.Part == "" {
		return a.Outcome.Message // the analyser decided: "REASON; instead: ALTERNATIVE"
	}
	name := p.Name
	if name == "" {
		name = "custom"
	}
	return profileRefusal(name, a.Part, a.Outcome.Decision == safety.Deny, a.Outcome.Rule == "default")
}
