package safety

import (
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

const (
	// MaxCommandBytes bounds the analyser's work, not what can run: Check
	// blocks anything longer (rule "too-long"). It is deliberately separate
	// from, and larger than, engine.MaxCommandBytes (131071 bytes, Linux's
	// limit on one argument), which the engine checks first, so no command
	// the engine would run ever reaches this bound.
	MaxCommandBytes = 1 << 20
	// MaxNesting bounds how deep nested shell code (bash -c, eval, su -c,
	// heredocs fed to a shell, ...) is re-parsed; deeper nesting is blocked
	// (rule "too-deep").
	MaxNesting = 8
	// maxSteps bounds the statements visited for one command.
	maxSteps = 200000
	// maxLoopIter bounds how many static values of a for loop are checked.
	maxLoopIter = 16
)

// Check analyses command (bash syntax) and returns whether it may run. It
// never executes anything and is safe for concurrent use.
func Check(command string) Verdict {
	if len(command) > MaxCommandBytes {
		return Verdict{Decision: Block, Rule: "too-long",
			Reason:      "command is too long to analyse (over 1 MiB)",
			Alternative: "write the script to a file and run it with bash FILE"}
	}
	if strings.TrimSpace(command) == "" {
		return Verdict{Decision: Allow}
	}
	f, err := parse(command, false)
	if err == errTooDeep {
		return tooComplex
	}
	if err != nil {
		return finish(parseErrorVerdict(err))
	}
	c := checker{}
	c.v.Decision = Allow
	c.stmts(f.Stmts, stdinSrc{})
	return finish(c.v)
}

// maxReason caps the length of a verdict's reason.
const maxReason = 240

// finish makes the reason one printable line of bounded length: words from
// the command may carry newlines, control bytes or be huge.
func finish(v Verdict) Verdict {
	r := v.Reason
	clean := len(r) <= maxReason
	for i := 0; i < len(r) && clean; i++ {
		if r[i] < 0x20 || r[i] == 0x7f {
			clean = false
		}
	}
	if clean && utf8.ValidString(r) {
		return v
	}
	var b strings.Builder
	n := 0
	for _, ch := range r {
		if n >= maxReason {
			b.WriteString("…")
			break
		}
		switch {
		case ch == 0:
			b.WriteString("$…")
		case ch == 1:
			b.WriteByte('~')
		case ch < 0x20 || ch == 0x7f:
			b.WriteByte(' ')
		case ch == utf8.RuneError:
			b.WriteByte('?')
		default:
			b.WriteRune(ch)
		}
		n++
	}
	v.Reason = b.String()
	return v
}

var tooComplex = Verdict{Decision: Block, Rule: "too-complex",
	Reason:      "command is too complex to analyse (too many statements or too deeply nested)",
	Alternative: "split it into smaller commands or put it in a script file"}

func parseErrorVerdict(err error) Verdict {
	return Verdict{Decision: Block, Rule: "parse-error",
		Reason:      "cannot parse command: " + oneLine(err.Error()),
		Alternative: "fix the shell syntax (unbalanced quotes, brackets, heredoc or keywords) and run it again"}
}

func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// checker walks one command's syntax tree.
type checker struct {
	resolver
	v       Verdict
	depth   int
	steps   int
	cwd     string // statically known working directory, "" if unknown
	inLoop  bool   // already iterating a for loop's static values
	nameBuf []field
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
	code  string // heredoc or here-string text
	isDoc bool   // code is set
	dyn   bool   // code has parts only known at run time
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
	in := piped
	for _, r := range s.Redirs {
		c.redirect(r)
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			in = stdinSrc{isDoc: true}
			txt, ok := c.docText(r.Hdoc)
			in.code, in.dyn = txt, !ok
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
	switch x := s.Cmd.(type) {
	case *syntax.CallExpr:
		c.call(x, in)
	case *syntax.BinaryCmd:
		if x.Op == syntax.Pipe || x.Op == syntax.PipeAll {
			c.stmt(x.X, in)
			if code, ok := c.staticOutput(x.X); ok {
				c.stmt(x.Y, stdinSrc{isDoc: true, code: code})
			} else {
				c.stmt(x.Y, stdinSrc{piped: true})
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
		for _, a := range x.Args {
			c.assign(a, true)
		}
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

// assign records constant assignments (X=val, export X=val) and checks
// substitutions in the value.
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
	if !record || a.Name == nil || a.Naked {
		return
	}
	if a.Index != nil || a.Array != nil || a.Append {
		c.setVar(a.Name.Value, "", false)
		return
	}
	if a.Value == nil {
		c.setVar(a.Name.Value, "", true)
		return
	}
	var fb fieldBuilder
	for i, p := range a.Value.Parts {
		// Assignment values are not split or brace-expanded.
		switch p := p.(type) {
		case *syntax.Lit:
			if i == 0 {
				tilde(&fb.b, p.Value)
			} else {
				unescape(&fb.b, p.Value, false)
			}
		case *syntax.SglQuoted:
			if p.Dollar {
				ansiC(&fb.b, p.Value)
			} else {
				fb.b.WriteString(p.Value)
			}
		case *syntax.DblQuoted:
			c.dqParts(&fb, p.Parts)
		case *syntax.ParamExp:
			if v, ok := c.lookup(p); ok {
				fb.b.WriteString(v)
			} else {
				fb.dyn = true
			}
		default:
			fb.dyn = true
		}
	}
	c.setVar(a.Name.Value, fb.b.String(), !fb.dyn)
}

func (c *checker) call(x *syntax.CallExpr, in stdinSrc) {
	for _, a := range x.Assigns {
		c.assign(a, len(x.Args) == 0)
	}
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
	c.argv(argv, in)
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
			c.stmts(n.Stmts, stdinSrc{})
			return false
		case *syntax.ProcSubst:
			c.stmts(n.Stmts, stdinSrc{})
			return false
		}
		return true
	})
}

// nested re-parses and checks shell code found inside the command.
func (c *checker) nested(code string, zsh bool, in stdinSrc) {
	if c.depth >= MaxNesting {
		c.report(Verdict{Decision: Block, Rule: "too-deep",
			Reason:      "nested shell code is too deep to analyse",
			Alternative: "run the inner command directly instead of wrapping it in further shells"})
		return
	}
	f, err := parse(code, zsh)
	if err != nil && zsh {
		f, err = parse(code, false)
	}
	if err == errTooDeep {
		c.report(tooComplex)
		return
	}
	if err != nil {
		v := parseErrorVerdict(err)
		v.Reason = "cannot parse nested shell code: " + oneLine(err.Error())
		c.report(v)
		return
	}
	c.depth++
	saved := c.cwd
	c.stmts(f.Stmts, in)
	c.cwd = saved
	c.depth--
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
	if dev, ok := blockDevice(t); ok {
		c.report(Verdict{Decision: Block, Rule: "write-device",
			Reason:      "redirection writes directly to block device " + dev + ", destroying its data",
			Alternative: "write to a regular file (e.g. > ./disk.img) and let the user flash devices themselves"})
	}
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

// maxStaticOutput caps the text taken from an echo/printf feeding a pipe.
const maxStaticOutput = 64 << 10

// staticOutput returns what a simple `echo ARGS` or `printf FMT` without
// expansions, escapes or redirections writes, so `echo CODE | sh` is
// checked as code instead of asking.
func (c *checker) staticOutput(s *syntax.Stmt) (string, bool) {
	if s == nil || len(s.Redirs) > 0 || s.Background {
		return "", false
	}
	call, ok := s.Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) < 2 || len(call.Assigns) > 0 {
		return "", false
	}
	var fs []field
	for i, w := range call.Args {
		fs = c.resolveWord(w, i, fs)
	}
	for _, f := range fs {
		if f.dyn {
			return "", false
		}
	}
	var b strings.Builder
	switch fs[0].s {
	case "echo":
		args := fs[1:]
		if len(args) > 0 && strings.HasPrefix(args[0].s, "-") {
			return "", false // -n, -e and friends
		}
		for i, f := range args {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(f.s)
		}
	case "printf":
		if len(fs) != 2 || strings.ContainsAny(fs[1].s, "%\\") {
			return "", false
		}
		b.WriteString(fs[1].s)
	default:
		return "", false
	}
	if b.Len() > maxStaticOutput {
		return "", false
	}
	return b.String(), true
}
