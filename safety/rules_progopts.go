package safety

import "strings"

// Options whose value is a command another program runs: rg --pre PROG
// runs PROG FILE for each file it searches, sort --compress-program=PROG
// feeds PROG the data, tar --to-command=CMD runs CMD with sh -c, rsync -e
// CMD, ssh -o ProxyCommand=CMD, nc -e PROG. The command is checked like
// any other: a shell given the searched files runs their text, a shell
// given the data runs it (pipe-to-shell).

// How a program-valued option's value runs.
const (
	optShell     = iota + 1 // a shell command line (sh -c VALUE)
	optFiles                // a program run with each file operand: VALUE FILE
	optData                 // a program fed the data on its stdin
	optProg                 // a program run with arguments of its own
	optShellData            // a shell command line fed the data on its stdin
)

// A progOpt is an option whose value is a command: the short letter
// (0: none), the long name ("" none) and how it runs.
type progOpt struct {
	short byte
	long  string
	kind  int
}

// progOpts returns the program-valued options of program name.
func progOpts(name string) []progOpt {
	switch name {
	case "rg":
		return []progOpt{{0, "pre", optFiles}, {0, "hostname-bin", optProg}}
	case "sort":
		return []progOpt{{0, "compress-program", optData}}
	case "tar", "gtar":
		return []progOpt{{'I', "use-compress-program", optShellData}, {0, "to-command", optShellData},
			{'F', "info-script", optShell}, {0, "new-volume-script", optShell}}
	case "zip":
		return []progOpt{{0, "unzip-command", optShell}}
	case "rsync":
		return []progOpt{{'e', "rsh", optShell}, {0, "rsync-path", optShell}}
	case "scp", "sftp":
		return []progOpt{{'S', "", optProg}}
	case "nc", "ncat", "netcat":
		return []progOpt{{'e', "exec", optProg}, {'c', "sh-exec", optShell}, {0, "lua-exec", optProg}}
	case "man":
		return []progOpt{{'P', "pager", optShell}}
	}
	return nil
}

// progRun is a command a program-valued option gives: its value and how
// it runs.
type progRun struct {
	val  field
	kind int
}

// progOptions checks the program-valued options of name (see progOpts),
// tar's --checkpoint-action=exec=CMD, and ssh, scp and sftp's -o
// ProxyCommand=CMD / LocalCommand=CMD.
func (c *checker) progOptions(name string, args []field, in stdinSrc) {
	opts := progOpts(name)
	if opts == nil && name != "ssh" && name != "scp" && name != "sftp" && name != "tar" {
		return
	}
	runs, files := scanProgOpts(name, opts, args)
	for _, r := range runs {
		c.progRun(name, r, files, in)
		if c.done() {
			return
		}
	}
}

// scanProgOpts returns the commands the options of args give, and the
// operands.
func scanProgOpts(name string, opts []progOpt, args []field) (runs []progRun, files []field) {
	sshLike := name == "ssh" || name == "scp" || name == "sftp"
	for i := 1; i < len(args); i++ {
		f := args[i]
		a := f.s
		next := func() (field, bool) {
			if i+1 < len(args) {
				i++
				return args[i], true
			}
			return field{}, false
		}
		switch {
		case a == "--":
			return runs, append(files, args[i+1:]...)
		case strings.HasPrefix(a, "--"):
			n, v, eq := strings.Cut(a[2:], "=")
			if cmd, ok := strings.CutPrefix(v, "exec="); ok && name == "tar" && n == "checkpoint-action" {
				runs = append(runs, progRun{field{s: cmd, dyn: f.dyn, word: -1}, optShell})
			}
			for _, o := range opts {
				switch {
				case o.long == "" || o.long != n:
				case eq:
					runs = append(runs, progRun{field{s: v, dyn: f.dyn, word: -1}, o.kind})
				default:
					if val, ok := next(); ok {
						runs = append(runs, progRun{val, o.kind})
					}
				}
			}
		case sshLike && strings.HasPrefix(a, "-o"):
			opt := a[2:]
			if opt == "" {
				if val, ok := next(); ok {
					opt, f = val.s, val
				}
			}
			if v, ok := sshCommandOption(opt); ok {
				runs = append(runs, progRun{field{s: v, dyn: f.dyn, word: -1}, optShell})
			}
		case len(a) > 1 && a[0] == '-':
			if o, val, ok := shortProgOpt(opts, a); ok {
				switch {
				case val != "":
					runs = append(runs, progRun{field{s: val, dyn: f.dyn, word: -1}, o.kind})
				default:
					if v, ok := next(); ok {
						runs = append(runs, progRun{v, o.kind})
					}
				}
			}
		default:
			files = append(files, f)
		}
	}
	return runs, files
}

// shortProgOpt finds a program-valued option in the cluster of short
// options a, and its value when the cluster holds it.
func shortProgOpt(opts []progOpt, a string) (progOpt, string, bool) {
	for j := 1; j < len(a); j++ {
		for _, o := range opts {
			if o.short != 0 && o.short == a[j] {
				return o, a[j+1:], true
			}
		}
	}
	return progOpt{}, "", false
}

// sshCommandOption returns the command of ssh's -o ProxyCommand=CMD or
// LocalCommand CMD.
func sshCommandOption(opt string) (string, bool) {
	key, v := opt, ""
	if k := strings.IndexAny(opt, "= "); k >= 0 {
		key, v = opt[:k], strings.TrimLeft(opt[k+1:], "= ")
	}
	k := strings.ToLower(key)
	return v, k == "proxycommand" || k == "localcommand"
}

// progRun checks one command an option of program name gives.
func (c *checker) progRun(name string, r progRun, files []field, in stdinSrc) {
	switch {
	case r.kind == optShell:
		c.commandLine(name+" runs "+r.val.s, r.val, stdinSrc{})
	case r.kind == optShellData:
		c.commandLine(name+" runs "+r.val.s, r.val, stdinSrc{piped: true, later: in.later})
	case r.val.dyn:
		c.report(Verdict{Decision: Ask, Rule: "dynamic-command",
			Reason:      name + " runs a program named only at run time (" + showDyn(r.val.s) + ")",
			Alternative: "spell out the program to run"})
	case r.kind == optData:
		c.argv([]field{r.val}, stdinSrc{piped: true, later: in.later})
	case r.kind == optFiles && runsText(base(r.val.s)):
		c.report(Verdict{Decision: Ask, Rule: "dynamic-shell",
			Reason:      name + " runs " + base(r.val.s) + " on each file it reads, so the files' text runs as code",
			Alternative: "read the files with cat, or run " + base(r.val.s) + " on a script you have read"})
	case r.kind == optFiles:
		ops := files
		if name == "rg" && len(ops) > 0 {
			ops = ops[1:] // the pattern
		}
		if len(ops) == 0 {
			ops = []field{{s: dynMark, dyn: true, word: -1}}
		}
		for _, op := range ops {
			c.argv([]field{r.val, op}, stdinSrc{})
		}
	default:
		c.argv([]field{r.val, {s: dynMark, dyn: true, spread: true, word: -1}}, stdinSrc{})
	}
}

// runsText reports whether program name runs the text of a file it is
// given: a shell, an interpreter, or a program that reads code.
func runsText(name string) bool {
	return shells[name] || interpreters[name] || strings.HasPrefix(name, "python") || codeReaders[name] != nil ||
		ownStdinRule[name]
}
