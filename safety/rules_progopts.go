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

// progOptions checks the program-valued options of name (see progOpts),
// tar's --checkpoint-action=exec=CMD, and ssh, scp and sftp's -o
// ProxyCommand=CMD / LocalCommand=CMD.
func (c *checker) progOptions(name string, args []field, in stdinSrc) {
	opts := progOpts(name)
	sshLike := name == "ssh" || name == "scp" || name == "sftp"
	if opts == nil && !sshLike && name != "tar" {
		return
	}
	var files []field
	type found struct {
		val  field
		kind int
	}
	var runs []found
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
			files = append(files, args[i+1:]...)
			i = len(args)
			continue
		case strings.HasPrefix(a, "--"):
			n, v, eq := strings.Cut(a[2:], "=")
			if name == "tar" && n == "checkpoint-action" {
				if cmd, ok := strings.CutPrefix(v, "exec="); ok {
					runs = append(runs, found{field{s: cmd, dyn: f.dyn, word: -1}, optShell})
				}
				continue
			}
			for _, o := range opts {
				if o.long == "" || o.long != n {
					continue
				}
				if eq {
					runs = append(runs, found{field{s: v, dyn: f.dyn, word: -1}, o.kind})
				} else if val, ok := next(); ok {
					runs = append(runs, found{val, o.kind})
				}
			}
		case len(a) > 1 && a[0] == '-':
			if sshLike && strings.HasPrefix(a, "-o") {
				opt := a[2:]
				if opt == "" {
					if val, ok := next(); ok {
						opt = val.s
						f = val
					}
				}
				key, v := opt, ""
				if k := strings.IndexAny(opt, "= "); k >= 0 {
					key, v = opt[:k], strings.TrimLeft(opt[k+1:], "= ")
				}
				if k := strings.ToLower(key); k == "proxycommand" || k == "localcommand" {
					runs = append(runs, found{field{s: v, dyn: f.dyn, word: -1}, optShell})
				}
				continue
			}
		cluster:
			for j := 1; j < len(a); j++ {
				for _, o := range opts {
					if o.short == 0 || o.short != a[j] {
						continue
					}
					if j+1 < len(a) {
						runs = append(runs, found{field{s: a[j+1:], dyn: f.dyn, word: -1}, o.kind})
					} else if val, ok := next(); ok {
						runs = append(runs, found{val, o.kind})
					}
					break cluster
				}
			}
		default:
			files = append(files, f)
		}
	}
	for _, r := range runs {
		what := name + " runs " + r.val.s
		switch {
		case r.kind == optShell:
			c.commandLine(what, r.val, stdinSrc{})
		case r.kind == optShellData:
			c.commandLine(what, r.val, stdinSrc{piped: true, later: in.later})
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
			c.argv(append([]field{r.val}, field{s: dynMark, dyn: true, spread: true, word: -1}), stdinSrc{})
		}
		if c.done() {
			return
		}
	}
}

// runsText reports whether program name runs the text of a file it is
// given: a shell, an interpreter, or a program that reads code.
func runsText(name string) bool {
	return shells[name] || interpreters[name] || strings.HasPrefix(name, "python") || codeReaders[name] != nil ||
		ownStdinRule[name]
}
