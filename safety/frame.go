package safety

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// readOnlyFrame reports whether what surrounds the simple commands of f
// only reads, so that a text whose every simple command reads does too:
// the redirections of compound commands ({ ...; } > f, a loop's) write
// nothing; arithmetic outside a simple command (a C-style loop's, a for
// list's) is plain; $_ and positional parameters are not evaluated as
// arithmetic (their value is a word the text chose: echo 'a[$(cmd)]';
// echo $((_)) runs cmd); and a text that binds a variable to a value of
// its own (a for loop over words that are not numbers, select, ${x:=v},
// printf -v, a function's parameters) evaluates no variable as
// arithmetic, since bash evaluates the value in turn (for x in
// 'a[$(cmd)]'; do echo $((x)); done runs cmd, and so does a variable
// whose value names x).
func readOnlyFrame(f *syntax.File) bool {
	ok, binds := true, false
	var scan arithScan
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Stmt:
			if _, call := n.Cmd.(*syntax.CallExpr); !call && !readOnlyRedirs(n) {
				ok = false
			}
		case *syntax.ForClause:
			switch l := n.Loop.(type) {
			case *syntax.WordIter:
				binds = binds || n.Select || !numbersOnly(l.Items)
			case *syntax.CStyleLoop:
				scan.expr(l.Init)
				scan.expr(l.Cond)
				scan.expr(l.Post)
			}
		case *syntax.FuncDecl:
			binds = true
		case *syntax.ParamExp:
			if n.Exp != nil && (n.Exp.Op == syntax.AssignUnset || n.Exp.Op == syntax.AssignUnsetOrNull) {
				binds = true
			}
		case *syntax.CallExpr:
			binds = binds || setsVar(n)
		}
		return ok
	})
	scan.node(f, true)
	return ok && scan.plain() && !(binds && scan.vars)
}

// numbersOnly reports whether a for loop's words are all numbers or
// brace sequences of numbers ({1..10}).
func numbersOnly(items []*syntax.Word) bool {
	for _, w := range items {
		l := w.Lit()
		if l == "" || strings.Trim(l, "0123456789{}.,-") != "" {
			return false
		}
	}
	return true
}

// setsVar reports whether a call of a read-only program assigns a
// variable: printf -v NAME.
func setsVar(x *syntax.CallExpr) bool {
	if len(x.Args) == 0 || base(x.Args[0].Lit()) != "printf" {
		return false
	}
	for _, w := range x.Args[1:] {
		if l := w.Lit(); l == "" || strings.HasPrefix(l, "-v") {
			return true
		}
	}
	return false
}

// An arithScan collects what the arithmetic it is shown ($((...)), a
// subscript, an offset, a C-style loop) does. Bash evaluates the text of
// anything but numbers, names and $NAME, and runs the $(...) of a
// subscript in it: echo $(( 'a[$(cmd)]' )) runs cmd.
type arithScan struct {
	other bool // an operand other than a number, a name or $NAME; or $_
	vars  bool // an operand reads a variable (or $1, $@, $-: their values may name one)
}

// plain reports whether the arithmetic seen is plain.
func (a *arithScan) plain() bool { return !a.other }

// expr scans one arithmetic expression.
func (a *arithScan) expr(x syntax.ArithmExpr) {
	if x == nil {
		return
	}
	syntax.Walk(x, func(n syntax.Node) bool {
		w, ok := n.(*syntax.Word)
		if !ok {
			return !a.other
		}
		for _, p := range w.Parts {
			switch p := p.(type) {
			case *syntax.Lit:
				switch {
				case p.Value == "_":
					a.other = true
				case isParamName(p.Value) && !isDigits(p.Value):
					a.vars = true
				}
			case *syntax.ParamExp:
				switch {
				case p.Index != nil || p.Slice != nil || p.Repl != nil || p.Exp != nil || p.Excl || p.Param == nil || p.Param.Value == "_":
					a.other = true
				case p.Length:
				case p.Param.Value == "#" || p.Param.Value == "?" || p.Param.Value == "$" || p.Param.Value == "!":
				default:
					a.vars = true
				}
			default:
				a.other = true
			}
		}
		return false
	})
}

// node scans the arithmetic in n, and in the substitutions nested in it
// when nested is set.
func (a *arithScan) node(n syntax.Node, nested bool) {
	syntax.Walk(n, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.ArithmExp:
			a.expr(n.X)
		case *syntax.ParamExp:
			if n.Index != nil {
				if w, ok := n.Index.(*syntax.Word); !ok || w.Lit() != "@" && w.Lit() != "*" {
					a.expr(n.Index)
				}
			}
			if n.Slice != nil {
				a.expr(n.Slice.Offset)
				a.expr(n.Slice.Length)
			}
		case *syntax.CmdSubst, *syntax.ProcSubst:
			return nested // parts of their own
		}
		return !a.other
	})
}

// stmt scans the arithmetic of a simple command, not that of the
// substitutions in it (parts of their own).
func (a *arithScan) stmt(st *syntax.Stmt) { a.node(st, false) }
