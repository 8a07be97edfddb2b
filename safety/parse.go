package safety

import (
	"strings"
	"sync"

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

// parse parses src as bash (or zsh) with a pooled parser.
func parse(src string, zsh bool) (*syntax.File, error) {
	pool := &bashParsers
	if zsh {
		pool = &zshParsers
	}
	p := pool.Get().(*syntax.Parser)
	f, err := p.Parse(strings.NewReader(src), "")
	pool.Put(p)
	return f, err
}
