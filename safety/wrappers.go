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

// wrapperScan is the state of scanning a wrapper's options.
type wrapperScan struct {
	spec *optSpec
	name string
	args []field
	i    int    // next word
	code *field // the shell code an option gave (env -S, script -c)
	join bool   // the command words are shell code (watch, sg)
	none bool   // an option says no command runs
}

// long handles the long option --NAME[=VALUE] just read.
func (w *wrapperScan) long(f field) {
	long, val, hasEq := strings.Cut(f.s[2:], "=")
	switch {
	case contains(w.spec.noneLong, long):
		w.none = true
	case contains(w.spec.codeLong, long):
		if hasEq {
			w.code = &field{s: val, dyn: f.dyn, word: -1}
		} else if w.i < len(w.args) {
			w.code = &w.args[w.i]
			w.i++
		}
	case w.name == "watch" && long == "exec":
		w.join = false
	case !hasEq && contains(w.spec.longArg, long):
		w.i++
	}
}

// short handles the cluster of short options -abc just read.
func (w *wrapperScan) short(f field) {
	a := f.s
	for j := 1; j < len(a); j++ {
		ch := a[j]
		switch {
		case strings.IndexByte(w.spec.none, ch) >= 0:
			w.none = true
			return
		case strings.IndexByte(w.spec.code, ch) >= 0:
			if j+1 < len(a) {
				w.code = &field{s: a[j+1:], dyn: f.dyn, word: -1}
			} else if w.i < len(w.args) {
				w.code = &w.args[w.i]
				w.i++
			}
			return
		case w.name == "watch" && ch == 'x':
			w.join = false
		case strings.IndexByte(w.spec.shortArg, ch) >= 0:
			if j == len(a)-1 {
				w.i++
			}
			return
		}
	}
}

// options reads the wrapper's options up to its command.
func (w *wrapperScan) options() {
	for w.i < len(w.args) && !w.none {
		f := w.args[w.i]
		a := f.s
		switch {
		case a == "--":
			w.i++
			return
		case a == "-" && w.spec.dash:
			w.i++
			continue
		case len(a) < 2 || a[0] != '-' || f.dyn:
			if !w.spec.permute {
				return
			}
			w.i++ // an operand; options may follow
			continue
		}
		w.i++
		if a[1] == '-' {
			w.long(f)
		} else {
			w.short(f)
		}
	}
}

// unwrapOne strips one wrapper (sudo, env, nice, ...) from args.
func unwrapOne(args []field) ([]field, unwrapResult) {
	name := base(args[0].s)
	spec, ok := wrapperSpecs[name]
	if !ok || name == "runuser" && !hasUserOpt(args) {
		return args, notWrapper
	}
	w := wrapperScan{spec: spec, name: name, args: args, i: 1, join: spec.join}
	w.options()
	if w.none {
		return nil, noCommand
	}
	i := w.i
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
		if !w.join {
			return rest[:1], shellCode
		}
	}
	switch {
	case w.code != nil && spec.noExec:
		return []field{*w.code}, shellCode
	case w.code != nil:
		// env -S STRING ARGS...: ARGS are words after the split string.
		return joinCode(*w.code, rest, true), shellCode
	case spec.noExec || len(rest) == 0:
		return nil, noCommand
	case w.join:
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
