package safety

import (
	"maps"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
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

var shells = map[string]bool{"bash": true, "sh": true, "zsh": true, "dash": true, "ksh": true,
	"ash": true, "mksh": true, "rbash": true, "yash": true, "posh": true, "lksh": true}

var interpreters = map[string]bool{"python": true, "python3": true, "python2": true, "perl": true,
	"ruby": true, "node": true, "php": true, "pwsh": true, "osascript": true}

// formatters create a filesystem or swap area (or erase a disk's
// signatures), destroying what the target held.
var formatters = map[string]bool{"mkfs": true, "mke2fs": true, "mkswap": true, "newfs": true,
	"mkdosfs": true, "mkntfs": true, "mkexfatfs": true, "mkudffs": true, "mkreiserfs": true}

// isFormatter matches the command's base name exactly: mkfs, mkfs.TYPE,
// mke2fs, mkdosfs, ...; mkfs_wrapper.sh or mkfs-notes are other programs.
func isFormatter(name string) bool {
	return formatters[name] || strings.HasPrefix(name, "mkfs.") && len(name) > len("mkfs.") ||
		strings.HasPrefix(name, "newfs_") && len(name) > len("newfs_")
}

// partitioners rewrite a disk's partition table.
var partitioners = map[string]bool{"sgdisk": true, "sfdisk": true, "fdisk": true, "gdisk": true,
	"cfdisk": true, "parted": true}

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

// wipefsErases reports whether wipefs erases signatures (-a, -o) rather
// than listing them (no option, or -n).
func wipefsErases(args []field) bool {
	erase, noAct := false, false
	for i := 1; i < len(args); i++ {
		a := args[i].s
		switch {
		case a == "--":
			return erase && !noAct
		case strings.HasPrefix(a, "--"):
			name, _, eq := strings.Cut(a[2:], "=")
			switch name {
			case "all":
				erase = true
			case "no-act":
				noAct = true
			case "offset", "types", "output":
				erase = erase || name == "offset"
				if !eq {
					i++
				}
			}
		case len(a) > 1 && a[0] == '-':
		cluster:
			for j := 1; j < len(a); j++ {
				switch a[j] {
				case 'a':
					erase = true
				case 'n':
					noAct = true
				case 'o', 'O', 't':
					erase = erase || a[j] == 'o'
					if j == len(a)-1 {
						i++
					}
					break cluster
				}
			}
		}
	}
	return erase && !noAct
}

// partitionWrite returns a description of the partition-table change a
// partitioning tool makes, or "" when it only reads (lists, prints,
// verifies, pretends) or shows help. Like mkfs, the target is not looked
// at: it is often a variable, and a disk image is the user's to prepare.
func partitionWrite(name string, args []field) string {
	if name == "sgdisk" {
		return sgdiskWrite(args)
	}
	// Options that make the whole command read-only, short options taking
	// an argument and long options taking one.
	var ro, withArg string
	var roLong, argLong []string
	switch name {
	case "sfdisk":
		ro, withArg = "ldJsgVFnThv", "oXYwWN"
		roLong = []string{"list", "dump", "json", "show-size", "show-geometry", "verify", "list-free",
			"no-act", "list-types", "help", "version"}
		argLong = []string{"output", "label", "label-nested", "sector-size", "wipe", "wipe-partitions",
			"color", "lock", "backup-file"}
	case "fdisk", "gdisk":
		ro, withArg = "lhVx", "bCHSoLuwW"
		roLong = []string{"list", "list-details", "help", "version"}
		argLong = []string{"sector-size", "cylinders", "heads", "sectors", "output", "wipe", "wipe-partitions",
			"type", "lock", "color", "units", "compatibility"}
	case "cfdisk":
		ro = "hV"
		roLong = []string{"help", "version"}
	case "parted":
		ro, withArg = "lhv", "a"
		roLong = []string{"list", "help", "version"}
		argLong = []string{"align"}
	}
	var operands []field
	for i := 1; i < len(args); i++ {
		a := args[i].s
		switch {
		case a == "--":
			operands = append(operands, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(a, "--"):
			n, _, eq := strings.Cut(a[2:], "=")
			if contains(roLong, n) {
				return ""
			}
			if !eq && contains(argLong, n) {
				i++
			}
		case len(a) < 2 || a[0] != '-':
			operands = append(operands, args[i])
		default:
			for j := 1; j < len(a); j++ {
				if strings.IndexByte(ro, a[j]) >= 0 {
					return ""
				}
				if strings.IndexByte(withArg, a[j]) >= 0 {
					if j == len(a)-1 {
						i++
					}
					break
				}
			}
		}
	}
	switch {
	case len(operands) == 0:
		return "" // no disk named: usage
	case name == "parted" && len(operands) > 1 && partedReadOnly(operands[1:]):
		return ""
	}
	return name + " " + operands[0].s
}

// sgdiskWrite is partitionWrite for sgdisk, whose options accumulate:
// any option other than the read-only ones changes the table, unless
// -P/--pretend keeps the changes in memory.
func sgdiskWrite(args []field) string {
	pretend, write := false, ""
	for i := 1; i < len(args); i++ {
		a := args[i].s
		if strings.HasPrefix(a, "--") {
			n, _, eq := strings.Cut(a[2:], "=")
			switch n {
			case "pretend":
				pretend = true
			case "info", "backup":
				if !eq {
					i++
				}
			case "print", "verify", "list-types", "print-mbr", "display-alignment", "version", "help", "usage":
			default:
				if write == "" {
					write = a
				}
			}
			continue
		}
		if len(a) < 2 || a[0] != '-' {
			continue // the disk, or an option's argument
		}
	cluster:
		for j := 1; j < len(a); j++ {
			switch ch := a[j]; {
			case ch == 'P':
				pretend = true
			case strings.IndexByte("pvLODV?", ch) >= 0:
			case ch == 'i' || ch == 'b':
				if j == len(a)-1 {
					i++
				}
				break cluster
			default:
				if write == "" {
					write = a
				}
				break cluster
			}
		}
	}
	if pretend || write == "" {
		return ""
	}
	return "sgdisk " + write
}

// partedReadOnly reports whether parted's command words only print.
func partedReadOnly(cmds []field) bool {
	for i := 0; i < len(cmds); i++ {
		switch cmds[i].s {
		case "print", "p", "help", "version", "quit":
		case "unit", "align-check":
			i++ // unit UNIT, align-check TYPE N
			if cmds[i-1].s == "align-check" {
				i++
			}
		default:
			return false
		}
	}
	return true
}

// unset NAME... forgets what was known about variables (IFS falls back to
// its default) or, with -f, functions.
func (c *checker) unset(args []field) {
	funcs := false
	for _, f := range args[1:] {
		switch f.s {
		case "-f":
			funcs = true
		case "-v", "-n":
		default:
			if funcs {
				delete(c.funcs, f.s)
			} else {
				delete(c.vars, f.s)
			}
		}
	}
}

// shift [N] drops positional parameters.
func (c *checker) shift(args []field) {
	if !c.posKnown {
		return
	}
	n := 1
	if len(args) > 1 {
		var err error
		if n, err = strconv.Atoi(args[1].s); err != nil || n < 0 {
			c.params, c.posKnown, c.posOpen = nil, false, false
			return
		}
	}
	if c.posOpen && n >= len(c.params) {
		c.params, c.posKnown, c.posOpen = nil, false, false // into the unknown ones
		return
	}
	c.params = c.params[min(n, len(c.params)):]
}

// set [options] [--] ARGS... sets the positional parameters.
func (c *checker) set(args []field) {
	for i := 1; i < len(args); i++ {
		a := args[i].s
		if len(a) > 1 && (a[0] == '-' || a[0] == '+') && a[len(a)-1] == 'o' {
			i++ // -o OPTION, -euo OPTION
			continue
		}
		if a == "--" || a == "-" || a == "" || a[0] != '-' && a[0] != '+' {
			if a == "--" || a == "-" {
				i++
			}
			c.setParams(args[min(i, len(args)):])
			return
		}
	}
}

func isStdinPath(s string) bool {
	return s == "/dev/stdin" || s == "-" || s == "/proc/self/fd/0" || s == "/dev/fd/0"
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

func (c *checker) deviceWrite(name string, f field) {
	if f.dyn {
		return
	}
	if dev, ok := blockDevice(f.s); ok {
		c.report(Verdict{Decision: Block, Rule: "write-device",
			Reason:      name + " writes to block device " + dev + ", destroying its data",
			Alternative: "write to a regular file instead and let the user handle devices"})
	}
}

func readsProgramFromStdin(args []field) bool {
	for _, f := range args[1:] {
		a := f.s
		if a == "-" {
			return true
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
		if i+2 < len(args) {
			params = args[i+2:]
		}
		c.nestedParams(args[i].s, zsh, in, params)
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
	case f.proc:
		c.report(askFedShell(name, true))
	case isStdinPath(f.s):
		c.stdinCode(name, false, in)
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

// find: the command of -exec/-execdir/-ok/-okdir is checked like any
// other; -delete on a critical starting point is blocked.
func (c *checker) find(args []field) {
	var starts []field
	expr := false
	del, filtered := false, false
	for i := 1; i < len(args); i++ {
		a := args[i].s
		if !expr && (strings.HasPrefix(a, "-") && a != "-" || a == "(" || a == "!") {
			if a != "-H" && a != "-L" && a != "-P" && !strings.HasPrefix(a, "-O") && a != "-D" {
				expr = true
			} else {
				if a == "-D" {
					i++
				}
				continue
			}
		}
		if !expr {
			starts = append(starts, args[i])
			continue
		}
		switch a {
		case "-delete":
			del = true
		case "-depth", "-d", "-xdev", "-mount", "-noleaf", "-ignore_readdir_race", "-daystart", "-follow":
		case "-maxdepth", "-mindepth":
			i++
		default:
			filtered = true
		case "-exec", "-execdir", "-ok", "-okdir":
			filtered = true
			j := i + 1
			for j < len(args) && args[j].s != ";" && args[j].s != "+" {
				j++
			}
			if j > i+1 {
				sub := make([]field, j-i-1)
				copy(sub, args[i+1:j])
				c.argv(sub, stdinSrc{})
			}
			i = j
		}
	}
	if del && !filtered {
		if len(starts) == 0 {
			starts = []field{{s: "."}}
		}
		for _, s := range starts {
			if c.criticalTarget(s) {
				c.report(Verdict{Decision: Block, Rule: "rm-critical",
					Reason:      "find " + s.s + " -delete would delete a critical directory tree",
					Alternative: "run find on the specific project directory you mean (e.g. find ./build -delete)"})
				return
			}
		}
	}
}

// gitSub returns the index of git's subcommand after its global options,
// or -1.
func gitSub(args []field) int {
	for i := 1; i < len(args); i++ {
		a := args[i].s
		switch a {
		case "-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env",
			"--super-prefix", "--attr-source", "--list-cmds":
			i++
			continue
		}
		if strings.HasPrefix(a, "-") {
			continue
		}
		return i
	}
	return -1
}

// maxAliasDepth bounds git alias expansion (git itself refuses loops).
const maxAliasDepth = 8

func (c *checker) git(args []field) {
	i := gitSub(args)
	for n := 0; i >= 0 && !args[i].dyn; n++ {
		val, found, dyn := gitAlias(args[:i], args[i].s)
		if !found {
			break
		}
		if dyn || n >= maxAliasDepth {
			why := " is only known at run time"
			if !dyn {
				why = " expands through too many aliases to follow"
			}
			c.report(Verdict{Decision: Ask, Rule: "dynamic-command", Reason: "git alias " + args[i].s + why,
				Alternative: "spell out the git command the alias stands for"})
			return
		}
		if code, ok := strings.CutPrefix(val, "!"); ok {
			// git runs sh -c 'CODE "$@"' CODE ARGS...
			c.nestedParams(code+` "$@"`, false, stdinSrc{}, args[i+1:])
			return
		}
		words, ok := splitCmdline(val)
		if !ok || len(words) == 0 {
			return // git rejects it
		}
		next := make([]field, 0, len(args)+len(words))
		next = append(next, args[:i]...)
		for _, w := range words {
			next = append(next, field{s: w, word: -1})
		}
		args = append(next, args[i+1:]...)
		i = gitSub(args)
	}
	if i < 0 || args[i].dyn {
		return
	}
	switch args[i].s {
	case "add", "stage":
		if what := blindAdd(args[i+1:]); what != "" {
			c.report(Verdict{Decision: Block, Rule: "git-add-blind",
				Reason:      "blind `git add " + what + "` stages every change, including secrets, build output and unrelated edits",
				Alternative: "run `git status`, then `git add` the specific files you changed (e.g. git add path/to/file)"})
		}
	case "push":
		if what := forcePush(args[i+1:]); what != "" {
			c.report(Verdict{Decision: Block, Rule: "git-push-force",
				Reason:      "force push (" + what + ") can overwrite commits others pushed to the remote",
				Alternative: "use `git push --force-with-lease` (or a plain `git push`)"})
		}
	}
}

// gitAlias returns the value of alias name set with -c alias.NAME=VALUE
// among git's global options (the last one wins, names are
// case-insensitive), and whether that value is only known at run time.
func gitAlias(opts []field, name string) (val string, found, dyn bool) {
	for i := 1; i+1 < len(opts); i++ {
		if opts[i].s != "-c" {
			continue
		}
		i++
		key, v, ok := strings.Cut(opts[i].s, "=")
		if ok && strings.EqualFold(key, "alias."+name) {
			val, found, dyn = v, true, opts[i].dyn
		}
	}
	return val, found, dyn
}

// splitCmdline splits a git alias into words like git's split_cmdline:
// blanks separate words, '...' and "..." quote, a backslash escapes the
// next character outside single quotes.
func splitCmdline(s string) ([]string, bool) {
	var out []string
	var b strings.Builder
	inWord := false
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote == 0 && (ch == ' ' || ch == '\t' || ch == '\n'):
			if inWord {
				out = append(out, b.String())
				b.Reset()
				inWord = false
			}
		case quote == 0 && (ch == '"' || ch == '\''):
			quote, inWord = ch, true
		case ch == quote:
			quote = 0
		case ch == '\\' && quote != '\'' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
			inWord = true
		default:
			b.WriteByte(ch)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, false
	}
	if inWord {
		out = append(out, b.String())
	}
	return out, true
}

// blindAdd returns the offending argument of a blind git add, or "".
func blindAdd(args []field) string {
	opts := true
	npaths, excludes := 0, 0
	for _, f := range args {
		a := f.s
		if opts && a == "--" {
			opts = false
			continue
		}
		if opts && strings.HasPrefix(a, "--") && !f.dyn {
			name, _, _ := strings.Cut(a[2:], "=")
			if name != "" && strings.HasPrefix("all", name) {
				return a
			}
			continue
		}
		if opts && len(a) > 1 && a[0] == '-' && !f.dyn {
			if strings.IndexByte(a[1:], 'A') >= 0 {
				return a
			}
			continue
		}
		if f.dyn {
			npaths++
			continue
		}
		npaths++
		if isBlindPathspec(a) {
			return a
		}
		if isExcludePathspec(a) {
			excludes++
		}
	}
	if npaths > 0 && excludes == npaths {
		return "(exclude-only pathspec)"
	}
	return ""
}

func isExcludePathspec(p string) bool {
	if !strings.HasPrefix(p, ":") || len(p) < 2 {
		return false
	}
	if p[1] == '!' || p[1] == '^' {
		return true
	}
	if p[1] == '(' {
		magic, _, _ := strings.Cut(p[2:], ")")
		for _, m := range strings.Split(magic, ",") {
			if m == "exclude" {
				return true
			}
		}
	}
	return false
}

func isBlindPathspec(p string) bool {
	if strings.HasPrefix(p, ":") {
		rest := p[1:]
		if strings.HasPrefix(rest, "(") {
			k := strings.IndexByte(rest, ')')
			if k < 0 {
				return false
			}
			if strings.Contains(rest[:k], "exclude") {
				return false
			}
			rest = rest[k+1:]
		} else {
			for len(rest) > 0 && (rest[0] == '/') {
				rest = rest[1:]
			}
			if len(rest) > 0 && (rest[0] == '!' || rest[0] == '^') {
				return false
			}
			rest = strings.TrimPrefix(rest, ":")
		}
		return rest == "" || allPaths(rest)
	}
	return allPaths(p)
}

// allPaths reports whether a pathspec means "everything here or above".
func allPaths(p string) bool {
	c := path.Clean(p)
	for strings.HasSuffix(c, "/*") || strings.HasSuffix(c, "/**") {
		c = path.Dir(c)
	}
	switch c {
	case ".", "*", "**", "..":
		return true
	}
	return allDotDot(c)
}

func allDotDot(p string) bool {
	if p == "" {
		return false
	}
	for _, s := range strings.Split(p, "/") {
		if s != ".." {
			return false
		}
	}
	return true
}

// forcePush returns the force option of a git push, or "".
func forcePush(args []field) string {
	for i := 0; i < len(args); i++ {
		a := args[i].s
		if args[i].dyn {
			continue
		}
		if a == "--" {
			for _, f := range args[i+1:] {
				if strings.HasPrefix(f.s, "+") {
					return f.s
				}
			}
			return ""
		}
		if strings.HasPrefix(a, "--") {
			name, _, hasEq := strings.Cut(a[2:], "=")
			switch {
			case name == "force":
				return a
			case len(name) >= 2 && strings.HasPrefix("mirror", name):
				return a
			case !hasEq && (name == "repo" || name == "receive-pack" || name == "exec" || name == "push-option"):
				i++
			}
			continue
		}
		if len(a) > 1 && a[0] == '-' {
			for j := 1; j < len(a); j++ {
				if a[j] == 'f' {
					return a
				}
				if a[j] == 'o' {
					if j == len(a)-1 {
						i++
					}
					break
				}
			}
			continue
		}
		if strings.HasPrefix(a, "+") {
			return a + " refspec"
		}
	}
	return ""
}

func (c *checker) rm(args []field) {
	rec, noPreserve := false, false
	opts := true
	var targets []field
	for _, f := range args[1:] {
		a := f.s
		if opts && a == "--" {
			opts = false
			continue
		}
		if opts && len(a) > 1 && a[0] == '-' && !f.dyn {
			if a[1] == '-' {
				name, _, _ := strings.Cut(a[2:], "=")
				switch {
				case name == "":
				case strings.HasPrefix("recursive", name):
					rec = true
				case strings.HasPrefix("no-preserve-root", name):
					noPreserve = true
				}
				continue
			}
			if strings.ContainsAny(a[1:], "rR") {
				rec = true
			}
			continue
		}
		targets = append(targets, f)
	}
	if !rec {
		return
	}
	for _, t := range targets {
		if c.criticalTarget(t) {
			c.report(Verdict{Decision: Block, Rule: "rm-critical",
				Reason:      "recursive rm of " + strings.TrimSpace(t.s) + " would delete a critical directory",
				Alternative: "delete only the specific project paths you mean (e.g. rm -rf ./build)"})
			return
		}
	}
	if noPreserve {
		c.report(Verdict{Decision: Block, Rule: "rm-critical",
			Reason:      "rm --no-preserve-root disables the protection of /",
			Alternative: "delete only the specific project paths you mean (e.g. rm -rf ./build)"})
	}
}

func (c *checker) cd(args []field) {
	var t *field
	for i := 1; i < len(args); i++ {
		a := args[i].s
		if a == "--" {
			if i+1 < len(args) {
				t = &args[i+1]
			}
			break
		}
		if len(a) > 1 && a[0] == '-' {
			continue
		}
		t = &args[i]
		break
	}
	switch {
	case t == nil:
		c.cwd = homeMark
	case t.dyn || t.s == "-" || t.s == "":
		c.cwd = ""
	case strings.HasPrefix(t.s, "/") || strings.HasPrefix(t.s, homeMark):
		c.cwd = cleanPath(t.s)
	case c.cwd != "":
		c.cwd = cleanPath(c.cwd + "/" + t.s)
	}
}

// criticalTarget reports whether deleting f (relative to the known working
// directory, if any) would destroy a critical directory.
func (c *checker) criticalTarget(f field) bool {
	if f.dyn {
		return false
	}
	crit := func(p string) bool { return isCritical(p) || f.glob && c.globMatches(p, isCritical) }
	p := f.s
	if crit(p) {
		return true
	}
	if c.cwd != "" && !strings.HasPrefix(p, "/") && !strings.HasPrefix(p, homeMark) {
		return crit(c.cwd + "/" + p)
	}
	return false
}

// systemTarget is criticalTarget for chmod and rsync: see isSystemCritical.
func (c *checker) systemTarget(f field) bool {
	return !f.dyn && (isSystemCritical(f.s) || f.glob && c.globMatches(f.s, isSystemCritical))
}

// Bounds on glob matching: longer patterns are not matched.
const (
	maxGlobLen   = 4096 // bytes
	maxGlobComps = 64   // path components
	maxGlobPaths = 256  // expansions tried per pattern
)

// Probe names: a pattern component matching all of sweepNames (*, ?*,
// [!.]*) or of dotSweepNames (.*, .[!.]*, .??*) stands for every entry of
// its directory, as * and .* do.
var (
	sweepNames    = []string{"a", "bin", "Zz", "1", "x.y", "_x-"}
	dotSweepNames = []string{".ssh", ".config", ".git", ".bashrc"}
)

// globMatches expands the glob pattern p the way bash would, but against
// the critical names instead of the file system (/ and its system
// directories, the home directory and the directories above it, .git),
// and reports whether an expansion is critical.
func (c *checker) globMatches(p string, critical func(string) bool) bool {
	if len(p) > maxGlobLen {
		return false
	}
	comps := strings.Split(p, "/")
	start := ""
	if comps[0] == "" {
		start, comps = "/", comps[1:]
	}
	if len(comps) > maxGlobComps {
		return false
	}
	res := make([]*regexp.Regexp, len(comps)) // compiled on first use
	tried := 0
	var walk func(dir string, k int) bool
	walk = func(dir string, k int) bool {
		if tried >= maxGlobPaths {
			return false
		}
		if k == len(comps) {
			tried++
			return critical(dir)
		}
		comp := comps[k]
		if !hasGlobMeta(comp) {
			return walk(joinPath(dir, comp), k+1)
		}
		if res[k] == nil {
			re, ok := compileGlob(comp, true)
			if !ok {
				return false
			}
			res[k] = re
		}
		re := res[k]
		names := globChildren(dir)
		c.work += len(comp) * (len(names) + len(sweepNames) + len(dotSweepNames))
		if matchAll(re, comp, sweepNames) && walk(joinPath(dir, "*"), k+1) ||
			matchAll(re, comp, dotSweepNames) && walk(joinPath(dir, ".*"), k+1) {
			return true
		}
		for _, name := range names {
			if globName(re, comp, name) && walk(joinPath(dir, name), k+1) {
				return true
			}
		}
		return false
	}
	return walk(start, 0)
}

func joinPath(dir, name string) string {
	switch dir {
	case "":
		return name
	case "/":
		return "/" + name
	}
	return dir + "/" + name
}

// globName reports whether the pattern component comp (compiled as re)
// matches name: like bash, a leading dot must be matched by a literal dot.
func globName(re *regexp.Regexp, comp, name string) bool {
	if strings.HasPrefix(name, ".") && !strings.HasPrefix(comp, ".") && !strings.HasPrefix(comp, `\.`) {
		return false
	}
	return re.MatchString(name)
}

func matchAll(re *regexp.Regexp, comp string, names []string) bool {
	for _, n := range names {
		if !globName(re, comp, n) {
			return false
		}
	}
	return true
}

// globChildren returns the critical names in dir that a glob may match.
func globChildren(dir string) []string {
	h := homeDir()
	switch dir {
	case "/":
		names := sysDirList
		if top, _, _ := strings.Cut(strings.TrimPrefix(h, "/"), "/"); top != "" && !sysDirs[top] {
			names = append(slices.Clip(names), top)
		}
		return names
	case "", ".", homeMark:
		return []string{".git"}
	}
	if h != "" && dir == h {
		return []string{".git"}
	}
	if rest, ok := strings.CutPrefix(h, dir+"/"); ok && h != "" {
		next, _, _ := strings.Cut(rest, "/")
		return []string{next}
	}
	return nil
}

// sysDirs are top-level directories whose recursive removal is blocked.
var sysDirs = map[string]bool{"bin": true, "boot": true, "dev": true, "etc": true, "home": true,
	"lib": true, "lib32": true, "lib64": true, "libx32": true, "media": true, "mnt": true, "opt": true,
	"proc": true, "root": true, "run": true, "sbin": true, "snap": true, "srv": true, "sys": true,
	"usr": true, "var": true, "nix": true, "Applications": true, "Library": true, "System": true,
	"Users": true, "Volumes": true, "private": true, "cores": true}

// sysDirList is sysDirs in a fixed order.
var sysDirList = slices.Sorted(maps.Keys(sysDirs))

func cleanPath(p string) string {
	for strings.HasSuffix(p, "/") && len(p) > 1 {
		p = p[:len(p)-1]
	}
	return path.Clean(p)
}

// isCritical reports whether p names /, a top-level system directory, the
// home directory, .git, everything in the working directory or its parent.
func isCritical(p string) bool {
	if p == "" {
		return false
	}
	p = cleanPath(p)
	if h := homeDir(); h != "" && h != "/" {
		if p == h {
			return true
		}
		if r, ok := strings.CutPrefix(p, h+"/"); ok {
			p = homeMark + "/" + r
		}
	}
	for k := 0; k < 2; k++ {
		if p == "/*" || p == "/.*" {
			p = "/"
			break
		}
		if s, ok := strings.CutSuffix(p, "/*"); ok {
			p = s
		} else if s, ok := strings.CutSuffix(p, "/.*"); ok {
			p = s
		} else {
			break
		}
	}
	switch p {
	case "/", homeMark, ".", "..", ".git", "*", ".*", "**", "/*", homeMark + "/.git":
		return true
	}
	if allDotDot(p) {
		return true
	}
	return p[0] == '/' && sysDirs[p[1:]]
}

func homeDir() string {
	h, _ := os.UserHomeDir()
	return h
}

var blockDevRe = regexp.MustCompile(`^/dev/(sd[a-z]+[0-9]*|hd[a-z]+[0-9]*|vd[a-z]+[0-9]*|xvd[a-z]+[0-9]*|` +
	`nvme[0-9]+(n[0-9]+(p[0-9]+)?)?|mmcblk[0-9]+(p[0-9]+|boot[0-9]+)?|loop[0-9]+|md[0-9]+|dm-[0-9]+|` +
	`sr[0-9]+|fd[0-9]+|nbd[0-9]+|zd[0-9]+|ram[0-9]+|ubd[a-z]+|rbd[0-9]+|r?disk[0-9]+(s[0-9]+)?|` +
	`mapper/.+|disk/.+|md/.+|block/.+|[a-z]+vg/.+)$`)

// blockDevice reports whether p is a disk-like block device path.
func blockDevice(p string) (string, bool) {
	if !strings.HasPrefix(p, "/dev/") {
		return "", false
	}
	p = path.Clean(p)
	if p == "/dev/mapper/control" {
		return "", false
	}
	return p, blockDevRe.MatchString(p)
}

// funcDecl blocks fork bombs, checks the function body with unknown
// arguments and records it: a later call with static words checks it
// again with those arguments (see callFunc).
func (c *checker) funcDecl(x *syntax.FuncDecl) {
	names := x.Names
	if x.Name != nil {
		names = append([]*syntax.Lit{x.Name}, names...)
	}
	for _, n := range names {
		if isForkBomb(n.Value, x.Body) {
			c.report(Verdict{Decision: Block, Rule: "fork-bomb",
				Reason:      "fork bomb: function " + n.Value + " keeps spawning copies of itself until the machine stalls",
				Alternative: "run a bounded number of background jobs (e.g. a for loop with a fixed count and wait)"})
			return
		}
		if c.funcs == nil {
			c.funcs = make(map[string]*syntax.Stmt)
		}
		c.funcs[n.Value] = x.Body
	}
	saved := c.enterFunc(nil)
	c.stmt(x.Body, stdinSrc{})
	c.leaveFunc(saved)
}

// isForkBomb reports whether body calls name both sides of a pipe or in the
// background.
func isForkBomb(name string, body *syntax.Stmt) bool {
	if body == nil {
		return false
	}
	found := false
	syntax.Walk(body, func(n syntax.Node) bool {
		if found {
			return false
		}
		switch n := n.(type) {
		case *syntax.Stmt:
			if n.Background && callsSelf(n, name) {
				found = true
			}
		case *syntax.BinaryCmd:
			if (n.Op == syntax.Pipe || n.Op == syntax.PipeAll) && callsSelf(n.X, name) && callsSelf(n.Y, name) {
				found = true
			}
		}
		return !found
	})
	return found
}

func callsSelf(s *syntax.Stmt, name string) bool {
	if s == nil {
		return false
	}
	switch x := s.Cmd.(type) {
	case *syntax.CallExpr:
		if len(x.Args) == 0 {
			return false
		}
		var r resolver
		v, ok := r.wordLit(x.Args[0])
		return ok && v == name
	case *syntax.BinaryCmd:
		if x.Op == syntax.Pipe || x.Op == syntax.PipeAll {
			return callsSelf(x.X, name) || callsSelf(x.Y, name)
		}
	case *syntax.Block:
		for _, st := range x.Stmts {
			if callsSelf(st, name) {
				return true
			}
		}
	case *syntax.Subshell:
		for _, st := range x.Stmts {
			if callsSelf(st, name) {
				return true
			}
		}
	}
	return false
}

// ssh HOST COMMAND...: the remote command is shell code too.
func (c *checker) ssh(args []field) {
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
	c.nested(b.String(), false, stdinSrc{})
}

// chmod/chown/chgrp -R on / , a top-level system directory or the home
// directory breaks the system or the user's account.
func (c *checker) chmod(name string, args []field) {
	rec := false
	var targets []field
	opts, needMode := true, true
	for _, f := range args[1:] {
		a := f.s
		if opts && a == "--" {
			opts = false
			continue
		}
		if opts && strings.HasPrefix(a, "--") {
			if a == "--recursive" {
				rec = true
			}
			if strings.HasPrefix(a, "--reference") {
				needMode = false
			}
			continue
		}
		if opts && len(a) > 1 && a[0] == '-' && strings.Trim(a[1:], "RHLPcfvh") == "" {
			if strings.IndexByte(a, 'R') > 0 {
				rec = true
			}
			continue
		}
		if needMode {
			needMode = false // the mode or owner
			continue
		}
		targets = append(targets, f)
	}
	if !rec {
		return
	}
	for _, t := range targets {
		if c.systemTarget(t) {
			c.report(Verdict{Decision: Block, Rule: "chmod-critical",
				Reason:      "recursive " + name + " of " + t.s + " would break the system or the account",
				Alternative: "change only the project paths you mean (e.g. " + name + " -R ... ./build)"})
			return
		}
	}
}

// isSystemCritical reports whether p is /, a top-level system directory or
// the home directory (each optionally with /*): the subset of critical
// targets that stays critical for commands other than rm, where "." or "*"
// are everyday operands.
func isSystemCritical(p string) bool {
	if p == "" {
		return false
	}
	p = cleanPath(p)
	h := homeDir()
	return p == "/" || p == "/*" || p == homeMark || p == homeMark+"/*" || h != "" && h != "/" && (p == h || p == h+"/*") ||
		p[0] == '/' && sysDirs[strings.TrimSuffix(p[1:], "/*")]
}

// rsync --delete into /, a system directory or the home directory wipes it.
func (c *checker) rsync(args []field) {
	del := false
	var pos []field
	for _, f := range args[1:] {
		switch {
		case strings.HasPrefix(f.s, "--del"), f.s == "--remove-source-files":
			del = del || strings.HasPrefix(f.s, "--del")
		case strings.HasPrefix(f.s, "-"):
		default:
			pos = append(pos, f)
		}
	}
	if !del || len(pos) < 2 {
		return
	}
	dst := pos[len(pos)-1]
	if c.systemTarget(dst) {
		c.report(Verdict{Decision: Block, Rule: "rm-critical",
			Reason:      "rsync --delete into " + dst.s + " would delete everything there that the source lacks",
			Alternative: "sync into the specific project directory you mean (e.g. rsync -a --delete src/ ./dest/)"})
	}
}

// kill -9 -1 signals every process the user may signal, the agent and
// the engine included.
func (c *checker) kill(args []field) {
	i := 1
	if i < len(args) {
		switch a := args[i].s; {
		case a == "-s" || a == "-n":
			i += 2
		case a == "-l" || a == "-L":
			return
		case a != "--" && strings.HasPrefix(a, "-"):
			i++ // -SIGNAL
		}
	}
	for ; i < len(args); i++ {
		if args[i].s == "--" {
			continue
		}
		if args[i].s == "-1" {
			c.report(Verdict{Decision: Block, Rule: "kill-all",
				Reason:      "kill -1 signals every process you own, including the agent and this tool",
				Alternative: "kill specific PIDs or a process group (kill -- -PGID)"})
			return
		}
	}
}
