package safety

// Decision is the outcome of analysing a command or evaluating a permission
// profile.
type Decision string

const (
	// Allow lets the command run.
	Allow Decision = "allow"
	// Block refuses the command; it is never executed. The engine reports
	// status "blocked" with "[command blocked: MESSAGE]".
	Block Decision = "block"
	// Ask means the command needs approval from the user before it runs; the
	// engine reports status "needs_approval".
	Ask Decision = "ask"
	// Deny is a permission-profile decision: the profile forbids the command
	// (status "denied"). The analyser itself never returns Deny.
	Deny Decision = "deny"
)

// severity orders decisions: Block/Deny > Ask > Allow.
func (d Decision) severity() int {
	switch d {
	case Block, Deny:
		return 2
	case Ask:
		return 1
	}
	return 0
}

// Verdict is the analyser's answer for one command.
type Verdict struct {
	// Decision is Allow, Block or Ask.
	Decision Decision `json:"decision"`
	// Rule names the rule that decided, e.g. "git-add-blind", "rm-critical",
	// "parse-error"; empty for Allow.
	Rule string `json:"rule,omitempty"`
	// Reason says in one line why the command was blocked or needs approval.
	Reason string `json:"reason,omitempty"`
	// Alternative is the safer thing to do instead.
	Alternative string `json:"alternative,omitempty"`
}

// Message returns "REASON; instead: ALTERNATIVE" (or just the reason when
// there is no alternative), the text the engine puts in
// "[command blocked: MESSAGE]". It is empty for an allowed command.
func (v Verdict) Message() string {
	if v.Reason == "" {
		return ""
	}
	if v.Alternative == "" {
		return v.Reason
	}
	return v.Reason + "; instead: " + v.Alternative
}
