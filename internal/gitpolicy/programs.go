//go:build linux

package gitpolicy

import (
	"path/filepath"
	"strings"
)

// A configuration's program-valued keys (core.fsmonitor, core.pager,
// core.editor, core.sshCommand, diff.external, credential.helper, shell
// aliases, drivers, ...) name a command git runs through the shell in
// the top of the working tree. A file the command names by a path
// (./fsm.sh, tools/pager, sh fsm.sh, or an absolute path) is code: a
// change of it is refused like a hook's. A relative path in the user's
// configuration (global, system, GIT_CONFIG_COUNT) names a file below
// every working tree, one in a repository's configuration a file below
// its own. The command's first word without a slash is looked up in
// PATH (not code), and so is any other word without a slash (an
// argument: git log in an alias) but the one after an interpreter (sh
// fsm.sh); words that start with - or $, and a path that is the working
// tree itself or above it, are left out (the shell decides what they
// mean; protecting the whole tree would refuse every change).

// interpreters run the file their next word names (sh fsm.sh).
var interpreters = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true,
	".": true, "source": true, "python": true, "python3": true, "perl": true, "ruby": true, "node": true}

// programKey reports whether section[.sub].key names a command git
// runs, and whether only a value starting with ! is one (aliases and
// credential helpers; a credential helper may also be an absolute
// path).
func programKey(e configEntry) (ok, bang bool) {
	name := e.Section + "." + e.Key
	if e.Sub == "" {
		switch name {
		case "core.fsmonitor", "core.pager", "core.editor", "core.sshcommand", "core.askpass",
			"core.gitproxy", "diff.external", "sequence.editor", "gpg.program",
			"interactive.difffilter", "web.browser":
			return true, false
		case "credential.helper":
			return true, true
		}
		return e.Section == "alias" || e.Section == "pager", e.Section == "alias"
	}
	switch {
	case driverKey(e.Section, e.Key), e.Section == "pager":
		return true, false
	case name == "credential.helper":
		return true, true
	case e.Key == "program" && e.Section == "gpg":
		return true, false
	case e.Key == "cmd" && (e.Section == "difftool" || e.Section == "mergetool" || e.Section == "browser"):
		return true, false
	}
	return false, false
}

// programPaths returns the paths that the program-valued entry e names
// (nil for another key): absolute ones as they are, relative ones as
// written (below the working tree).
func (u *userConfig) programPaths(e configEntry) (abs, rel []string) {
	ok, bang := programKey(e)
	if !ok {
		return nil, nil
	}
	v := strings.TrimSpace(e.Value)
	if s, cut := strings.CutPrefix(v, "!"); cut {
		v = s
	} else if bang && !filepath.IsAbs(v) {
		return nil, nil
	}
	prev := ""
	for _, w := range strings.Fields(v) {
		w = strings.Trim(w, `"'`)
		after := prev
		prev = filepath.Base(w)
		switch {
		case w == "" || w[0] == '-' || w[0] == '$' || (!strings.Contains(w, "/") && !interpreters[after]):
		case w[0] == '~':
			if p := u.resolve("/", w); p != "" {
				abs = append(abs, p)
			}
		case filepath.IsAbs(w):
			abs = append(abs, rawPath("/", w))
		default:
			rel = append(rel, w)
		}
	}
	return abs, rel
}

// addProgram records the program file p (absolute, or relative to the
// working tree wt; its .. components kept, see rawPath) unless it
// names wt or a directory above it.
func (c *code) addProgram(wt, p string) {
	p = rawPath(wt, p)
	if q := filepath.Clean(p); q == wt || q == "/" || strings.HasPrefix(wt, q+"/") {
		return
	}
	c.programs = append(c.programs, p)
}
