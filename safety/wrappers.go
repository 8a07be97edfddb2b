package safety

import "strings"

// optSpec describes the options of a command wrapper.
type optSpec struct {
	shortArg string   // short options that take an argument
	longArg  []string // long options (without "--") that take an argument
	assigns  bool     // NAME=value words may follow the options
	skipPos  int      // positional words to skip before the command (timeout DURATION)
}

var wrapperSpecs = map[string]*optSpec{
	"sudo": {shortArg: "CDghpRrtTUu", assigns: true, longArg: []string{"close-from", "chdir", "group", "host",
		"prompt", "chroot", "role", "type", "command-timeout", "other-user", "user"}},
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
	"command":     {},
	"env":         {shortArg: "uCS", assigns: true, longArg: []string{"unset", "chdir", "split-string"}},
	"watch":       {shortArg: "nq", longArg: []string{"interval", "equexit"}},
	"catchsegv":   {},
	"proxychains": {shortArg: "f"},
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
	if !ok {
		return args, notWrapper
	}
	var split *field // env -S STRING
	watchExec := false
	i := 1
	for i < len(args) {
		f := args[i]
		a := f.s
		if a == "--" {
			i++
			break
		}
		if len(a) < 2 || a[0] != '-' || f.dyn {
			if name == "env" && a == "-" {
				i++
				continue
			}
			break
		}
		if a[1] == '-' {
			long, val, hasEq := strings.Cut(a[2:], "=")
			switch {
			case name == "command" && (long == "version"):
			case name == "sudo" && (long == "edit" || long == "list" || long == "help" || long == "version" || long == "validate"):
				return nil, noCommand
			case name == "watch" && long == "exec":
				watchExec = true
			case name == "env" && long == "split-string":
				if hasEq {
					split = &field{s: val, dyn: f.dyn}
				} else if i+1 < len(args) {
					split = &args[i+1]
				}
			}
			if !hasEq && contains(spec.longArg, long) {
				i++
			}
			i++
			continue
		}
		i++
		for j := 1; j < len(a); j++ {
			ch := a[j]
			switch {
			case name == "command" && (ch == 'v' || ch == 'V'):
				return nil, noCommand
			case name == "sudo" && strings.IndexByte("elvKV", ch) >= 0:
				return nil, noCommand
			case name == "watch" && ch == 'x':
				watchExec = true
			}
			if strings.IndexByte(spec.shortArg, ch) >= 0 {
				if name == "env" && ch == 'S' {
					if j+1 < len(a) {
						split = &field{s: a[j+1:], dyn: f.dyn, word: -1}
					} else if i < len(args) {
						split = &args[i]
					}
				}
				if j == len(a)-1 {
					i++
				}
				break
			}
		}
	}
	if spec.assigns {
		for i < len(args) && isAssignWord(args[i].s) {
			i++
		}
	}
	for k := 0; k < spec.skipPos && i < len(args); k++ {
		i++
	}
	if i > len(args) {
		i = len(args)
	}
	rest := args[i:]
	if split != nil {
		code := split.s
		for _, f := range rest {
			code += " " + shellQuote(f.s)
		}
		return []field{{s: code, dyn: split.dyn, word: -1}}, shellCode
	}
	if name == "watch" && !watchExec {
		if len(rest) == 0 {
			return nil, noCommand
		}
		var b strings.Builder
		dyn := false
		for k, f := range rest {
			if k > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(f.s)
			dyn = dyn || f.dyn
		}
		return []field{{s: b.String(), dyn: dyn, word: -1}}, shellCode
	}
	if len(rest) == 0 {
		return nil, noCommand
	}
	return rest, wrapped
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
