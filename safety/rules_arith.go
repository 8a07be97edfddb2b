package safety

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Words bash evaluates as code: arithmetic ((( )), let, $(( )), [[ -eq ]],
// subscripts, offsets) evaluates each variable's value as arithmetic in
// turn and runs the $(...) of a subscript in it (x[$(cmd)]); a variable
// name with a subscript (test -v, printf -v, declare, read, unset,
// ${!x}) does the same; mapfile -C runs its callback. A value read at run
// time (read, mapfile: the job's input or a file) asks; a literal one
// (assigned, a for loop's, ${x:=v}'s, printf -v's) is analysed like
// $(...), also when arithmetic evaluates a variable the text did not set
// (its value may name one the text did); $_ (the previous command's last
// argument) asks.

// The rules of the builtins that evaluate names and callbacks (found by
// ruleFor without a map entry, which would cost at package init).
func (c *checker) mapfileRule(_ string, args []field, _ stdinSrc) { c.mapfile(args) }
func (c *checker) testRule(_ string, args []field, _ stdinSrc)    { c.testBuiltin(args) }
func (c *checker) printfRule(_ string, args []field, _ stdinSrc)  { c.printfBuiltin(args) }

// taint marks variable name as read at run time.
func (c *checker) taint(name string) {
	if c.vars == nil {
		c.vars = make(map[string]varState, 4)
	}
	st := c.vars[name]
	st.taint = true
	c.vars[name] = st
}

// mapfile [-C CALLBACK] [ARRAY]: the callback is shell code; the array's
// elements are read at run time.
func (c *checker) mapfile(args []field) {
	array := "MAPFILE"
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a.s == "-C" && i+1 < len(args):
			i++
			c.code("mapfile -C", args[i])
		case strings.HasPrefix(a.s, "-C") && len(a.s) > 2:
			c.code("mapfile -C", field{s: a.s[2:], dyn: a.dyn, taint: a.taint})
		case a.s == "-d" || a.s == "-n" || a.s == "-O" || a.s == "-s" || a.s == "-u" || a.s == "-c":
			i++
		case strings.HasPrefix(a.s, "-"):
		default:
			array = a.s
			c.arrayOperand(args[0].s, a)
			c.aliasOperand("mapfile", a, field{}, false)
			if !isParamName(a.s) {
				c.nameOperand("mapfile", a)
			}
		}
	}
	if isParamName(array) {
		c.setArray(array, nil, false)
		c.taint(array)
	}
}

// code checks a word bash runs as shell code (a callback).
func (c *checker) code(what string, f field) {
	switch {
	case f.taint:
		c.report(askEvalInput(what, f))
	case f.dyn:
		c.report(askDynamicShell(what))
	default:
		c.nested(f.s, false, stdinSrc{})
	}
}

// askEvalInput is the verdict on text read at run time that bash
// evaluates as code.
func askEvalInput(what string, f field) Verdict {
	return Verdict{Decision: Ask, Rule: "dynamic-eval",
		Reason:      what + " evaluates " + showDyn(f.s) + ", a value read at run time (read, mapfile), as arithmetic or code: a subscript such as x[$(cmd)] in it runs cmd",
		Alternative: "check the value first ([[ $v =~ ^[0-9]+$ ]]) in a separate step, or use it only as data"}
}

// nameOperand checks a word bash takes as a variable name and evaluates
// when it has a subscript (test -v, printf -v, declare, read, unset): one
// read at run time asks, and a literal one's subscript is analysed like
// $(...).
func (c *checker) nameOperand(what string, f field) {
	name, _, _ := strings.Cut(f.s, "=")
	switch {
	case f.taint:
		c.report(askEvalInput(what, f))
	case !f.dyn && strings.IndexByte(name, '[') >= 0 && hasExpansion(name):
		c.extracted(": "+name, stdinSrc{})
	}
}

// hasExpansion reports whether s holds a substitution bash would run.
func hasExpansion(s string) bool {
	return strings.Contains(s, "$(") || strings.Contains(s, "`") || strings.Contains(s, "<(") || strings.Contains(s, ">(")
}

// testBuiltin checks test and [: -v NAME and -R NAME evaluate NAME's
// subscript.
func (c *checker) testBuiltin(args []field) {
	for i := 1; i+1 < len(args); i++ {
		if !args[i].dyn && (args[i].s == "-v" || args[i].s == "-R") {
			c.nameOperand(args[0].s+" "+args[i].s, args[i+1])
		}
	}
}

// printfBuiltin checks printf -v NAME.
func (c *checker) printfBuiltin(args []field) {
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a.s == "-v" && i+1 < len(args):
			c.assignedName("printf -v", args[i+1])
			c.nameOperand("printf -v", args[i+1])
			c.printfSets(args[i+1].s, args[i+2:])
			return
		case strings.HasPrefix(a.s, "-v") && !a.dyn:
			c.nameOperand("printf -v", field{s: a.s[2:]})
			c.printfSets(a.s[2:], args[i+1:])
			return
		case a.s == "--", !strings.HasPrefix(a.s, "-"):
			return
		}
	}
}

// printfSets records what printf -v NAME [--] FORMAT ARGS... assigns:
// the format and its arguments run together (which holds what %s would
// put there), as text arithmetic may later evaluate.
func (c *checker) printfSets(name string, rest []field) {
	if strings.HasPrefix(name, aliasArray) {
		out, ok := printfOutput(rest)
		for _, f := range rest {
			ok = ok && !f.dyn
		}
		c.aliasOperand("printf -v", field{s: name}, field{s: out}, ok)
	}
	if !isParamName(name) || isDigits(name) {
		return
	}
	if len(rest) > 0 && rest[0].s == "--" {
		rest = rest[1:]
	}
	var b strings.Builder
	for _, f := range rest {
		if f.dyn {
			c.setVar(name, "", false)
			return
		}
		b.WriteString(f.s)
	}
	c.setVar(name, b.String(), true)
}

// nameArgs checks the NAME operands of declare, local, unset and the
// like.
func (c *checker) nameArgs(name string, args []field) {
	for _, f := range args[1:] {
		if !strings.HasPrefix(f.s, "-") && !strings.HasPrefix(f.s, "+") {
			c.nameOperand(name, f)
		}
	}
}

// arithm checks an arithmetic expression (see above).
func (c *checker) arithm(x syntax.ArithmExpr) {
	if x == nil {
		return
	}
	syntax.Walk(x, func(n syntax.Node) bool {
		if c.done() {
			return false
		}
		if x, ok := n.(syntax.ArithmExpr); ok {
			c.arithAssigns(x)
		}
		w, ok := n.(*syntax.Word)
		if !ok {
			return true
		}
		c.arithWord("arithmetic", w)
		return false
	})
}

// arithWord checks one operand of arithmetic: a variable read at run
// time asks; a known value or literal text with a substitution is
// analysed.
func (c *checker) arithWord(what string, w *syntax.Word) {
	name := w.Lit()
	if p, ok := soleParam(w); ok {
		name = p
	}
	if name == "_" {
		// the last word of the previous command, whatever the text
		// wrote there (echo 'a[$(cmd)]'; echo $((_)) runs cmd)
		c.report(Verdict{Decision: Ask, Rule: "dynamic-eval",
			Reason:      what + " evaluates $_, the previous command's last argument, as arithmetic: a subscript such as x[$(cmd)] in it runs cmd",
			Alternative: "use a variable with a number in it"})
		return
	}
	if isParamName(name) && !isDigits(name) {
		st, ok := c.vars[name]
		switch {
		case st.taint:
			c.report(askEvalInput(what, field{s: name}))
		case st.known && !st.array && hasExpansion(st.val):
			c.evaluated(st.val)
		case !ok:
			// a variable the text did not set (the environment's) may
			// name one it did: bash evaluates that one's value in turn
			for _, v := range c.vars {
				if v.known && !v.array && hasExpansion(v.val) {
					c.evaluated(v.val)
				}
			}
		}
		return
	}
	if c.taintedWord(w) {
		c.report(askEvalInput(what, field{s: dynMark}))
		return
	}
	if v, ok := c.literal(w); ok && hasExpansion(v) {
		c.evaluated(v)
	}
}

// evaluated analyses text bash evaluates as arithmetic, once per distinct
// text: a variable's value may be used many times.
func (c *checker) evaluated(text string) {
	if c.arithSeen[text] {
		return
	}
	if c.arithSeen == nil {
		c.arithSeen = make(map[string]bool)
	}
	c.arithSeen[text] = true
	c.extracted(": "+text, stdinSrc{})
}

// soleParam returns the name of w when w is a plain $NAME or ${NAME}.
func soleParam(w *syntax.Word) (string, bool) {
	if len(w.Parts) != 1 {
		return "", false
	}
	p, ok := w.Parts[0].(*syntax.ParamExp)
	if !ok || p.Param == nil || p.Index != nil || p.Slice != nil || p.Repl != nil || p.Exp != nil || p.Excl || p.Length {
		return "", false
	}
	return p.Param.Value, true
}

// paramCode checks the arithmetic of a parameter expansion (a subscript,
// an offset) and ${!x}, which expands the variable x names, subscript
// included.
func (c *checker) paramCode(p *syntax.ParamExp) {
	if p.Index != nil {
		if w, ok := p.Index.(*syntax.Word); !ok || w.Lit() != "@" && w.Lit() != "*" {
			c.arithm(p.Index)
		}
	}
	if p.Slice != nil {
		c.arithm(p.Slice.Offset)
		c.arithm(p.Slice.Length)
	}
	c.indirectAssign(p)
	if p.Excl && c.taintedParam(p) {
		c.report(askEvalInput("${!"+p.Param.Value+"}", field{s: dynMark}))
	}
	if p.Exp != nil && (p.Exp.Op == syntax.AssignUnset || p.Exp.Op == syntax.AssignUnsetOrNull) && p.Param != nil && p.Param.Value == aliasArray {
		c.assignAliases(&syntax.Assign{Name: p.Param, Index: p.Index, Value: p.Exp.Word}) // taken as assigning
	}
	if p.Exp != nil && (p.Exp.Op == syntax.AssignUnset || p.Exp.Op == syntax.AssignUnsetOrNull) && p.Param != nil && isParamName(p.Param.Value) {
		// ${x:=v} assigns v to x when x is unset (or empty): what
		// arithmetic later evaluates
		if st, ok := c.vars[p.Param.Value]; !ok || !st.known || st.val == "" {
			val, known := c.literal(p.Exp.Word)
			c.setVar(p.Param.Value, val, known)
		}
	}
}

// testCode checks the words [[ ]] evaluates: the operands of its
// arithmetic comparisons and the names of -v and -R.
func (c *checker) testCode(n syntax.Node) {
	switch n := n.(type) {
	case *syntax.BinaryTest:
		switch n.Op {
		case syntax.TsEql, syntax.TsNeq, syntax.TsLss, syntax.TsGtr, syntax.TsLeq, syntax.TsGeq:
			for _, x := range []syntax.TestExpr{n.X, n.Y} {
				if w, ok := x.(*syntax.Word); ok {
					c.arithWord("[[ "+n.Op.String()+" ]]", w)
				}
			}
		}
	case *syntax.UnaryTest:
		if w, ok := n.X.(*syntax.Word); ok && (n.Op == syntax.TsVarSet || n.Op == syntax.TsRefVar) {
			for _, f := range c.resolveWord(w, -1, nil) {
				c.nameOperand("[[ "+n.Op.String()+" ]]", f)
			}
		}
	}
}

// taintedParam reports whether p expands a variable read at run time.
func (r *resolver) taintedParam(p *syntax.ParamExp) bool {
	return p.Param != nil && r.vars[p.Param.Value].taint
}

// taintedWord reports whether w expands a variable read at run time, also
// inside substitutions.
func (r *resolver) taintedWord(w syntax.Node) bool {
	found := false
	syntax.Walk(w, func(n syntax.Node) bool {
		if p, ok := n.(*syntax.ParamExp); ok && r.taintedParam(p) {
			found = true
		}
		return !found
	})
	return found
}
