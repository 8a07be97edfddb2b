package safety

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Names only known at run time. A builtin that assigns to the variable
// its operand names (printf -v, declare, typeset, local, export,
// readonly, read, mapfile, readarray, getopts, an arithmetic assignment,
// a name reference) assigns to BASH_ALIASES when the name it computes at
// run time says so (n=$(cat f); printf -v "$n[ls]" 'rm -rf x'; ls runs
// rm): a name whose variable part is only known at run time asks, as an
// alias only known at run time does. A literal variable part with a
// subscript only known at run time (x[$i]) is an ordinary variable.
// export and readonly without -a/-A take no subscript and no compound
// value, so the only alias a name of theirs can define is 0 (element 0 of
// BASH_ALIASES): alias 0 is then only known at run time, and a later
// command named 0 asks, while export "$kv" itself runs.

// askRuntimeName is the verdict on an assignment to a variable whose name
// is only known at run time.
func askRuntimeName(what string, f field) Verdict {
	name, _, _ := strings.Cut(f.s, "=")
	return Verdict{Decision: Ask, Rule: "dynamic-command",
		Reason: what + " assigns to a variable whose name (" + showDyn(name) +
			") is only known at run time: it may define an alias (BASH_ALIASES[NAME]) that a later command runs",
		Alternative: "write the variable's name literally"}
}

// runtimeName reports whether an assigned name's variable part (before
// a subscript, += or =) is only known at run time.
func runtimeName(f field) bool {
	if !f.dyn {
		return false
	}
	name, _, _ := strings.Cut(f.s, "=")
	base, _, _ := strings.Cut(name, "[")
	return strings.Contains(base, dynMark) || base == ""
}

// assignedName checks NAME, the operand of a builtin that assigns to
// the variable it names (see above): only known at run time, it asks.
func (c *checker) assignedName(what string, f field) {
	if runtimeName(f) {
		c.report(askRuntimeName(what, f))
	}
}

// declName checks the NAME[=VALUE] operand of declare, typeset, local,
// export or readonly (what), flags their options so far: export and
// readonly without -a or -A can only reach element 0 of BASH_ALIASES.
func (c *checker) declName(what, flags string, f field) {
	if !runtimeName(f) {
		return
	}
	if (what == "export" || what == "readonly") && !strings.ContainsAny(flags, "aAn") {
		c.setAlias("0", field{s: dynMark, dyn: true, word: -1})
		return
	}
	c.report(askRuntimeName(what, f))
}

// declOperands checks the operands of declare and the like run as a
// command (see declare): options, then names.
func (c *checker) declOperands(what string, args []field) {
	flags := ""
	for _, f := range args[1:] {
		if !f.dyn && (strings.HasPrefix(f.s, "-") || strings.HasPrefix(f.s, "+")) {
			flags += f.s
			continue
		}
		c.declName(what, flags, f)
		if strings.Contains(flags, "n") && strings.Contains(f.s, "=") {
			c.namerefTarget(what+" -n", f)
		}
	}
}

// namerefTarget checks the target given to a name reference (declare -n
// ref=TARGET, or ref=TARGET later): one only known at run time asks.
func (c *checker) namerefTarget(what string, f field) {
	_, v, _ := strings.Cut(f.s, "=")
	if f.dyn && strings.Contains(v, dynMark) || f.dyn && !strings.Contains(f.s, "=") {
		c.report(askRuntimeName(what, field{s: v, dyn: true}))
	}
}

// declRef records a name declared a name reference (declare -n NAME),
// whose later assignments set its target.
func (c *checker) declRef(name string) {
	if c.namerefs == nil {
		c.namerefs = make(map[string]bool)
	}
	c.namerefs[name] = true
}

// refAssign checks an assignment to a name reference: a target only
// known at run time asks.
func (c *checker) refAssign(a *syntax.Assign) {
	if a == nil || a.Name == nil || a.Naked || a.Index != nil || a.Array != nil || !c.namerefs[a.Name.Value] {
		return
	}
	if v, ok := c.literal(a.Value); !ok {
		c.report(askRuntimeName(a.Name.Value+"=", field{s: v, dyn: true}))
	}
}

// readOperands checks the NAME operands of read (and its -a ARRAY),
// skipping the values of its other options.
func (c *checker) readOperands(args []field) {
	for i := 1; i < len(args); i++ {
		f := args[i]
		if f.s == "--" && !f.dyn {
			for _, g := range args[i+1:] {
				c.assignedName("read", g)
			}
			return
		}
		if !f.dyn && len(f.s) > 1 && f.s[0] == '-' {
			// -r, -s, -e: flags; -a -d -i -n -N -p -t -u take a value,
			// attached or next
			for k := 1; k < len(f.s); k++ {
				if strings.IndexByte("adinNptu", f.s[k]) < 0 {
					continue
				}
				val := field{s: f.s[k+1:], word: -1}
				if k+1 == len(f.s) && i+1 < len(args) {
					i++
					val = args[i]
				}
				if f.s[k] == 'a' {
					c.assignedName("read -a", val)
				}
				break
			}
			continue
		}
		c.assignedName("read", f)
	}
}

// arrayOperand checks the ARRAY operand of mapfile/readarray.
func (c *checker) arrayOperand(what string, f field) { c.assignedName(what, f) }

// getoptsName checks getopts OPTSTRING NAME [ARGS...].
func (c *checker) getoptsName(args []field) {
	if len(args) > 2 {
		c.assignedName("getopts", args[2])
		if !args[2].dyn && args[2].s == aliasArray {
			c.setAlias("0", field{s: dynMark, dyn: true, word: -1})
		}
	}
}

// arithTarget checks an arithmetic assignment (x = v, x += v, x++, ...)
// whose target is a word with an expansion: bash expands it, then
// assigns to the variable the text names ($n = 5 with
// n='BASH_ALIASES[ls]' defines alias ls). Only known at run time it asks;
// known, it names BASH_ALIASES or not.
func (c *checker) arithTarget(x syntax.ArithmExpr) {
	w, ok := x.(*syntax.Word)
	if !ok || w.Lit() != "" {
		return
	}
	v, known := c.literal(w)
	switch {
	case !known:
		c.report(askRuntimeName("arithmetic", field{s: v + dynMark, dyn: true}))
	case strings.HasPrefix(v, aliasArray):
		c.report(askDynamicAlias("arithmetic on " + v))
	}
}

// arithAssigns checks the assignments of an arithmetic expression (see
// arithTarget) and, for a word holding a whole expression only known at
// run time (let "$n[ls]=5"), an assignment whose target is not known.
func (c *checker) arithAssigns(x syntax.ArithmExpr) {
	switch x := x.(type) {
	case *syntax.BinaryArithm:
		if isArithAssign(x.Op) {
			c.arithTarget(x.X)
		}
	case *syntax.UnaryArithm:
		if x.Op == syntax.Inc || x.Op == syntax.Dec {
			c.arithTarget(x.X)
		}
	case *syntax.Word:
		if w := x.Lit(); w != "" {
			return
		}
		v, known := c.literal(x)
		if known {
			if hasAssignOp(v) && strings.HasPrefix(v, aliasArray) {
				c.report(askDynamicAlias("arithmetic " + v))
			}
			return
		}
		if k := assignOpAt(v); k >= 0 && strings.Contains(v[:k], dynMark) {
			c.report(askRuntimeName("arithmetic", field{s: v, dyn: true}))
		}
	}
}

// isArithAssign reports whether op assigns to its left operand.
func isArithAssign(op syntax.BinAritOperator) bool {
	switch op {
	case syntax.Assgn, syntax.AddAssgn, syntax.SubAssgn, syntax.MulAssgn, syntax.QuoAssgn, syntax.RemAssgn,
		syntax.AndAssgn, syntax.OrAssgn, syntax.XorAssgn, syntax.ShlAssgn, syntax.ShrAssgn:
		return true
	}
	return false
}

// hasAssignOp reports whether arithmetic text s assigns (see assignOpAt).
func hasAssignOp(s string) bool { return assignOpAt(s) >= 0 }

// assignOpAt returns the offset of the first assignment operator (=,
// +=, <<=, ..., ++, --) in arithmetic text s, or -1: an = that is not
// part of ==, !=, <= or >=.
func assignOpAt(s string) int {
	for i := 0; i < len(s); i++ {
		switch {
		case i+1 < len(s) && (s[i] == '+' && s[i+1] == '+' || s[i] == '-' && s[i+1] == '-'):
			return i
		case s[i] != '=':
			continue
		case i+1 < len(s) && s[i+1] == '=':
			i++
			continue
		}
		if i > 0 && (s[i-1] == '!' || s[i-1] == '=') {
			continue
		}
		if i > 0 && (s[i-1] == '<' || s[i-1] == '>') && (i < 2 || s[i-2] != s[i-1]) {
			continue // <= or >=, not <<= or >>=
		}
		k := i
		for k > 0 && strings.IndexByte("+-*/%&|^<>", s[k-1]) >= 0 {
			k--
		}
		return k
	}
	return -1
}

// declNaked checks a quoted or computed operand of a declaration clause
// (declare "$n[k]=v"): each word it expands to is a name (see declName).
func (c *checker) declNaked(variant, flags string, w *syntax.Word) {
	for _, f := range c.resolveWord(w, -1, nil) {
		c.declName(variant, flags, f)
		if strings.Contains(flags, "n") {
			c.namerefTarget(variant+" -n", f)
		}
	}
}

// indirectAssign checks ${!x:=v} and ${!x=v}, which assign v to the
// variable x names: one only known at run time may be BASH_ALIASES (bash
// refuses a subscript there, so only element 0), and alias 0 is then only
// known at run time.
func (c *checker) indirectAssign(p *syntax.ParamExp) {
	if !p.Excl || p.Exp == nil || p.Exp.Op != syntax.AssignUnset && p.Exp.Op != syntax.AssignUnsetOrNull || p.Param == nil {
		return
	}
	if v, ok := c.lookupVar(p.Param.Value); !ok || strings.HasPrefix(v, aliasArray) {
		c.setAlias("0", field{s: dynMark, dyn: true, word: -1})
	}
}
