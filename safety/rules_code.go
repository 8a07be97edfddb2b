package safety

import (
	"regexp"
	"strings"
	"sync"
)

// Shell code nested in other programs' own languages: awk's system() and
// pipes, sed's e command, and the shell-outs of python, node, perl, ruby
// and php one-liners. The shell-out is recognised and its literal argument
// checked as shell code (or, for an argument vector, as a command); an
// argument only known at run time asks for a shell command line (rule
// dynamic-shell) and is let through for an argument vector, like any
// program run with unknown arguments.

// askBuiltShell is the verdict on a shell-out whose command line is only
// known at run time.
func askBuiltShell(name string) Verdict {
	return Verdict{Decision: Ask, Rule: "dynamic-shell",
		Reason:      name + " runs a shell command built at run time, which cannot be checked",
		Alternative: "run the shell command directly in this command, or write it literally in the program"}
}

// awk checks the program of awk (given as its first operand, not -f FILE):
// system("CMD"), print | "CMD" and "CMD" | getline run CMD with sh -c.
func (c *checker) awk(name string, args []field, in stdinSrc) {
	prog, ok := awkProgram(args)
	if !ok {
		return
	}
	if prog.dyn {
		if strings.Contains(prog.s, "system") || strings.Contains(prog.s, "|") {
			c.report(askBuiltShell(name))
		}
		return
	}
	for _, sh := range awkShellOuts(prog.s) {
		switch {
		case !sh.static:
			c.report(askBuiltShell(name))
		case sh.fed:
			c.extracted(sh.code, stdinSrc{piped: true}) // print | "sh": awk's output is the code
		default:
			c.extracted(sh.code, in)
		}
		if c.done() {
			return
		}
	}
}

// awkProgram returns awk's program text: the first operand, unless -f
// gives the program in a file.
func awkProgram(args []field) (field, bool) {
	for i := 1; i < len(args); i++ {
		a := args[i].s
		switch {
		case a == "--":
			if i+1 < len(args) {
				return args[i+1], true
			}
			return field{}, false
		case a == "-f" || strings.HasPrefix(a, "--file") || strings.HasPrefix(a, "-f") && len(a) > 2:
			return field{}, false
		case a == "-F" || a == "-v" || a == "--field-separator" || a == "--assign":
			i++
		case len(a) > 1 && a[0] == '-':
		default:
			return args[i], true
		}
	}
	return field{}, false
}

// shellOut is a shell command line found in another language's program.
type shellOut struct {
	code   string
	static bool // code is the literal command line
	fed    bool // the program writes to the command's stdin (awk's print | "cmd")
}

// awkShellOuts finds system(...), | "cmd" and "cmd" | getline in an awk
// program.
func awkShellOuts(prog string) []shellOut {
	var out []shellOut
	for i := 0; i < len(prog); i++ {
		switch {
		case prog[i] == '"':
			lit, end := awkString(prog, i)
			rest := strings.TrimLeft(prog[end:], " \t")
			if strings.HasPrefix(rest, "|") && !strings.HasPrefix(rest, "||") &&
				strings.HasPrefix(strings.TrimLeft(strings.TrimLeft(rest[1:], "&"), " \t"), "getline") {
				out = append(out, shellOut{code: lit, static: true})
			}
			i = end - 1
		case prog[i] == '|' && i+1 < len(prog) && prog[i+1] != '|' && (i == 0 || prog[i-1] != '|'):
			rest := strings.TrimLeft(strings.TrimLeft(prog[i+1:], "&"), " \t")
			if strings.HasPrefix(rest, "\"") {
				lit, end := awkString(rest, 0)
				if tail := strings.TrimLeft(rest[end:], " \t"); tail == "" || strings.IndexByte(";}\n)", tail[0]) >= 0 {
					out = append(out, shellOut{code: lit, static: true, fed: true})
				}
			}
		case strings.HasPrefix(prog[i:], "system") && (i == 0 || !isIdentChar(prog[i-1])):
			rest := strings.TrimLeft(prog[i+len("system"):], " \t")
			if !strings.HasPrefix(rest, "(") {
				continue
			}
			arg := strings.TrimSpace(rest[1:])
			if strings.HasPrefix(arg, "\"") {
				lit, end := awkString(arg, 0)
				if strings.HasPrefix(strings.TrimLeft(arg[end:], " \t"), ")") {
					out = append(out, shellOut{code: lit, static: true})
					continue
				}
			}
			out = append(out, shellOut{})
		}
	}
	return out
}

// awkString reads the awk string literal at s[i] (a double quote) and
// returns its value and the offset after it.
func awkString(s string, i int) (string, int) {
	var b strings.Builder
	for j := i + 1; j < len(s); j++ {
		switch ch := s[j]; {
		case ch == '"':
			return b.String(), j + 1
		case ch == '\\' && j+1 < len(s):
			j++
			switch s[j] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(s[j])
			}
		default:
			b.WriteByte(ch)
		}
	}
	return b.String(), len(s)
}

func isIdentChar(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// sed checks sed's script (-e SCRIPT..., or the first operand): the e
// command runs its argument, or without one the pattern space, and the
// s///e flag runs the pattern space, which is text read at run time.
func (c *checker) sed(name string, args []field, in stdinSrc) {
	var scripts []field
	fromFile := false
	i := 1
	for ; i < len(args); i++ {
		a := args[i].s
		switch {
		case a == "--":
			i++
		case a == "-e" || a == "--expression":
			if i+1 < len(args) {
				scripts = append(scripts, args[i+1])
			}
			i++
			continue
		case strings.HasPrefix(a, "--expression="):
			scripts = append(scripts, field{s: a[len("--expression="):], dyn: args[i].dyn})
			continue
		case a == "-f" || a == "--file" || strings.HasPrefix(a, "--file="):
			fromFile = true
			if a == "-f" || a == "--file" {
				i++
			}
			continue
		case a == "-l" || a == "--line-length":
			i++
			continue
		case len(a) > 1 && a[0] == '-':
			if k := strings.IndexByte(a, 'e'); k > 0 && a[1] != '-' {
				if k+1 < len(a) {
					scripts = append(scripts, field{s: a[k+1:], dyn: args[i].dyn})
				} else if i+1 < len(args) {
					scripts = append(scripts, args[i+1])
					i++
				}
			}
			continue
		}
		break
	}
	if len(scripts) == 0 && !fromFile && i < len(args) {
		scripts = append(scripts, args[i])
	}
	for _, s := range scripts {
		if s.dyn {
			if len(sedExecs(strings.ReplaceAll(s.s, dynMark, "x"))) > 0 {
				c.report(askBuiltShell(name))
			}
			continue
		}
		for _, cmd := range sedExecs(s.s) {
			if cmd == "" {
				c.report(Verdict{Decision: Ask, Rule: "dynamic-shell",
					Reason:      name + " runs its input lines as shell commands (the e command or the s///e flag), only known at run time",
					Alternative: "run the commands directly instead of through sed's e"})
				continue
			}
			c.extracted(cmd, in)
		}
	}
}

// sedExecs returns the commands a sed script runs: the argument of each e
// command, or "" for an e command or s///e flag that runs the pattern
// space.
func sedExecs(script string) []string {
	if !strings.Contains(script, "e") {
		return nil
	}
	var out []string
	p := sedParser{s: script}
	for {
		cmd, ok := p.command()
		if !ok {
			break
		}
		switch cmd {
		case '{', '}', '=', 'd', 'D', 'g', 'G', 'h', 'H', 'l', 'n', 'N', 'p', 'P', 'x', 'z', 'F':
		case 'a', 'i', 'c':
			p.text()
		case '#', ':', 'b', 't', 'T', 'r', 'R', 'w', 'W', 'q', 'Q', 'v', 'L':
			p.restOfLine(cmd == 'b' || cmd == 't' || cmd == 'T' || cmd == 'q' || cmd == 'Q' || cmd == 'v')
		case 'e':
			out = append(out, strings.TrimSpace(p.restOfLine(false)))
		case 's', 'y':
			p.delimited(2)
			if cmd == 's' && p.flags() {
				out = append(out, "")
			}
		default:
			return out // not sed as we know it: sed rejects it
		}
	}
	return out
}

// sedParser reads a sed script.
type sedParser struct {
	s string
	i int
}

// command skips to the next command, past its address, and returns the
// command's letter; false at the end of the script.
func (p *sedParser) command() (byte, bool) {
	p.skip(" \t\n;")
	if p.i >= len(p.s) {
		return 0, false
	}
	p.address()
	p.skip(" \t!")
	if p.i >= len(p.s) {
		return 0, false
	}
	p.i++
	return p.s[p.i-1], true
}

func (p *sedParser) skip(chars string) {
	for p.i < len(p.s) && strings.IndexByte(chars, p.s[p.i]) >= 0 {
		p.i++
	}
}

// address skips an address or a range: N, $, /re/, \cREc, first~step,
// addr1,addr2, addr,+N.
func (p *sedParser) address() {
	for k := 0; k < 2; k++ {
		switch {
		case p.i >= len(p.s):
			return
		case p.s[p.i] == '/':
			p.i++
			p.delimitedBy('/')
			p.skip("IM")
		case p.s[p.i] == '\\' && p.i+1 < len(p.s):
			d := p.s[p.i+1]
			p.i += 2
			p.delimitedBy(d)
			p.skip("IM")
		default:
			p.skip("0123456789$~+")
		}
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			continue
		}
		return
	}
}

// delimitedBy skips to after the next unescaped d.
func (p *sedParser) delimitedBy(d byte) {
	for p.i < len(p.s) {
		ch := p.s[p.i]
		p.i++
		if ch == '\\' {
			p.i++
		} else if ch == d {
			return
		}
	}
}

// delimited skips n parts delimited by the character at p.i (s/a/b/).
func (p *sedParser) delimited(n int) {
	if p.i >= len(p.s) {
		return
	}
	d := p.s[p.i]
	p.i++
	for range n {
		p.delimitedBy(d)
	}
}

// flags reads the flags of an s command and reports whether they have e.
func (p *sedParser) flags() bool {
	e := false
	for p.i < len(p.s) {
		switch ch := p.s[p.i]; ch {
		case 'w', 'W':
			p.restOfLine(false)
			return e
		case ';', '\n', '}', ' ', '\t':
			return e
		case 'e':
			e = true
		}
		p.i++
	}
	return e
}

// text skips the text of a, i and c: to the end of the line, and on while
// a line ends in a backslash (a\ TEXT\ TEXT).
func (p *sedParser) text() {
	for p.i < len(p.s) {
		line := p.restOfLine(false)
		n := len(line) - len(strings.TrimRight(line, "\\"))
		if n%2 == 0 {
			return
		}
		p.i++ // the newline
	}
}

// restOfLine reads to the end of the line, or to a ; when semi.
func (p *sedParser) restOfLine(semi bool) string {
	start := p.i
	for p.i < len(p.s) && p.s[p.i] != '\n' && !(semi && (p.s[p.i] == ';' || p.s[p.i] == '}')) {
		p.i++
	}
	return p.s[start:p.i]
}

// Shell-outs of the interpreters' one-liners: the call, then its first
// argument. shell says the argument is a shell command line; otherwise it
// is an argument vector (or a program name). Compiled on first use (a
// command that runs an interpreter's one-liner), not at every program's
// start.
var (
	pyShellOut  = lazyRegexp(`\b(?:os\.(system|popen)|subprocess\.(run|call|check_call|check_output|Popen|getoutput|getstatusoutput))\s*\(`)
	jsShellOut  = lazyRegexp(`\b(execSync|exec|spawnSync|spawn|execFileSync|execFile)\s*\(`)
	plShellOut  = lazyRegexp("\\b(system|exec|qx)\\s*[({]?|`")
	rbShellOut  = lazyRegexp("\\b(system|exec|spawn)\\s*\\(?|%x\\(|`")
	phpShellOut = lazyRegexp("\\b(system|exec|shell_exec|passthru|popen|proc_open)\\s*\\(|`")
)

// lazyRegexp returns a function that compiles expr on its first call.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// interpreterShellOuts checks the shell-outs of an interpreter's program
// text (-c/-e text or a static heredoc): each literal command line is
// checked as shell code, each literal argument vector as a command.
func (c *checker) interpreterShellOuts(name string, prog string, in stdinSrc) {
	var re *regexp.Regexp
	switch {
	case strings.HasPrefix(name, "python"):
		re = pyShellOut()
	case name == "node":
		if !strings.Contains(prog, "child_process") {
			return
		}
		re = jsShellOut()
	case name == "perl":
		re = plShellOut()
	case name == "ruby":
		re = rbShellOut()
	case name == "php":
		re = phpShellOut()
	default:
		return
	}
	for _, m := range re.FindAllStringSubmatchIndex(prog, maxShellOuts) {
		call := ""
		for g := 2; g+1 < len(m); g += 2 {
			if m[g] >= 0 {
				call = prog[m[g]:m[g+1]]
			}
		}
		rest := prog[m[1]:]
		if prog[m[0]] == '`' || strings.HasPrefix(prog[m[0]:], "%x(") || call == "qx" {
			// `cmd` and %x(cmd): the text up to the closing quote.
			end := strings.IndexAny(rest, "`)}")
			if end < 0 {
				continue
			}
			c.shellOutArg(name, rest[:end], !strings.ContainsAny(rest[:end], "$#{@"), true, in)
			continue
		}
		c.shellOutCall(name, call, rest, in)
		if c.done() {
			return
		}
	}
}

// maxShellOuts bounds the shell-outs checked in one program.
const maxShellOuts = 64

// shellOutCall checks the first argument of a shell-out call (the text
// after its opening parenthesis or keyword).
func (c *checker) shellOutCall(name, call, rest string, in stdinSrc) {
	rest = strings.TrimLeft(rest, " \t(")
	lit, end, ok := scriptString(rest)
	shell := false
	switch call {
	case "system", "popen", "getoutput", "getstatusoutput", "execSync", "exec", "shell_exec", "passthru", "qx", "proc_open":
		shell = true
	case "run", "call", "check_call", "check_output", "Popen", "spawn", "spawnSync":
		closeAt := strings.IndexByte(rest, ')')
		if closeAt < 0 {
			closeAt = len(rest)
		}
		shell = strings.Contains(strings.ReplaceAll(rest[:closeAt], " ", ""), "shell=True") ||
			strings.Contains(strings.ReplaceAll(rest[:closeAt], " ", ""), "shell:true")
	}
	if ok && (shell || !strings.HasPrefix(strings.TrimLeft(rest[end:], " \t"), ",")) {
		c.shellOutArg(name, lit, true, shell, in)
		return
	}
	if shell {
		c.report(askBuiltShell(name))
		return
	}
	if strings.HasPrefix(rest, "[") { // an argument vector
		var argv []field
		for _, item := range splitList(rest[1:]) {
			if s, _, ok := scriptString(item); ok {
				argv = append(argv, field{s: s, word: -1})
			} else {
				argv = append(argv, field{s: dynMark, dyn: true, spread: true, word: -1})
			}
		}
		if len(argv) > 0 && !argv[0].dyn {
			c.argv(argv, in)
		}
		return
	}
	if ok { // a program name with arguments after it: spawn("rm", ["-rf", "/"])
		argv := []field{{s: lit, word: -1}}
		after := strings.TrimLeft(rest[end:], " \t,")
		if strings.HasPrefix(after, "[") {
			for _, item := range splitList(after[1:]) {
				if s, _, ok := scriptString(item); ok {
					argv = append(argv, field{s: s, word: -1})
				} else {
					argv = append(argv, field{s: dynMark, dyn: true, spread: true, word: -1})
				}
			}
		}
		c.argv(argv, in)
	}
}

// shellOutArg checks a shell-out's argument: shell code when shell,
// otherwise a program name.
func (c *checker) shellOutArg(name, arg string, static, shell bool, in stdinSrc) {
	switch {
	case !static && shell:
		c.report(askBuiltShell(name))
	case !static:
	case shell:
		c.extracted(arg, in)
	default:
		c.argv([]field{{s: arg, word: -1}}, in)
	}
}

// scriptString reads a string literal of a scripting language at the start
// of s: '...', "..." (not f-strings or ones with interpolation), with
// backslash escapes, and Python's r'...'. It returns the value and the
// offset after it.
func scriptString(s string) (string, int, bool) {
	i := 0
	raw := false
	if strings.HasPrefix(s, "r'") || strings.HasPrefix(s, `r"`) {
		raw, i = true, 1
	}
	if i >= len(s) || s[i] != '\'' && s[i] != '"' {
		return "", 0, false
	}
	q := s[i]
	if strings.HasPrefix(s[i:], strings.Repeat(string(q), 3)) {
		end := strings.Index(s[i+3:], strings.Repeat(string(q), 3))
		if end < 0 {
			return "", 0, false
		}
		return s[i+3 : i+3+end], i + 6 + end, true
	}
	var b strings.Builder
	for j := i + 1; j < len(s); j++ {
		ch := s[j]
		switch {
		case ch == q:
			return b.String(), j + 1, true
		case ch == '\\' && !raw && j+1 < len(s):
			j++
			switch s[j] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(s[j])
			}
		case ch == '\n':
			return "", 0, false
		case q == '"' && (ch == '$' || ch == '#' && j+1 < len(s) && s[j+1] == '{'):
			return "", 0, false // perl, ruby and php interpolate
		default:
			b.WriteByte(ch)
		}
	}
	return "", 0, false
}

// splitList splits the items of a list literal up to its closing ] at
// top-level commas (strings may hold commas and brackets).
func splitList(s string) []string {
	var out []string
	start, depth := 0, 0
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; ch {
		case '\'', '"':
			if _, end, ok := scriptString(s[i:]); ok {
				i += end - 1
			}
		case '[', '(', '{':
			depth++
		case ']', ')', '}':
			if depth == 0 {
				if item := strings.TrimSpace(s[start:i]); item != "" {
					out = append(out, item)
				}
				return out
			}
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
		if len(out) > maxArray {
			return out
		}
	}
	return out
}

// parallel checks GNU parallel: it runs its command words, joined, as
// shell code once per input ({} stands for the input, appended when
// absent), or each input as a command when there are no command words.
// Inputs after ::: are static; inputs read from stdin (or :::: FILE) are
// only known at run time: a command then gets an unknown word, and inputs
// run as commands ask.
func (c *checker) parallel(name string, args []field, in stdinSrc) {
	var cmd, inputs []field
	static := false
	i := 1
	for ; i < len(args); i++ {
		a := args[i].s
		if a == ":::" || a == "::::" || a == ":::+" {
			break
		}
		if len(cmd) == 0 && len(a) > 1 && a[0] == '-' {
			if parallelOptArg(a) {
				i++
			}
			continue
		}
		cmd = append(cmd, args[i])
	}
	if i < len(args) && args[i].s != "::::" {
		static = true
		for _, f := range args[i+1:] {
			if strings.HasPrefix(f.s, ":::") {
				static = static && f.s != "::::"
				continue
			}
			inputs = append(inputs, f)
		}
	}
	if len(cmd) == 0 {
		if !static {
			if in.piped {
				c.report(askFed(name, in))
			} else if i < len(args) {
				c.report(askDynamicShell(name))
			}
			return
		}
		for _, f := range inputs {
			c.commandLine(name, f, stdinSrc{})
		}
		return
	}
	if !static && in.piped && in.later && !cmd[0].dyn && !argsAreData(base(cmd[0].s)) && !shells[base(cmd[0].s)] {
		c.report(askArgsLater(name, base(cmd[0].s)))
		return
	}
	template := joinCode(cmd[0], cmd[1:], false)[0]
	if !static || len(inputs) > maxXargsRuns {
		inputs = []field{{s: "${__bashvisor_unknown}", word: -1}}
	}
	for _, f := range inputs {
		arg := f.s
		if !strings.HasPrefix(arg, "${__bashvisor") {
			arg = shellQuote(arg)
		}
		code := template
		if strings.Contains(code.s, "{}") {
			code.s = strings.ReplaceAll(code.s, "{}", arg)
		} else {
			code.s += " " + arg
		}
		code.dyn = code.dyn || f.dyn
		c.commandLine(name, code, stdinSrc{})
		if c.done() {
			return
		}
	}
}

// parallelOptArg reports whether a parallel option takes the next word.
func parallelOptArg(a string) bool {
	switch a {
	case "-j", "-J", "-P", "-S", "-n", "-N", "-L", "-l", "-s", "-d", "-a", "-E", "-I", "-C", "-X", "--jobs", "--sshlogin",
		"--max-args", "--max-replace-args", "--max-lines", "--delimiter", "--arg-file", "--colsep", "--joblog",
		"--results", "--workdir", "--tmpdir", "--timeout", "--retries", "--delay", "--memfree", "--load",
		"--basefile", "--return", "--env", "--tag-string", "--tagstring":
		return a != "-X"
	}
	return false
}

// tclShellOuts checks the program text of tclsh, wish or expect given on
// stdin as static text: exec and spawn run their words as a command
// (Tcl's exec is no shell: the words are the argument vector).
func (c *checker) tclShellOuts(name, prog string) {
	for _, line := range strings.FieldsFunc(prog, func(r rune) bool { return r == '\n' || r == ';' || r == '[' || r == ']' }) {
		words := strings.Fields(line)
		if len(words) < 2 || words[0] != "exec" && words[0] != "spawn" {
			continue
		}
		var argv []field
		for _, w := range words[1:] {
			if strings.HasPrefix(w, "-") && len(argv) == 0 {
				continue // exec -ignorestderr, spawn -noecho
			}
			w = strings.Trim(w, `{}"`)
			if strings.ContainsAny(w, "$") {
				argv = append(argv, field{s: dynMark, dyn: true, spread: true, word: -1})
				continue
			}
			argv = append(argv, field{s: w, word: -1})
		}
		if len(argv) > 0 && !argv[0].dyn {
			c.argv(argv, stdinSrc{})
		}
		if c.done() {
			return
		}
	}
}
