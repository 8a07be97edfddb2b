package safety

import (
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/pattern"
	"mvdan.cc/sh/v3/syntax"
)

// value is what a parameter expansion stands for: one string, or for $@,
// $*, ${a[@]} and ${a[*]} a list of strings, one per element.
type value struct {
	s     string
	list  []string
	multi bool // list holds the elements
	star  bool // $* or ${a[*]}: joined with the first character of IFS when quoted
	unset bool // the parameter or element is unset (s is "")
}

// lookup returns the static value of a parameter expansion that stands
// for one string ($@ and friends are joined with spaces, as in an
// assignment).
func (r *resolver) lookup(p *syntax.ParamExp) (string, bool) {
	v, ok := r.param(p)
	if !ok {
		return "", false
	}
	s := v.s
	if v.multi {
		s = strings.Join(v.list, " ")
	}
	return s, strings.IndexByte(s, 0) < 0
}

// param resolves a parameter expansion. Values may hold dynMark where an
// array element or a positional parameter is only partly known.
func (r *resolver) param(p *syntax.ParamExp) (value, bool) {
	if r.expanded >= maxExpansion {
		return value{}, false
	}
	v, ok := r.param1(p)
	if !ok {
		return v, false
	}
	n := len(v.s) + len(v.list)
	for _, e := range v.list {
		n += len(e)
	}
	if r.expanded+n > maxExpansion {
		r.expanded = maxExpansion
		return value{}, false
	}
	r.work += n
	r.expanded += n
	return v, true
}

func (r *resolver) param1(p *syntax.ParamExp) (value, bool) {
	if p.Param == nil || p.Width || p.IsSet || p.Flags != nil || p.NestedParam != nil ||
		len(p.Modifiers) != 0 || p.Names != 0 {
		return value{}, false
	}
	name := p.Param.Value
	if p.Excl {
		// ${!x}: the parameter named by the value of x.
		if p.Index != nil {
			return value{}, false // ${!a[@]}: the indices
		}
		v, ok := r.base(name, nil)
		if !ok || v.multi || !isParamName(v.s) {
			return value{}, false
		}
		name = v.s
	}
	v, ok := r.base(name, p.Index)
	if !ok {
		return v, false
	}
	switch {
	case p.Length:
		if v.multi {
			return value{s: strconv.Itoa(len(v.list))}, true
		}
		if strings.ContainsAny(v.s, dynMark+homeMark) {
			return value{}, false
		}
		return value{s: strconv.Itoa(utf8.RuneCountInString(v.s))}, true
	case p.Exp != nil:
		return r.expansion(v, p.Exp)
	case p.Slice != nil:
		return r.slice(v, p.Slice, name == "@" || name == "*")
	case p.Repl != nil:
		return r.each(v, func(s string) (string, bool) { return r.replace(s, p.Repl) })
	}
	return v, true
}

// isParamName reports whether s names a variable or positional parameter.
func isParamName(s string) bool {
	if s == "" {
		return false
	}
	if isDigits(s) || s == "@" || s == "*" || s == "#" {
		return true
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// base returns the value of parameter name, or of its element index.
func (r *resolver) base(name string, index syntax.ArithmExpr) (value, bool) {
	switch {
	case name == "@" || name == "*":
		return value{list: r.params, multi: true, star: name == "*"}, r.posKnown && index == nil
	case name == "#":
		return value{s: strconv.Itoa(len(r.params))}, r.posKnown && !r.posOpen && index == nil
	case name == "0" && r.arg0 != nil && index == nil:
		return value{s: *r.arg0}, true
	case isDigits(name):
		n, err := strconv.Atoi(name)
		if !r.posKnown || index != nil || err != nil || n == 0 || r.posOpen && n >= len(r.params) {
			return value{}, false // $0 is the shell's name
		}
		if n > len(r.params) {
			return value{unset: true}, true
		}
		return value{s: r.params[n-1]}, true
	}
	st, ok := r.vars[name]
	if !ok {
		switch {
		case index != nil:
		case name == "HOME":
			return value{s: homeMark}, true
		case name == "IFS":
			return value{s: defaultIFS}, true
		}
		return value{}, false
	}
	if !st.known {
		return value{}, false
	}
	if index == nil {
		if !st.array {
			return value{s: st.val}, true
		}
		if len(st.list) == 0 {
			return value{unset: true}, true
		}
		return value{s: st.list[0]}, true
	}
	list := st.list
	if !st.array {
		list = []string{st.val}
	}
	if w, ok := index.(*syntax.Word); ok {
		if s := w.Lit(); s == "@" || s == "*" {
			return value{list: list, multi: true, star: s == "*"}, true
		}
	}
	i, ok := r.arith(index, 0)
	if !ok {
		return value{}, false
	}
	if i < 0 {
		i += len(list)
	}
	if i < 0 {
		return value{}, false // bash: bad array subscript
	}
	if i >= len(list) {
		return value{unset: true}, true
	}
	return value{s: list[i]}, true
}

// arith evaluates the arithmetic expressions static values come with:
// integers, variables holding one, and a leading - or +.
func (r *resolver) arith(x syntax.ArithmExpr, depth int) (int, bool) {
	switch x := x.(type) {
	case *syntax.Word:
		s := x.Lit()
		if n, err := strconv.Atoi(s); err == nil {
			return n, true
		}
		if st, ok := r.vars[s]; ok && st.known && !st.array && depth < 4 {
			n, err := strconv.Atoi(strings.TrimSpace(st.val))
			return n, err == nil
		}
	case *syntax.UnaryArithm:
		if depth > 8 || x.Post {
			return 0, false
		}
		n, ok := r.arith(x.X, depth+1)
		switch x.Op {
		case syntax.Minus:
			return -n, ok
		case syntax.Plus:
			return n, ok
		}
	case *syntax.ParenArithm:
		if depth <= 8 {
			return r.arith(x.X, depth+1)
		}
	}
	return 0, false
}

// expansion applies ${x-...}, ${x%...}, ${x^^} and friends.
func (r *resolver) expansion(v value, e *syntax.Expansion) (value, bool) {
	switch op := e.Op; op {
	case syntax.ErrorUnset, syntax.ErrorUnsetOrNull:
		// When the check fails the command does not run at all.
		return v, true
	case syntax.DefaultUnset, syntax.DefaultUnsetOrNull, syntax.AssignUnset, syntax.AssignUnsetOrNull,
		syntax.AlternateUnset, syntax.AlternateUnsetOrNull:
		if v.multi || strings.IndexByte(v.s, 0) >= 0 {
			return value{}, false
		}
		colon := op == syntax.DefaultUnsetOrNull || op == syntax.AssignUnsetOrNull || op == syntax.AlternateUnsetOrNull
		empty := v.unset || colon && v.s == ""
		alt := op == syntax.AlternateUnset || op == syntax.AlternateUnsetOrNull
		if empty == alt {
			if alt {
				return value{}, true
			}
			return v, true
		}
		s, ok := r.literal(e.Word)
		return value{s: s}, ok
	case syntax.RemSmallSuffix, syntax.RemLargeSuffix, syntax.RemSmallPrefix, syntax.RemLargePrefix:
		pat, ok := r.patternWord(e.Word)
		if !ok {
			return value{}, false
		}
		suffix := op == syntax.RemSmallSuffix || op == syntax.RemLargeSuffix
		small := op == syntax.RemSmallSuffix || op == syntax.RemSmallPrefix
		return r.each(v, func(s string) (string, bool) { return r.remove(s, pat, suffix, small) })
	case syntax.UpperFirst, syntax.UpperAll, syntax.LowerFirst, syntax.LowerAll:
		if e.Word != nil && e.Word.Lit() != "?" {
			return value{}, false // only characters matching a pattern
		}
		upper := op == syntax.UpperFirst || op == syntax.UpperAll
		all := op == syntax.UpperAll || op == syntax.LowerAll
		return r.each(v, func(s string) (string, bool) {
			conv := strings.ToLower
			if upper {
				conv = strings.ToUpper
			}
			if all {
				return conv(s), true
			}
			_, n := utf8.DecodeRuneInString(s)
			return conv(s[:n]) + s[n:], true
		})
	}
	return value{}, false
}

// each applies f to a value or to each of its elements, with the home
// directory spelled out: the operators see the real path.
func (r *resolver) each(v value, f func(string) (string, bool)) (value, bool) {
	conv := func(s string) (string, bool) {
		if strings.IndexByte(s, 0) >= 0 {
			return "", false
		}
		if strings.Contains(s, homeMark) {
			h := homeDir()
			if h == "" {
				return "", false
			}
			s = strings.ReplaceAll(s, homeMark, h)
		}
		return f(s)
	}
	if !v.multi {
		s, ok := conv(v.s)
		return value{s: s}, ok
	}
	out := make([]string, len(v.list))
	for i, s := range v.list {
		var ok bool
		if out[i], ok = conv(s); !ok {
			return value{}, false
		}
	}
	v.list = out
	return v, true
}

// slice applies ${x:offset:length}; for $@ offset 1 is the first parameter.
func (r *resolver) slice(v value, sl *syntax.Slice, positional bool) (value, bool) {
	off := 0
	if sl.Offset != nil {
		var ok bool
		if off, ok = r.arith(sl.Offset, 0); !ok {
			return value{}, false
		}
	}
	length, hasLen := 0, sl.Length != nil
	if hasLen {
		var ok bool
		if length, ok = r.arith(sl.Length, 0); !ok {
			return value{}, false
		}
	}
	if v.multi {
		if positional {
			if off == 0 || r.posOpen {
				return value{}, false // $0 is not known
			}
			if off > 0 {
				off--
			}
		}
		list, ok := cut(v.list, off, length, hasLen, false)
		v.list = list
		return v, ok
	}
	return r.each(v, func(s string) (string, bool) {
		rs, ok := cut([]rune(s), off, length, hasLen, true)
		return string(rs), ok
	})
}

// cut returns the slice of list that ${x:off:length} selects.
func cut[T any](list []T, off, length int, hasLen, negLen bool) ([]T, bool) {
	n := len(list)
	if off < 0 {
		off += n
		if off < 0 {
			return nil, true
		}
	}
	if off > n {
		return nil, true
	}
	end := n
	if hasLen {
		if length < 0 {
			if !negLen {
				return nil, false
			}
			end = n + length
			if end < off {
				return nil, false // bash: substring expression < 0
			}
		} else if off+length < end {
			end = off + length
		}
	}
	return list[off:end], true
}

// patternWord returns w as a pattern for pattern.Regexp: quoted parts
// match literally.
func (r *resolver) patternWord(w *syntax.Word) (string, bool) {
	if w == nil {
		return "", true
	}
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			b.WriteString(p.Value)
		case *syntax.SglQuoted:
			s := p.Value
			if p.Dollar {
				var d strings.Builder
				ansiC(&d, s)
				s = d.String()
			}
			b.WriteString(pattern.QuoteMeta(s, 0))
		case *syntax.DblQuoted:
			s, ok := r.literal(&syntax.Word{Parts: []syntax.WordPart{p}})
			if !ok {
				return "", false
			}
			b.WriteString(pattern.QuoteMeta(s, 0))
		case *syntax.ParamExp:
			s, ok := r.lookup(p)
			if !ok || strings.Contains(s, homeMark) {
				return "", false
			}
			b.WriteString(s)
		default:
			return "", false
		}
	}
	return b.String(), true
}

// compileGlob compiles a shell pattern; anchored patterns must match the
// whole string.
func compileGlob(pat string, anchored bool) (*regexp.Regexp, bool) {
	mode := pattern.Mode(0)
	if anchored {
		mode = pattern.EntireString
	}
	expr, err := pattern.Regexp(pat, mode)
	if err != nil {
		return nil, false
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, false
	}
	return re, true
}

// spend accounts for scanning n bytes in pattern matching and reports
// whether the budget allows it.
func (r *resolver) spend(n int) bool {
	if r.patWork+n >= maxPatternWork {
		r.patWork = maxPatternWork
		return false
	}
	r.patWork += n + 1
	r.work += n + 1
	return true
}

// remove applies ${s%pat}, ${s%%pat}, ${s#pat} or ${s##pat}.
func (r *resolver) remove(s, pat string, suffix, small bool) (string, bool) {
	if len(s) > maxPatternValue || !r.spend(len(pat)) {
		return "", false
	}
	if !pattern.HasMeta(pat, 0) {
		lit := unquotePattern(pat)
		if suffix {
			return strings.TrimSuffix(s, lit), true
		}
		return strings.TrimPrefix(s, lit), true
	}
	re, ok := compileGlob(pat, true)
	if !ok {
		return "", false
	}
	// Candidate cut points from the shortest piece removed to the longest.
	for k := 0; k <= len(s); k++ {
		i := k
		if !small {
			i = len(s) - k
		}
		if i < len(s) && !utf8.RuneStart(s[i]) {
			continue
		}
		piece := s[:i]
		if suffix {
			piece = s[len(s)-i:]
			if j := len(s) - i; j < len(s) && !utf8.RuneStart(s[j]) {
				continue
			}
		}
		if !r.spend(len(piece)) {
			return "", false
		}
		if re.MatchString(piece) {
			if suffix {
				return s[:len(s)-i], true
			}
			return s[i:], true
		}
	}
	return s, true
}

// unquotePattern removes the backslashes of a pattern without metacharacters.
func unquotePattern(p string) string {
	if strings.IndexByte(p, '\\') < 0 {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' && i+1 < len(p) {
			i++
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// replace applies ${s/pat/with}, ${s//pat/with}, ${s/#pat/with} or
// ${s/%pat/with}.
func (r *resolver) replace(s string, rp *syntax.Replace) (string, bool) {
	if len(s) > maxPatternValue || rp.Orig == nil || r.patWork >= maxPatternWork {
		return "", false
	}
	orig := rp.Orig
	anchor := byte(0)
	if l, ok := orig.Parts[0].(*syntax.Lit); ok && l.Value != "" && (l.Value[0] == '#' || l.Value[0] == '%') {
		anchor = l.Value[0]
		parts := append([]syntax.WordPart{&syntax.Lit{Value: l.Value[1:]}}, orig.Parts[1:]...)
		orig = &syntax.Word{Parts: parts}
	}
	pat, ok := r.patternWord(orig)
	if !ok {
		return "", false
	}
	with, ok := r.literal(rp.With)
	if !ok || strings.ContainsAny(with, "&"+homeMark) {
		return "", false // & stands for the match (patsub_replacement)
	}
	if !pattern.HasMeta(pat, 0) {
		lit := unquotePattern(pat)
		switch {
		case anchor == '#' && strings.HasPrefix(s, lit):
			return with + s[len(lit):], true
		case anchor == '%' && strings.HasSuffix(s, lit):
			return s[:len(s)-len(lit)] + with, true
		case anchor != 0 || lit == "":
			return s, true
		case rp.All:
			return strings.ReplaceAll(s, lit, with), true
		}
		return strings.Replace(s, lit, with, 1), true
	}
	expr, err := pattern.Regexp(pat, 0)
	if err != nil {
		return "", false
	}
	// Leftmost-longest matching is bash's: the first position, the
	// longest match there.
	switch anchor {
	case '#':
		expr = "^(?:" + expr + ")"
	case '%':
		expr = "(?:" + expr + ")$"
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return "", false
	}
	re.Longest()
	if !r.spend(len(s)+len(pat)) || re.MatchString("") {
		return "", false // bash's handling of empty matches is not modelled
	}
	n := 1
	if rp.All && anchor == 0 {
		n = -1
	}
	var b strings.Builder
	last := 0
	for _, m := range re.FindAllStringIndex(s, n) {
		b.WriteString(s[last:m[0]])
		b.WriteString(with)
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String(), true
}
