package safety

import (
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

// Agents write files with heredocs whose delimiter is quoted (cat <<'EOF' >
// file.py): the body is literal text, often many kilobytes, and the shell
// parser reads it a character at a time, which costs more than the rest of
// the analysis together. So a source parses a skeleton of its text first,
// with the bodies of such heredocs cut out, and puts each body back into
// the tree as the literal it is. The parser must agree: every cut body's
// heredoc must be where the cut assumed, with the same delimiter, and
// empty in the skeleton's tree; otherwise (and when the skeleton does not
// parse, so that errors name the right line) the whole text is parsed.

// A hole is a heredoc body cut out of a source's text.
type hole struct {
	op    int    // offset of the heredoc's << in the skeleton
	at    int    // offset in the skeleton where the body was
	body  string // the body: its lines, each with its newline
	delim string
}

// cutBodies returns text without the bodies of its heredocs with a quoted
// delimiter (<<'EOF', <<"EOF", <<\EOF), and where they were; nil holes
// when there are none. It does not decide what the shell sees: the parser
// confirms every hole (see fillBodies).
func cutBodies(text string) (string, []hole) {
	var holes []hole
	var b strings.Builder
	last, removed := 0, 0
	for i := 0; i < len(text); {
		k := strings.Index(text[i:], "<<")
		if k < 0 {
			break
		}
		op := i + k
		j := op + 2
		if j < len(text) && (text[j] == '<' || text[j] == '-') {
			i = j + 1 // a here-string, or <<- (its body loses leading tabs)
			continue
		}
		for j < len(text) && (text[j] == ' ' || text[j] == '\t') {
			j++
		}
		delim, end, ok := quotedDelim(text, j)
		if !ok {
			i = j
			continue
		}
		nl, ok := lineEnd(text, end)
		if !ok {
			i = end
			continue
		}
		start := nl + 1
		found := -1
		for p := start; p <= len(text); {
			e := strings.IndexByte(text[p:], '\n')
			line := text[p:]
			if e >= 0 {
				line = text[p : p+e]
			}
			if line == delim {
				found = p
				break
			}
			if e < 0 {
				break
			}
			p += e + 1
		}
		if found < 0 {
			break // no end: the parser reports it
		}
		if body := text[start:found]; found > start && utf8.ValidString(body) && strings.IndexByte(body, 0) < 0 {
			// (the parser rejects invalid UTF-8 and NUL bytes in a body too)
			if b.Len() == 0 {
				b.Grow(len(text))
			}
			b.WriteString(text[last:start])
			holes = append(holes, hole{op: op - removed, at: start - removed, body: text[start:found], delim: delim})
			last = found
			removed += found - start
		}
		i = found + len(delim)
	}
	if holes == nil {
		return text, nil
	}
	b.WriteString(text[last:])
	return b.String(), holes
}

// quotedDelim reads a heredoc delimiter at text[i:] quoted as a whole:
// 'WORD', "WORD" or \WORD, WORD made of letters, digits, _ . and -.
func quotedDelim(text string, i int) (delim string, end int, ok bool) {
	if i >= len(text) {
		return "", 0, false
	}
	q := text[i]
	if q != '\'' && q != '"' && q != '\\' {
		return "", 0, false
	}
	j := i + 1
	for j < len(text) && isDelimChar(text[j]) {
		j++
	}
	delim = text[i+1 : j]
	if delim == "" {
		return "", 0, false
	}
	if q == '\\' {
		return delim, j, j == len(text) || !isWordChar(text[j])
	}
	if j >= len(text) || text[j] != q {
		return "", 0, false
	}
	j++
	return delim, j, j == len(text) || !isWordChar(text[j])
}

func isDelimChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
}

// isWordChar reports whether c would continue a shell word.
func isWordChar(c byte) bool {
	return !strings.ContainsRune(" \t\n;&|()<>", rune(c))
}

// lineEnd returns the offset of the newline that ends the line from
// text[i:], where a heredoc body starts, when the rest of the line is
// simple: quotes closed on the line, no line continuation, no other
// heredoc.
func lineEnd(text string, i int) (int, bool) {
	quote := byte(0)
	for ; i < len(text); i++ {
		c := text[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			}
		case c == '\\':
			i++
			if i < len(text) && text[i] == '\n' {
				return 0, false
			}
		case quote == '"':
			if c == '"' {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '\n':
			return i, true
		case c == '<' && i+1 < len(text) && text[i+1] == '<':
			return 0, false
		case c == '#' && (text[i-1] == ' ' || text[i-1] == '\t'):
			e := strings.IndexByte(text[i:], '\n')
			if e < 0 {
				return 0, false
			}
			return i + e, true
		}
	}
	return 0, false
}

// fillBodies puts the cut bodies back into f, the skeleton's tree, as the
// literal words the parser makes of them, and reports whether every hole
// is a quoted heredoc of f with an empty body where the cut assumed it.
func fillBodies(f *syntax.File, holes []hole) bool {
	byOp := make(map[int]*syntax.Redirect, len(holes))
	syntax.Walk(f, func(n syntax.Node) bool {
		if r, ok := n.(*syntax.Redirect); ok && r.Op == syntax.Hdoc && r.Hdoc == nil {
			byOp[int(r.OpPos.Offset())] = r
		}
		return true
	})
	for _, h := range holes {
		r := byOp[h.op]
		if r == nil || !isQuotedDelim(r.Word, h.delim) {
			return false
		}
		pos := syntax.NewPos(uint(h.at), 0, 0)
		r.Hdoc = &syntax.Word{Parts: []syntax.WordPart{&syntax.Lit{ValuePos: pos, ValueEnd: pos, Value: h.body}}}
	}
	return true
}

// isQuotedDelim reports whether w is 'delim', "delim" or \delim.
func isQuotedDelim(w *syntax.Word, delim string) bool {
	if w == nil || len(w.Parts) != 1 {
		return false
	}
	switch p := w.Parts[0].(type) {
	case *syntax.SglQuoted:
		return !p.Dollar && p.Value == delim
	case *syntax.DblQuoted:
		if len(p.Parts) != 1 || p.Dollar {
			return false
		}
		l, ok := p.Parts[0].(*syntax.Lit)
		return ok && l.Value == delim
	case *syntax.Lit:
		return p.Value == `\`+delim
	}
	return false
}
