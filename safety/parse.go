package safety

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"mvdan.cc/sh/v3/syntax"
)

// A syntax.Parser is not safe for concurrent use, so parsers are pooled, one
// pool per language variant.
var (
	bashParsers = sync.Pool{New: func() any {
		return syntax.NewParser(syntax.Variant(syntax.LangBash))
	}}
	zshParsers = sync.Pool{New: func() any {
		return syntax.NewParser(syntax.Variant(syntax.LangZsh))
	}}
)

// maxBracketDepth bounds the bracket nesting accepted before parsing: the
// parser slows down superlinearly on absurdly deep nesting.
const maxBracketDepth = 1000

// errTooDeep is returned by parse for input nested too deeply.
var errTooDeep = errors.New("brackets nested more than 1000 levels deep")

// bracketDepth returns the deepest nesting of ( and { in src, counting
// every bracket (quoted or not): a cheap upper bound of the syntax depth.
func bracketDepth(src string) int {
	d, max := 0, 0
	for i := 0; i < len(src); i++ {
		switch src[i] {
		case '(', '{':
			d++
			if d > max {
				max = d
			}
		case ')', '}':
			if d > 0 {
				d--
			}
		}
	}
	return max
}

// parses counts the texts parsed, so that a test can prove that Analyze
// parses a command once.
var parses atomic.Int64

// parse parses src as bash (or zsh) with a pooled parser. It is the only
// caller of syntax.Parser.Parse in the package.
func parse(src string, zsh bool) (*syntax.File, error) {
	if bracketDepth(src) > maxBracketDepth {
		return nil, errTooDeep
	}
	pool := &bashParsers
	if zsh {
		pool = &zshParsers
	}
	p := pool.Get().(*syntax.Parser)
	parses.Add(1)
	f, err := p.Parse(strings.NewReader(src), "")
	pool.Put(p)
	return f, err
}

// A source is a command's text with its bash syntax tree, parsed the first
// time an analysis asks for it and then shared by all of them. It is not
// safe for concurrent use; each call analyses its own source.
type source struct {
	text       string
	stdinFed   bool   // see Options.StdinFed
	terminal   bool   // see Options.Terminal
	workDir    string // see Options.WorkDir
	file       *syntax.File
	err        error
	parsed     bool
	parts      []part // simple commands, see commandParts
	split      bool   // parts is set
	frameRO    bool   // see readOnlyFrame, once frameKnown
	frameKnown bool
	holes      []hole // heredoc bodies cut out of the parsed text (see cutBodies)
	whole      bool   // parse the whole text, cutting nothing (for tests)
	discard    string // the checker's git command that discards work (see gitDiscards), once checked
	checked    bool   // the checker ran on the text (see discards)
}

// discards returns the first git command of the text that discards
// uncommitted work (see gitDiscards), or "", running the checker once.
func (s *source) discards() string {
	if !s.checked {
		checkSource(s)
	}
	return s.discard
}

// tree returns the text's syntax tree, or the parse error. Positions in
// the tree are offsets into a skeleton of the text: off translates them.
func (s *source) tree() (*syntax.File, error) {
	if s.parsed {
		return s.file, s.err
	}
	s.parsed = true
	if skel, holes := cutBodies(s.text); holes != nil && !s.whole {
		if f, err := parse(skel, false); err == nil && fillBodies(f, holes) {
			s.file, s.holes = f, holes
			return f, nil
		}
	}
	s.file, s.err = parse(s.text, false)
	return s.file, s.err
}

// off returns the offset in the text of position p of the tree.
func (s *source) off(p syntax.Pos) int {
	o := int(p.Offset())
	add := 0
	for _, h := range s.holes {
		if h.at > o {
			break
		}
		add += len(h.body)
	}
	return o + add
}
