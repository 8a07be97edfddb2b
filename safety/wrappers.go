package safety

import "strings"

// optSpec describes the options of a command wrapper.
type optSpec struct {
	shortArg string   // short options that take an argument
	longArg  []string // long options (without "--") that take an argument
	none     string   // short options after which no command runs (command -v, sudo -l)
	noneLong []string
	code     string // short options whose argument is shell code (script -c, env -S)
	codeLong []string
	assigns  bool // NAME=value words may follow the options (env, sudo)
	skipPos  int  // operands before the command (timeout DURATION, chroot DIR, flock FILE)
	posCode  bool // -c/--command CODE may follow those operands (flock FILE -c CODE)
	join     bool // the command words are shell code, joined with spaces (watch, sg)
	noExec   bool // operands are not a command, only code is (script [FILE])
	permute  bool // options may follow operands (script)
	dash     bool // a lone "-" is an option (env -, sg -)
}

var wrapperSpecs = map[string]*optSpec{
	"sudo": {shortArg: "CDghpRrtTUu", assigns: true, none: "elvKV",
		noneLong: []string{"edit", "list", "help", "version", "validate"},
		longArg: []string{"close-from", "chdir", "group", "host", "prompt", "chroot", "role", "type",
			"command-timeout", "other-user", "user"}},
	"doas":        {shortArg: "uC"},
	"nohup":       {},
	"time":        {shortArg: "fo", longArg: []string{"format", "output"}},
	"exec":        {shortArg: "a"},
	"nice":        {shortArg: "n", longArg: []string{"adjustment"}},
	"timeout":     {shortArg: "sk", longArg: []string{"signal", "kill-after"}, skipPos: 1},
	"xargs":       {shortArg: "adEILnPs", longArg: []string{"arg-file", "delimiter", "max-args", "max-procs", "max-chars", "process-slot-var"}},
	"busybox":     {},
	"builtin":     {},
	"setsid":      {},
	"stdbuf":      {shortArg: "ioe", longArg: []string{"input", "output", "error"}},
	"ionice":      {shortArg: "cnpPu", longArg: []string{"class", "classdata"}},
	"unbuffer":    {},
	"nocorrect":   {},
	"noglob":      {},
	"chronic":     {},
	"command":     {none: "vV"},
	"env":         {shortArg: "uC", code: "S", codeLong: []string{"split-string"}, assigns: true, dash: true, longArg: []string{"unset", "chdir"}},
	"watch":       {shortArg: "nq", longArg: []string{"interval", "equexit"}, join: true},
	"catchsegv":   {},
	"proxychains": {shortArg: "f"},
	// flock [-sxun] [-w SECS] [-E CODE] FILE|DIR CMD... or FILE -c CODE
	"flock": {shortArg: "wE", longArg: []string{"timeout", "wait", "conflict-exit-code"}, skipPos: 1, posCode: true},
	// chroot [--userspec=U:G] [--groups=G] NEWROOT [CMD...]
	"chroot": {longArg: []string{"userspec", "groups"}, skipPos: 1},
	"strace": {shortArg: "abeEIoOpPsSuUX", longArg: []string{"trace", "trace-path", "signal", "status", "abbrev",
		"verbose", "raw", "read", "write", "output", "attach", "user", "env", "columns", "string-limit",
		"summary-sort-by", "summary-columns", "const-print-style", "kvm", "inject", "fault", "argv0"}},
	"ltrace": {shortArg: "aADeFlnopsuwx", longArg: []string{"align", "output", "indent", "library"}},
	// script [-aefq] [-c CODE] [-E WHEN] [-O/-I/-B/-T FILE] [FILE]
	"script": {shortArg: "EIOBTmo", code: "c", codeLong: []string{"command"}, noExec: true, permute: true,
		longArg: []string{"echo", "log-in", "log-out", "log-io", "log-timing", "logging-format", "output-limit"}},
	// runuser -u USER [--] CMD...; without -u it is su (see command)
	"runuser": {shortArg: "ugGsw", longArg: []string{"user", "group", "supp-group", "shell", "whitelist-environment"}},
	"unshare": {shortArg: "SGRw", longArg: []string{"setuid", "setgid", "root", "wd", "propagation", "setgroups",
		"map-user", "map-group", "map-users", "map-groups", "monotonic", "boottime", "load-interp"}},
	"setpriv": {none: "d", noneLong: []string{"dump", "list-caps"}, longArg: []string{"reuid", "regid", "ruid",
		"rgid", "euid", "egid", "groups", "inh-caps", "ambient-caps", "bounding-set", "securebits",
		"pdeathsig", "selinux-label", "apparmor-profile", "landlock-access", "landlock-rule"}},
	"firejail": {}, // its options are all --name or --name=value
	"systemd-run": {shortArg: "upEMH", none: "S", noneLong: []string{"shell"}, longArg: []string{"unit",
		"property", "setenv", "machine", "host", "description", "slice", "uid", "gid", "nice",
		"working-directory", "on-active", "on-boot", "on-startup", "on-unit-active", "on-unit-inactive",
		"on-calendar", "timer-property", "path-property", "socket-property", "service-type", "background"}},
	// sg [-] GROUP [-c] CODE: the command is run by /bin/sh -c
	"sg": {skipPos: 1, posCode: true, join: true, dash: true},
}

// base returns the last element of a command path ("/usr/bin/rm" -> "rm").
func base(s string) string {
	if i := strings.LastIndexByte(s, '/'); i >= 0 && i < len(s)-1 {
		return s[i+1:]
	}
	return s
}

// isAssignWord reports whether s looks like NAME=value.
func isAssignWord(s string) bool {
	eq := strings.IndexByte(s, '=')
	if eq <= 0 {
		return false
	}
	for i := 0; i < eq; i++ {
		ch := s[i]
		if !(ch == '_' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || i > 0 && ch >= '0' && ch <= '9') {
			return false
		}
	}
	return true
}

// unwrapResult is what unwrapping one level of wrapper found.
type unwrapResult int

const (
	notWrapper unwrapResult = iota // args[0] is the real command
	wrapped                        // rest is the wrapped command's argv
	noCommand                      // the wrapper runs no command (command -v, sudo -e, ...)
	shellCode                      // rest[0] is shell code to re-parse (watch, env -S)
)

// unwrapOne strips one wrapper (sudo, env, nice, ...) from args.
func unwrapOne(args []field) ([]field, unwrapResult) {
	name := base(args[0].s)
	spec, ok := wrapperSpecs[name]
	if !ok || name == "runuser" && !hasUserOpt(args) {
		return args, notWrapper
	}
	var code *field
	join := spec.join
	i := 1
	for i < len(args) {
		f := args[i]
		a := f.s
		if a == "--" {
			i++
			break
		}
		if a == "-" && spec.dash {
			i++
			continue
		}
		if len(a) < 2 || a[0] != '-' || f.dyn {
			if spec.permute {
				i++ // an operand; options may follow
				continue
			}
			break
		}
		i++
		if a[1] == '-' {
			long, val, hasEq := strings.Cut(a[2:], "=")
			switch {
			case contains(spec.noneLong, long):
				return nil, noCommand
			case contains(spec.codeLong, long):
				if hasEq {
					code = &field{s: val, dyn: f.dyn, word: -1}
				} else if i < len(args) {
					code = &args[i]
					i++
				}
				continue
			case name == "watch" && long == "exec":
				join = false
			}
			if !hasEq && contains(spec.longArg, long) {
				i++
			}
			continue
		}
	cluster:
		for j := 1; j < len(a); j++ {
			ch := a[j]
			switch {
			case strings.IndexByte(spec.none, ch) >= 0:
				return nil, noCommand
			case strings.IndexByte(spec.code, ch) >= 0:
				if j+1 < len(a) {
					code = &field{s: a[j+1:], dyn: f.dyn, word: -1}
				} else if i < len(args) {
					code = &args[i]
					i++
				}
				break cluster
			case name == "watch" && ch == 'x':
				join = false
			case strings.IndexByte(spec.shortArg, ch) >= 0:
				if j == len(a)-1 {
					i++
				}
				break cluster
			}
		}
	}
	if spec.assigns {
		for i < len(args) && isAssignWord(args[i].s) {
			i++
		}
	}
	i = min(i+spec.skipPos, len(args))
	rest := args[i:]
	if spec.posCode && len(rest) > 0 && (rest[0].s == "-c" || rest[0].s == "--command") {
		if len(rest) < 2 {
			return nil, noCommand
		}
		rest = rest[1:]
		if !join {
			return rest[:1], shellCode
		}
	}
	switch {
	case code != nil && spec.noExec:
		return []field{*code}, shellCode
	case code != nil:
		// env -S STRING ARGS...: ARGS are words after the split string.
		return joinCode(*code, rest, true), shellCode
	case spec.noExec || len(rest) == 0:
		return nil, noCommand
	case join:
		return joinCode(rest[0], rest[1:], false), shellCode
	}
	return rest, wrapped
}

// joinCode appends the words of rest to the shell code in code, quoted as
// words or verbatim. An unknown word makes the code unknown: re-parsing
// cannot carry the mark.
func joinCode(code field, rest []field, quote bool) []field {
	var b strings.Builder
	b.WriteString(code.s)
	dyn := code.dyn
	for _, f := range rest {
		b.WriteByte(' ')
		if quote {
			b.WriteString(shellQuote(f.s))
		} else {
			b.WriteString(f.s)
		}
		dyn = dyn || f.dyn
	}
	return []field{{s: b.String(), dyn: dyn, word: -1}}
}

// hasUserOpt reports whether runuser has -u/--user (a command follows)
// rather than su's form.
func hasUserOpt(args []field) bool {
	for _, f := range args[1:] {
		a := f.s
		switch {
		case a == "--":
			return false
		case a == "--user" || strings.HasPrefix(a, "--user="):
			return true
		case len(a) > 1 && a[0] == '-' && a[1] != '-':
			if k := strings.IndexAny(a[1:], "ugGsw"); k >= 0 && a[1+k] == 'u' {
				return true
			}
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// shellQuote quotes s for re-parsing as one shell word.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`;&|<>(){}[]*?!#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
