package safety

import (
	"path"
	"strings"
)

// Code kept for later: writes to shell start-up files, git hooks and
// configuration, scheduled jobs and login hooks, and variables that make
// later programs run code (BASH_ENV, PROMPT_COMMAND, LD_PRELOAD), run code
// outside the analysis of this command, so they ask (rule persist-code).
// Variables and settings whose value is a command line another program
// runs (GIT_SSH_COMMAND, GIT_PAGER, core.pager, LESSOPEN) have that
// command line checked as shell code.

// askPersist is the verdict on code kept for later.
func askPersist(what string) Verdict {
	return Verdict{Decision: Ask, Rule: "persist-code",
		Reason:      what + ", so code runs later outside this command's analysis",
		Alternative: "run the code directly in this command; leave shell start-up files, hooks, scheduled jobs and preload settings to the user"}
}

// persistPath says what writing p keeps for later, or "".
func persistPath(p string) string {
	if p == "" || strings.Contains(p, dynMark) {
		return ""
	}
	p = cleanPath(p)
	rel, home := strings.CutPrefix(p, homeMark+"/")
	if h := homeDir(); !home && h != "" && h != "/" {
		rel, home = strings.CutPrefix(p, h+"/")
	}
	b := path.Base(p)
	switch {
	case home && (startupFiles[rel] || strings.HasPrefix(rel, ".config/fish/") || strings.HasPrefix(rel, ".bashrc.d/")):
		return "writes the shell start-up file ~/" + rel
	case home && (rel == ".ssh/rc" || rel == ".ssh/config" || rel == ".ssh/authorized_keys"):
		return "writes ~/" + rel + ", which ssh runs or trusts on later logins"
	case home && (rel == ".gitconfig" || rel == ".config/git/config"):
		return "writes git's global configuration ~/" + rel + " (aliases, pagers, hooks)"
	case home && (strings.HasPrefix(rel, ".config/systemd/user/") || strings.HasPrefix(rel, ".config/autostart/")):
		return "writes ~/" + rel + ", which starts programs later"
	case strings.HasPrefix(p, ".git/hooks/") || strings.Contains(p, "/.git/hooks/"):
		return "writes the git hook " + p
	case p == ".git/config" || strings.HasSuffix(p, "/.git/config"):
		return "writes the repository's git configuration " + p + " (aliases, pagers, hooks)"
	case b == ".envrc":
		return "writes " + p + ", which direnv runs on entering the directory"
	case strings.Contains(p, "site-packages/") && (strings.HasSuffix(b, ".pth") || b == "sitecustomize.py" || b == "usercustomize.py"):
		return "writes " + p + ", which every Python start runs"
	case systemStartup(p):
		return "writes " + p + ", which runs at every login, boot or scheduled time"
	}
	return ""
}

// startupFiles are shell start-up files relative to the home directory.
var startupFiles = setOf(".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc",
	".zshenv", ".zprofile", ".zlogin", ".zlogout", ".kshrc", ".mkshrc", ".pam_environment", ".xprofile",
	".xinitrc", ".xsessionrc")

// systemStartup reports whether p is a system-wide start-up, preload or
// scheduling file.
func systemStartup(p string) bool {
	switch p {
	case "/etc/profile", "/etc/bash.bashrc", "/etc/bashrc", "/etc/environment", "/etc/ld.so.preload",
		"/etc/rc.local", "/etc/crontab", "/etc/zshenv", "/etc/zprofile", "/etc/zshrc":
		return true
	}
	for _, dir := range []string{"/etc/profile.d/", "/etc/zsh/", "/etc/cron", "/var/spool/cron/", "/etc/systemd/",
		"/etc/init.d/", "/etc/xdg/autostart/", "/lib/systemd/", "/usr/lib/systemd/"} {
		if strings.HasPrefix(p, dir) {
			return true
		}
	}
	return false
}

// persistWrite asks when a write target keeps code for later.
func (c *checker) persistWrite(f field) {
	if f.dyn {
		return
	}
	p := f.s
	if c.cwd != "" && !strings.HasPrefix(p, "/") && !strings.HasPrefix(p, homeMark) {
		if what := persistPath(p); what != "" {
			c.report(askPersist(what))
			return
		}
		p = c.cwd + "/" + p
	}
	if what := persistPath(p); what != "" {
		c.report(askPersist(what))
	}
}

// writeTargets checks the files a command writes for code kept for later:
// tee FILE..., cp/mv/install/ln SRC... DEST (or -t DIR), dd of=FILE, sed
// -i FILE..., chmod making a hook executable, and crontab FILE.
func (c *checker) writeTargets(name string, args []field) {
	switch name {
	case "tee", "cp", "mv", "install", "ln", "dd", "sed", "perl", "ruby", "chmod", "crontab":
	default:
		return
	}
	ops := operands(args)
	switch name {
	case "tee":
		for _, f := range ops {
			c.persistWrite(f)
		}
	case "cp", "mv", "install", "ln":
		for i := 1; i < len(args); i++ {
			if a := args[i].s; a == "-t" && i+1 < len(args) {
				c.persistWrite(args[i+1])
			} else if strings.HasPrefix(a, "--target-directory=") {
				c.persistWrite(field{s: a[len("--target-directory="):], dyn: args[i].dyn})
			}
		}
		if len(ops) > 1 {
			c.persistWrite(ops[len(ops)-1])
		}
	case "dd":
		for _, f := range args[1:] {
			if v, ok := strings.CutPrefix(f.s, "of="); ok {
				c.persistWrite(field{s: v, dyn: f.dyn})
			}
		}
	case "sed", "perl", "ruby":
		if hasOpt(args, "i", "in-place") {
			for _, f := range ops {
				c.persistWrite(f)
			}
		}
	case "chmod":
		for _, f := range ops {
			if strings.HasPrefix(f.s, ".git/hooks/") || strings.Contains(f.s, "/.git/hooks/") {
				c.report(askPersist("makes the git hook " + f.s + " executable"))
			}
		}
	case "crontab":
		if !hasOpt(args, "l", "r", "e") {
			c.report(askPersist("installs a crontab"))
		}
	}
}

// commandVars are environment variables whose value is a command line
// that another program runs later (git, less, man, editors).
var commandVars = setOf("GIT_SSH_COMMAND", "GIT_PAGER", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_EXTERNAL_DIFF",
	"GIT_ASKPASS", "SSH_ASKPASS", "GIT_PROXY_COMMAND", "PAGER", "MANPAGER", "SYSTEMD_PAGER", "EDITOR", "VISUAL",
	"LESSOPEN", "LESSCLOSE", "PROMPT_COMMAND", "PS0")

// persistVars are environment variables that make later programs run
// code: shells source BASH_ENV/ENV, the dynamic linker loads LD_PRELOAD.
var persistVars = map[string]string{
	"BASH_ENV":       "sets BASH_ENV, a file every later bash sources",
	"ENV":            "sets ENV, a file every later sh sources",
	"PROMPT_COMMAND": "sets PROMPT_COMMAND, code every later interactive shell runs",
	"LD_PRELOAD":     "sets LD_PRELOAD, a library loaded into every later program",
	"LD_AUDIT":       "sets LD_AUDIT, a library loaded into every later program",
}

// envVar is a variable assignment: NAME=value.
type envVar struct {
	name string
	val  field
}

// envCode checks assignments to variables that run code: command lines
// are checked as shell code, git configuration passed in the environment
// (GIT_CONFIG_COUNT/KEY_n/VALUE_n, GIT_CONFIG_PARAMETERS) like git -c, and
// persisting variables ask.
func (c *checker) envCode(vars []envVar, in stdinSrc) {
	for _, v := range vars {
		if what, ok := persistVars[v.name]; ok {
			c.report(askPersist(what))
		}
		switch {
		case commandVars[v.name]:
			code := v.val
			if v.name == "LESSOPEN" || v.name == "LESSCLOSE" {
				code.s = strings.ReplaceAll(strings.TrimLeft(code.s, "|-"), "%s", "FILE")
			}
			c.commandLine(v.name, code, stdinSrc{piped: strings.Contains(v.name, "PAGER")})
		case v.name == "GIT_CONFIG_PARAMETERS":
			words, ok := splitCmdline(v.val.s)
			if !ok || v.val.dyn {
				c.report(askDynamicShell("git (GIT_CONFIG_PARAMETERS)"))
				continue
			}
			for _, w := range words {
				key, val, _ := strings.Cut(w, "=")
				c.gitSetting(key, field{s: val, word: -1}, in, false)
			}
		case strings.HasPrefix(v.name, "GIT_CONFIG_VALUE_"):
			n := v.name[len("GIT_CONFIG_VALUE_"):]
			key, ok := "", false
			for _, k := range vars {
				if k.name == "GIT_CONFIG_KEY_"+n {
					key, ok = k.val.s, !k.val.dyn
				}
			}
			if !ok {
				key, ok = c.lookupVar("GIT_CONFIG_KEY_" + n)
			}
			if ok {
				c.gitSetting(key, v.val, in, false)
			}
		}
		if c.done() {
			return
		}
	}
}

// lookupVar returns the known value of a scalar variable.
func (c *checker) lookupVar(name string) (string, bool) {
	st, ok := c.vars[name]
	if !ok || !st.known || st.array {
		return "", false
	}
	return st.val, true
}

// commandLine checks a command line that a program runs with sh -c later:
// a value only known at run time asks.
func (c *checker) commandLine(what string, code field, in stdinSrc) {
	switch {
	case code.dyn:
		c.report(askDynamicShell(what))
	case strings.TrimSpace(code.s) == "":
	default:
		c.extracted(code.s, in)
	}
}

// gitCommandKey reports whether a git configuration key's value is a
// command line git runs (lower-cased key).
func gitCommandKey(key string) bool {
	k := strings.ToLower(key)
	switch k {
	case "core.sshcommand", "core.pager", "core.editor", "core.askpass", "core.fsmonitor", "core.gitproxy",
		"sequence.editor", "diff.external", "gpg.program", "credential.helper", "uploadpack.packobjectshook",
		"core.alternaterefscommand", "interactive.difffilter", "sendemail.sendmailcmd", "sendemail.tocmd",
		"sendemail.cccmd":
		return true
	}
	first, rest, _ := strings.Cut(k, ".")
	last := rest[strings.LastIndexByte(rest, '.')+1:]
	switch first {
	case "pager":
		return true
	case "diff":
		return last == "command" || last == "textconv"
	case "merge":
		return last == "driver"
	case "filter":
		return last == "clean" || last == "smudge" || last == "process"
	case "gpg", "credential":
		return last == "program" || last == "helper"
	case "remote":
		return last == "uploadpack" || last == "receivepack"
	}
	return false
}

// gitSetting checks one git configuration setting given on the command
// line (-c, GIT_CONFIG_*) or, with persist, written by git config: a
// command-valued setting has its command line checked (and asks when
// written to a file); an alias is remembered for later git commands in
// this command.
func (c *checker) gitSetting(key string, val field, in stdinSrc, persist bool) {
	k := strings.ToLower(key)
	if name, ok := strings.CutPrefix(k, "alias."); ok {
		if persist {
			if c.gitAliases == nil {
				c.gitAliases = make(map[string]field)
			}
			c.gitAliases[name] = val
			if strings.HasPrefix(val.s, "!") || val.dyn {
				c.report(askPersist("defines the git shell alias " + name))
				c.commandLine("git alias "+name, field{s: val.s[min(1, len(val.s)):], dyn: val.dyn}, stdinSrc{})
			}
		}
		return
	}
	if persist && k == "core.hookspath" {
		c.report(askPersist("sets core.hooksPath, the directory of hooks git runs"))
		return
	}
	if !gitCommandKey(k) {
		return
	}
	switch strings.ToLower(val.s) {
	case "", "true", "false", "yes", "no", "on", "off", "0", "1":
		return // a boolean: pager.log=false, core.fsmonitor=true
	}
	code := val
	if strings.HasPrefix(k, "credential.") {
		if !strings.HasPrefix(code.s, "!") {
			return // a helper's name: git credential-NAME
		}
		code.s = code.s[1:]
	}
	if persist {
		c.report(askPersist("sets git's " + key + ", a command git runs later"))
	}
	cin := stdinSrc{}
	if strings.HasPrefix(k, "pager.") || k == "core.pager" {
		cin = stdinSrc{piped: true} // git's output
	}
	c.commandLine("git's "+key, code, cin)
}
