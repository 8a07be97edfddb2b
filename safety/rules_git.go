package safety

import (
	"path"
	"strings"
)

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

func (c *checker) git(args []field, in stdinSrc) {
	i := gitSub(args)
	c.gitGlobalSettings(args, i, in)
	for n := 0; i >= 0 && !args[i].dyn; n++ {
		val, found, dyn := c.gitAlias(args[:i], args[i].s)
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
			c.nestedParams(code+` "$@"`, false, in, nil, args[i+1:])
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
	c.noteDiscard(args, i)
	if i < 0 || args[i].dyn {
		return
	}
	sub := args[i].s
	if c.addAll != "" && gitCommits(sub, args[i+1:]) {
		c.report(Verdict{Decision: Ask, Rule: "git-add-blind",
			Reason: "blind `git add " + c.addAll + "` stages every change, including secrets, build output and unrelated edits, and `git " +
				sub + "` then records them",
			Alternative: "run `git status`, then `git add` the specific files you changed (e.g. git add path/to/file) before `git " + sub + "`"})
	}
	c.gitSubcommand(sub, args[i+1:], in)
	switch sub {
	case "add", "stage":
		if what := blindAdd(args[i+1:]); what != "" && c.addAll == "" {
			c.addAll = what
			return
		}
	case "push":
		if what := forcePush(args[i+1:]); what != "" {
			c.report(Verdict{Decision: Block, Rule: "git-push-force",
				Reason:      "force push (" + what + ") can overwrite commits others pushed to the remote",
				Alternative: "use `git push --force-with-lease` (or a plain `git push`)"})
		}
	}
	if c.addAll != "" {
		c.followAddAll("git", gitInspects(sub))
	}
}

// gitCommits reports whether git subcommand sub records the index in a
// commit or a stash (or pushes such commits).
func gitCommits(sub string, args []field) bool {
	switch sub {
	case "commit", "stash", "commit-tree", "write-tree", "push":
		return true
	case "merge", "rebase", "cherry-pick", "revert", "am":
		for _, f := range args {
			if f.s == "--continue" {
				return true
			}
		}
	}
	return false
}

// gitInspects reports whether git subcommand sub only shows the
// repository's state.
func gitInspects(sub string) bool {
	switch sub {
	case "status", "diff", "log", "show", "ls-files", "rev-parse", "shortlog", "describe", "blame", "whatchanged":
		return true
	}
	return false
}

// inspects reports whether a program only prints (text or what it is
// given), for the commands that may follow a blind git add.
func inspects(name string) bool {
	switch name {
	case "echo", "printf", "cat", "head", "tail", "wc", "true", ":", "grep", "sort", "uniq", "less", "more", "tee":
		return true
	}
	return false
}

// followAddAll records a command that follows a blind git add: a git
// command that shows the repository's state reviews it; other commands
// that only print are neutral; anything else may act on what was staged.
func (c *checker) followAddAll(name string, gitInspection bool) {
	switch {
	case gitInspection:
		c.reviewed = true
	case name == "git" || !inspects(name):
		c.afterAddAll = true
	}
}

// addAllVerdict is the verdict on a blind `git add` (c.addAll) that no
// commit followed: it passes when only inspection followed (git diff
// --cached shows what was staged), and otherwise needs approval.
func (c *checker) addAllVerdict() {
	if c.addAll == "" || c.reviewed && !c.afterAddAll {
		return
	}
	c.report(Verdict{Decision: Ask, Rule: "git-add-blind",
		Reason:      "blind `git add " + c.addAll + "` stages every change, including secrets, build output and unrelated edits",
		Alternative: "run `git status`, then `git add` the specific files you changed (e.g. git add path/to/file); or review what it staged in the same command (git add -A && git diff --cached)"})
}

// gitAlias returns the value of alias name set with -c alias.NAME=VALUE
// among git's global options (the last one wins, names are
// case-insensitive) or by git config earlier in the command, and whether
// that value is only known at run time.
func (c *checker) gitAlias(opts []field, name string) (val string, found, dyn bool) {
	if f, ok := c.gitAliases[strings.ToLower(name)]; ok {
		val, found, dyn = f.s, true, f.dyn
	}
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
			if f.top && strings.Trim(strings.ReplaceAll(a, dynMark, ""), "/.") == "" {
				return "$(git rev-parse --show-toplevel)" // the whole work tree
			}
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

// isExcludePathspec reports whether pathspec p excludes: its magic,
// short (':!x', ':^x', ':/!x') or long (':(top,exclude)x'), says so.
func isExcludePathspec(p string) bool {
	if !strings.HasPrefix(p, ":") || len(p) < 2 {
		return false
	}
	if p[1] != '(' {
		for _, ch := range p[1:] {
			if ch == '!' || ch == '^' {
				return true
			}
			if ch != '/' {
				return false
			}
		}
		return false
	}
	magic, _, _ := strings.Cut(p[2:], ")")
	for _, m := range strings.Split(magic, ",") {
		if m == "exclude" {
			return true
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

// gitGlobalSettings checks git's global -c KEY=VALUE options (before the
// subcommand at sub) whose value git runs as a command.
func (c *checker) gitGlobalSettings(args []field, sub int, in stdinSrc) {
	if sub < 0 {
		sub = len(args)
	}
	for i := 1; i+1 < sub; i++ {
		switch a := args[i].s; {
		case a == "-c":
			key, val, _ := strings.Cut(args[i+1].s, "=")
			c.gitSetting(key, field{s: val, dyn: args[i+1].dyn, word: -1}, in, false)
			i++
		case a == "--config-env":
			key, env, _ := strings.Cut(args[i+1].s, "=")
			val, ok := c.lookupVar(env)
			c.gitSetting(key, field{s: val, dyn: !ok, word: -1}, in, false)
			i++
		}
	}
}

// gitSubcommand checks what a git subcommand runs as a command: settings
// of clone -c, --upload-pack/--receive-pack/--exec programs, git config
// writing command-valued settings or aliases, submodule foreach, rebase
// --exec, bisect run and filter-branch's filters.
func (c *checker) gitSubcommand(sub string, args []field, in stdinSrc) {
	switch sub {
	case "config":
		c.gitConfig(args, in)
		return
	case "submodule":
		for k, f := range args {
			if f.s == "foreach" && k+1 < len(args) {
				c.commandLine("git submodule foreach", joinCode(args[k+1], args[k+2:], false)[0], stdinSrc{})
				return
			}
		}
		return
	case "reset":
		for _, f := range args {
			if strings.HasPrefix(f.s, "--h") && abbrevOf(f.s[2:], "hard") {
				c.report(Verdict{Decision: Ask, Rule: "git-reset-hard",
					Reason:      "git reset --hard discards uncommitted changes, and with a revision the commits after it, with no undo",
					Alternative: "run `git stash` first (keeps the changes), or `git reset --keep REV`, which refuses to discard local changes"})
				return
			}
		}
		return
	case "bisect":
		if len(args) > 1 && args[0].s == "run" {
			c.argv(append([]field(nil), args[1:]...), stdinSrc{})
		}
		return
	}
	for k := 0; k < len(args); k++ {
		name, val, eq := strings.Cut(args[k].s, "=")
		next := func() (field, bool) {
			if eq {
				return field{s: val, dyn: args[k].dyn, word: -1}, true
			}
			if k+1 < len(args) {
				k++
				return args[k], true
			}
			return field{}, false
		}
		switch {
		case sub == "clone" && (name == "-c" || name == "--config"):
			if f, ok := next(); ok {
				key, v, _ := strings.Cut(f.s, "=")
				c.gitSetting(key, field{s: v, dyn: f.dyn, word: -1}, in, false)
			}
		case name == "--upload-pack" || name == "--receive-pack" || name == "--exec" ||
			sub == "clone" && name == "-u" || sub == "rebase" && name == "-x" ||
			sub == "filter-branch" && strings.HasSuffix(name, "-filter"):
			if f, ok := next(); ok {
				c.commandLine("git "+sub+" "+name, f, stdinSrc{})
			}
		}
		if c.done() {
			return
		}
	}
}

// gitConfig checks git config writing a setting: KEY VALUE (also after
// set, --add, --replace-all, with a scope or file option). Reading,
// listing and unsetting write nothing that runs.
func (c *checker) gitConfig(args []field, in stdinSrc) {
	var ops []field
	for k := 0; k < len(args); k++ {
		a := args[k].s
		switch {
		case a == "-f" || a == "--file" || a == "--blob" || a == "--type" || a == "--default" || a == "--comment":
			k++
		case a == "--get" || a == "--get-all" || a == "--get-regexp" || a == "--get-urlmatch" || a == "-l" ||
			a == "--list" || a == "--unset" || a == "--unset-all" || a == "-e" || a == "--edit" ||
			a == "--rename-section" || a == "--remove-section":
			return
		case strings.HasPrefix(a, "-"):
		default:
			ops = append(ops, args[k])
		}
	}
	if len(ops) > 0 {
		switch ops[0].s {
		case "set":
			ops = ops[1:]
		case "get", "list", "unset", "rename-section", "remove-section", "edit":
			return
		}
	}
	if len(ops) < 2 {
		return
	}
	c.gitSetting(ops[0].s, ops[1], in, true)
}
