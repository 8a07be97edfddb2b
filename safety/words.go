package safety

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

// dynMark stands for a piece of a word that is only known at run time
// (an unknown variable, a command substitution, ...).
const dynMark = "\x00"

// homeMark stands for the home directory: an unquoted leading ~ or $HOME.
// A quoted "~" stays a literal ~.
const homeMark = "\x01"

// defaultIFS is what bash splits on when IFS is unset.
const defaultIFS = " \t\n"

// tilde writes an unquoted first literal with tilde expansion: ~, ~/...,
// ~user and ~user/... become homeMark (any user's home is as critical as
// one's own) and ~+ becomes "." (the working directory); anything else,
// ~- included, is left alone.
func tilde(b *strings.Builder, v string) {
	if strings.HasPrefix(v, "~") {
		end := strings.IndexByte(v, '/')
		if end < 0 {
			end = len(v)
		}
		switch name := v[1:end]; {
		case name == "" || isUserName(name):
			b.WriteString(homeMark)
			v = v[end:]
		case name == "+":
			b.WriteByte('.')
			v = v[end:]
		}
	}
	unescape(b, v, false)
}

// isUserName reports whether s is a portable user name, as in ~user.
func isUserName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '.' || c == '-'):
		case i > 0 && c == '$' && i == len(s)-1:
		default:
			return false
		}
	}
	return s != ""
}

// maxBraceFields caps the words one brace expansion may produce.
const maxBraceFields = 64

// field is one word of a command line after static expansion.
type field struct {
	s      string // value; dynamic pieces appear as dynMark
	dyn    bool   // contains a piece only known at run time
	proc   bool   // contains a process substitution <(...)
	sub    bool   // contains a command substitution $(...)
	glob   bool   // contains an unquoted *, ? or [ that bash matches against file names
	spread bool   // may be any number of words at run time (unquoted $(...), unknown $X, "$@")
	unsure bool   // comes from splitting on an IFS only known at run time
	top    bool   // contains $(git rev-parse --show-toplevel), the repository's root
	taint  bool   // contains the value of a variable read at run time (see varState.taint)
	word   int    // index of the source word in the call, -1 if synthetic
	one    bool   // the source word expanded to exactly this one field
}

// varState is what the analyser knows about a shell variable.
type varState struct {
	val   string
	list  []string // an indexed array's elements; dynamic pieces as dynMark
	known bool
	array bool
	taint bool // the value was read at run time (read, mapfile): it may be code where bash evaluates it
	top   bool // the value contains $(git rev-parse --show-toplevel): the repository's root (see field.top)
}

// Bounds on the work static expansion may do for one command.
const (
	// maxArray caps the elements kept for an array or the positional
	// parameters; longer ones become unknown.
	maxArray = 4096
	// maxPatternValue caps the length of a value a pattern operator
	// (${x%pat}, ${x//pat/s}) is applied to; longer values become unknown.
	maxPatternValue = 1024
	// maxPatternWork caps the bytes pattern matching may scan in total.
	maxPatternWork = 1 << 20
	// maxExpansion caps the bytes parameter expansions may produce in
	// total (a long value expanded many times); beyond it values are
	// unknown.
	maxExpansion = 8 << 20
)

// resolver expands words statically: quotes, escapes, $'...', brace
// expansion, tilde (as homeMark), constant variables and arrays, the
// positional parameters of a function call, parameter operators and IFS
// splitting.
type resolver struct {
	vars     map[string]varState
	params   []string // positional parameters $1...; dynamic pieces as dynMark
	posKnown bool     // params holds the positional parameters
	posOpen  bool     // the last of params stands for any number of unknown ones
	arg0     *string  // $0 when known (sh -c CODE NAME), else nil
	work     int      // units of work done: fields, pattern bytes, parsed bytes, ...
	patWork  int      // bytes scanned by pattern matching
	expanded int      // bytes produced by parameter expansions
}

func (r *resolver) setVar(name, val string, known bool) {
	if r.vars == nil {
		r.vars = make(map[string]varState, 4)
	}
	r.vars[name] = varState{val: val, known: known}
}

func (r *resolver) setArray(name string, list []string, known bool) {
	if len(list) > maxArray {
		list, known = nil, false
	}
	if r.vars == nil {
		r.vars = make(map[string]varState, 4)
	}
	r.vars[name] = varState{list: list, known: known, array: true}
}

// setParams sets the positional parameters to the words fields. After a
// word that may be any number of words at run time, the rest are unknown.
func (r *resolver) setParams(fields []field) {
	r.params, r.posKnown, r.posOpen = make([]string, 0, len(fields)), true, false
	for _, f := range fields {
		if f.spread || f.glob {
			r.params, r.posOpen = append(r.params, dynMark), true
			break
		}
		r.params = append(r.params, f.s)
	}
	if len(r.params) > maxArray {
		r.params, r.posKnown = nil, false
	}
}

// ifs returns the value of IFS and whether it is known.
func (r *resolver) ifs() (string, bool) {
	st, ok := r.vars["IFS"]
	if !ok {
		return defaultIFS, true
	}
	return st.val, st.known && !st.array
}

// literal expands w the way an assignment value is expanded: no field
// splitting, brace expansion or globbing; a leading ~ still expands.
func (r *resolver) literal(w *syntax.Word) (string, bool) {
	if w == nil {
		return "", true
	}
	var fb fieldBuilder
	for i, p := range w.Parts {
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
			r.dqParts(&fb, p.Parts, nil, -1, false)
		case *syntax.ParamExp:
			v, ok := r.param(p)
			if !ok {
				return "", false
			}
			if v.multi {
				fb.write(r.join(v.list, v.star))
			} else {
				fb.write(v.s)
			}
		default:
			return "", false
		}
	}
	return fb.b.String(), !fb.dyn
}

// join joins the elements of $@ or ${a[@]} (with a space) or of $* or
// ${a[*]} (with the first character of IFS).
func (r *resolver) join(list []string, star bool) string {
	sep := " "
	if ifs, known := r.ifs(); star && known {
		sep = ifs
		if sep != "" {
			_, n := utf8.DecodeRuneInString(sep)
			sep = sep[:n]
		}
	}
	return strings.Join(list, sep)
}

// wordLit resolves a word that must expand to exactly one static field.
func (r *resolver) wordLit(w *syntax.Word) (string, bool) {
	if w == nil {
		return "", false
	}
	fs := r.resolveWord(w, -1, nil)
	if len(fs) != 1 || fs[0].dyn {
		return "", false
	}
	return fs[0].s, true
}

// resolveWord appends the fields word w expands to.
func (r *resolver) resolveWord(w *syntax.Word, idx int, out []field) []field {
	if w == nil || len(w.Parts) == 0 {
		return out
	}
	if hasBrace(w.Parts) {
		cp := &syntax.Word{Parts: append([]syntax.WordPart(nil), w.Parts...)}
		if syntax.SplitBraces(cp) {
			alts := expandBraces(cp.Parts)
			for _, alt := range alts {
				out = r.resolveParts(alt, idx, out, false)
			}
			return out
		}
	}
	return r.resolveParts(w.Parts, idx, out, true)
}

func hasBrace(parts []syntax.WordPart) bool {
	for _, p := range parts {
		if l, ok := p.(*syntax.Lit); ok && strings.IndexByte(l.Value, '{') >= 0 {
			return true
		}
	}
	return false
}

// expandBraces expands BraceExp nodes into alternative part lists.
func expandBraces(parts []syntax.WordPart) [][]syntax.WordPart {
	res := [][]syntax.WordPart{nil}
	for _, p := range parts {
		be, ok := p.(*syntax.BraceExp)
		if !ok {
			for i := range res {
				res[i] = append(res[i], p)
			}
			continue
		}
		var alts [][]syntax.WordPart
		if be.Sequence {
			for _, s := range braceSeq(be) {
				alts = append(alts, []syntax.WordPart{&syntax.Lit{Value: s}})
			}
		} else {
			for _, e := range be.Elems {
				alts = append(alts, expandBraces(e.Parts)...)
				if len(alts) >= maxBraceFields {
					break
				}
			}
		}
		if len(alts) == 0 {
			continue
		}
		if len(res)*len(alts) > maxBraceFields && len(res) >= maxBraceFields/2 {
			// Over the cap: keep the first alternative only, in place.
			for i := range res {
				res[i] = append(res[i], alts[0]...)
			}
			continue
		}
		next := make([][]syntax.WordPart, 0, min(len(res)*len(alts), maxBraceFields))
	outer:
		for _, r := range res {
			for _, a := range alts {
				if len(next) >= maxBraceFields {
					break outer
				}
				n := make([]syntax.WordPart, 0, len(r)+len(a))
				n = append(append(n, r...), a...)
				next = append(next, n)
			}
		}
		res = next
	}
	return res
}

// braceSeq expands {x..y[..incr]} (integers or single letters), capped.
func braceSeq(be *syntax.BraceExp) []string {
	if len(be.Elems) < 2 {
		return nil
	}
	a, b := be.Elems[0].Lit(), be.Elems[1].Lit()
	step := 1
	if len(be.Elems) > 2 {
		if n, err := strconv.Atoi(be.Elems[2].Lit()); err == nil && n != 0 {
			step = max(n, -n)
		}
	}
	var x, y int
	format := strconv.Itoa
	if n, err := strconv.Atoi(a); err == nil {
		m, err := strconv.Atoi(b)
		if err != nil {
			return nil
		}
		x, y = n, m
	} else if len(a) == 1 && len(b) == 1 {
		x, y = int(a[0]), int(b[0])
		format = func(i int) string { return string(rune(i)) }
	} else {
		return nil
	}
	if x > y {
		step = -step
	}
	var out []string
	for i := x; len(out) < maxBraceFields; i += step {
		out = append(out, format(i))
		if step > 0 && i+step > y || step < 0 && i+step < y {
			break
		}
	}
	return out
}

// fieldBuilder accumulates one field during expansion.
type fieldBuilder struct {
	b                                    strings.Builder
	have                                 bool // the field exists even if empty ("", '')
	dyn, proc, sub, glob, spread, unsure bool
	top, taint                           bool // see field
}

// write appends s, a value that may hold dynMark.
func (fb *fieldBuilder) write(s string) {
	if strings.IndexByte(s, 0) >= 0 {
		fb.dyn = true
	}
	fb.b.WriteString(s)
}

func (fb *fieldBuilder) flush(out []field, idx int) []field {
	if fb.have || fb.b.Len() > 0 || fb.dyn {
		out = append(out, field{s: fb.b.String(), dyn: fb.dyn, proc: fb.proc, sub: fb.sub,
			glob: fb.glob, spread: fb.spread, unsure: fb.unsure, top: fb.top, taint: fb.taint, word: idx})
	}
	*fb = fieldBuilder{}
	return out
}

// hasGlobMeta reports whether the raw unquoted literal s holds an
// unescaped *, ? or [.
func hasGlobMeta(s string) bool {
	if strings.IndexAny(s, "*?[") < 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '*', '?', '[':
			return true
		}
	}
	return false
}

func (r *resolver) resolveParts(parts []syntax.WordPart, idx int, out []field, single bool) []field {
	start := len(out)
	var fb fieldBuilder
	for i, p := range parts {
		switch p := p.(type) {
		case *syntax.Lit:
			fb.have = true
			fb.glob = fb.glob || hasGlobMeta(p.Value)
			if i == 0 {
				tilde(&fb.b, p.Value)
			} else {
				unescape(&fb.b, p.Value, false)
			}
		case *syntax.SglQuoted:
			fb.have = true
			if p.Dollar {
				ansiC(&fb.b, p.Value)
			} else {
				fb.b.WriteString(p.Value)
			}
		case *syntax.DblQuoted:
			if len(p.Parts) == 0 {
				fb.have = true
			}
			out = r.dqParts(&fb, p.Parts, out, idx, true)
		case *syntax.ParamExp:
			v, ok := r.param(p)
			if !ok {
				fb.dyn, fb.spread = true, true
				fb.taint = fb.taint || r.taintedParam(p)
				fb.top = fb.top || r.topParam(p)
				fb.b.WriteString(dynMark)
				continue
			}
			if !v.multi {
				out = r.split(&fb, out, idx, v.s)
				continue
			}
			for k, e := range v.list {
				if k > 0 {
					out = fb.flush(out, idx)
				}
				out = r.split(&fb, out, idx, e)
			}
		case *syntax.ProcSubst:
			fb.have, fb.dyn, fb.proc = true, true, true
			fb.b.WriteString(dynMark)
		case *syntax.CmdSubst:
			fb.have, fb.dyn, fb.sub, fb.spread = true, true, true, true
			fb.top = fb.top || isToplevel(p)
			fb.b.WriteString(dynMark)
		case *syntax.ExtGlob:
			fb.have, fb.glob = true, true
			fb.b.WriteString(p.Op.String())
			if p.Pattern != nil {
				fb.b.WriteString(p.Pattern.Value)
			}
			fb.b.WriteByte(')')
		default: // ArithmExp, BraceExp leftovers
			fb.have, fb.dyn = true, true
			fb.b.WriteString(dynMark)
		}
	}
	out = fb.flush(out, idx)
	r.work += len(out) - start + 1
	if single && len(out)-start == 1 {
		out[start].one = true
	}
	return out
}

// split writes v, the value of an unquoted expansion, splitting it into
// fields on IFS the way bash does: IFS whitespace separates fields and is
// trimmed, every other IFS character ends a field, even an empty one.
func (r *resolver) split(fb *fieldBuilder, out []field, idx int, v string) []field {
	ifs, known := r.ifs()
	if !known {
		fb.unsure = true
		ifs = defaultIFS
	}
	ws := false // a field just ended on IFS whitespace
	for i := 0; i < len(v); i++ {
		ch := v[i]
		switch {
		case strings.IndexByte(ifs, ch) < 0:
			fb.have = true
			fb.b.WriteByte(ch)
			switch ch {
			case 0:
				fb.dyn, fb.spread = true, true
			case '*', '?', '[':
				fb.glob = true
			}
			ws = false
		case ch == ' ' || ch == '\t' || ch == '\n':
			if fb.have || fb.b.Len() > 0 {
				out = fb.flush(out, idx)
				fb.unsure = !known
				ws = true
			}
		case ws:
			ws = false
		default:
			fb.have = true
			out = fb.flush(out, idx)
			fb.unsure = !known
		}
	}
	return out
}

// dqParts expands the parts of a double-quoted string (no splitting). With
// fields, "$@" and "${a[@]}" make one field per element; otherwise they are
// joined.
func (r *resolver) dqParts(fb *fieldBuilder, parts []syntax.WordPart, out []field, idx int, fields bool) []field {
	for _, p := range parts {
		switch p := p.(type) {
		case *syntax.Lit:
			fb.have = true
			unescape(&fb.b, p.Value, true)
		case *syntax.ParamExp:
			v, ok := r.param(p)
			switch {
			case !ok:
				fb.have, fb.dyn = true, true
				fb.taint = fb.taint || r.taintedParam(p)
				fb.top = fb.top || r.topParam(p)
				fb.b.WriteString(dynMark)
			case !v.multi:
				fb.have = true
				fb.write(v.s)
			case v.star || !fields:
				fb.have = true
				fb.write(r.join(v.list, v.star))
			default:
				for k, e := range v.list {
					if k > 0 {
						out = fb.flush(out, idx)
					}
					fb.have = true
					fb.write(e)
					fb.spread = fb.spread || fb.dyn
				}
			}
		case *syntax.CmdSubst:
			fb.have, fb.dyn, fb.sub = true, true, true
			fb.top = fb.top || isToplevel(p)
			fb.b.WriteString(dynMark)
		default:
			fb.have, fb.dyn = true, true
			fb.b.WriteString(dynMark)
		}
	}
	return out
}

// docText expands a heredoc body (like double quotes, but '"' stays). It
// reports whether the text has parts only known at run time, and whether
// those include a command substitution.
func (r *resolver) docText(w *syntax.Word) (text string, dyn, sub bool) {
	if w == nil {
		return "", false, false
	}
	var fb fieldBuilder
	r.dqParts(&fb, w.Parts, nil, -1, false)
	return fb.b.String(), fb.dyn, fb.sub
}

// unescape writes s with backslash escapes removed: all of them outside
// quotes, only \$ \` \" \\ and \newline inside double quotes.
func unescape(b *strings.Builder, s string, dq bool) {
	if strings.IndexByte(s, '\\') < 0 {
		b.WriteString(s)
		return
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		n := s[i+1]
		switch {
		case n == '\n':
			i++
		case !dq || n == '$' || n == '`' || n == '"' || n == '\\':
			b.WriteByte(n)
			i++
		default:
			b.WriteByte(c)
		}
	}
}

// ansiC decodes the body of a $'...' string.
func ansiC(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := s[i]; e {
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'e', 'E':
			b.WriteByte(0x1b)
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '\\', '\'', '"', '?':
			b.WriteByte(e)
		case 'c':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i] & 0x1f)
			}
		case 'x', 'u', 'U':
			max := 2
			if e == 'u' {
				max = 4
			} else if e == 'U' {
				max = 8
			}
			j := i + 1
			for j < len(s) && j-i-1 < max && isHex(s[j]) {
				j++
			}
			if j == i+1 {
				b.WriteByte('\\')
				b.WriteByte(e)
				continue
			}
			n, _ := strconv.ParseUint(s[i+1:j], 16, 32)
			if e == 'x' {
				b.WriteByte(byte(n))
			} else if n <= utf8.MaxRune {
				b.WriteRune(rune(n))
			}
			i = j - 1
		default:
			if e >= '0' && e <= '7' {
				j := i
				for j < len(s) && j-i < 3 && s[j] >= '0' && s[j] <= '7' {
					j++
				}
				n, _ := strconv.ParseUint(s[i:j], 8, 32)
				b.WriteByte(byte(n))
				i = j - 1
				continue
			}
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// topParam reports whether p expands a variable whose value holds the
// repository's root (top=$(git rev-parse --show-toplevel); git add "$top").
func (r *resolver) topParam(p *syntax.ParamExp) bool {
	return p.Param != nil && r.vars[p.Param.Value].top
}

// topWord reports whether w holds the repository's root: a
// $(git rev-parse --show-toplevel) or a variable assigned one.
func (r *resolver) topWord(w syntax.Node) bool {
	found := false
	syntax.Walk(w, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CmdSubst:
			found = found || isToplevel(n)
		case *syntax.ParamExp:
			found = found || r.topParam(n)
		}
		return !found
	})
	return found
}

// isToplevel reports whether cs is $(git rev-parse --show-toplevel), the
// root of the work tree.
func isToplevel(cs *syntax.CmdSubst) bool {
	if len(cs.Stmts) != 1 {
		return false
	}
	x, ok := cs.Stmts[0].Cmd.(*syntax.CallExpr)
	if !ok || len(x.Args) != 3 {
		return false
	}
	var r resolver
	for i, want := range []string{"git", "rev-parse", "--show-toplevel"} {
		if v, ok := r.wordLit(x.Args[i]); !ok || v != want {
			return false
		}
	}
	return true
}
