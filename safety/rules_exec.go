package safety

import (
	"strings"
)

var shells = map[string]bool{"bash": true, "sh": true, "zsh": true, "dash": true, "ksh": true,
	"ash": true, "mksh": true, "rbash": true, "yash": true, "posh": true, "lksh": true}

var interpreters = map[string]bool{"python": true, "python3": true, "python2": true, "perl": true,
	"ruby": true, "node": true, "php": true, "pwsh": true, "osascript": true}

// programArgs returns the program-text arguments of an interpreter:
// python -c CODE, perl -e/-E CODE, ruby -e CODE, node -e/-p/--eval/--print
// CODE, php -r CODE, osascript -e CODE, pwsh -c/-Command CODE.
func programArgs(name string, args []field) []field {
	var code, withArg, stop string
	var long []string
	switch {
	case strings.HasPrefix(name, "python"):
		code, withArg, stop = "c", "WXQ", "m"
	case name == "perl":
		code = "eE"
	case name == "ruby":
		code, withArg = "e", "rICE"
	case name == "node":
		code, withArg, long = "ep", "r", []string{"eval", "print"}
	case name == "php":
		code, withArg = "r", "cdz"
	case name == "osascript":
		code, withArg = "e", "s"
	case name == "pwsh":
		long = []string{"c", "command"} // -Command, case-insensitive
	}
	var out []field
	for i := 1; i < len(args); i++ {
		f := args[i]
		a := f.s
		if a == "--" || a == "-" || !strings.HasPrefix(a, "-") {
			break // the script and its arguments
		}
		if name == "pwsh" || strings.HasPrefix(a, "--") {
			n, v, eq := strings.Cut(strings.TrimLeft(a, "-"), "=")
			switch {
			case !contains(long, strings.ToLower(n)):
			case eq:
				out = append(out, field{s: v, dyn: f.dyn, sub: f.sub, word: -1})
			case i+1 < len(args):
				i++
				out = append(out, args[i])
			}
			continue
		}
	cluster:
		for j := 1; j < len(a); j++ {
			switch ch := a[j]; {
			case strings.IndexByte(code, ch) >= 0:
				if j+1 < len(a) {
					out = append(out, field{s: a[j+1:], dyn: f.dyn, sub: f.sub, word: -1})
				} else if i+1 < len(args) {
					i++
					out = append(out, args[i])
				}
				break cluster
			case strings.IndexByte(stop, ch) >= 0:
				return out
			case strings.IndexByte(withArg, ch) >= 0:
				if j == len(a)-1 {
					i++
				}
				break cluster
			}
		}
	}
	return out
}

// askFed is the verdict on a shell or interpreter that reads its program
// from stdin src: a pipe, or input sent to the job later (Options.StdinFed).
func askFed(name string, src stdinSrc) Verdict {
	if src.later {
		return Verdict{Decision: Ask, Rule: "stdin-shell",
			Reason:      name + " reads the code it runs from its stdin, which takes input sent later (stdin pipe or tty), so that code is only known at run time",
			Alternative: "run a script file, or start a program that reads data rather than code"}
	}
	return askFedShell(name, false)
}

func askFedShell(name string, proc bool) Verdict {
	if proc {
		return Verdict{Decision: Ask, Rule: "procsubst-shell",
			Reason:      name + " runs a script produced by a process substitution, only known at run time",
			Alternative: "save the script to a file, read it, then run it"}
	}
	return Verdict{Decision: Ask, Rule: "pipe-to-shell",
		Reason:      "pipes text into " + name + ", so the code it runs is only known at run time",
		Alternative: "save the script to a file (e.g. curl -o script.sh URL), read it, then run it"}
}

// readsProgramFromStdin reports whether an interpreter reads the program
// it runs from stdin: no script, -c or -e text, a script named - or
// /dev/stdin, or an interactive mode (python -i, node -i, php -a, python
// -m pdb/code) that reads code after the script.
func readsProgramFromStdin(args []field) bool {
	for i, f := range args[1:] {
		a := f.s
		if isStdinPath(a) || a == "--interactive" || a == "-a" && base(args[0].s) == "php" {
			return true
		}
		if a == "-m" && i+2 < len(args) {
			switch args[i+2].s {
			case "pdb", "code", "idlelib", "IPython", "ptpython", "bpython":
				return true
			}
			return false
		}
		if n := base(args[0].s); (strings.HasPrefix(n, "python") || n == "node") &&
			len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.IndexByte(a, 'i') > 0 && !strings.ContainsAny(a[1:], "cemEpr") {
			return true // python -i, node -i (perl -i and ruby -i edit files in place)
		}
		if !strings.HasPrefix(a, "-") {
			return false // a script file
		}
		if strings.HasPrefix(a, "--") {
			if a == "--eval" || a == "--print" || strings.HasPrefix(a, "--eval=") {
				return false
			}
			continue
		}
		if strings.ContainsAny(a[1:], "cemEpr") {
			return false
		}
	}
	return true
}

// shell handles bash/sh/zsh...: -c CODE is re-parsed; code on stdin from a
// pipe or a process substitution is only known at run time.
func (c *checker) shell(name string, args []field, in stdinSrc) {
	appended := c.appended
	c.appended = false
	if len(args) == 2 && (args[1].s == "--version" || args[1].s == "--help") {
		return // bash --version; bash -h is -o hashall and reads stdin
	}
	hasC, readStdin := false, false
	i := 1
	for ; i < len(args); i++ {
		a := args[i].s
		if a == "--" || a == "-" {
			i++
			break
		}
		if len(a) < 2 || a[0] != '-' && a[0] != '+' || args[i].dyn {
			break
		}
		if strings.HasPrefix(a, "--") {
			if a == "--rcfile" || a == "--init-file" {
				i++
			}
			continue
		}
		for j := 1; j < len(a); j++ {
			switch a[j] {
			case 'c':
				hasC = true
			case 's':
				readStdin = true
			case 'o', 'O':
				if j == len(a)-1 {
					i++
				}
				j = len(a)
			}
		}
	}
	zsh := name == "zsh"
	if appended && (hasC && (i >= len(args) || strings.Contains(args[i].s, "{}")) || !hasC && !readStdin && i >= len(args)) {
		c.report(Verdict{Decision: Ask, Rule: "dynamic-shell",
			Reason:      "xargs gives " + name + " the code or script it runs from its input, only known at run time",
			Alternative: "write the code out literally (xargs sh -c 'CODE \"$@\"' sh) so the input is only data"})
		return
	}
	if hasC {
		if i >= len(args) {
			return
		}
		if args[i].dyn {
			c.report(askDynamicShell(name + " -c"))
			return
		}
		// sh -c CODE [NAME [ARGS...]]: ARGS are $1..., unless xargs
		// adds more at run time.
		if appended {
			c.nested(args[i].s, zsh, in)
			return
		}
		var params []field
		var arg0 *field
		if i+1 < len(args) {
			arg0 = &args[i+1]
		}
		if i+2 < len(args) {
			params = args[i+2:]
		}
		c.nestedParams(args[i].s, zsh, in, arg0, params)
		return
	}
	if !readStdin && i < len(args) {
		c.script(name, args[i], in)
		return
	}
	c.stdinCode(name, zsh, in)
}

// script checks a script operand of a shell or source: a process
// substitution or /dev/stdin means code only known at run time (or the
// heredoc on stdin); a file is not ours to read.
func (c *checker) script(name string, f field, in stdinSrc) {
	switch {
	case c.fedFile(f):
		c.report(askFedFile(f.s))
	case f.proc:
		c.report(askFedShell(name, true))
	case isStdinPath(f.s):
		c.stdinCode(name, false, in)
	case f.dyn && (f.taint || in.piped && in.later):
		// read l; . "$l" with l=/dev/stdin runs the input sent later
		c.report(askFed(name, stdinSrc{piped: true, later: true}))
	}
}

// stdinCode checks a shell that reads its program from stdin.
func (c *checker) stdinCode(name string, zsh bool, in stdinSrc) {
	switch {
	case in.isDoc && in.dyn:
		c.report(Verdict{Decision: Ask, Rule: "dynamic-shell",
			Reason:      "feeds " + name + " a heredoc whose code is only known at run time",
			Alternative: "quote the heredoc delimiter (<<'EOF') or write the code out literally"})
	case in.isDoc:
		c.nested(in.code, zsh, stdinSrc{})
	case in.piped:
		c.report(askFed(name, in))
	}
}

func (c *checker) eval(args []field, in stdinSrc) {
	var b strings.Builder
	for i, f := range args[1:] {
		if f.dyn {
			c.report(Verdict{Decision: Ask, Rule: "dynamic-eval",
				Reason:      "eval runs code that is only known at run time",
				Alternative: "run the command directly instead of through eval"})
			return
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(f.s)
	}
	if b.Len() > 0 {
		c.nested(b.String(), false, in)
	}
}

func (c *checker) su(args []field, in stdinSrc) {
	var code *field
	for i := 1; i < len(args) && code == nil; i++ {
		a := args[i].s
		switch {
		case a == "-c" || a == "--command":
			if i+1 < len(args) {
				code = &args[i+1]
			}
		case strings.HasPrefix(a, "--command="):
			code = &field{s: a[len("--command="):], dyn: args[i].dyn}
		case a == "-s" || a == "--shell" || a == "-g" || a == "--group" || a == "-G" ||
			a == "--supp-group" || a == "-w" || a == "--whitelist-environment":
			i++
		case len(a) > 2 && a[0] == '-' && a[1] != '-':
			if k := strings.IndexByte(a, 'c'); k > 0 {
				if k+1 < len(a) {
					code = &field{s: a[k+1:], dyn: args[i].dyn}
				} else if i+1 < len(args) {
					code = &args[i+1]
				}
			}
		}
	}
	if code == nil {
		if in.piped {
			c.report(askFed("su", in))
		}
		return
	}
	if code.dyn {
		c.report(askDynamicShell("su -c"))
		return
	}
	c.nested(code.s, false, in)
}

// ssh HOST COMMAND...: the remote command is shell code too.
func (c *checker) ssh(args []field, in stdinSrc) {
	i := 1
	for i < len(args) {
		a := args[i].s
		if a == "--" {
			i++
			break
		}
		if len(a) < 2 || a[0] != '-' || args[i].dyn {
			break
		}
		i++
		for j := 1; j < len(a); j++ {
			if strings.IndexByte("BbcDEeFIiJLlmOoPpQRSWw", a[j]) >= 0 {
				if j == len(a)-1 {
					i++
				}
				break
			}
		}
	}
	i++ // host
	if i >= len(args) {
		return
	}
	var b strings.Builder
	for k, f := range args[i:] {
		if f.dyn {
			return // unknown remote code: the remote side is not ours to judge
		}
		if k > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(f.s)
	}
	c.nested(b.String(), false, in) // the remote command reads ssh's stdin
}
