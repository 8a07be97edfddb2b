package safety

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// actionPrefix starts every action string a permission rule is matched
// against: "tool:bash:<command>".
const actionPrefix = "tool:bash:"

// Rule is one permission rule: a regular expression (Go RE2 syntax) matched
// against the action string "tool:bash:<command>", and the decision (Allow,
// Deny or Ask) it yields when it matches.
type Rule struct {
	// Pattern is the regular expression.
	Pattern string `json:"pattern"`
	// Decision is what the rule answers when it matches.
	Decision Decision `json:"decision"`
	// ReadOnly restricts the rule to simple commands the analyser proves
	// only read: a program of its argument grammars (ls, cat, grep, rg,
	// sed -n, find, git status/diff/log/show, ...; see Preset) given only
	// options the grammar declares harmless, only harmless variables
	// (LANG, LC_*, TZ, ...), and no redirection that writes. A program is
	// not read-only by its name: rg --pre, sort -o, date -s, find -exec,
	// git -c, printf -v 'a[$(cmd)]' and any option the grammar does not
	// list make the rule not match. A word only known at run time counts
	// as any option, except for programs none of whose options write or
	// run anything (cat, grep, ls, ...).
	ReadOnly bool `json:"read_only,omitempty"`
	// Contained marks an Ask rule that asks only because the command
	// changes the workspace or runs code the agent wrote there (a file
	// written by a redirection, sed -i, rm, python3 script.py, git reset
	// --hard), not because its effects leave the workspace (publishing,
	// deploying, privilege, the system's services and packages, a
	// cluster). Where the command runs contained, such an ask is answered
	// by reviewing the result instead: in workspace-write over a layer,
	// with no network allowlist, no writable roots besides the workspace
	// and signals scoped to the sandbox, the engine runs it and holds
	// everything it changed until a person accepts it (see
	// Outcome.Contained). Elsewhere it asks like any Ask rule. It means
	// nothing on an Allow or Deny rule: a denial stays a denial.
	Contained bool `json:"contained,omitempty"`
	// Grammar, when set, names an analysis the command must match as
	// well as Pattern; the rule is then matched against the whole command
	// ("tool:bash:<command>"), after its parts, and can only tighten the
	// result. "git-discard" matches a command running a git command that
	// discards uncommitted work: git checkout -f or of the whole work tree
	// (git checkout -- ., git checkout HEAD~5 .), git switch
	// --discard-changes, git restore of the whole work tree (or of
	// pathspecs that only exclude, ':!x'), git reset --hard/--merge, git
	// read-tree -u, git checkout-index -f -a/--stdin, git clean without
	// -n, git stash drop/clear and their plumbing (git update-ref -d
	// refs/stash), git reflog delete/expire of any ref (a commit only a
	// reflog names, older stash entries), git worktree
	// remove --force, git submodule deinit/update --force, found behind
	// wrappers, git and shell aliases and nested shells, with git's
	// abbreviations of long options; a pathspec only known at run time
	// counts as the whole tree, and restoring named files does not match.
	// Compile rejects any other name.
	Grammar string `json:"grammar,omitempty"`
}

// ruleGrammars are the names Rule.Grammar accepts, with what matches.
var ruleGrammars = map[string]func(*source) bool{
	"git-discard": func(s *source) bool { return s.discards() != "" },
}

// Profile is an ordered list of permission rules: for each command the first
// rule whose pattern matches decides; when none matches, Default decides
// (Allow when empty). A Profile is a plain value: copy it freely; compiled
// patterns are cached package-wide.
type Profile struct {
	Name    string   `json:"name"`
	Rules   []Rule   `json:"rules"`
	Default Decision `json:"default"`
	// DefaultContained is Rule.Contained for Default: an Ask default
	// asks only because the command changes the workspace or runs code
	// the agent wrote (guarded's, whose rules ask first for what leaves
	// the workspace).
	DefaultContained bool `json:"default_contained,omitempty"`
}

// reCache holds compiled rule patterns by source.
var reCache sync.Map // string -> *rulePattern

// A rulePattern is a compiled rule pattern with its prefilter.
type rulePattern struct {
	re  *regexp.Regexp
	pre prefilter
}

// match reports whether the pattern matches action.
func (p *rulePattern) match(action string) bool {
	return p.pre.pass(action) && p.re.MatchString(action)
}

func compileRule(pattern string) (*rulePattern, error) {
	if p, ok := reCache.Load(pattern); ok {
		return p.(*rulePattern), nil
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	p := &rulePattern{re: re, pre: newPrefilter(pattern, actionPrefix)}
	reCache.Store(pattern, p)
	return p, nil
}

// Compile checks the profile: every pattern must compile and every
// decision be Allow, Deny or Ask. Evaluate fails closed (Deny) on a profile
// that does not compile; call Compile to report the problem early.
func (p *Profile) Compile() error {
	if p == nil {
		return nil
	}
	for i, r := range p.Rules {
		if _, err := compileRule(r.Pattern); err != nil {
			return fmt.Errorf("permission rule %d (%q): %w", i, r.Pattern, err)
		}
		switch r.Decision {
		case Allow, Deny, Ask:
		default:
			return fmt.Errorf("permission rule %d (%q): unknown decision %q", i, r.Pattern, r.Decision)
		}
		if _, ok := ruleGrammars[r.Grammar]; r.Grammar != "" && !ok {
			return fmt.Errorf("permission rule %d (%q): unknown grammar %q", i, r.Pattern, r.Grammar)
		}
	}
	switch p.Default {
	case Allow, Deny, Ask, "":
	default:
		return fmt.Errorf("permission profile %q: unknown default %q", p.Name, p.Default)
	}
	return nil
}

// Evaluate decides whether command may run under the profile. It returns
// Allow, Deny or Ask and the rule that decided (nil when the default did).
//
// Multi-part commands are matched part by part: every simple command in
// the command (including those in pipelines, lists, subshells, loops and
// substitutions, each as its own original text with its redirections) is
// matched separately as "tool:bash:<part>", and the most restrictive
// result wins (Deny over Ask over Allow). So `cd x && rm -r y` cannot slip
// past a rule on rm because it starts with cd, and a rule like
// `^tool:bash:ls( .*)?$` never matches text on the next line. A rule
// matching the whole text can only tighten the result, never loosen it.
// When the command does not parse, it is matched as a whole. A nil profile
// allows everything. Invalid patterns or decisions fail closed: Deny.
func (p *Profile) Evaluate(command string) (Decision, *Rule) {
	d, r, _ := p.evaluate(&source{text: command})
	return d, r
}

// evaluate is Evaluate on a source that other analyses share; contained
// reports, for Ask, whether every rule that asked is Contained (the
// default when DefaultContained).
func (p *Profile) evaluate(src *source) (Decision, *Rule, bool) {
	if p == nil {
		return Allow, nil, false
	}
	if err := p.Compile(); err != nil {
		return Deny, nil, false
	}
	if strings.TrimSpace(src.text) == "" {
		d, r := p.evalOne(src.text, nil)
		return d, r, d == Ask && p.contained(r)
	}
	d, r, contained := p.evalParts(src.commandParts(), src.text)
	return p.evalGrammars(src, d, r, contained)
}

// evalGrammars applies the rules with a Grammar to the whole command
// after its parts decided d (by rule r; contained as evaluate says): a
// matching rule can only tighten the result, and an Ask it adds keeps
// the answer Contained only when the rule is.
func (p *Profile) evalGrammars(src *source, d Decision, r *Rule, contained bool) (Decision, *Rule, bool) {
	if d == Deny {
		return d, r, false
	}
	for i := range p.Rules {
		g := &p.Rules[i]
		if g.Grammar == "" {
			continue
		}
		re, err := compileRule(g.Pattern)
		if err != nil || !re.match(actionPrefix+src.text) || !ruleGrammars[g.Grammar](src) {
			continue
		}
		switch {
		case g.Decision.severity() > d.severity():
			d, r, contained = g.Decision, g, g.Contained
		case g.Decision == Ask && d == Ask:
			contained = contained && g.Contained
		}
	}
	return d, r, d == Ask && contained
}

// evalParts decides parts, the simple commands of whole (the whole text
// alone when there are none), as Evaluate describes, and whether every
// rule that asked is Contained. p compiles.
func (p *Profile) evalParts(parts []part, whole string) (Decision, *Rule, bool) {
	best, bestRule, contained := Decision(""), (*Rule)(nil), true
	asked := func(d Decision, r *Rule) {
		if d == Ask && !p.contained(r) {
			contained = false
		}
	}
	for i := range parts {
		d, r := p.evalOne(parts[i].text, func() bool { return parts[i].readOnly() })
		asked(d, r)
		if best == "" || d.severity() > best.severity() {
			best, bestRule = d, r
		}
		if best == Deny {
			break
		}
	}
	if best == "" {
		d, r := p.evalOne(whole, nil)
		return d, r, d == Ask && p.contained(r)
	}
	if len(parts) > 1 && best != Deny {
		// The whole text may tighten the result (a rule written for a
		// pipeline), never loosen it; an Ask rule written for it that
		// is not Contained keeps the ask.
		d, r := p.evalOne(whole, nil)
		if r != nil {
			asked(d, r)
			if d.severity() > best.severity() {
				best, bestRule = d, r
			}
		}
	}
	return best, bestRule, best == Ask && contained
}

// contained reports whether rule r (nil: the default) is Contained.
func (p *Profile) contained(r *Rule) bool {
	if r == nil {
		return p.DefaultContained
	}
	return r.Contained
}

// evalOne decides one part (or the whole text); readOnly says whether it
// only reads (nil: not known to).
func (p *Profile) evalOne(part string, readOnly func() bool) (Decision, *Rule) {
	action := actionPrefix + part
	for i := range p.Rules {
		if p.Rules[i].Grammar != "" {
			continue // matched on the whole command (evalGrammars)
		}
		re, err := compileRule(p.Rules[i].Pattern)
		if err != nil {
			return Deny, &p.Rules[i]
		}
		if re.match(action) && (!p.Rules[i].ReadOnly || readOnly != nil && readOnly()) {
			return p.Rules[i].Decision, &p.Rules[i]
		}
	}
	if p.Default == "" {
		return Allow, nil
	}
	return p.Default, nil
}

// decidingPart returns the simple command that p objects to with d, for
// telling the agent what a profile refused: the first simple command (in
// the order they appear, with its redirections) that p alone answers with
// d, or the whole command when no single one does (a rule written for the
// whole text). Each simple command is matched as Evaluate matches a
// command, with the commands nested in its text: `echo $(sudo x)` is asked
// about when sudo is. One with a heredoc, whose body is not part of its
// text, is matched by its text alone, as Evaluate matches a text that does
// not parse (so no ReadOnly rule matches it); the commands nested in it
// are then matched on their own. When the profile has ReadOnly rules and
// what surrounds the simple commands is not proven read-only (see
// readOnlyFrame), it is the whole command.
func (p *Profile) decidingPart(src *source, d Decision) string {
	compiled := p.Compile() == nil
	if compiled && p.hasReadOnly() && !src.readOnlyFrame() {
		// what surrounds the simple commands ({ ...; } > f, a loop
		// binding what arithmetic evaluates) is what no ReadOnly rule
		// proves: the whole text is the answer
		return src.text
	}
	parts := src.commandParts()
	for i, pt := range parts {
		if !pt.call {
			continue
		}
		got := Deny // Evaluate fails closed on a profile that does not compile
		switch {
		case compiled && pt.hdoc:
			// its text alone does not parse (the heredoc's body lies
			// after it): matched whole, it is proven nothing
			got, _ = p.evalOne(pt.text, nil)
		case compiled:
			got, _, _ = p.evalParts(parts[i:pt.last], pt.text)
		}
		if got == d {
			return pt.text
		}
	}
	return src.text
}

// hasReadOnly reports whether a rule of p is ReadOnly.
func (p *Profile) hasReadOnly() bool {
	for _, r := range p.Rules {
		if r.ReadOnly {
			return true
		}
	}
	return false
}

// A part is one simple command of a command's text.
type part struct {
	text string // its original text, with its redirections
	end  int    // the offset of the text's end in the command
	call bool   // a command call, not a declaration or a test
	last int    // the index after the parts nested in it
	hdoc bool   // the body of a heredoc nested in it lies after its text

	stmt        *syntax.Stmt // the statement, for readOnly
	src         *source      // the text it is part of, for readOnly
	ro, roKnown bool         // readOnly's answer, once known
}

// readOnly reports whether the part is a simple command that only reads
// (see Rule.ReadOnly).
func (pt *part) readOnly() bool {
	if !pt.roKnown {
		pt.roKnown = true
		pt.ro = pt.call && pt.stmt != nil && pt.src.readOnlyFrame() && readOnlyStmt(pt.stmt)
	}
	return pt.ro
}

// readOnlyFrame reports whether what surrounds the simple commands of
// the text only reads (see readOnlyFrame), once per text.
func (s *source) readOnlyFrame() bool {
	if !s.frameKnown {
		s.frameKnown = true
		f, err := s.tree()
		s.frameRO = err == nil && readOnlyFrame(f)
	}
	return s.frameRO
}

// commandParts returns every simple command of the text (see part) in the
// order they appear, or nil when the text does not parse. Nested parts
// follow the part they are nested in.
func (s *source) commandParts() []part {
	if s.split {
		return s.parts
	}
	s.split = true
	command := s.text
	f, err := s.tree()
	if err != nil {
		return nil
	}
	var open []int // per node entered: its part's index, or -1
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case nil: // after the children of the last node entered
			if i := open[len(open)-1]; i >= 0 {
				s.parts[i].last = len(s.parts)
			}
			open = open[:len(open)-1]
			return true
		case *syntax.Redirect:
			if n.Hdoc != nil {
				end := s.off(n.Hdoc.End())
				for _, i := range open {
					if i >= 0 && end > s.parts[i].end {
						s.parts[i].hdoc = true
					}
				}
			}
		}
		open = append(open, -1)
		st, ok := n.(*syntax.Stmt)
		if !ok || st.Cmd == nil {
			return true
		}
		call := false
		switch st.Cmd.(type) {
		case *syntax.CallExpr:
			call = true
		case *syntax.DeclClause, *syntax.LetClause, *syntax.TestClause, *syntax.ArithmCmd:
		default:
			return true
		}
		start, end := s.off(st.Pos()), s.off(st.Cmd.End())
		for _, r := range st.Redirs {
			if r.Word != nil {
				end = max(end, s.off(r.Word.End()))
			}
		}
		if start >= 0 && start <= end && end <= len(command) {
			open[len(open)-1] = len(s.parts)
			s.parts = append(s.parts, part{text: command[start:end], end: end, call: call, stmt: st, src: s})
		}
		return true
	})
	return s.parts
}

// cmdRe builds a pattern matching a simple command whose name (after
// NAME=value prefixes and a directory) is one of names, followed by an
// optional argument pattern.
func cmdRe(names, args string) string {
	return `(?s)^tool:bash:(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(?:\S*/)?(?:` + names + `)` + args
}

const (
	anyArgs = `(?:\s.*)?$`
	// writeRedirect matches an output redirection to anything but /dev/null
	// or a file descriptor.
	writeRedirect = `^tool:bash:[^\n]*>>?\|?\s*(?:[^/&\s>]|/(?:[^d]|d[^e]|de[^v]|dev/[^n]))`
)

// presetNames lists the built-in profiles; Preset documents them.
var presetNames = []string{"open", "standard", "guarded", "locked"}

// Presets returns the names of the built-in profiles.
func Presets() []string { return append([]string(nil), presetNames...) }

var (
	rulesPriv     = Rule{cmdRe(`sudo|su|doas|pkexec|run0`, anyArgs), "", false, false, ""}
	rulesShutdown = Rule{`(?s)^tool:bash:(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*` +
		`(?:(?:\S*/)?(?:sudo|doas|env|nohup|command|exec|systemctl)(?:\s+-\S+)*\s+)*` +
		`(?:\S*/)?(?:shutdown|reboot|halt|poweroff|init|telinit)(?:\s.*)?$`, Deny, false, false, ""}
	// readsOnly matches every command; its rules are ReadOnly.
	readsOnly = `^tool:bash:`

	// rulesLeave ask before what reaches beyond the workspace:
	// publishing, deploying, the system's services, mounts, firewall and
	// packages. Not Contained: a person approves the command itself.
	rulesLeave = []Rule{
		{cmdRe(`git`, `(?:\s+-\S+(?:\s+\S+)?)*?\s+push\b.*$`), Ask, false, false, ""},
		{cmdRe(`npm|pnpm|yarn|cargo|gem|twine|poetry|flit`, `\s+(?:.*\s)?(?:publish|upload)\b.*$`), Ask, false, false, ""},
		{cmdRe(`docker|podman`, `\s+(?:.*\s)?(?:push|system\s+prune|volume\s+prune|rm\s+-f)\b.*$`), Ask, false, false, ""},
		{cmdRe(`kubectl|helm`, `\s+(?:.*\s)?(?:apply|delete|create|replace|patch|install|uninstall|upgrade|rollback)\b.*$`), Ask, false, false, ""},
		{cmdRe(`terraform|tofu|pulumi`, `\s+(?:.*\s)?(?:apply|destroy|up|import)\b.*$`), Ask, false, false, ""},
		{cmdRe(`systemctl|service|crontab|launchctl|mount|umount|iptables|nft|ufw`, anyArgs), Ask, false, false, ""},
		{cmdRe(`apt|apt-get|yum|dnf|pacman|zypper|apk|brew|snap`, `\s+(?:.*\s)?(?:install|remove|purge|upgrade|dist-upgrade|-S|-R)\b.*$`), Ask, false, false, ""},
	}
	// rulesLoseWork ask before what may lose work in the workspace:
	// git's forms that discard uncommitted work (the git-discard grammar:
	// reset --hard, clean, checkout -f, checkout/restore of the whole
	// tree, switch --discard-changes, stash drop/clear), rebase, branch
	// -D and recursive permission changes. Contained: what the command
	// changed is what a person reviews.
	rulesLoseWork = []Rule{
		{cmdRe(`git`, `(?:\s+-\S+(?:\s+\S+)?)*?\s+rebase\b.*$`), Ask, false, true, ""},
		{readsOnly, Ask, false, true, "git-discard"},
		{cmdRe(`git`, `\s.*\bbranch\s+.*(?:-D|--delete\s+--force|-d\s+-f).*$`), Ask, false, true, ""},
		{cmdRe(`chmod|chown|chgrp`, `\s+(?:.*\s)?-[a-zA-Z]*R.*$`), Ask, false, true, ""},
	}
)

func presetRules(name string) (*Profile, bool) {
	priv := rulesPriv
	switch name {
	case "open":
		return &Profile{Name: name, Default: Allow}, true
	case "standard":
		priv.Decision = Ask
		return &Profile{Name: name, Default: Allow, Rules: append(append([]Rule{rulesShutdown, priv}, rulesLeave...), rulesLoseWork...)}, true
	case "guarded":
		priv.Decision = Deny
		rules := []Rule{rulesShutdown, priv, {readsOnly, Allow, true, false, ""}}
		rules = append(rules, rulesLeave...)
		rules = append(rules, []Rule{
			{writeRedirect, Ask, false, true, ""},
			{cmdRe(`go`, `\s+(?:build|test|vet|run|fmt|list|version|env|doc|mod\s+(?:download|verify|why|graph))(?:\s.*)?$`), Allow, false, false, ""},
			{cmdRe(`make|cmake|ninja|gradle|mvn|pytest|py\.test|tox|nox|ruff|mypy|pylint|eslint|tsc|prettier|black|flake8|isort|gofmt|shellcheck|sphinx-build`, anyArgs), Allow, false, false, ""},
			{cmdRe(`(?:python[0-9.]*\s+)?(?:\S*/)?runtests\.py`, anyArgs), Allow, false, false, ""},
			{cmdRe(`cargo`, `\s+(?:build|test|check|clippy|fmt|run|doc|tree)(?:\s.*)?$`), Allow, false, false, ""},
			{cmdRe(`npm|pnpm|yarn|bun`, `\s+(?:test|run|ls|list|outdated|audit)(?:\s.*)?$`), Allow, false, false, ""},
			{cmdRe(`python|python3`, `\s+-m\s+(?:pytest|unittest|mypy|ruff|black)(?:\s.*)?$`), Allow, false, false, ""},
		}...)
		rules = append(rules, rulesLoseWork...)
		return &Profile{Name: name, Default: Ask, DefaultContained: true, Rules: rules}, true
	case "locked":
		return &Profile{Name: name, Default: Deny, Rules: []Rule{
			{readsOnly, Allow, true, false, ""},
		}}, true
	}
	return nil, false
}

// Preset returns a fresh copy of the named built-in permission profile
// ("open", "standard", "guarded" or "locked"). Profiles apply after
// the safety rules (which hold under every profile):
//
//   - open: allows everything; only the safety rules apply.
//   - standard (a sensible default for a trusted agent): allows by default;
//     asks before privilege escalation (sudo, su, doas, pkexec, run0),
//     publishing or deploying (git push, npm/cargo/gem/twine publish,
//     docker push, kubectl apply/delete, helm install, terraform
//     apply/destroy), losing work (the git-discard grammar of
//     Rule.Grammar: git reset --hard, git clean without -n, git checkout
//     -f, git checkout/restore of the whole tree, git switch
//     --discard-changes, git stash drop/clear; and git rebase, git branch
//     -D, chmod/chown -R; these asks are Contained) and system changes (systemctl, service,
//     crontab, mount, firewall, apt/dnf/pacman/brew install or remove);
//     denies shutdown, reboot, halt, poweroff and init, also behind sudo.
//   - guarded (review everything that changes things): asks by default;
//     allows what the argument grammars prove only reads (see
//     Rule.ReadOnly: ls, cat, grep, rg, sed -n, nl, head, tail, wc, find
//     without -exec/-delete, diff, jq, sort without -o, git
//     status/diff/log/show/blame/grep, git branch and tag listing, pip
//     list, a program asked for --version, ...) and local build and test
//     commands (go, make, cargo build/test, npm/yarn/pnpm test/run,
//     pytest, tox, linters, sphinx-build, Django's runtests.py), unless
//     they redirect output to a file; denies privilege escalation and
//     shutdown; asks before standard's publishing, deploying and system
//     changes. Its other asks (a redirection to a file, losing work, and
//     its default: sed -i, rm, cp, mv, mkdir, running the agent's own
//     scripts, python -c) are Contained: in workspace-write the engine runs
//     them and holds what they changed for review, and in the read-only
//     sandbox it runs them (approving them would not lift the sandbox):
//     their writes fail. Builds and tests run
//     the project's code: guarded reviews what the agent changes, it does
//     not contain what the project runs. Package engine runs the reads in
//     the read-only sandbox; where it cannot start that sandbox, they ask.
//     Unsandboxed, its asks are what no grammar can prove harmless: on
//     14,565 real agent commands, 6,218 asks, all writes (heredocs into
//     files, sed -i, rm, mkdir, git checkout FILE, cp, mv) or runs of the
//     agent's or the project's code (its scripts, python -c importing the
//     project, manage.py): only the kernel (workspace-write holding the
//     changes for review, read-only failing the writes) takes them away.
//   - locked (read-only): denies everything but what the argument
//     grammars prove only reads (the guarded list without builds and
//     tests); it never asks, so nothing is Contained. The analyser's
//     proof covers the command's text; what the programs read (the
//     repository's configuration, a project's .ripgreprc named by the
//     environment) is the kernel's to contain: package engine runs every
//     command locked allows in the read-only sandbox, and where it cannot
//     start that sandbox denies them all.
func Preset(name string) (*Profile, error) {
	p, ok := presetRules(name)
	if !ok {
		names := Presets()
		sort.Strings(names)
		return nil, fmt.Errorf("unknown permission profile %q (want one of %s)", name, strings.Join(names, ", "))
	}
	if err := p.Compile(); err != nil {
		return nil, err
	}
	return p, nil
}
