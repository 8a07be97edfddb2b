package safety

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// checker walks one command's syntax tree.
type checker struct {
	resolver
	v          Verdict
	depth      int
	steps      int
	cwd        string // statically known working directory, "" if unknown
	inLoop     bool   // already iterating a for loop's static values
	nameBuf    []field
	funcs      map[string]*syntax.Stmt // bodies of the functions defined so far
	calls      map[string]bool         // function calls already followed (name and arguments)
	callDepth  int
	callWork   int                   // work spent following function calls
	frames     []map[string]savedVar // per function walk: variables to restore (local)
	appended   bool                  // the command being checked gets more arguments at run time (xargs)
	terminal   bool                  // the job's stdin is a terminal (Options.Terminal)
	gitAliases map[string]field      // aliases written by git config earlier in the command
	aliases    map[string]field      // shell aliases defined earlier in the command
	namerefs   map[string]bool       // names declared name references (declare -n) earlier in the command
	discard    string                // the first git command found that discards uncommitted work (see gitDiscards)
	expanding  map[string]string     // shell aliases being expanded: their values
	aliasText  bool                  // the next nested text is an alias's expansion (see nested)
	workDir    string                // Options.WorkDir
	lenient    bool                  // nested code that does not parse asks (see extracted)
	subIn      stdinSrc              // the standard input of $(...) and <(...) in the statement being checked
	arithSeen  map[string]bool       // texts evaluated as arithmetic already analysed (see evaluated)
	fedFiles   map[string]bool       // files written from the job's input sent later (see fedFile)
	fed        fedRun                // files written from the input sent later, and what may run them (see fedRun)

	// A blind git add (git add -A) is judged by what follows it.
	addAll      string // its offending argument, "" if none yet
	reviewed    bool   // a git command showing the state (git diff --cached) followed it
	afterAddAll bool   // a command that may act on what was staged followed it
}

// savedVar is a variable's state before a function made it local.
type savedVar struct {
	st  varState
	set bool
}

// posParams is a saved set of positional parameters.
type posParams struct {
	params      []string
	known, open bool
	arg0        *string
}

func (c *checker) saveParams() posParams {
	return posParams{c.params, c.posKnown, c.posOpen, c.arg0}
}

func (c *checker) restoreParams(p posParams) {
	c.params, c.posKnown, c.posOpen, c.arg0 = p.params, p.known, p.open, p.arg0
}

// enterFunc starts walking a function body with the positional parameters
// set to args, or unknown when args is nil; leaveFunc restores the
// caller's parameters and the variables the body made local.
func (c *checker) enterFunc(args []field) posParams {
	saved := c.saveParams()
	if args != nil {
		c.setParams(args)
	} else {
		c.params, c.posKnown, c.posOpen = nil, false, false
	}
	c.frames = append(c.frames, nil)
	c.callDepth++
	return saved
}

func (c *checker) leaveFunc(saved posParams) {
	c.callDepth--
	top := c.frames[len(c.frames)-1]
	c.frames = c.frames[:len(c.frames)-1]
	for name, sv := range top {
		if sv.set {
			c.vars[name] = sv.st
		} else {
			delete(c.vars, name)
		}
	}
	c.restoreParams(saved)
}

// local remembers name's state so that leaving the function restores it.
func (c *checker) local(name string) {
	if len(c.frames) == 0 {
		return
	}
	top := &c.frames[len(c.frames)-1]
	if _, ok := (*top)[name]; ok {
		return
	}
	if *top == nil {
		*top = make(map[string]savedVar)
	}
	st, ok := c.vars[name]
	(*top)[name] = savedVar{st: st, set: ok}
}

func (c *checker) done() bool { return c.v.Decision == Block }

// report records v when it is more severe than what was found so far.
func (c *checker) report(v Verdict) {
	if v.Decision.severity() > c.v.Decision.severity() {
		c.v = v
	}
}

func (c *checker) stmts(ss []*syntax.Stmt, piped stdinSrc) {
	for _, s := range ss {
		if c.done() {
			return
		}
		c.stmt(s, piped)
	}
}

// stdinSrc says where a simple command's standard input comes from.
type stdinSrc struct {
	piped bool   // a pipe from a previous command
	later bool   // with piped: the job's stdin, input sent later (Options.StdinFed)
	code  string // heredoc or here-string text
	isDoc bool   // code is set
	dyn   bool   // code has parts only known at run time
	sub   bool   // those include a command substitution
}

func (c *checker) stmt(s *syntax.Stmt, piped stdinSrc) {
	if s == nil || c.done() {
		return
	}
	c.steps++
	if c.steps > maxSteps {
		c.report(tooComplex)
		return
	}
	if s.Background {
		piped = stdinSrc{} // bash -c gives background commands /dev/null
	}
	savedSub := c.subIn
	c.subIn = piped
	c.stmtIn(s, piped)
	c.subIn = savedSub
}

// stmtIn checks one statement whose standard input is piped.
func (c *checker) stmtIn(s *syntax.Stmt, piped stdinSrc) {
	in := piped
	for _, r := range s.Redirs {
		c.redirect(r)
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			in = stdinSrc{isDoc: true}
			in.code, in.dyn, in.sub = c.docText(r.Hdoc)
			c.wordSubs(r.Hdoc)
		case syntax.WordHdoc:
			in = stdinSrc{isDoc: true}
			fs := c.resolveWord(r.Word, -1, nil)
			var b strings.Builder
			for i, f := range fs {
				if i > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(f.s)
				in.dyn = in.dyn || f.dyn
				in.sub = in.sub || f.sub
			}
			in.code = b.String()
		case syntax.RdrIn, syntax.DplIn:
			// < <(curl ...) is as unknown as a pipe; < file is a file.
			in = stdinSrc{piped: hasProcSubst(r.Word)}
		}
	}
	if c.done() {
		return
	}
	if in.piped && in.later {
		c.fed.redirs(s)
	}
	if _, ok := s.Cmd.(*syntax.CallExpr); ok && in.piped && in.later {
		c.fedRedirs(s.Redirs)
	}
	switch x := s.Cmd.(type) {
	case *syntax.CallExpr:
		c.call(x, in)
	case *syntax.BinaryCmd:
		if x.Op == syntax.Pipe || x.Op == syntax.PipeAll {
			c.stmt(x.X, in)
			if code, ok := c.staticOutput(x.X, in, 0); ok {
				c.stmt(x.Y, stdinSrc{isDoc: true, code: code})
			} else {
				// What the left side writes may be the job's input
				// sent later, passed on.
				c.stmt(x.Y, stdinSrc{piped: true, later: in.later && !readsOwnStdin(x.X)})
			}
		} else {
			c.stmt(x.X, in)
			c.stmt(x.Y, in)
		}
	case *syntax.Subshell:
		c.stmts(x.Stmts, in)
	case *syntax.Block:
		c.stmts(x.Stmts, in)
	case *syntax.IfClause:
		for ic := x; ic != nil && !c.done(); ic = ic.Else {
			c.stmts(ic.Cond, in)
			c.stmts(ic.Then, in)
		}
	case *syntax.WhileClause:
		c.stmts(x.Cond, in)
		c.stmts(x.Do, in)
	case *syntax.ForClause:
		c.forClause(x, in)
	case *syntax.CaseClause:
		c.wordSubs(x.Word)
		for _, it := range x.Items {
			for _, p := range it.Patterns {
				c.wordSubs(p)
			}
			c.stmts(it.Stmts, in)
		}
	case *syntax.FuncDecl:
		c.funcDecl(x)
	case *syntax.DeclClause:
		c.decl(x)
	case *syntax.TimeClause:
		c.stmt(x.Stmt, in)
	case *syntax.CoprocClause:
		c.stmt(x.Stmt, stdinSrc{})
	case *syntax.TestDecl:
		c.stmt(x.Body, in)
	case nil:
	default: // ArithmCmd, TestClause, LetClause: only substitutions matter
		c.nodeSubs(x)
	}
}

func (c *checker) forClause(x *syntax.ForClause, piped stdinSrc) {
	wi, ok := x.Loop.(*syntax.WordIter)
	if !ok {
		c.nodeSubs(x.Loop)
		c.stmts(x.Do, piped)
		return
	}
	var vals []field
	dyn := false
	for _, w := range wi.Items {
		c.wordSubs(w)
		vals = c.resolveWord(w, -1, vals)
	}
	for _, v := range vals {
		dyn = dyn || v.dyn
	}
	name := ""
	if wi.Name != nil {
		name = wi.Name.Value
	}
	if c.namerefs[name] && dyn {
		c.report(askRuntimeName("for "+name+" in", field{s: dynMark, dyn: true}))
	}
	if name == aliasArray {
		// for BASH_ALIASES in V...: alias 0=V, one after the other
		for _, v := range vals {
			c.putAlias("0", v.s, !v.dyn, false)
		}
	}
	if name == "" || dyn || len(vals) == 0 || len(vals) > maxLoopIter || c.inLoop {
		if name != "" {
			c.setVar(name, "", false)
		}
		c.stmts(x.Do, piped)
		return
	}
	c.inLoop = true
	for _, v := range vals {
		if c.done() {
			break
		}
		c.setVar(name, v.s, true)
		c.stmts(x.Do, piped)
	}
	c.inLoop = false
}

// assign records constant assignments (X=val, export X=val, a=(x y),
// a+=(z), a[1]=x) and checks substitutions in the value.
func (c *checker) assign(a *syntax.Assign, record bool) {
	if a == nil {
		return
	}
	c.wordSubs(a.Value)
	if a.Array != nil {
		for _, e := range a.Array.Elems {
			c.wordSubs(e.Value)
		}
	}
	if a.Index != nil {
		c.arithm(a.Index)
	}
	if a.Array != nil {
		for _, e := range a.Array.Elems {
			if e.Index != nil {
				c.arithm(e.Index)
			}
		}
	}
	if a.Naked && a.Name == nil && a.Value != nil {
		for _, f := range c.resolveWord(a.Value, -1, nil) {
			if !strings.HasPrefix(f.s, "-") && !strings.HasPrefix(f.s, "+") {
				c.nameOperand("declare", f)
				if _, v, ok := strings.Cut(f.s, "="); ok {
					c.aliasOperand("declare", f, field{s: v, dyn: f.dyn}, true)
				}
			}
		}
	}
	if a.Name != nil && !a.Naked && a.Name.Value == aliasArray {
		c.assignAliases(a)
	}
	c.refAssign(a)
	if v, _ := c.literal(a.Value); a.Name != nil && !a.Naked && strings.HasPrefix(v, aliasArray) {
		// the target of a name reference (declare -n ref; ref=BASH_ALIASES)
		c.report(askDynamicAlias(a.Name.Value + "=" + aliasArray))
	}
	if !record || a.Name == nil || a.Naked {
		return
	}
	name := a.Name.Value
	switch {
	case a.Array != nil:
		c.assignArray(name, a.Array, a.Append)
	case a.Index != nil:
		c.assignElem(name, a.Index, a.Value)
	case a.Append:
		prev, ok := c.lookup(&syntax.ParamExp{Param: a.Name})
		val, ok2 := c.literal(a.Value)
		c.setVar(name, prev+val, ok && ok2)
	default:
		val, ok := c.literal(a.Value)
		c.setVar(name, val, ok)
		if !ok && a.Value != nil && c.taintedWord(a.Value) {
			c.taint(name)
		}
		if !ok && a.Value != nil && c.topWord(a.Value) {
			st := c.vars[name]
			st.top = true
			c.vars[name] = st
		}
	}
}

// assignArray records name=(...) or name+=(...).
func (c *checker) assignArray(name string, arr *syntax.ArrayExpr, appending bool) {
	var list []string
	if appending {
		st, ok := c.vars[name]
		switch {
		case !ok || !st.known:
			c.setArray(name, nil, false)
			return
		case st.array:
			list = st.list
		default:
			list = []string{st.val}
		}
	}
	var fs []field
	for _, e := range arr.Elems {
		fs = c.resolveWord(e.Value, -1, fs[:0])
		if e.Index != nil {
			i, ok := c.arith(e.Index, 0)
			switch {
			case !ok || i < 0 || i > len(list) || len(fs) != 1:
				c.setArray(name, nil, false) // sparse or associative
				return
			case i < len(list):
				list[i] = fs[0].s
				continue
			}
		}
		for _, f := range fs {
			list = append(list, f.s)
		}
	}
	c.setArray(name, list, true)
}

// assignElem records name[index]=value.
func (c *checker) assignElem(name string, index syntax.ArithmExpr, w *syntax.Word) {
	st, ok := c.vars[name]
	i, ok2 := c.arith(index, 0)
	val, ok3 := c.literal(w)
	if !ok || !st.known || !ok2 || !ok3 || i < 0 {
		c.setArray(name, nil, false)
		return
	}
	if !st.array {
		st.list = []string{st.val}
	}
	switch {
	case i < len(st.list):
		list := append([]string(nil), st.list...)
		list[i] = val
		c.setArray(name, list, true)
	case i == len(st.list):
		c.setArray(name, append(st.list, val), true)
	default:
		c.setArray(name, nil, false)
	}
}

// decl handles declare/local/export/readonly/typeset: constant values are
// recorded, except for associative arrays and name references; in a
// function, local/declare/typeset variables are restored when it returns.
func (c *checker) decl(x *syntax.DeclClause) {
	scoped := x.Variant != nil && (x.Variant.Value == "local" || x.Variant.Value == "declare" || x.Variant.Value == "typeset")
	opaque := false
	variant, flags := "declare", ""
	if x.Variant != nil {
		variant = x.Variant.Value
	}
	for _, a := range x.Args {
		if a.Naked && a.Name == nil && a.Value != nil {
			if s := a.Value.Lit(); strings.HasPrefix(s, "-") {
				opaque = opaque || strings.ContainsAny(s, "An")
				scoped = scoped && !strings.Contains(s, "g")
				flags += s
			} else {
				c.declNaked(variant, flags, a.Value)
			}
		}
		if a.Name != nil && strings.Contains(flags, "n") {
			c.declRef(a.Name.Value)
			if a.Value != nil {
				if v, ok := c.literal(a.Value); !ok {
					c.report(askRuntimeName(variant+" -n", field{s: v, dyn: true}))
				}
			}
		}
		if a.Name != nil && scoped {
			c.local(a.Name.Value)
		}
		if opaque && a.Name != nil && !a.Naked {
			c.assign(a, false)
			c.setVar(a.Name.Value, "", false)
			continue
		}
		c.assign(a, true)
	}
	c.envAssigns(x.Args, stdinSrc{})
}

// envAssigns checks the assignments of a command or declaration that run
// code (see envCode).
func (c *checker) envAssigns(as []*syntax.Assign, in stdinSrc) {
	var vars []envVar
	for _, a := range as {
		if a == nil || a.Name == nil || a.Naked || a.Array != nil || a.Index != nil {
			continue
		}
		if !commandVars[a.Name.Value] && persistVars[a.Name.Value] == "" && !strings.HasPrefix(a.Name.Value, "GIT_CONFIG_") {
			continue
		}
		val, ok := c.literal(a.Value)
		vars = append(vars, envVar{name: a.Name.Value, val: field{s: val, dyn: !ok, word: -1}})
	}
	if len(vars) > 0 {
		c.envCode(vars, in)
	}
}

func (c *checker) call(x *syntax.CallExpr, in stdinSrc) {
	for _, a := range x.Assigns {
		c.assign(a, len(x.Args) == 0)
		if v, ok := c.literal(a.Value); ok && a.Name != nil && in.piped && in.later && len(x.Args) > 0 && isStdinPath(v) {
			c.report(Verdict{Decision: Ask, Rule: "stdin-program",
				Reason:      a.Name.Value + " names the job's input (" + v + ") as a file, which the program may read as configuration or code sent later",
				Alternative: "name a file written in the command instead"})
		}
	}
	c.envAssigns(x.Assigns, in)
	if len(x.Args) == 0 {
		return
	}
	// Substitutions first: checking them may recurse into call, which
	// reuses nameBuf.
	for _, w := range x.Args {
		c.wordSubs(w)
	}
	fields := c.nameBuf[:0]
	for i, w := range x.Args {
		fields = c.resolveWord(w, i, fields)
	}
	c.nameBuf = fields[:0]
	if c.done() || len(fields) == 0 {
		return
	}
	// copy: argv may recurse and reuse nameBuf
	argv := make([]field, len(fields))
	copy(argv, fields)
	if body, ok := c.funcs[argv[0].s]; ok && !argv[0].dyn {
		c.callFunc(body, argv, in)
	}
	if in.piped && in.later {
		c.fedArgs(argv)
		c.fed.args(x, argv)
	}
	if c.fed.on && c.funcs[argv[0].s] == nil {
		c.fed.ran(x, argv[0])
	}
	if c.fedFile(argv[0]) {
		c.report(askFedFile(argv[0].s))
	}
	c.argv(argv, in)
}

// Bounds on following function calls.
const (
	maxCalls     = 64      // distinct calls followed per command
	maxCallDepth = 16      // calls nested in calls
	maxCallWork  = 1 << 20 // work spent in calls before no more are followed
)

// callFunc checks the body of a shell function called with static words,
// with the positional parameters bound to them. Each distinct call is
// followed once, within maxCalls and maxCallDepth.
func (c *checker) callFunc(body *syntax.Stmt, argv []field, in stdinSrc) {
	if c.callDepth >= maxCallDepth || len(c.calls) >= maxCalls || c.callWork > maxCallWork {
		return
	}
	var key strings.Builder
	for _, f := range argv {
		key.WriteString(f.s)
		key.WriteByte(0xff)
	}
	if c.calls[key.String()] {
		return
	}
	if c.calls == nil {
		c.calls = make(map[string]bool)
	}
	c.calls[key.String()] = true
	start := c.work
	saved := c.enterFunc(argv[1:len(argv):len(argv)])
	c.stmt(body, in)
	c.leaveFunc(saved)
	if c.callDepth == 0 {
		c.callWork += c.work - start
	}
}

// wordSubs checks the commands inside $(...), `...` and <(...) of a word.
func (c *checker) wordSubs(w *syntax.Word) {
	if w == nil {
		return
	}
	simple := true
	for _, p := range w.Parts {
		switch p.(type) {
		case *syntax.Lit, *syntax.SglQuoted:
		default:
			simple = false
		}
	}
	if !simple {
		c.nodeSubs(w)
	}
}

// nodeSubs walks any node for command and process substitutions.
func (c *checker) nodeSubs(n syntax.Node) {
	if n == nil {
		return
	}
	syntax.Walk(n, func(n syntax.Node) bool {
		if c.done() {
			return false
		}
		switch n := n.(type) {
		case *syntax.CmdSubst:
			c.stmts(n.Stmts, c.subIn)
			return false
		case *syntax.ProcSubst:
			c.stmts(n.Stmts, c.subIn)
			return false
		case *syntax.ArithmExp:
			c.arithm(n.X)
		case *syntax.ArithmCmd:
			c.arithm(n.X)
		case *syntax.LetClause:
			for _, x := range n.Exprs {
				c.arithm(x)
			}
		case *syntax.CStyleLoop:
			c.arithm(n.Init)
			c.arithm(n.Cond)
			c.arithm(n.Post)
		case *syntax.ParamExp:
			c.paramCode(n)
		case *syntax.BinaryTest, *syntax.UnaryTest:
			c.testCode(n)
		}
		return true
	})
}

// nestedParams checks code run by a new shell whose positional
// parameters are params (sh -c CODE NAME ARGS..., git's shell aliases).
// A new shell has none of this one's aliases (and expands its own
// afresh: alias g='bash -c "alias g=…; g"' runs the inner g).
func (c *checker) nestedParams(code string, zsh bool, in stdinSrc, arg0 *field, params []field) {
	saved := c.saveParams()
	aliases := c.aliases
	c.aliases = nil
	c.setParams(params)
	c.arg0 = nil
	if arg0 != nil && !arg0.dyn && !arg0.glob {
		c.arg0 = &arg0.s
	}
	c.nested(code, zsh, in)
	c.restoreParams(saved)
	c.aliases = aliases
}

// extracted checks a shell command line found in another program's
// language, argument or setting (awk's system(), git's core.pager): like
// nested, but a text that does not parse asks rather than blocks, since
// finding it was a heuristic.
func (c *checker) extracted(code string, in stdinSrc) {
	saved := c.lenient
	c.lenient = true
	c.nested(code, false, in)
	c.lenient = saved
}

// nested re-parses and checks shell code found inside the command.
func (c *checker) nested(code string, zsh bool, in stdinSrc) {
	aliasText := c.aliasText
	c.aliasText = false
	if c.depth >= maxNesting {
		c.report(Verdict{Decision: Block, Rule: "too-deep",
			Reason:      "nested shell code is too deep to analyse",
			Alternative: "run the inner command directly instead of wrapping it in further shells"})
		return
	}
	c.work += len(code)
	f, err := parse(code, zsh)
	if err != nil && zsh {
		f, err = parse(code, false)
	}
	if err == errTooDeep {
		c.report(tooComplex)
		return
	}
	if err != nil && c.lenient {
		c.report(Verdict{Decision: Ask, Rule: "unparsed-code",
			Reason:      "cannot parse a shell command found in another program's argument or setting: " + oneLine(err.Error()),
			Alternative: "run the shell command directly in this command"})
		return
	}
	if err != nil {
		v := parseErrorVerdict(err)
		v.Reason = "cannot parse nested shell code: " + oneLine(err.Error())
		c.report(v)
		return
	}
	// An alias's expansion does not expand that alias again; any other
	// text is parsed when it runs (eval, source, a new shell), after the
	// expansions around it ended, and expands every alias afresh.
	expanding := c.expanding
	if !aliasText {
		c.expanding = nil
	}
	c.depth++
	saved := c.cwd
	c.stmts(f.Stmts, in)
	c.cwd = saved
	c.depth--
	c.expanding = expanding
}

func (c *checker) redirect(r *syntax.Redirect) {
	c.wordSubs(r.Word)
	switch r.Op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrInOut, syntax.RdrClob,
		syntax.RdrAll, syntax.AppAll, syntax.RdrAllClob, syntax.AppAllClob, syntax.DplOut:
	default:
		return
	}
	t, ok := c.wordLit(r.Word)
	if !ok {
		return
	}
	c.persistWrite(field{s: t})
	if dev, ok := blockDevice(t); ok {
		c.report(Verdict{Decision: Block, Rule: "write-device",
			Reason:      "redirection writes directly to block device " + dev + ", destroying its data",
			Alternative: "write to a regular file (e.g. > ./disk.img) and let the user flash devices themselves"})
	}
}

// readsOwnStdin reports whether s has a redirection of its standard input
// (< file, a heredoc), so that it does not read what its statement gets.
func readsOwnStdin(s *syntax.Stmt) bool {
	for _, r := range s.Redirs {
		switch r.Op {
		case syntax.RdrIn, syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc, syntax.DplIn:
			if r.N == nil || r.N.Value == "0" {
				return true
			}
		}
	}
	return false
}

func hasProcSubst(w *syntax.Word) bool {
	if w == nil {
		return false
	}
	for _, p := range w.Parts {
		if _, ok := p.(*syntax.ProcSubst); ok {
			return true
		}
	}
	return false
}
