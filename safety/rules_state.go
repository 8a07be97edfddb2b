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
	if body == nil {
		return false
	}
	found := false
	syntax.Walk(body, func(n syntax.Node) bool {
		if found {
			return false
		}
		switch n := n.(type) {
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
