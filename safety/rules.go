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
		"unset":    func(c *checker, _ string, args []field, _ stdinSrc) { c.unset(args) },
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
	for _, f := range args[1:] {
		if isParamName(f.s) && !isDigits(f.s) {
			c.setVar(f.s, "", false)
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
	}
	if in.isDoc && !in.dyn && readsProgramFromStdin(args) {
		c.interpreterShellOuts(name, in.code, stdinSrc{})
	}
	switch {
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
