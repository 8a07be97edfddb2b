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
	// Contained reports, for Ask, that the command is asked about only
	// for what it does in the workspace: the safety rules' asks all are
	// (staging everything, rm -rf in the working directory, code only
	// known at run time: what such code reaches outside the workspace is
	// the sandbox's to contain), and so is a profile's ask when every
	// rule that asked is Rule.Contained (its default when
	// Profile.DefaultContained). Package
	// engine runs such a command in workspace-write over a layer without
	// asking, when nothing it does can leave the layer, and reviews what
	// it changed instead; in the read-only sandbox it runs it without
	// asking too, as approving it would not let it write.
	Contained bool `json:"contained,omitempty"`
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
	out := Outcome{Decision: v.Decision, Rule: v.Rule, Message: v.Message(), Verdict: v, Contained: v.Decision == Ask}
	if v.Decision == Block || p == nil {
		return out
	}
	d, r, contained := p.evaluate(src)
	if d == Ask && !contained {
		out.Contained = false // the profile asks for what leaves the workspace
	}
	if d.severity() <= v.Decision.severity() {
		return out
	}
	out.Contained = d == Ask && contained
	rule, why := "default", "default"
	switch {
	case r != nil && r.Grammar != "":
		rule, why = r.Grammar, r.Grammar+": "+src.discards()+" discards uncommitted work"
	case r != nil:
		rule, why = r.Pattern, r.Pattern
	}
	name := p.Name
	if name == "" {
		name = "custom"
	}
	out.Decision, out.Rule = d, rule
	switch d {
	case Deny:
		out.Message = "denied by permission profile " + name + " (rule " + why + ")"
	case Ask:
		out.Message = "permission profile " + name + " requires approval for this command (rule " + why + ")"
	}
	return out
}
