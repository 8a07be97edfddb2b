package safety

import (
	"sort"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// addCoAuthor inserts ` --trailer "Co-authored-by: TRAILER"` right after
// the `commit` word of every real `git … commit` invocation in the
// source's command (Options.CoAuthor; Analysis.Run is the result). See
// Options.CoAuthor for what counts as a commit. The trailer goes right
// after the `commit` word rather than at the end, so it stays before any
// `--` and pathspecs.
func addCoAuthor(src *source, trailer string) string {
	command := src.text
	trailer = strings.TrimSpace(trailer)
	if trailer == "" || !strings.Contains(command, "commit") || len(command) > maxCommandBytes {
		return command
	}
	f, err := src.tree()
	if err != nil {
		return command
	}
	want := "Co-authored-by: " + trailer
	var inserts []int
	syntax.Walk(f, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		if p, ok := commitWordEnd(call, want); ok {
			inserts = append(inserts, src.off(p))
		}
		return true
	})
	if len(inserts) == 0 {
		return command
	}
	sort.Ints(inserts)
	ins := ` --trailer "` + escapeDQ(want) + `"`
	var b strings.Builder
	b.Grow(len(command) + len(inserts)*len(ins))
	last := 0
	for _, off := range inserts {
		if off < last || off > len(command) {
			continue
		}
		b.WriteString(command[last:off])
		b.WriteString(ins)
		last = off
	}
	b.WriteString(command[last:])
	return b.String()
}

// commitWordEnd returns the offset just after the `commit` word when call
// is a git commit that lacks the trailer want.
func commitWordEnd(call *syntax.CallExpr, want string) (syntax.Pos, bool) {
	var r resolver
	var args []field
	for i, w := range call.Args {
		args = r.resolveWord(w, i, args)
	}
	for len(args) > 0 {
		if args[0].dyn {
			return syntax.Pos{}, false
		}
		rest, kind := unwrapOne(args)
		if kind != wrapped {
			break
		}
		args = rest
	}
	if len(args) == 0 || base(args[0].s) != "git" {
		return syntax.Pos{}, false
	}
	i := gitSub(args)
	if i < 0 || args[i].s != "commit" || !args[i].one || args[i].word < 0 {
		return syntax.Pos{}, false
	}
	lw := strings.ToLower(want)
	for _, a := range args[i+1:] {
		if strings.Contains(strings.ToLower(a.s), lw) {
			return syntax.Pos{}, false
		}
	}
	return call.Args[args[i].word].End(), true
}

// escapeDQ escapes s for use inside double quotes.
func escapeDQ(s string) string {
	if !strings.ContainsAny(s, "\"$`\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"', '$', '`', '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
