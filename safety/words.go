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

// tilde writes an unquoted first literal with tilde expansion: ~ and ~/...
// become homeMark (~user is left alone).
func tilde(b *strings.Builder, v string) {
	if strings.HasPrefix(v, "~") && (len(v) == 1 || v[1] == '/') {
		b.WriteString(homeMark)
		v = v[1:]
	}
	unescape(b, v, false)
}

// maxBraceFields caps the words one brace expansion may produce.
const maxBraceFields = 64

// field is one word of a command line after static expansion.
type field struct {
	s    string // value; dynamic pieces appear as dynMark
	dyn  bool   // contains a piece only known at run time
	proc bool   // contains a process substitution <(...)
	word int    // index of the source word in the call, -1 if synthetic
	one  bool   // the source word expanded to exactly this one field
}

// varState is what the analyser knows about a shell variable.
type varState struct {
	val   string
	known bool
}

// resolver expands words statically: quotes, escapes, $'...', brace
// expansion, tilde (as homeMark) and constant variables.
type resolver struct {
	vars map[string]varState
}

func (r *resolver) setVar(name, val string, known bool) {
	if r.vars == nil {
		r.vars = make(map[string]varState, 4)
	}
	r.vars[name] = varState{val: val, known: known}
}

// lookup returns the static value of a simple parameter expansion.
func (r *resolver) lookup(p *syntax.ParamExp) (string, bool) {
	if p.Param == nil || p.Excl || p.Length || p.Width || p.IsSet ||
		p.Index != nil || p.Slice != nil || p.Repl != nil ||
		p.Names != 0 || len(p.Modifiers) != 0 || p.NestedParam != nil || p.Flags != nil {
		return "", false
	}
	name := p.Param.Value
	val, known := "", false
	if st, ok := r.vars[name]; ok {
		val, known = st.val, st.known
	} else if name == "HOME" {
		val, known = homeMark, true
	}
	if p.Exp == nil {
		return val, known
	}
	// ${X:?msg}, ${X-default}, ${X:=default}: the value of X when it is
	// known and set; the static default when X is known to be empty.
	switch op := p.Exp.Op; op {
	case syntax.ErrorUnset, syntax.ErrorUnsetOrNull, syntax.DefaultUnset, syntax.DefaultUnsetOrNull,
		syntax.AssignUnset, syntax.AssignUnsetOrNull:
		if !known {
			return "", false
		}
		colon := op == syntax.ErrorUnsetOrNull || op == syntax.DefaultUnsetOrNull || op == syntax.AssignUnsetOrNull
		if val != "" || !colon {
			return val, true
		}
		if op == syntax.DefaultUnsetOrNull || op == syntax.AssignUnsetOrNull {
			return r.wordLit(p.Exp.Word)
		}
	}
	return "", false
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
	b     strings.Builder
	have  bool
	dyn   bool
	proc  bool
	count int
}

func (fb *fieldBuilder) flush(out []field, idx int) []field {
	if fb.have || fb.b.Len() > 0 || fb.dyn {
		out = append(out, field{s: fb.b.String(), dyn: fb.dyn, proc: fb.proc, word: idx})
		fb.count++
	}
	fb.b.Reset()
	fb.have, fb.dyn, fb.proc = false, false, false
	return out
}

func (r *resolver) resolveParts(parts []syntax.WordPart, idx int, out []field, single bool) []field {
	start := len(out)
	var fb fieldBuilder
	for i, p := range parts {
		switch p := p.(type) {
		case *syntax.Lit:
			fb.have = true
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
			fb.have = true
			r.dqParts(&fb, p.Parts)
		case *syntax.ParamExp:
			v, ok := r.lookup(p)
			if !ok {
				fb.dyn = true
				fb.b.WriteString(dynMark)
				continue
			}
			// unquoted: split on IFS whitespace
			for i := 0; i < len(v); i++ {
				switch v[i] {
				case ' ', '\t', '\n':
					out = fb.flush(out, idx)
				default:
					fb.have = true
					fb.b.WriteByte(v[i])
				}
			}
		case *syntax.ProcSubst:
			fb.have, fb.dyn, fb.proc = true, true, true
			fb.b.WriteString(dynMark)
		case *syntax.ExtGlob:
			fb.have = true
			fb.b.WriteString(p.Op.String())
			if p.Pattern != nil {
				fb.b.WriteString(p.Pattern.Value)
			}
			fb.b.WriteByte(')')
		default: // CmdSubst, ArithmExp, BraceExp leftovers
			fb.have, fb.dyn = true, true
			fb.b.WriteString(dynMark)
		}
	}
	out = fb.flush(out, idx)
	if single && len(out)-start == 1 {
		out[start].one = true
	}
	return out
}

// dqParts expands the parts of a double-quoted string (no splitting).
func (r *resolver) dqParts(fb *fieldBuilder, parts []syntax.WordPart) {
	for _, p := range parts {
		switch p := p.(type) {
		case *syntax.Lit:
			unescape(&fb.b, p.Value, true)
		case *syntax.ParamExp:
			if v, ok := r.lookup(p); ok {
				fb.b.WriteString(v)
			} else {
				fb.dyn = true
				fb.b.WriteString(dynMark)
			}
		default:
			fb.dyn = true
			fb.b.WriteString(dynMark)
		}
	}
}

// docText expands a heredoc body (like double quotes, but '"' stays).
func (r *resolver) docText(w *syntax.Word) (string, bool) {
	if w == nil {
		return "", true
	}
	var fb fieldBuilder
	r.dqParts(&fb, w.Parts)
	return fb.b.String(), !fb.dyn
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
