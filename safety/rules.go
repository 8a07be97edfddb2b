package safety

import (
	"strings"
)

// argv checks one simple command after word expansion, looking through
// wrappers such as sudo, env, nice and timeout.
func (c *checker) argv(args []field, in stdinSrc) {
	appended := false // xargs adds arguments at run time
	for len(args) > 0 && !c.done() {
		if args[0].dyn || args[0].unsure {
			c.report(Verdict{Decision: Ask, Rule: "dynamic-command",
				Reason:      "the command name is only known at run time (" + showDyn(args[0].s) + ")",
				Alternative: "spell out the command to run"})
			return
		}
		rest, kind := unwrapOne(args)
		switch kind {
		case wrapped:
			appended = appended || base(args[0].s) == "xargs"
			args = rest
			continue
		case noCommand:
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

func showDyn(s string) string {
	return strings.ReplaceAll(s, dynMark, "$…")
}

func askDynamicShell(name string) Verdict {
	return Verdict{Decision: Ask, Rule: "dynamic-shell",
		Reason:      name + " runs shell code that is only known at run time",
		Alternative: "write the code out literally so it can be checked"}
}

// command applies the rules to the real command name and its arguments.
func (c *checker) command(name string, args []field, in stdinSrc) {
	switch {
	case shells[name]:
		c.shell(name, args, in)
	case name == "eval":
		c.eval(args, in)
	case name == "su" || name == "runuser":
		c.su(args, in) // runuser -u USER CMD is a wrapper (see unwrapOne)
	case name == "source" || name == ".":
		if len(args) > 1 {
			c.script(name, args[1], in)
		}
	case name == "find":
		c.find(args)
	case name == "git":
		c.git(args)
	case name == "rm":
		c.rm(args)
	case name == "dd":
		for _, f := range args[1:] {
			if v, ok := strings.CutPrefix(f.s, "of="); ok {
				if dev, ok := blockDevice(v); ok {
					c.report(Verdict{Decision: Block, Rule: "dd-device",
						Reason:      "dd writes directly to block device " + dev + ", destroying its data",
						Alternative: "write to an image file instead (e.g. of=./disk.img)"})
				}
			}
		}
	case isFormatter(name) || name == "wipefs" && wipefsErases(args):
		what := " creates a filesystem, erasing everything on the target"
		if name == "wipefs" {
			what = " erases the filesystem and partition-table signatures on its target"
		}
		c.report(Verdict{Decision: Block, Rule: "mkfs", Reason: name + what,
			Alternative: "leave formatting disks to the user; to test, use a loop image under /tmp set up by the user"})
	case partitioners[name]:
		if what := partitionWrite(name, args); what != "" {
			c.report(Verdict{Decision: Block, Rule: "partition",
				Reason:      what + " rewrites a partition table, making the data on the disk unreachable",
				Alternative: "leave partitioning disks to the user; list partitions with lsblk or " + name + " in read-only mode"})
		}
	case name == "tee" || name == "shred" || name == "blkdiscard" || name == "badblocks":
		for _, f := range args[1:] {
			c.deviceWrite(name, f)
		}
	case name == "cp" || name == "mv" || name == "install" || name == "pv" || name == "ddrescue":
		if len(args) > 2 {
			c.deviceWrite(name, args[len(args)-1])
		}
	case name == "cd" || name == "pushd":
		c.cd(args)
	case name == "trap":
		// trap 'CODE' SIGNALS: the handler runs later in this shell.
		if len(args) > 2 && !strings.HasPrefix(args[1].s, "-") {
			if args[1].dyn {
				c.report(askDynamicShell("trap"))
			} else {
				c.nested(args[1].s, false, stdinSrc{})
			}
		}
	case name == "ssh":
		c.ssh(args)
	case name == "chmod" || name == "chown" || name == "chgrp":
		c.chmod(name, args)
	case name == "rsync":
		c.rsync(args)
	case name == "kill":
		c.kill(args)
	case name == "unset":
		c.unset(args)
	case name == "read":
		// read NAME...: values only known at run time (IFS included)
		for _, f := range args[1:] {
			if isParamName(f.s) && !isDigits(f.s) {
				c.setVar(f.s, "", false)
			}
		}
	case name == "shift":
		c.shift(args)
	case name == "set":
		c.set(args)
	case interpreters[name] || strings.HasPrefix(name, "python"):
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
		switch {
		case in.piped && readsProgramFromStdin(args):
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
}
