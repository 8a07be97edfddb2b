package safety

import (
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestPrefilterLiterals(t *testing.T) {
	cases := []struct {
		name, pattern, always string
		want                  []string // nil: no prefilter
	}{
		{"a literal", `abc`, "", []string{"abc"}},
		{"any branch of an alternation", `sudo|doas|run0`, "", []string{"doas", "run0", "sudo"}},
		{"a literal containing another filters nothing more", `su|sudo`, "", []string{"su"}},
		{"the most selective part of a sequence", `a.*bcd\s*e`, "", []string{"bcd"}},
		{"a run of parts with few matches spells them out", `g[hi]t`, "", []string{"ght", "git"}},
		{"what the text always contains is no filter", `^tool:bash:.*`, actionPrefix, nil},
		{"but the rest of the pattern is", `^tool:bash:(?:\S*/)?(?:git)\s+push`, actionPrefix, []string{"push"}},
		{"an optional part is no filter", `(?:abc)?d*`, "", nil},
		{"a repeated part is", `(?:abc){2,}`, "", []string{"abc"}},
		{"letters matched in any case are no filter", `(?i)cookie`, "", nil},
		{"other characters matched in any case are", `(?i)cookie\s*:`, "", []string{":"}},
		{"a branch without literals spoils the alternation", `abc|\w+`, "", nil},
		{"a negated class is no filter", `[^a]`, "", nil},
		{"the replacement character also matches invalid bytes", "\uFFFDabc|x", "", nil},
		{"too many literals are no filter", `[a-z0-9]`, "", nil},
		{"a pattern that does not compile has none", `(`, "", nil},
	}
	for _, tc := range cases {
		got := []string(newPrefilter(tc.pattern, tc.always))
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: newPrefilter(%q) = %q, want %q", tc.name, tc.pattern, got, tc.want)
		}
	}
}

// TestPrefilterNeverSkipsAMatch: for every pattern the package filters
// (redaction patterns, the presets' rules), text that the pattern matches
// passes its prefilter. The texts are drawn from the patterns themselves,
// in random surroundings.
func TestPrefilterNeverSkipsAMatch(t *testing.T) {
	type pattern struct {
		re  *regexp.Regexp
		pre prefilter
	}
	var pats []pattern
	for _, r := range redactRules() {
		pats = append(pats, pattern{r.re, r.pre})
	}
	configSetRe, configSetPre := configSet()
	pats = append(pats, pattern{configSetRe, configSetPre})
	for _, name := range Presets() {
		p, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Rules {
			c, err := compileRule(r.Pattern)
			if err != nil {
				t.Fatal(err)
			}
			pats = append(pats, pattern{c.re, c.pre})
		}
	}
	for _, p := range pats {
		re, err := syntax.Parse(p.re.String(), syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		re = re.Simplify()
		matched := 0
		rapid.Check(t, func(t *rapid.T) {
			text := rapid.StringMatching(`[ -~]{0,4}`).Draw(t, "before") + sample(t, re) +
				rapid.StringMatching(`[ -~]{0,4}`).Draw(t, "after")
			if !p.re.MatchString(text) {
				return
			}
			matched++
			if !p.pre.pass(text) {
				t.Fatalf("%q matches %q but fails its prefilter %q", p.re, text, p.pre)
			}
		})
		if matched == 0 {
			t.Errorf("no text drawn matched %q: nothing was tested", p.re)
		}
	}
}

// sample draws a string that re (mostly) matches: assertions such as ^ or
// \b are ignored, so the caller checks.
func sample(t *rapid.T, re *syntax.Regexp) string {
	switch re.Op {
	case syntax.OpLiteral:
		s := string(re.Rune)
		if re.Flags&syntax.FoldCase != 0 && rapid.Bool().Draw(t, "upper") {
			s = strings.ToUpper(s)
		}
		return s
	case syntax.OpCharClass:
		i := rapid.IntRange(0, len(re.Rune)/2-1).Draw(t, "range")
		lo, hi := re.Rune[2*i], min(re.Rune[2*i+1], re.Rune[2*i]+200)
		return string(rune(rapid.IntRange(int(lo), int(hi)).Draw(t, "rune")))
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return rapid.SampledFrom([]string{"a", " ", "-", "/", "\t", "é"}).Draw(t, "any")
	case syntax.OpCapture:
		return sample(t, re.Sub[0])
	case syntax.OpConcat:
		var b strings.Builder
		for _, sub := range re.Sub {
			b.WriteString(sample(t, sub))
		}
		return b.String()
	case syntax.OpAlternate:
		return sample(t, re.Sub[rapid.IntRange(0, len(re.Sub)-1).Draw(t, "branch")])
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		lo, hi := 0, 3
		switch re.Op {
		case syntax.OpPlus:
			lo = 1
		case syntax.OpQuest:
			hi = 1
		case syntax.OpRepeat:
			lo = re.Min
			hi = lo + 3
			if re.Max >= 0 {
				hi = re.Max
			}
		}
		var b strings.Builder
		for range rapid.IntRange(lo, hi).Draw(t, "times") {
			b.WriteString(sample(t, re.Sub[0]))
		}
		return b.String()
	}
	return "" // assertions, empty match
}

// TestLitScanSameAsContains: the scanner of many literals answers as
// strings.Contains of each does, on random texts built from pieces of the
// redaction rules' literals (and of other bytes), for every rule that
// gets a scanner.
func TestLitScanSameAsContains(t *testing.T) {
	var sets []prefilter
	var pieces []string
	for _, r := range redactRules() {
		if r.scan != nil {
			sets = append(sets, r.pre)
		}
		for _, l := range r.pre {
			pieces = append(pieces, l, l[:len(l)/2], l[len(l)/2:])
		}
	}
	if len(sets) == 0 {
		t.Fatal("no redaction rule has a scanner")
	}
	pieces = append(pieces, "a", "_", "-", " ", "\n", "x", "é")
	piece := rapid.SampledFrom(pieces)
	rapid.Check(t, func(t *rapid.T) {
		text := strings.Join(rapid.SliceOfN(piece, 0, 12).Draw(t, "text"), "")
		for _, p := range sets {
			if got, want := newLitScan(p).pass(text), p.pass(text); got != want {
				t.Fatalf("%q in %q: scanner %v, Contains %v", p, text, got, want)
			}
		}
	})
}
