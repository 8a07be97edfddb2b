package safety

// Outcome combines the safety verdict and the permission profile's
// decision for one command: what the engine acts on before running it.
type Outcome struct {
	// Decision is Allow, Block (safety rule: status "blocked"), Deny
	// (profile: status "denied") or Ask (either: status "needs_approval").
	Decision Decision `json:"decision"`
	// Rule is the safety rule name, or the permission rule's pattern
	// ("default" when the profile's default decided).
	Rule string `json:"rule,omitempty"`
	// Message is the one-line text for the model: the safety message
	// ("REASON; instead: ALTERNATIVE") or a description of the profile's
	// decision. Empty for Allow.
	Message string `json:"message,omitempty"`
	// Verdict is the safety analyser's verdict.
	Verdict Verdict `json:"verdict"`
}

// Gate checks command with the safety rules first and then, unless they
// block it, with the permission profile p (nil: no profile). The most
// restrictive answer wins: Block, then Deny, then Ask, then Allow.
func Gate(command string, p *Profile) Outcome {
	return gate(&source{text: command}, p)
}

// gate is Gate on a source that other analyses share.
func gate(src *source, p *Profile) Outcome {
	v, _ := checkSource(src)
	out := Outcome{Decision: v.Decision, Rule: v.Rule, Message: v.Message(), Verdict: v}
	if v.Decision == Block || p == nil {
		return out
	}
	d, r := p.evaluate(src)
	if d.severity() <= v.Decision.severity() {
		return out
	}
	rule := "default"
	if r != nil {
		rule = r.Pattern
	}
	name := p.Name
	if name == "" {
		name = "custom"
	}
	out.Decision, out.Rule = d, rule
	switch d {
	case Deny:
		out.Message = "denied by permission profile " + name + " (rule " + rule + ")"
	case Ask:
		out.Message = "permission profile " + name + " requires approval for this command (rule " + rule + ")"
	}
	return out
}
