package safety

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

// maxStaticOutput caps the text taken from commands feeding a pipe.
const maxStaticOutput = 64 << 10

// staticOutput returns what s writes to its standard output when that is
// known statically, so `echo CODE | sh` is checked as code instead of
// asking: echo and printf of static words, cat of a heredoc, a here-string
// or static input, tee of static input, and pipelines or { } and ( ) lists
// of those. in is s's standard input.
func (c *checker) staticOutput(s *syntax.Stmt, in stdinSrc, depth int) (string, bool) {
	if s == nil || s.Background || depth > maxNesting {
		return "", false
	}
	for _, r := range s.Redirs {
		switch {
		case r.Op == syntax.Hdoc || r.Op == syntax.DashHdoc:
			in = stdinSrc{isDoc: true}
			in.code, in.dyn, _ = c.docText(r.Hdoc)
		case r.Op == syntax.WordHdoc:
			txt, ok := c.literal(r.Word)
			in = stdinSrc{isDoc: true, code: txt + "\n", dyn: !ok}
		case r.N != nil && r.N.Value == "2":
			// 2>/dev/null and friends leave standard output alone
		default:
			return "", false
		}
	}
	var out string
	ok := false
	switch x := s.Cmd.(type) {
	case *syntax.CallExpr:
		out, ok = c.callOutput(x, in)
	case *syntax.Block:
		out, ok = c.listOutput(x.Stmts, in, depth)
	case *syntax.Subshell:
		out, ok = c.listOutput(x.Stmts, in, depth)
	case *syntax.BinaryCmd:
		switch x.Op {
		case syntax.Pipe, syntax.PipeAll:
			if out, ok = c.staticOutput(x.X, in, depth+1); ok {
				out, ok = c.staticOutput(x.Y, stdinSrc{isDoc: true, code: out}, depth+1)
			}
		default: // && and ||: both may run
			out, ok = c.listOutput([]*syntax.Stmt{x.X, x.Y}, in, depth)
		}
	}
	if len(out) > maxStaticOutput {
		return "", false
	}
	return out, ok
}

// listOutput concatenates the static output of a list of statements.
func (c *checker) listOutput(ss []*syntax.Stmt, in stdinSrc, depth int) (string, bool) {
	var b strings.Builder
	for _, s := range ss {
		out, ok := c.staticOutput(s, in, depth+1)
		if !ok || b.Len()+len(out) > maxStaticOutput {
			return "", false
		}
		b.WriteString(out)
	}
	return b.String(), true
}

// callOutput is staticOutput for a simple command.
func (c *checker) callOutput(x *syntax.CallExpr, in stdinSrc) (string, bool) {
	if len(x.Args) == 0 || len(x.Assigns) > 0 {
		return "", false
	}
	switch name, _ := c.wordLit(x.Args[0]); name {
	case "echo", "printf", "cat", "tee":
	default:
		return "", false
	}
	var fs []field
	for i, w := range x.Args {
		fs = c.resolveWord(w, i, fs)
	}
	for _, f := range fs {
		if f.dyn || f.glob {
			return "", false // globs expand to file names
		}
	}
	args := fs[1:]
	switch fs[0].s {
	case "echo":
		return echoOutput(args), true
	case "printf":
		return printfOutput(args)
	case "cat":
		for _, f := range args {
			if f.s != "-" {
				return "", false // a file
			}
		}
	case "tee":
		for _, f := range args {
			if strings.HasPrefix(f.s, "--") && f.s != "--append" && f.s != "--ignore-interrupts" ||
				len(f.s) > 1 && f.s[0] == '-' && strings.Trim(f.s[1:], "aip") != "" {
				return "", false
			}
		}
	}
	if !in.isDoc || in.dyn {
		return "", false
	}
	return in.code, true
}

// echoOutput returns what bash's echo builtin prints for args.
func echoOutput(args []field) string {
	esc, nl := false, true
	i := 0
	for ; i < len(args); i++ {
		a := args[i].s
		if len(a) < 2 || a[0] != '-' || strings.Trim(a[1:], "neE") != "" {
			break
		}
		for _, ch := range a[1:] {
			switch ch {
			case 'n':
				nl = false
			case 'e':
				esc = true
			case 'E':
				esc = false
			}
		}
	}
	var b strings.Builder
	for k, f := range args[i:] {
		if k > 0 {
			b.WriteByte(' ')
		}
		if !esc {
			b.WriteString(f.s)
		} else if echoEscapes(&b, f.s) {
			return b.String() // \c: no further output
		}
	}
	if nl {
		b.WriteByte('\n')
	}
	return b.String()
}

// echoEscapes writes s with the escapes of echo -e and printf %b decoded
// and reports whether it ended at \c.
func echoEscapes(b *strings.Builder, s string) (stop bool) {
	if strings.IndexByte(s, '\\') < 0 {
		b.WriteString(s)
		return false
	}
	// Rewrite what differs from $'...' (\c, \0NNN), then decode as $'...'.
	var pre strings.Builder
	for i := 0; i < len(s) && !stop; i++ {
		switch {
		case s[i] != '\\' || i+1 >= len(s):
			pre.WriteByte(s[i])
		case s[i+1] == 'c':
			stop = true
		case s[i+1] == '0':
			j := i + 2
			for j < len(s) && j < i+5 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			n, _ := strconv.ParseUint("0"+s[i+2:j], 8, 16)
			fmt.Fprintf(&pre, "\\x%02x", byte(n))
			i = j - 1
		default:
			pre.WriteString(s[i : i+2])
			i++
		}
	}
	ansiC(b, pre.String())
	return stop
}

// printfOutput returns what printf prints for args (format and
// arguments), for the common conversions; ok is false for anything else.
func printfOutput(args []field) (string, bool) {
	if len(args) > 0 && args[0].s == "--" {
		args = args[1:]
	}
	if len(args) == 0 || strings.HasPrefix(args[0].s, "-") {
		return "", false // printf -v VAR and friends
	}
	format, rest := args[0].s, args[1:]
	var b strings.Builder
	for {
		used, stop, ok := printfOnce(&b, format, rest)
		if !ok || b.Len() > maxStaticOutput {
			return "", false
		}
		rest = rest[used:]
		if stop || used == 0 || len(rest) == 0 {
			return b.String(), true
		}
	}
}

// printfOnce applies format once, consuming arguments from args.
func printfOnce(b *strings.Builder, format string, args []field) (used int, stop, ok bool) {
	next := func() string {
		if used < len(args) {
			used++
			return args[used-1].s
		}
		return ""
	}
	for len(format) > 0 {
		i := strings.IndexByte(format, '%')
		if i < 0 {
			i = len(format)
		}
		ansiC(b, format[:i])
		if i == len(format) {
			break
		}
		format = format[i+1:]
		j := 0
		for j < len(format) && strings.IndexByte("-+ #0", format[j]) >= 0 {
			j++
		}
		for j < len(format) && (format[j] >= '0' && format[j] <= '9' || format[j] == '.') {
			j++
		}
		if j >= len(format) {
			return used, false, false
		}
		spec := "%" + format[:j]
		conv := format[j]
		format = format[j+1:]
		switch conv {
		case '%':
			b.WriteByte('%')
		case 's':
			fmt.Fprintf(b, spec+"s", next())
		case 'q':
			fmt.Fprintf(b, spec+"s", shellQuote(next()))
		case 'b':
			var e strings.Builder
			stop = echoEscapes(&e, next())
			fmt.Fprintf(b, spec+"s", e.String())
			if stop {
				return used, true, true
			}
		case 'c':
			a := next()
			if a != "" {
				_, n := utf8.DecodeRuneInString(a)
				a = a[:n]
			}
			fmt.Fprintf(b, spec+"s", a)
		case 'd', 'i', 'u', 'x', 'X', 'o':
			a := strings.TrimSpace(next())
			if a == "" {
				a = "0"
			}
			n, err := strconv.ParseInt(a, 0, 64)
			if err != nil || n < 0 && conv != 'd' && conv != 'i' {
				return used, false, false
			}
			if conv == 'i' || conv == 'u' {
				conv = 'd'
			}
			fmt.Fprintf(b, spec+string(conv), n)
		default:
			return used, false, false
		}
	}
	return used, false, true
}
