package safety

import (
	"path"
	"strings"
)

// A grammar of git's forms that discard uncommitted work, which the
// "git-discard" grammar of a permission rule (Rule.Grammar) matches: the
// checker finds them wherever it finds a git command (behind wrappers,
// git and shell aliases, -C and the other global options, in nested
// shells and functions) and after git's own option parsing, which takes
// options after operands and any unambiguous abbreviation of a long
// option (--forc, --har, --sour=HEAD).
//
//   - git checkout with -f/--force (git checkout -f BRANCH, git checkout
//     -f alone), or with a pathspec naming the whole work tree (.,
//     ./, *, :/, :(top), .., the working directory's absolute path or one
//     above it, $(git rev-parse --show-toplevel)), pathspecs that only
//     exclude (':!x', ':^x', ':(exclude)x': git then means the whole tree
//     but x), a pathspec only known at run time, or --pathspec-from-file:
//     it overwrites the files' uncommitted changes (git checkout -- ., git
//     checkout HEAD~5 .);
//   - git switch with -f/--force/--discard-changes;
//   - git restore of the work tree (not --staged alone) with such a
//     pathspec (git restore ., git restore --source=HEAD~5 :/);
//   - git reset --hard and git reset --merge (which overwrites staged
//     changes);
//   - git read-tree -u with --reset or -m (git read-tree -u --reset HEAD,
//     git read-tree -mu HEAD overwrites staged changes), unless
//     -n/--dry-run or --prefix (which refuses to overwrite);
//   - git clean, unless -n/--dry-run (git clean -fdx; without -f too,
//     since clean.requireForce=false lets it delete);
//   - git stash drop and git stash clear, and their plumbing: git
//     update-ref -d refs/stash (or --stdin);
//   - git reflog delete, git reflog expire and git reflog drop (git 2.50: whole reflogs) of any ref, unless
//     -n/--dry-run: a stash entry but the newest, and a commit that only a
//     reflog still names (made on a detached HEAD, or left by git reset),
//     live only in reflogs. Which entries expire depends on --expire,
//     --expire-unreachable and on gc.reflogExpire and
//     gc.reflogExpireUnreachable, which -c, GIT_CONFIG_PARAMETERS or an
//     earlier git config may set to now, so every expire counts;
//   - git rm -f and git checkout-index -f of such a pathspec (or -a, or
//     --stdin: git ls-files | git checkout-index -f --stdin), unless
//     --temp;
//   - git worktree remove -f/--force, git submodule deinit -f and git
//     submodule update -f, which delete a linked work tree's or a
//     submodule's uncommitted changes;
//   - any of these subcommands with a word only known at run time where an
//     option may stand (git checkout "$opt" main) or words xargs adds at
//     run time, and git with a subcommand only known at run time (or
//     none, behind xargs).
//
// Restoring named files (git checkout path/file.py, git restore src/) is
// not matched: it discards the changes to those files only, as an edit
// would, and the agents of the real-agent corpus do it to undo their own
// edits.

// gitArgs are a git subcommand's words sorted by git's option parsing.
type gitArgs struct {
	short    string   // the one-letter options given
	long     []string // the long options given, without -- and =VALUE
	ops      []field  // the operands
	afterDD  []field  // the operands after --
	dd       bool     // -- was given
	dynOpt   bool     // a word only known at run time where an option may stand
	fromFile bool     // --pathspec-from-file
}

// parseGitArgs sorts args; shortVals are the one-letter options that take
// a value (the rest of the word or the next word), longVals the long
// options that take one (=VALUE or the next word), by full name.
func parseGitArgs(args []field, shortVals string, longVals ...string) gitArgs {
	var g gitArgs
	for i := 0; i < len(args); i++ {
		f := args[i]
		switch {
		case g.dd:
			g.afterDD = append(g.afterDD, f)
			continue
		case f.dyn && (f.s == "" || strings.HasPrefix(f.s, dynMark) || strings.HasPrefix(f.s, "-")):
			g.dynOpt = true
			g.ops = append(g.ops, f)
			continue
		case f.s == "--":
			g.dd = true
			continue
		case strings.HasPrefix(f.s, "--"):
			name, _, eq := strings.Cut(f.s[2:], "=")
			g.long = append(g.long, name)
			if abbrevOf(name, "pathspec-from-file") {
				g.fromFile = true
			}
			for _, v := range longVals {
				if abbrevOf(name, v) && !eq {
					i++
					break
				}
			}
			continue
		case len(f.s) > 1 && f.s[0] == '-':
			for k := 1; k < len(f.s); k++ {
				g.short += f.s[k : k+1]
				if strings.IndexByte(shortVals, f.s[k]) >= 0 {
					if k+1 == len(f.s) {
						i++
					}
					break
				}
			}
			continue
		}
		g.ops = append(g.ops, f)
	}
	return g
}

// abbrevOf reports whether a long option as given (without --) is name or
// an abbreviation git accepts for it (a prefix; an ambiguous one git
// refuses, so taking it costs at most an ask).
func abbrevOf(given, name string) bool {
	return given != "" && strings.HasPrefix(name, given)
}

// has reports whether option short (a letter) or one of the long names
// was given.
func (g *gitArgs) has(short byte, long ...string) bool {
	if short != 0 && strings.IndexByte(g.short, short) >= 0 {
		return true
	}
	for _, l := range g.long {
		for _, name := range long {
			if abbrevOf(l, name) {
				return true
			}
		}
	}
	return false
}

// wholeTree reports whether a pathspec names the whole work tree (see
// above) or is only known at run time.
func (c *checker) wholeTree(f field) bool {
	if f.dyn || f.top || c.appended {
		return true
	}
	if isBlindPathspec(f.s) {
		return true
	}
	p := f.s
	if strings.HasPrefix(p, ":") {
		return false // magic other than the whole tree's (isBlindPathspec)
	}
	if !strings.HasPrefix(p, "/") || c.workDir == "" {
		return false
	}
	p, wd := path.Clean(p), path.Clean(c.workDir)
	return p == wd || p == "/" || strings.HasPrefix(wd, p+"/")
}

// anyWhole reports whether one of fs names the whole work tree.
func (c *checker) anyWhole(fs []field) bool {
	for _, f := range fs {
		if c.wholeTree(f) {
			return true
		}
	}
	return false
}

// excludeOnly reports whether fs are pathspecs that all only exclude
// (':!x'): git then takes the whole tree but those.
func excludeOnly(fs []field) bool {
	for _, f := range fs {
		if f.dyn || !isExcludePathspec(f.s) {
			return false
		}
	}
	return len(fs) > 0
}

// wholeSpec reports whether pathspecs fs name the whole work tree: one of
// them does, or they only exclude.
func (c *checker) wholeSpec(fs []field) bool {
	return c.anyWhole(fs) || excludeOnly(fs)
}

// gitDiscards returns the form of git subcommand sub with args that
// discards uncommitted work (see above), or "".
func (c *checker) gitDiscards(sub string, args []field) string {
	switch sub {
	case "checkout":
		g := parseGitArgs(args, "bB", "orphan", "conflict", "pathspec-from-file")
		switch {
		case g.has('f', "force"):
			return "git checkout --force"
		case g.dynOpt, g.fromFile, c.wholeSpec(g.afterDD), !g.dd && c.anyWhole(g.ops),
			!g.dd && (excludeOnly(g.ops) || len(g.ops) > 1 && excludeOnly(g.ops[1:])): // [REV] ':!x'
			return "git checkout of the whole work tree"
		}
	case "switch":
		g := parseGitArgs(args, "cC", "create", "force-create", "orphan", "conflict")
		if g.dynOpt || g.has('f', "force", "discard-changes") {
			return "git switch --discard-changes"
		}
	case "restore":
		g := parseGitArgs(args, "s", "source", "conflict", "pathspec-from-file")
		worktree := !g.has('S', "staged") || g.has('W', "worktree")
		if g.dynOpt || worktree && (g.fromFile || c.wholeSpec(append(g.ops, g.afterDD...))) {
			return "git restore of the whole work tree"
		}
	case "reset":
		g := parseGitArgs(args, "", "pathspec-from-file")
		if g.dynOpt || g.has(0, "hard") {
			return "git reset --hard"
		}
		if g.has(0, "merge") {
			return "git reset --merge"
		}
	case "clean":
		g := parseGitArgs(args, "e", "exclude")
		if !g.has('n', "dry-run") {
			return "git clean"
		}
	case "rm":
		g := parseGitArgs(args, "", "pathspec-from-file")
		if g.has('f', "force") && !g.has(0, "cached") && (g.dynOpt || g.fromFile || c.wholeSpec(append(g.ops, g.afterDD...))) {
			return "git rm --force of the whole work tree"
		}
	case "checkout-index":
		g := parseGitArgs(args, "", "prefix", "stage")
		switch {
		case !g.has('f', "force"), g.has(0, "temp"):
		case g.has(0, "stdin"):
			return "git checkout-index --force --stdin"
		case g.has('a', "all") || g.dynOpt || c.anyWhole(g.ops) || c.anyWhole(g.afterDD):
			return "git checkout-index --force --all"
		}
	case "read-tree":
		g := parseGitArgs(args, "", "prefix", "index-output")
		if g.dynOpt || strings.IndexByte(g.short, 'u') >= 0 && !g.has('n', "dry-run", "prefix") {
			return "git read-tree -u"
		}
	default:
		return gitDropsStash(sub, args)
	}
	return ""
}

// gitDropsStash returns the form of git subcommand sub with args that
// drops stash entries or a linked work tree's changes (see above), or "".
func gitDropsStash(sub string, args []field) string {
	switch sub {
	case "stash":
		g := parseGitArgs(args, "m", "message", "pathspec-from-file")
		if len(g.ops) > 0 && (g.ops[0].dyn || g.ops[0].s == "drop" || g.ops[0].s == "clear") {
			return "git stash " + showDyn(g.ops[0].s)
		}
	case "update-ref":
		g := parseGitArgs(args, "m")
		if g.dynOpt || g.has(0, "stdin") || strings.IndexByte(g.short, 'd') >= 0 && len(g.ops) > 0 && stashRef(g.ops[0]) {
			return "git update-ref -d refs/stash"
		}
	case "reflog":
		g := parseGitArgs(args, "", "expire", "expire-unreachable")
		if len(g.ops) == 0 {
			break
		}
		op := g.ops[0].s
		if g.ops[0].dyn || g.dynOpt || (op == "delete" || op == "expire" || op == "drop") && !g.has('n', "dry-run") {
			return "git reflog " + showDyn(g.ops[0].s)
		}
	case "submodule":
		g := parseGitArgs(args, "j", "reference", "depth", "jobs", "filter")
		if len(g.ops) > 0 && (g.ops[0].dyn || g.ops[0].s == "deinit" || g.ops[0].s == "update") && (g.dynOpt || g.has('f', "force")) {
			return "git submodule " + showDyn(g.ops[0].s) + " --force"
		}
	case "worktree":
		g := parseGitArgs(args, "", "reason")
		if len(g.ops) > 0 && (g.ops[0].dyn || g.ops[0].s == "remove") && (g.dynOpt || g.has('f', "force")) {
			return "git worktree remove --force"
		}
	}
	return ""
}

// stashRef reports whether f names refs/stash or is only known at run
// time.
func stashRef(f field) bool {
	return f.dyn || f.s == "refs/stash"
}

// noteDiscard records the first git command that discards uncommitted
// work (see gitDiscards) for the git-discard grammar.
func (c *checker) noteDiscard(args []field, sub int) {
	switch {
	case c.discard != "":
	case c.appended && (sub < 0 || discardSubs[args[sub].s] || args[sub].dyn):
		c.discard = "git with words xargs adds at run time"
	case sub < 0:
	case args[sub].dyn:
		c.discard = "git with a subcommand only known at run time"
	default:
		c.discard = c.gitDiscards(args[sub].s, args[sub+1:])
	}
}

// discardSubs are the subcommands gitDiscards knows forms of.
var discardSubs = map[string]bool{"checkout": true, "switch": true, "restore": true, "reset": true, "clean": true,
	"stash": true, "rm": true, "checkout-index": true, "read-tree": true, "update-ref": true, "reflog": true, "worktree": true,
	"submodule": true}
