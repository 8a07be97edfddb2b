package safety

import (
	"cmp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A prefilter lets a regular expression be skipped on text that cannot
// match it: every match contains one of its literals. A nil prefilter
// passes everything.
type prefilter []string

// maxLiterals bounds a prefilter: past it, checking the literals costs
// about as much as running the expression.
const maxLiterals = 32

// newPrefilter derives the prefilter of pattern (Go RE2 syntax, as
// regexp.Compile parses it). Literals that always occurs in the text it is
// matched against (such as actionPrefix) filter nothing and are not used.
// It returns nil when it finds no useful literals or pattern does not
// parse.
func newPrefilter(pattern, always string) prefilter {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil
	}
	lits, ok := required(re.Simplify(), always)
	if !ok || len(lits) > maxLiterals {
		return nil
	}
	// A literal containing another one filters nothing more.
	slices.SortFunc(lits, func(a, b string) int { return cmp.Compare(len(a), len(b)) })
	var p prefilter
	for _, l := range lits {
		if !slices.ContainsFunc(p, func(k string) bool { return strings.Contains(l, k) }) {
			p = append(p, l)
		}
	}
	return p
}

// pass reports whether text contains one of the literals.
func (p prefilter) pass(text string) bool {
	if p == nil {
		return true
	}
	for _, l := range p {
		if strings.Contains(text, l) {
			return true
		}
	}
	return false
}

// required returns literals one of which every match of re contains, and
// whether it found any. Literals contained in always are useless.
func required(re *syntax.Regexp, always string) ([]string, bool) {
	if set, ok := exact(re); ok {
		return set, usable(set, always)
	}
	switch re.Op {
	case syntax.OpCapture, syntax.OpPlus:
		return required(re.Sub[0], always)
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return required(re.Sub[0], always)
		}
	case syntax.OpAlternate:
		var all []string
		for _, sub := range re.Sub {
			set, ok := required(sub, always)
			if !ok {
				return nil, false
			}
			all = append(all, set...)
		}
		return all, len(all) <= maxLiterals
	case syntax.OpConcat:
		// Any child's literals will do, and so will the strings that a
		// run of children with finitely many matches spells together:
		// keep the most selective.
		var best []string
		consider := func(set []string) {
			if better(set, best) {
				best = set
			}
		}
		for i, sub := range re.Sub {
			if set, ok := required(sub, always); ok {
				consider(set)
			}
			run := []string{""}
			for _, next := range re.Sub[i:] {
				set, ok := exact(next)
				if !ok {
					break
				}
				if run, ok = product(run, set); !ok {
					break
				}
				if usable(run, always) {
					consider(run)
				}
			}
		}
		return best, best != nil
	}
	return nil, false
}

// usable reports whether set can filter anything: no empty string, no
// literal that the text always contains.
func usable(set []string, always string) bool {
	for _, s := range set {
		if s == "" || strings.Contains(always, s) {
			return false
		}
	}
	return len(set) > 0
}

// better prefers a set of a few literals (at most 8), then the set whose
// shortest literal is longest, then the smaller set.
func better(a, b []string) bool {
	if b == nil {
		return true
	}
	if fa, fb := len(a) <= 8, len(b) <= 8; fa != fb {
		return fa
	}
	minLen := func(set []string) int {
		n := len(set[0])
		for _, s := range set[1:] {
			n = min(n, len(s))
		}
		return n
	}
	if la, lb := minLen(a), minLen(b); la != lb {
		return la > lb
	}
	return len(a) < len(b)
}

// exact returns every string re matches when they are few (at most
// maxLiterals) and re matches them case-sensitively.
func exact(re *syntax.Regexp) ([]string, bool) {
	switch re.Op {
	case syntax.OpEmptyMatch:
		return []string{""}, true
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 && folds(re.Rune) {
			return nil, false
		}
		for _, r := range re.Rune {
			if r == utf8.RuneError { // also matches an invalid byte
				return nil, false
			}
		}
		return []string{string(re.Rune)}, true
	case syntax.OpCharClass:
		var set []string
		for i := 0; i+1 < len(re.Rune); i += 2 {
			for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
				if len(set) == maxLiterals || r == utf8.RuneError {
					return nil, false
				}
				set = append(set, string(r))
			}
		}
		return set, len(set) > 0
	case syntax.OpCapture:
		return exact(re.Sub[0])
	case syntax.OpQuest:
		set, ok := exact(re.Sub[0])
		return append([]string{""}, set...), ok && len(set) < maxLiterals
	case syntax.OpConcat:
		run := []string{""}
		for _, sub := range re.Sub {
			set, ok := exact(sub)
			if !ok {
				return nil, false
			}
			if run, ok = product(run, set); !ok {
				return nil, false
			}
		}
		return run, true
	case syntax.OpAlternate:
		var all []string
		for _, sub := range re.Sub {
			set, ok := exact(sub)
			if !ok || len(all)+len(set) > maxLiterals {
				return nil, false
			}
			all = append(all, set...)
		}
		return all, true
	}
	return nil, false
}

// product returns every a+b, if there are at most maxLiterals.
func product(as, bs []string) ([]string, bool) {
	if len(as)*len(bs) > maxLiterals {
		return nil, false
	}
	out := make([]string, 0, len(as)*len(bs))
	for _, a := range as {
		for _, b := range bs {
			out = append(out, a+b)
		}
	}
	return out, true
}

// folds reports whether a case-insensitive match of rs can differ from rs.
func folds(rs []rune) bool {
	for _, r := range rs {
		if unicode.SimpleFold(r) != r {
			return true
		}
	}
	return false
}

// A litScan answers prefilter.pass for many literals in fewer passes over
// the text: it looks only at the occurrences of the literals' last bytes
// (strings.IndexByte, which is fast), and at each one first at the byte
// before it (a literal of two bytes or more must end in one of a few
// pairs) before comparing whole literals. The provider keys' thirteen
// literals ending in _ and eight in - then cost two scans of the text
// instead of twenty-one.
type litScan struct {
	last  []byte              // the distinct last bytes
	pairs [256][4]uint64      // by last byte: the bytes that may precede it
	ends  map[uint16][]string // by (byte before, last byte): the literals
	short prefilter           // literals of one byte, checked as they are
}

// newLitScan returns the scanner of p's literals, or nil when p has too
// few for it to pay (pass them as they are).
func newLitScan(p prefilter) *litScan {
	if len(p) < 8 {
		return nil // a few strings.Contains cost less
	}
	ls := &litScan{ends: make(map[uint16][]string)}
	for _, l := range p {
		if len(l) < 2 {
			ls.short = append(ls.short, l)
			continue
		}
		a, b := l[len(l)-2], l[len(l)-1]
		if !slices.Contains(ls.last, b) {
			ls.last = append(ls.last, b)
		}
		ls.pairs[b][a>>6] |= 1 << (a & 63)
		k := uint16(a)<<8 | uint16(b)
		ls.ends[k] = append(ls.ends[k], l)
	}
	return ls
}

// pass reports whether text holds one of the literals (prefilter.pass).
func (ls *litScan) pass(text string) bool {
	if len(ls.short) > 0 && ls.short.pass(text) {
		return true
	}
	for _, b := range ls.last {
		set := &ls.pairs[b]
		for i := 1; i < len(text); {
			k := strings.IndexByte(text[i:], b)
			if k < 0 {
				break
			}
			i += k
			if a := text[i-1]; set[a>>6]&(1<<(a&63)) != 0 {
				for _, l := range ls.ends[uint16(a)<<8|uint16(b)] {
					if strings.HasSuffix(text[:i+1], l) {
						return true
					}
				}
			}
			i++
		}
	}
	return false
}
