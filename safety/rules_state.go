package safety

import (
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// unset NAME... forgets what was known about variables (IFS falls back to
// its default) or, with -f, functions.
func (c *checker) unset(args []field) {
	funcs := false
	for _, f := range args[1:] {
		switch f.s {
		case "-f":
			funcs = true
		case "-v", "-n":
		default:
			if funcs {
				delete(c.funcs, f.s)
			} else {
				delete(c.vars, f.s)
			}
		}
	}
}

// shift [N] drops positional parameters.
func (c *checker) shift(args []field) {
	if !c.posKnown {
		return
	}
	n := 1
	if len(args) > 1 {
		var err error
		if n, err = strconv.Atoi(args[1].s); err != nil || n < 0 {
			c.params, c.posKnown, c.posOpen = nil, false, false
			return
		}
	}
	if c.posOpen && n >= len(c.params) {
		c.params, c.posKnown, c.posOpen = nil, false, false // into the unknown ones
		return
	}
	c.params = c.params[min(n, len(c.params)):]
}

// set [options] [--] ARGS... sets the positional parameters.
func (c *checker) set(args []field) {
	for i := 1; i < len(args); i++ {
		a := args[i].s
		if len(a) > 1 && (a[0] == '-' || a[0] == '+') && a[len(a)-1] == 'o' {
			i++ // -o OPTION, -euo OPTION
			continue
		}
		if a == "--" || a == "-" || a == "" || a[0] != '-' && a[0] != '+' {
			if a == "--" || a == "-" {
				i++
			}
			c.setParams(args[min(i, len(args)):])
			return
		}
	}
}

// funcDecl blocks fork bombs, checks the function body with unknown
// arguments and records it: a later call with static words checks it
// again with those arguments (see callFunc).
func (c *checker) funcDecl(x *syntax.FuncDecl) {
	names := x.Names
	if x.Name != nil {
		names = append([]*syntax.Lit{x.Name}, names...)
	}
	for _, n := range names {
		if isForkBomb(n.Value, x.Body) {
			c.report(Verdict{Decision: Block, Rule: "fork-bomb",
				Reason:      "fork bomb: function " + n.Value + " keeps spawning copies of itself until the machine stalls",
				Alternative: "run a bounded number of background jobs (e.g. a for loop with a fixed count and wait)"})
			return
		}
		if c.funcs == nil {
			c.funcs = make(map[string]*syntax.Stmt)
		}
		c.funcs[n.Value] = x.Body
	}
	saved := c.enterFunc(nil)
	c.stmt(x.Body, stdinSrc{})
	c.leaveFunc(saved)
}

// isForkBomb reports whether body calls name both sides of a pipe or in the
// background.
func isForkBomb(name string, body *syntax.Stmt) bool {
	return isForkBombDepth(name, body, 0)
}

// evalText returns the code of eval with static words.
func evalText(x *syntax.CallExpr) (string, bool) {
	var r resolver
	if len(x.Args) < 2 {
		return "", false
	}
	if v, ok := r.wordLit(x.Args[0]); !ok || v != "eval" {
		return "", false
	}
	var words []string
	for _, w := range x.Args[1:] {
		v, ok := r.literal(w)
		if !ok {
			return "", false
		}
		words = append(words, v)
	}
	return strings.Join(words, " "), true
}

// isForkBombDepth is isForkBomb looking into eval's code depth levels deep.
func isForkBombDepth(name string, body *syntax.Stmt, depth int) bool {
	if body == nil {
		return false
	}
	found := false
	syntax.Walk(body, func(n syntax.Node) bool {
		if found {
			return false
		}
		switch n := n.(type) {
		case *syntax.CallExpr:
			if code, ok := evalText(n); ok && depth < maxNesting {
				if f, err := parse(code, false); err == nil {
					found = isForkBombDepth(name, &syntax.Stmt{Cmd: &syntax.Block{Stmts: f.Stmts}}, depth+1)
				}
			}
		case *syntax.Stmt:
			if n.Background && callsSelf(n, name) {
				found = true
			}
		case *syntax.BinaryCmd:
			if (n.Op == syntax.Pipe || n.Op == syntax.PipeAll) && callsSelf(n.X, name) && callsSelf(n.Y, name) {
				found = true
			}
		}
		return !found
	})
	return found
}

func callsSelf(s *syntax.Stmt, name string) bool {
	if s == nil {
		return false
	}
	switch x := s.Cmd.(type) {
	case *syntax.CallExpr:
		if len(x.Args) == 0 {
			return false
		}
		var r resolver
		v, ok := r.wordLit(x.Args[0])
		return ok && v == name
	case *syntax.BinaryCmd:
		if x.Op == syntax.Pipe || x.Op == syntax.PipeAll {
			return callsSelf(x.X, name) || callsSelf(x.Y, name)
		}
	case *syntax.Block:
		for _, st := range x.Stmts {
			if callsSelf(st, name) {
				return true
			}
		}
	case *syntax.Subshell:
		for _, st := range x.Stmts {
			if callsSelf(st, name) {
				return true
			}
		}
	}
	return false
}

// kill -9 -1 signals every process the user may signal, the agent and
// the engine included.
func (c *checker) kill(args []field) {
	i := 1
	if i < len(args) {
		switch a := args[i].s; {
		case a == "-s" || a == "-n":
			i += 2
		case a == "-l" || a == "-L":
			return
		case a != "--" && strings.HasPrefix(a, "-"):
			i++ // -SIGNAL
		}
	}
	for ; i < len(args); i++ {
		if args[i].s == "--" {
			continue
		}
		if args[i].s == "-1" {
			c.report(Verdict{Decision: Block, Rule: "kill-all",
				Reason:      "kill -1 signals every process you own, including the agent and this tool",
				Alternative: "kill specific PIDs or a process group (kill -- -PGID)"})
			return
		}
	}
}

// defineAlias records alias [-p] [--] NAME=VALUE...: a later command
// named NAME is checked with VALUE in its place. Bash expands aliases in a
// script only with shopt -s expand_aliases (or in an interactive shell),
// but a definition is as good as a use for the analysis. Options end at
// "--" or the first operand; after that a NAME may start with "-". A NAME
// only known at run time asks (any command could be it).
func (c *checker) defineAlias(args []field) {
	opts := true
	for _, f := range args[1:] {
		if opts && !f.dyn && f.s == "--" {
			opts = false
			continue
		}
		if opts && !f.dyn && strings.HasPrefix(f.s, "-") {
			continue
		}
		opts = false
		name, val, ok := strings.Cut(f.s, "=")
		if f.spread || strings.Contains(name, dynMark) {
			c.report(askDynamicAlias("alias " + showDyn(f.s)))
			return
		}
		if ok && name != "" {
			c.setAlias(name, field{s: val, dyn: f.dyn, word: -1})
		}
	}
}

// setAlias records alias name with value val.
func (c *checker) setAlias(name string, val field) {
	if c.aliases == nil {
		c.aliases = make(map[string]field)
	}
	c.aliases[name] = val
}

// askDynamicAlias is the verdict on an alias whose name or value is only
// known at run time.
func askDynamicAlias(what string) Verdict {
	return Verdict{Decision: Ask, Rule: "dynamic-command",
		Reason:      what + " defines an alias only known at run time: a later command may run its value",
		Alternative: "define the alias with a literal name and value, or spell out the command"}
}

// aliasArray is bash's associative array of aliases: BASH_ALIASES[k]=v is
// alias k=v.
const aliasArray = "BASH_ALIASES"

// assignAliases handles an assignment to BASH_ALIASES (BASH_ALIASES[k]=v,
// BASH_ALIASES[k]+=v, BASH_ALIASES=([k]=v ...), BASH_ALIASES+=(...) and
// the same in declare, typeset, local, readonly, export): an element with
// a literal key and value is alias k=v, and BASH_ALIASES=v is alias 0=v
// (element 0). A key or value only known at run time, or an element
// without a key (bash 5.1's key-value pairs), asks. A compound assignment
// keeps the aliases known before: more aliases only means more checks.
func (c *checker) assignAliases(a *syntax.Assign) {
	switch {
	case a.Array != nil:
		for _, e := range a.Array.Elems {
			if e.Index == nil {
				c.report(askDynamicAlias(aliasArray + "=(...)"))
				return
			}
			c.assignAlias(e.Index, e.Value, false)
		}
	case a.Index != nil:
		c.assignAlias(a.Index, a.Value, a.Append)
	default:
		c.assignAlias(nil, a.Value, a.Append)
	}
}

// assignAlias handles BASH_ALIASES[index]=w (+= when appending); a nil
// index is element 0.
func (c *checker) assignAlias(index syntax.ArithmExpr, w *syntax.Word, appending bool) {
	key, ok := "0", true
	if index != nil {
		iw, isWord := index.(*syntax.Word)
		key, ok = "", false
		if isWord {
			key, ok = c.literal(iw)
		}
	}
	val, ok2 := c.literal(w)
	c.putAlias(key, val, ok && ok2, appending)
}

// putAlias records BASH_ALIASES[key]=val (+= when appending); unknown
// (key or value only known at run time) asks.
func (c *checker) putAlias(key, val string, known, appending bool) {
	prev, had := c.aliases[key]
	if !known || key == "" || appending && had && prev.dyn {
		c.report(askDynamicAlias(aliasArray + "[...]"))
		return
	}
	if appending && had {
		val = prev.s + val
	}
	c.setAlias(key, field{s: val, word: -1})
}

// aliasOperand handles a NAME operand of read, mapfile, printf -v or a
// quoted declare (NAME or NAME=VALUE) that names BASH_ALIASES or one of
// its elements: the value known is alias KEY=VALUE; any other (read at
// run time, a key only known at run time) asks.
func (c *checker) aliasOperand(what string, f field, val field, known bool) {
	name, _, _ := strings.Cut(f.s, "=")
	base, rest, sub := strings.Cut(name, "[")
	if base != aliasArray {
		return
	}
	key, closed := strings.CutSuffix(rest, "]")
	if f.dyn || !known || val.dyn || !sub || !closed || key == "" || strings.ContainsAny(key, dynMark+"$`") {
		c.report(askDynamicAlias(what + " " + showDyn(name)))
		return
	}
	c.setAlias(key, field{s: val.s, word: -1})
}

// unalias NAME... / unalias -a forgets aliases.
func (c *checker) unalias(args []field) {
	for _, f := range args[1:] {
		if f.s == "-a" {
			c.aliases = nil
			return
		}
		delete(c.aliases, f.s)
	}
}

// alias checks a command whose name is an alias defined earlier: its value
// followed by the other words, as shell code. It reports whether it did.
// An alias is not expanded again inside its own expansion, unless the
// expansion redefined it: bash then may run the new value (it does three
// aliases deep), so the analysis expands it.
func (c *checker) alias(args []field, in stdinSrc) bool {
	name := args[0].s
	val, ok := c.aliases[name]
	if prev, in := c.expanding[name]; !ok || in && prev == val.s {
		return false
	}
	if val.dyn {
		c.report(Verdict{Decision: Ask, Rule: "dynamic-command",
			Reason:      "alias " + name + " stands for a command only known at run time",
			Alternative: "spell out the command the alias stands for"})
		return true
	}
	code := joinCode(val, args[1:], true)[0]
	words, plain := plainWords(val.s)
	if code.dyn && !plain {
		c.report(Verdict{Decision: Ask, Rule: "dynamic-command",
			Reason:      "alias " + name + " is shell code given words only known at run time",
			Alternative: "spell out the command the alias stands for"})
		return true
	}
	if c.expanding == nil {
		c.expanding = make(map[string]string)
	}
	prev, had := c.expanding[name]
	c.expanding[name] = val.s
	if code.dyn {
		// words only known at run time: the alias's plain words take
		// the name's place among the fields (alias g='git '; g -C "$d" ...)
		next := make([]field, 0, len(words)+len(args)-1)
		for _, w := range words {
			next = append(next, field{s: w, word: -1})
		}
		if len(next) > 0 {
			c.argv(append(next, args[1:]...), in)
		}
	} else {
		c.aliasText = true
		c.nested(code.s, false, in)
	}
	if had {
		c.expanding[name] = prev
	} else {
		delete(c.expanding, name)
	}
	return true
}

// plainWords splits an alias's value into words when it is plain words
// (no quoting, expansion or operator the shell would interpret).
func plainWords(s string) ([]string, bool) {
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch == ' ' || ch == '\t' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' ||
			strings.IndexByte("_./=:@%+,-", ch) >= 0 {
			continue
		}
		return nil, false
	}
	return strings.Fields(s), true
}

// wrapperAssigns checks the NAME=value words of env and sudo (between
// their options and the command, up to word end).
func (c *checker) wrapperAssigns(args []field, end int, in stdinSrc) {
	var vars []envVar
	for _, f := range args[1:end] {
		if !isAssignWord(f.s) {
			continue
		}
		name, val, _ := strings.Cut(f.s, "=")
		if commandVars[name] || persistVars[name] != "" || strings.HasPrefix(name, "GIT_CONFIG_") {
			vars = append(vars, envVar{name: name, val: field{s: val, dyn: f.dyn, word: -1}})
		}
	}
	if len(vars) > 0 {
		c.envCode(vars, in)
	}
}

// declare checks export/declare/... NAME=value run as a command (a quoted
// or computed name: the parser gives those a call, not a declaration).
func (c *checker) declare(name string, args []field, in stdinSrc) {
	c.nameArgs(name, args)
	c.declOperands(name, args)
	for _, f := range args[1:] {
		if n, v, ok := strings.Cut(f.s, "="); ok && !strings.HasPrefix(n, "-") {
			c.aliasOperand(name, f, field{s: v, dyn: f.dyn}, true)
		}
	}
	c.wrapperAssigns(args, len(args), in)
}
