package safety

import (
	"strings"
)

// argv checks one simple command after word expansion, looking through
// wrappers such as sudo, env, nice and timeout.
func (c *checker) argv(args []field, in stdinSrc) {
	appended := false // xargs adds arguments at run time
	for len(args) > 0 && !c.done() {
		if args[0].dyn && !args[0].unsure && staticBase(args[0].s) {
			// "$TMPDIR/app", $(go env GOPATH)/bin/tool: the directory is
			// only known at run time, the program is not.
			args[0].dyn = false
		}
		if args[0].dyn || args[0].unsure {
			c.report(Verdict{Decision: Ask, Rule: "dynamic-command",
				Reason:      "the command name is only known at run time (" + showDyn(args[0].s) + ")",
				Alternative: "spell out the command to run"})
			return
		}
		if c.alias(args, in) {
			return
		}
		if run, code, ok := unwrapRunner(args); ok {
			if code != nil {
				if code.dyn {
					c.report(askDynamicShell(base(args[0].s)))
				} else {
					c.nested(code.s, false, in)
				}
				return
			}
			if len(run) == 0 {
				return
			}
			args = run
			continue
		}
		rest, kind := unwrapOne(args)
		if kind != notWrapper && wrapperSpecs[base(args[0].s)].assigns {
			c.wrapperAssigns(args, len(args)-len(rest), in)
		}
		switch kind {
		case wrapped:
			if base(args[0].s) == "xargs" {
				if c.xargs(args[:len(args)-len(rest)], rest, in) {
					return
				}
				if in.piped && in.later && !rest[0].dyn && !shells[base(rest[0].s)] && !argsAreData(base(rest[0].s)) {
					c.report(askArgsLater("xargs", base(rest[0].s)))
					return
				}
				appended, in = true, stdinSrc{} // xargs gives its commands /dev/null
			}
			args = rest
			continue
		case noCommand:
			if startsShell(args) {
				c.stdinCode(base(args[0].s), false, in) // script, chroot DIR, sudo -s ...
			}
			return
		case shellCode:
			if rest[0].dyn {
				c.report(askDynamicShell(base(args[0].s)))
				return
			}
			c.nested(rest[0].s, false, in)
			return
		}
		c.appended = appended
		c.command(base(args[0].s), args, in)
		c.appended = false
		return
	}
}

// staticBase reports whether the command path s ends in a static program
// name after a directory only known at run time.
func staticBase(s string) bool {
	i := strings.LastIndexByte(s, '/')
	name := s[i+1:]
	return i >= 0 && name != "" && name != "." && name != ".." && !strings.Contains(name, dynMark)
}

func showDyn(s string) string {
	return strings.ReplaceAll(s, dynMark, "$…")
}

func askDynamicShell(name string) Verdict {
	return Verdict{Decision: Ask, Rule: "dynamic-shell",
		Reason:      name + " runs shell code that is only known at run time",
		Alternative: "write the code out literally so it can be checked"}
}

// A rule checks one program's command line: name is the program's base
// name, args its words after expansion (args[0] the program), in its
// standard input.
type rule func(c *checker, name string, args []field, in stdinSrc)

// rules maps a program's base name to its rule; ruleFor adds the families
// matched by prefix (python3.12, mkfs.ext4).
var rules map[string]rule

func init() {
	rules = map[string]rule{
		"eval":     func(c *checker, _ string, args []field, in stdinSrc) { c.eval(args, in) },
		"su":       func(c *checker, _ string, args []field, in stdinSrc) { c.su(args, in) },
		"runuser":  func(c *checker, _ string, args []field, in stdinSrc) { c.su(args, in) }, // runuser -u USER CMD is a wrapper (see unwrapOne)
		"source":   (*checker).source,
		".":        (*checker).source,
		"find":     func(c *checker, _ string, args []field, in stdinSrc) { c.find(args, in) },
		"git":      func(c *checker, _ string, args []field, in stdinSrc) { c.git(args, in) },
		"rm":       func(c *checker, _ string, args []field, _ stdinSrc) { c.rm(args) },
		"dd":       func(c *checker, _ string, args []field, _ stdinSrc) { c.dd(args) },
		"wipefs":   (*checker).wipefs,
		"cd":       func(c *checker, _ string, args []field, _ stdinSrc) { c.cd(args) },
		"pushd":    func(c *checker, _ string, args []field, _ stdinSrc) { c.cd(args) },
		"trap":     func(c *checker, _ string, args []field, _ stdinSrc) { c.trap(args) },
		"ssh":      func(c *checker, _ string, args []field, in stdinSrc) { c.ssh(args, in) },
		"rsync":    func(c *checker, _ string, args []field, _ stdinSrc) { c.rsync(args) },
		"kill":     func(c *checker, _ string, args []field, _ stdinSrc) { c.kill(args) },
		"unset":    func(c *checker, _ string, args []field, _ stdinSrc) { c.nameArgs("unset", args); c.unset(args) },
		"read":     func(c *checker, _ string, args []field, _ stdinSrc) { c.read(args) },
		"shift":    func(c *checker, _ string, args []field, _ stdinSrc) { c.shift(args) },
		"set":      func(c *checker, _ string, args []field, _ stdinSrc) { c.set(args) },
		"export":   (*checker).declare,
		"declare":  (*checker).declare,
		"typeset":  (*checker).declare,
		"readonly": (*checker).declare,
		"local":    (*checker).declare,
		"alias":    func(c *checker, _ string, args []field, _ stdinSrc) { c.defineAlias(args) },
		"unalias":  func(c *checker, _ string, args []field, _ stdinSrc) { c.unalias(args) },
		"getopts":  func(c *checker, _ string, args []field, _ stdinSrc) { c.getoptsName(args) },
	}
	for name := range shells {
		rules[name] = (*checker).shell
	}
	for name := range interpreters {
		rules[name] = (*checker).interpreter
	}
	for name := range formatters {
		rules[name] = (*checker).format
	}
	for name := range partitioners {
		rules[name] = (*checker).partition
	}
	for _, name := range []string{"tee", "shred", "blkdiscard", "badblocks"} {
		rules[name] = (*checker).writesDevices
	}
	for _, name := range []string{"cp", "mv", "install", "pv", "ddrescue"} {
		rules[name] = (*checker).copiesToDevice
	}
	for _, name := range []string{"awk", "gawk", "mawk", "nawk"} {
		rules[name] = (*checker).awk
	}
	rules["sed"] = (*checker).sed
	rules["parallel"] = (*checker).parallel
	for _, name := range []string{"tclsh", "wish", "expect"} {
		rules[name] = func(c *checker, name string, _ []field, in stdinSrc) {
			if in.isDoc && !in.dyn {
				c.tclShellOuts(name, in.code)
			}
		}
	}
	for _, name := range []string{"chmod", "chown", "chgrp"} {
		rules[name] = (*checker).chmod
	}
}

// ruleFor returns the rule for a program's base name, or nil.
func ruleFor(name string) rule {
	if r, ok := rules[name]; ok {
		return r
	}
	switch name {
	case "mapfile", "readarray":
		return (*checker).mapfileRule
	case "test", "[":
		return (*checker).testRule
	case "printf":
		return (*checker).printfRule
	}
	switch {
	case strings.HasPrefix(name, "python"):
		return (*checker).interpreter
	case isFormatter(name):
		return (*checker).format
	}
	return nil
}

// command applies the rules to the real command name and its arguments.
func (c *checker) command(name string, args []field, in stdinSrc) {
	if c.addAll != "" && name != "git" {
		c.followAddAll(name, false)
	}
	if r := ruleFor(name); r != nil {
		r(c, name, args, in)
	}
	c.progOptions(name, args, in)
	c.writeTargets(name, args)
	c.stdinGate(name, args, in)
}

// source checks source FILE / . FILE.
func (c *checker) source(name string, args []field, in stdinSrc) {
	if len(args) > 1 {
		c.script(name, args[1], in)
	}
}

// trap 'CODE' SIGNALS: the handler runs later in this shell.
func (c *checker) trap(args []field) {
	if len(args) > 2 && !strings.HasPrefix(args[1].s, "-") {
		if args[1].dyn {
			c.report(askDynamicShell("trap"))
		} else {
			c.nested(args[1].s, false, stdinSrc{})
		}
	}
}

// read NAME...: values only known at run time (IFS included).
func (c *checker) read(args []field) {
	c.readOperands(args)
	for _, f := range args[1:] {
		c.aliasOperand("read", f, field{}, false)
		if isParamName(f.s) && !isDigits(f.s) {
			c.setVar(f.s, "", false)
			c.taint(f.s)
		} else if !strings.HasPrefix(f.s, "-") {
			c.nameOperand("read", f)
		}
	}
}

// interpreter checks python, perl, ruby, node...: program text only known
// at run time asks, and so does a program read from a pipe.
func (c *checker) interpreter(name string, args []field, in stdinSrc) {
	for _, f := range args[1:] {
		if f.proc {
			c.report(askFedShell(name, true))
			return
		}
		if c.fedFile(f) {
			c.report(askFedFile(f.s))
			return
		}
	}
	for _, f := range programArgs(name, args) {
		if f.sub || f.dyn && strings.Trim(f.s, dynMark) == "" {
			c.report(Verdict{Decision: Ask, Rule: "dynamic-shell",
				Reason:      name + " runs program text that is only known at run time",
				Alternative: "save the program to a file, read it, then run it"})
			return
		}
	}
	for _, f := range programArgs(name, args) {
		c.interpreterShellOuts(name, f.s, in)
		if in.piped && in.later && evalsInput(name, f.s, args) {
			c.report(askFed(name, in))
			return
		}
	}
	if in.isDoc && !in.dyn && readsProgramFromStdin(args) {
		c.interpreterShellOuts(name, in.code, stdinSrc{})
	}
	switch {
	case in.piped && in.later && dynScript(name, args):
		c.report(askFed(name, in)) // the script's path may name the job's input
	case in.piped && readsProgramFromStdin(args) && !infoQuery(args):
		v := askFed(name, in)
		if !in.later {
			v.Alternative = "save the script to a file, read it, then run it"
		}
		c.report(v)
	case in.isDoc && in.sub && readsProgramFromStdin(args):
		c.report(Verdict{Decision: Ask, Rule: "dynamic-shell",
			Reason:      "feeds " + name + " program text produced by a command substitution, only known at run time",
			Alternative: "save the program to a file, read it, then run it"})
	}
}

// argsAreData reports whether a program given words only known at run
// time (xargs or parallel fed input sent later) treats them as data
// whatever they are: a program of the read-only grammars none of whose
// options write or run anything, or one whose operands are only files,
// processes or text. Not env, nice or other wrappers, interpreters, awk,
// sed, git, find, sort, printf or test, whose arguments may be code.
func argsAreData(name string) bool {
	if g := grammarOf(name); g != nil && g.closed && g.check == nil {
		return true
	}
	switch name {
	case "rm", "rmdir", "mkdir", "touch", "cp", "mv", "ln", "chmod", "chown", "chgrp", "kill", "gzip",
		"gunzip", "bzip2", "bunzip2", "xz", "unxz", "zstd", "dos2unix", "unix2dos", "sha1sum", "sha512sum",
		"b2sum", "truncate", "sleep":
		return true
	}
	return false
}

// askArgsLater is the verdict on xargs or parallel running a program
// whose arguments come from input sent later and may be code.
func askArgsLater(runner, name string) Verdict {
	return Verdict{Decision: Ask, Rule: "stdin-program",
		Reason: runner + " gives " + name + " arguments read from input sent later (stdin pipe or tty), and " + name +
			" may run them as code (an option, a program to run, a script)",
		Alternative: "give the arguments in the command, or have " + runner + " run a program that only takes data (rm, cat, grep, gzip, ...)"}
}

// unwrapRunner looks through the package runners that run a command:
// npx, npm exec/x, pnpm dlx/exec, yarn dlx/exec, bunx, bun x, uvx, uv
// run, uv tool run, pipx run. It returns the command, or the shell code
// of -c/--call, and whether args is such a runner.
func unwrapRunner(args []field) (run []field, code *field, ok bool) {
	name := base(args[0].s)
	i := 1
	sub := func(subs ...string) bool {
		for _, s := range subs {
			if i < len(args) && args[i].s == s {
				i++
				return true
			}
		}
		return false
	}
	var vals []string // options taking a value
	switch {
	case name == "npx" || name == "bunx" || name == "uvx":
		vals = []string{"-p", "--package", "--from", "--with", "--python", "--spec", "--node-options"}
	case (name == "npm" || name == "bun") && sub("exec", "x"),
		(name == "pnpm" || name == "yarn") && sub("dlx", "exec"):
		vals = []string{"-p", "--package", "-w", "--workspace"}
	case name == "uv" && (sub("run") || sub("tool") && sub("run")),
		name == "pipx" && sub("run"):
		vals = []string{"--from", "--with", "--python", "-p", "--spec", "--index", "--project", "--directory", "--env-file"}
	default:
		return nil, nil, false
	}
	for ; i < len(args); i++ {
		a := args[i].s
		switch {
		case args[i].dyn:
			return args[i:], nil, true
		case a == "--":
			return args[i+1:], nil, true
		case a == "-c" || a == "--call":
			if i+1 < len(args) {
				return nil, &args[i+1], true
			}
			return nil, nil, true
		case strings.HasPrefix(a, "--call="):
			return nil, &field{s: a[len("--call="):], dyn: args[i].dyn, word: -1}, true
		case contains(vals, a):
			i++
		case strings.HasPrefix(a, "-"):
		default:
			return args[i:], nil, true
		}
	}
	return nil, nil, true
}

// evalsInput reports whether an interpreter's program text (-c, -e)
// reads its standard input and has a construct that runs text as code
// (exec, eval, a shell-out, an import of text): with input sent later,
// that input may be code (python3 -c 'exec(sys.stdin.read())'). A program
// that reads stdin as data (json.load(sys.stdin)) has none.
func evalsInput(name, prog string, args []field) bool {
	var reads, runs []string
	switch {
	case strings.HasPrefix(name, "python"):
		reads = []string{"stdin", "input(", "fileinput"}
		runs = []string{"exec", "eval", "compile", "os.system", "popen", "subprocess", "__import__", "runpy", "code.", "pickle", "marshal", "importlib", "spawn"}
	case name == "perl":
		reads = []string{"STDIN", "<>", "<<>>", "$_", "@ARGV"}
		runs = []string{"eval", "system", "exec", "qx", "`", "do ", "require", "open(", "open "}
		if hasOpt(args, "n", "p") {
			reads = append(reads, "")
		}
	case name == "ruby":
		reads = []string{"STDIN", "$stdin", "gets", "ARGF", "readlines", "$<"}
		runs = []string{"eval", "system", "exec", "`", "%x", "spawn", "load", "require", "open(", "IO.popen", "send"}
		if hasOpt(args, "n", "p") {
			reads = append(reads, "")
		}
	case name == "node":
		reads = []string{"stdin", "readline", "/dev/stdin", "fd: 0", "readFileSync(0"}
		runs = []string{"eval", "Function", "child_process", "vm.", "require(", "import("}
	case name == "php":
		reads = []string{"stdin", "STDIN", "fgets", "fopen", "file_get_contents"}
		runs = []string{"eval", "system", "exec", "passthru", "`", "popen", "include", "require", "assert", "create_function"}
	default:
		return false
	}
	has := func(list []string) bool {
		for _, s := range list {
			if strings.Contains(prog, s) {
				return true
			}
		}
		return false
	}
	return has(reads) && has(runs)
}

// dynScript reports whether an interpreter's script operand (its first
// operand, when no -c/-e text gives the program) is only known at run
// time.
func dynScript(name string, args []field) bool {
	if len(programArgs(name, args)) > 0 {
		return false
	}
	ops := operands(args)
	return len(ops) > 0 && ops[0].dyn
}
