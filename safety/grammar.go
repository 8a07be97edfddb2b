package safety

import (
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Argument grammars of the programs that only read. A permission rule
// with ReadOnly set matches a simple command only when its program is in
// the table below and every word is one the entry declares harmless: a
// program is not read-only by its name, whatever its arguments (rg --pre
// runs a program, sort -o writes a file, date -s sets the clock). Options
// the entry does not list are not harmless, and neither is a word only
// known at run time where an option may stand (rg x "$f" with
// f=--pre=sh), except for a program whose every option is harmless
// (closed). Adding a program is adding one entry.

// A grammar declares the harmless arguments of one program (or git
// subcommand).
type grammar struct {
	name string // the program's base name, or "git SUBCOMMAND"
	// flags are the harmless one-letter options without a value, vals
	// those that take one (-k2, -k 2).
	flags, vals string
	// long are the harmless long options, separated by spaces: "name"
	// takes no value or an optional =VALUE, "name=" takes a value
	// (--name=V or --name V).
	long string
	// closed says every option the program has is harmless (it cannot
	// write a file or run a program, whatever it is given), so words only
	// known at run time are fine too.
	closed bool
	// ops bounds the operands: -1 any number, otherwise at most ops.
	ops int
	// check, when set, must also accept the words (args[0] the program);
	// it sees them only when the options passed.
	check func(args []field) bool
}

// Option sets shared by several entries.
const (
	gitDiffLong = "stat numstat shortstat dirstat summary name-only name-status patch no-patch raw patch-with-stat " +
		"unified= color no-color color-words color-moved word-diff word-diff-regex= minimal patience histogram " +
		"diff-algorithm= ignore-all-space ignore-space-change ignore-space-at-eol ignore-blank-lines " +
		"ignore-cr-at-eol function-context exit-code quiet check full-index binary abbrev find-renames " +
		"find-copies no-renames diff-filter= relative no-relative text no-ext-diff no-textconv src-prefix= " +
		"dst-prefix= no-prefix inter-hunk-context= compact-summary cached staged merge-base ita-invisible-in-index " +
		"stat-width= stat-count= submodule ignore-submodules no-color-moved anchored= indent-heuristic " +
		"no-indent-heuristic line-prefix= output-indicator-new= output-indicator-old= output-indicator-context= " +
		"break-rewrites irreversible-delete pickaxe-all pickaxe-regex find-object= skip-to= rotate-to= R"
	gitLogLong = gitDiffLong + " oneline graph all branches tags remotes decorate no-decorate source " +
		"max-count= skip= since= after= until= before= author= committer= grep= all-match invert-grep " +
		"regexp-ignore-case basic-regexp extended-regexp fixed-strings perl-regexp merges no-merges " +
		"min-parents= max-parents= first-parent not reverse format= pretty abbrev-commit no-abbrev-commit " +
		"date= relative-date follow full-history simplify-by-decoration ancestry-path topo-order date-order " +
		"author-date-order left-right cherry-pick cherry-mark cherry boundary parents children show-signature " +
		"notes no-notes log-size encoding= walk-reflogs expand-tabs no-expand-tabs show-linear-break " +
		"no-walk do-walk count dense sparse full-diff cc combined-all-paths remerge-diff diff-merges= " +
		"no-diff-merges first-parent mailmap use-mailmap no-mailmap clear-decorations decorate-refs= " +
		"decorate-refs-exclude= exclude= glob= no-min-parents no-max-parents show-pulls"
	gitDiffFlags = "0123456789pusRaBzwbtWDM"
)

// grammars is sorted by name (a test checks it).
var grammars = []grammar{
	{name: "[", closed: true, ops: -1, check: testReads},
	{name: "ag", flags: "iswlLcvQFunUtaHfS0", vals: "ABCGgmp", ops: -1,
		long: "ignore-case smart-case case-sensitive word-regexp files-with-matches files-without-matches count " +
			"invert-match literal fixed-strings unrestricted all-types all-text hidden follow stats vimgrep " +
			"column nocolor color noheading heading nogroup group filename nofilename numbers nonumbers " +
			"context= after= before= file-search-regex= ignore= ignore-dir= depth= max-count= silent skip-vcs-ignores " +
			"search-binary one-device ignore-case-paths only-matching print0 null"},
	{name: "basename", closed: true, ops: -1},
	{name: "cat", closed: true, ops: -1},
	{name: "cd", closed: true, ops: -1},
	{name: "cksum", closed: true, ops: -1},
	{name: "cmp", closed: true, ops: -1},
	{name: "column", closed: true, ops: -1},
	{name: "comm", closed: true, ops: -1},
	{name: "cut", closed: true, ops: -1},
	{name: "date", flags: "uRI", vals: "dfr", ops: -1, check: dateReads,
		long: "date= file= reference= utc universal rfc-email rfc-3339= iso-8601 debug resolution"},
	{name: "df", closed: true, ops: -1},
	{name: "diff", closed: true, ops: -1},
	{name: "dirname", closed: true, ops: -1},
	{name: "du", closed: true, ops: -1},
	{name: "echo", closed: true, ops: -1},
	{name: "egrep", closed: true, ops: -1},
	{name: "expand", closed: true, ops: -1},
	{name: "false", closed: true, ops: -1},
	{name: "fd", flags: "HIsiLapgF0l1uq", vals: "dtecjSEo", ops: -1,
		long: "hidden no-ignore no-ignore-vcs unrestricted case-sensitive ignore-case glob regex fixed-strings " +
			"absolute-path list-details follow full-path print0 max-depth= min-depth= exact-depth= type= " +
			"extension= exclude= size= changed-within= changed-before= owner= color= threads= max-results= " +
			"quiet show-errors prune one-file-system strip-cwd-prefix base-directory= search-path= and= format= ignore-file="},
	{name: "fgrep", closed: true, ops: -1},
	{name: "file", flags: "bcdEhiIklLNnprsSvz0", vals: "eFfmP", ops: -1,
		long: "brief debug extension mime mime-type mime-encoding keep-going list dereference no-dereference " +
			"no-pad no-buffer preserve-date raw special-files uncompress uncompress-noreport print0 " +
			"separator= files-from= magic-file= exclude= exclude-quiet= parameter="},
	{name: "find", closed: true, ops: -1, check: findReads},
	{name: "fold", closed: true, ops: -1},
	{name: "free", closed: true, ops: -1},
	{name: "git blame", flags: "bclfnstwpeM0123456789C", vals: "LSM", ops: -1,
		long: "root show-stats porcelain line-porcelain incremental encoding= contents= date= progress " +
			"no-progress score-debug show-name show-number show-email ignore-rev= ignore-revs-file= color-lines " +
			"color-by-age minimal abbrev reverse first-parent"},
	{name: "git branch", flags: "arvl", ops: -1, check: gitListOnly,
		long: "all remotes verbose list show-current contains= no-contains= merged= no-merged= points-at= " +
			"sort= format= column no-column color no-color abbrev no-abbrev ignore-case omit-empty"},
	{name: "git cat-file", flags: "ptse", ops: 2, long: "allow-unknown-type"},
	{name: "git config", flags: "lz", ops: -1, check: gitConfigReads,
		long: "get get-all get-regexp get-urlmatch list global system local worktree show-origin show-scope " +
			"name-only null type= bool int bool-or-int path expiry-date default= includes no-includes"},
	{name: "git describe", ops: -1,
		long: "tags always abbrev dirty broken long match= exclude= contains all first-parent exact-match candidates="},
	{name: "git diff", flags: gitDiffFlags, vals: "USGOlC", ops: -1, long: gitDiffLong + " no-index"},
	{name: "git grep", flags: "nilLcvwhHEFPoqzIapWe0123456789", vals: "ABCfm", ops: -1,
		long: "cached untracked no-index no-exclude-standard exclude-standard recurse-submodules text " +
			"ignore-case word-regexp invert-match full-name extended-regexp basic-regexp fixed-strings perl-regexp " +
			"line-number column files-with-matches name-only files-without-match null count color no-color break " +
			"heading show-function function-context after-context= before-context= context= threads= max-depth= " +
			"max-count= only-matching quiet all-match and or not"},
	{name: "git log", flags: gitDiffFlags + "gLm", vals: "nUSGOlC", ops: -1, long: gitLogLong},
	{name: "git ls-files", flags: "cdmoiskuzftvX", vals: "x", ops: -1,
		long: "cached deleted modified others ignored stage killed directory no-empty-directory unmerged " +
			"resolve-undo exclude= exclude-from= exclude-per-directory= exclude-standard error-unmatch with-tree= " +
			"full-name recurse-submodules abbrev eol deduplicate sparse format= debug"},
	{name: "git ls-tree", flags: "dzrtl", ops: -1,
		long: "name-only name-status object-only full-name full-tree long abbrev format="},
	{name: "git merge-base", flags: "a", ops: -1, long: "all octopus independent is-ancestor fork-point"},
	{name: "git remote", flags: "v", ops: 0, long: "verbose"},
	{name: "git rev-list", flags: gitDiffFlags, vals: "n", ops: -1, long: gitLogLong},
	{name: "git rev-parse", flags: "q", ops: -1,
		long: "show-toplevel show-cdup show-prefix git-dir git-common-dir absolute-git-dir is-inside-work-tree " +
			"is-inside-git-dir is-bare-repository is-shallow-repository show-superproject-working-tree " +
			"show-object-format abbrev-ref short verify quiet symbolic symbolic-full-name all branches tags " +
			"remotes default= revs-only no-revs flags no-flags sq not local-env-vars path-format= git-path= " +
			"shared-index-path resolve-git-dir= since= until= disambiguate= exclude= glob= show-ref-format"},
	{name: "git shortlog", flags: "nsec", vals: "w", ops: -1,
		long: "numbered summary email committer group= format= all branches tags no-merges merges since= until= author="},
	{name: "git show", flags: gitDiffFlags + "m", vals: "nUSGOlC", ops: -1, long: gitLogLong},
	{name: "git show-ref", flags: "dsq", ops: -1, long: "head heads tags dereference hash abbrev verify exists quiet"},
	{name: "git stash", closed: true, ops: -1, check: gitStashReads},
	{name: "git status", flags: "sbvuz", ops: -1,
		long: "short branch porcelain long verbose untracked-files ignore-submodules ignored column no-column " +
			"ahead-behind no-ahead-behind renames no-renames find-renames show-stash null"},
	{name: "git tag", flags: "ln0123456789", ops: -1, check: gitListOnly,
		long: "list contains= no-contains= merged= no-merged= points-at= sort= format= column no-column color ignore-case omit-empty"},
	{name: "git version", ops: 0},
	{name: "grep", closed: true, ops: -1},
	{name: "head", closed: true, ops: -1},
	{name: "hostname", flags: "aAdfiIsy", ops: 0,
		long: "alias all-fqdns domain fqdn long ip-address all-ip-addresses short yp nis"},
	{name: "id", closed: true, ops: -1},
	{name: "jq", closed: true, ops: -1},
	{name: "less", flags: "aBcCdeEfFgGiIJKLmMnNqQrRsSuUVwWX~", vals: "bhjpPtTxyz", ops: -1, check: noPlusWords,
		long: "quit-at-eof QUIT-AT-EOF quit-if-one-screen ignore-case IGNORE-CASE LINE-NUMBERS line-numbers " +
			"RAW-CONTROL-CHARS raw-control-chars chop-long-lines no-init squeeze-blank-lines status-column tabs= " +
			"quiet silent pattern= jump-target= shift= mouse wheel-lines= use-color color= no-histdups incsearch"},
	{name: "ls", closed: true, ops: -1},
	{name: "md5sum", closed: true, ops: -1},
	{name: "more", flags: "dlfpcsue", vals: "n", ops: -1, check: noPlusWords,
		long: "silent logical no-pause print-over clean-print squeeze plain exit-on-eof lines="},
	{name: "nl", closed: true, ops: -1},
	{name: "nproc", closed: true, ops: -1},
	{name: "od", closed: true, ops: -1},
	{name: "paste", closed: true, ops: -1},
	{name: "pip freeze", flags: "lqv", ops: 0,
		long: "all local user path= exclude-editable exclude= quiet verbose no-color disable-pip-version-check"},
	{name: "pip list", flags: "loueqv", ops: 0,
		long: "outdated uptodate editable local user not-required format= exclude-editable include-editable path= " +
			"exclude= pre quiet verbose no-color disable-pip-version-check"},
	{name: "pip show", flags: "fqv", ops: -1, long: "files quiet verbose no-color disable-pip-version-check"},
	{name: "printenv", closed: true, ops: -1},
	{name: "printf", closed: true, ops: -1, check: printfReads},
	{name: "ps", closed: true, ops: -1},
	{name: "pwd", closed: true, ops: -1},
	{name: "readlink", closed: true, ops: -1},
	{name: "realpath", closed: true, ops: -1},
	{name: "rev", closed: true, ops: -1},
	{name: "rg", flags: "nNiSswlcvFxoHIL0auUqbpP.", vals: "egtTABCmjdfrME", ops: -1,
		long: "line-number no-line-number ignore-case smart-case case-sensitive word-regexp files-with-matches " +
			"files-without-match count count-matches invert-match fixed-strings line-regexp only-matching heading " +
			"no-heading with-filename no-filename null null-data text binary no-binary hidden no-hidden follow " +
			"no-follow no-ignore no-ignore-vcs no-ignore-dot no-ignore-parent no-ignore-global no-ignore-exclude " +
			"no-ignore-files no-ignore-messages no-messages unrestricted files type-list json no-json vimgrep " +
			"column no-column stats trim no-trim pretty multiline multiline-dotall pcre2 no-pcre2 passthru " +
			"sort-files no-config crlf no-crlf mmap no-mmap one-file-system quiet debug trace byte-offset " +
			"line-buffered block-buffered include-zero glob-case-insensitive invert-match max-columns-preview " +
			"regexp= file= glob= iglob= type= type-not= type-add= type-clear= after-context= before-context= " +
			"context= max-count= threads= max-depth= maxdepth= max-filesize= max-columns= sort= sortr= color= colors= " +
			"replace= engine= encoding= path-separator= field-match-separator= field-context-separator= " +
			"context-separator= ignore-file= dfa-size-limit= regex-size-limit= "},
	{name: "sed", flags: "nErsuz", vals: "el", ops: -1, check: sedReads,
		long: "quiet silent regexp-extended separate unbuffered null-data posix debug sandbox expression= line-length="},
	{name: "seq", closed: true, ops: -1},
	{name: "sha1sum", closed: true, ops: -1},
	{name: "sha256sum", closed: true, ops: -1},
	{name: "sha512sum", closed: true, ops: -1},
	{name: "sleep", closed: true, ops: -1},
	{name: "sort", flags: "bdfgiMhnRrVcCsumz", vals: "ktS", ops: -1,
		long: "ignore-leading-blanks dictionary-order ignore-case general-numeric-sort ignore-nonprinting " +
			"month-sort human-numeric-sort numeric-sort random-sort reverse version-sort check unique stable " +
			"merge zero-terminated debug key= field-separator= buffer-size= sort= parallel= files0-from= random-source="},
	{name: "stat", closed: true, ops: -1},
	{name: "strings", closed: true, ops: -1},
	{name: "tac", closed: true, ops: -1},
	{name: "tail", closed: true, ops: -1},
	{name: "test", closed: true, ops: -1, check: testReads},
	{name: "tr", closed: true, ops: -1},
	{name: "tree", flags: "adlfxsDpughCnNQrtcvUJ", vals: "LPIH", ops: -1,
		long: "noreport charset= filelimit= dirsfirst du si prune timefmt= inodes device sort= gitignore info= matchdirs ignore-case filesfrom="},
	{name: "true", closed: true, ops: -1},
	{name: "type", closed: true, ops: -1},
	{name: "uname", closed: true, ops: -1},
	{name: "unexpand", closed: true, ops: -1},
	{name: "uniq", flags: "cdDiuz", vals: "fsw", ops: 1,
		long: "count repeated all-repeated ignore-case unique zero-terminated skip-fields= skip-chars= check-chars= group"},
	{name: "unzip", flags: "lvtzq", ops: -1, check: unzipLists},
	{name: "wc", closed: true, ops: -1},
	{name: "whereis", closed: true, ops: -1},
	{name: "which", closed: true, ops: -1},
	{name: "whoami", closed: true, ops: -1},
}

// grammarOf returns the entry for name, or nil.
func grammarOf(name string) *grammar {
	i, ok := slices.BinarySearchFunc(grammars, name, func(g grammar, n string) int { return strings.Compare(g.name, n) })
	if !ok {
		return nil
	}
	return &grammars[i]
}

// longOpt reports whether the long option name (without "--") is listed
// in long, and whether it takes a value.
func longOpt(long, name string) (ok, val bool) {
	for long != "" {
		var w string
		w, long, _ = strings.Cut(long, " ")
		if n, eq := strings.CutSuffix(w, "="); n == name {
			return true, eq
		}
	}
	return false, false
}

// reads reports whether args (args[0] the program) are all harmless
// under g.
func (g *grammar) reads(args []field) bool {
	if g.closed {
		return g.check == nil || g.check(args)
	}
	ops := 0
	for i := 1; i < len(args); i++ {
		f := args[i]
		a := f.s
		switch {
		case f.dyn:
			return false // it may be any option at run time
		case a == "--":
			ops += len(args) - i - 1
			i = len(args)
		case strings.HasPrefix(a, "--"):
			name, _, eq := strings.Cut(a[2:], "=")
			ok, val := longOpt(g.long, name)
			if !ok {
				return false
			}
			if val && !eq {
				i++
			}
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				ch := a[j]
				if strings.IndexByte(g.vals, ch) >= 0 {
					if j == len(a)-1 {
						i++
					}
					break
				}
				if strings.IndexByte(g.flags, ch) < 0 {
					return false
				}
			}
		default:
			ops++
		}
	}
	if g.ops >= 0 && ops > g.ops {
		return false
	}
	return g.check == nil || g.check(args)
}

// noPlusWords: less and more run +COMMAND as their first command.
func noPlusWords(args []field) bool {
	for _, f := range args[1:] {
		if strings.HasPrefix(f.s, "+") {
			return false
		}
	}
	return true
}

// unzipLists: unzip extracts unless it is asked to list (-l, -v), test
// (-t) or show the comment (-z).
func unzipLists(args []field) bool {
	for _, f := range args[1:] {
		if len(f.s) > 1 && f.s[0] == '-' && strings.ContainsAny(f.s[1:], "lvtz") {
			return true
		}
	}
	return false
}

// dateReads: date sets the clock with an operand that is not +FORMAT
// (date MMDDhhmm).
func dateReads(args []field) bool {
	for i := 1; i < len(args); i++ {
		a := args[i].s
		switch {
		case a == "-d" || a == "-f" || a == "-r" || a == "--date" || a == "--file" || a == "--reference" || a == "--rfc-3339":
			i++
		case strings.HasPrefix(a, "-"):
		case !strings.HasPrefix(a, "+"):
			return false
		}
	}
	return true
}

// isName reports whether s is a plain shell variable name: a name with a
// subscript (x[$(cmd)]) is evaluated, and its $(...) run.
func isName(s string) bool {
	return isParamName(s) && !isDigits(s) && s != "@" && s != "*" && s != "#"
}

// printfReads: printf -v NAME assigns a variable, which is harmless for a
// plain name; a subscript is evaluated as code.
func printfReads(args []field) bool {
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a.s == "--":
			return true
		case a.dyn:
			return false // it may be -v at run time
		case a.s == "-v":
			if i+1 >= len(args) || args[i+1].dyn || !isName(args[i+1].s) {
				return false
			}
			i++
		case strings.HasPrefix(a.s, "-v"):
			if !isName(a.s[2:]) {
				return false
			}
		default:
			return true // the format
		}
	}
	return true
}

// testUnary and testBinary are the operators of test and [.
const (
	testUnary  = " -a -b -c -d -e -f -g -h -k -n -p -r -s -t -u -w -x -z -G -L -N -O -S -o ! "
	testBinary = " = == != < > -eq -ne -lt -le -gt -ge -nt -ot -ef -a -o "
)

// testReads: test -v NAME and -R NAME evaluate a subscript of NAME as code;
// a word only known at run time may become such an operator unless it
// stands next to a static operator.
func testReads(args []field) bool {
	w := args[1:]
	if len(w) > 0 && args[0].s == "[" && w[len(w)-1].s == "]" && !w[len(w)-1].dyn {
		w = w[:len(w)-1]
	}
	op := func(i int, set string) bool {
		return i >= 0 && i < len(w) && !w[i].dyn && strings.Contains(set, " "+w[i].s+" ")
	}
	for i, f := range w {
		switch {
		case !f.dyn && (f.s == "-v" || f.s == "-R"):
			if i+1 < len(w) && (w[i+1].dyn || !isName(w[i+1].s)) {
				return false
			}
		case !f.dyn:
		case !f.one || f.spread:
			return false // any number of words
		case len(w) == 1, op(i-1, testUnary), op(i-1, testBinary), op(i+1, testBinary):
		default:
			return false
		}
	}
	return true
}

// sedReads: sed without -i whose script is given, static, and has no
// command that writes a file (w, W, s///w) or runs one (e, s///e).
func sedReads(args []field) bool {
	var scripts []string
	i := 1
	for ; i < len(args); i++ {
		a := args[i].s
		switch {
		case a == "--":
			i++
		case a == "-e" || a == "--expression":
			if i+1 >= len(args) || args[i+1].dyn {
				return false
			}
			scripts = append(scripts, args[i+1].s)
			i++
			continue
		case strings.HasPrefix(a, "--expression="):
			scripts = append(scripts, a[len("--expression="):])
			continue
		case a == "-l" || a == "--line-length":
			i++
			continue
		case len(a) > 1 && a[0] == '-':
			if k := strings.IndexByte(a, 'e'); k > 0 && a[1] != '-' {
				if k+1 < len(a) {
					scripts = append(scripts, a[k+1:])
				} else if i+1 < len(args) && !args[i+1].dyn {
					scripts = append(scripts, args[i+1].s)
					i++
				} else {
					return false
				}
			}
			continue
		}
		break
	}
	if len(scripts) == 0 {
		if i >= len(args) || args[i].dyn {
			return false
		}
		scripts = append(scripts, args[i].s)
	}
	for _, s := range scripts {
		if !sedScriptReads(s) {
			return false
		}
	}
	return true
}

// sedScriptReads reports whether a sed script only prints: every command
// is one that edits the pattern space or prints, none writes a file or
// runs a command.
func sedScriptReads(script string) bool {
	p := sedParser{s: script}
	for {
		cmd, ok := p.command()
		if !ok {
			break
		}
		switch cmd {
		case '{', '}', '=', 'd', 'D', 'g', 'G', 'h', 'H', 'l', 'n', 'N', 'p', 'P', 'x', 'z', 'F':
		case 'a', 'i', 'c':
			p.text()
		case '#', ':', 'b', 't', 'T', 'r', 'R', 'q', 'Q', 'v', 'L':
			p.restOfLine(cmd == 'b' || cmd == 't' || cmd == 'T' || cmd == 'q' || cmd == 'Q' || cmd == 'v')
		case 's':
			p.delimited(2)
			for p.i < len(p.s) && strings.IndexByte(";\n} \t", p.s[p.i]) < 0 {
				if c := p.s[p.i]; c == 'w' || c == 'W' || c == 'e' {
					return false
				}
				p.i++
			}
		case 'y':
			p.delimited(2)
		default:
			return false // w, W, e, or not sed as we know it
		}
	}
	return true
}

// findReads: find's expression without the actions that run commands
// (-exec, -execdir, -ok, -okdir) or write (-delete, -fprint, -fprint0,
// -fprintf, -fls); a word only known at run time may only be a value.
func findReads(args []field) bool {
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a.dyn {
			if i > 1 && findTakesValue(args[i-1].s) && !args[i-1].dyn {
				continue
			}
			// a starting point before the expression is fine, but
			// where the expression may have started, it may be
			// -exec at run time
			if !findExprStarted(args[1:i]) && a.one && !a.spread {
				continue
			}
			return false
		}
		switch a.s {
		case "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls":
			return false
		}
		if findTakesValue(a.s) {
			i++
		}
	}
	return true
}

func findTakesValue(a string) bool {
	switch a {
	case "-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex", "-lname",
		"-ilname", "-type", "-xtype", "-size", "-perm", "-user", "-group", "-uid", "-gid", "-links", "-inum",
		"-samefile", "-newer", "-anewer", "-cnewer", "-mtime", "-mmin", "-atime", "-amin", "-ctime", "-cmin",
		"-used", "-maxdepth", "-mindepth", "-fstype", "-regextype", "-printf", "-context", "-D", "-files0-from":
		return true
	}
	return strings.HasPrefix(a, "-newer") && len(a) == 8
}

func findExprStarted(prev []field) bool {
	for _, f := range prev {
		if f.dyn || strings.HasPrefix(f.s, "-") || f.s == "(" || f.s == "!" {
			return true
		}
	}
	return false
}

// gitListOnly: git branch and git tag take names only as patterns to list
// (-l, --list) or as the value of a filter; otherwise a name creates one.
func gitListOnly(args []field) bool {
	list := false
	for i := 1; i < len(args); i++ {
		a := args[i].s
		switch {
		case a == "-l" || a == "--list":
			list = true
		case a == "--contains" || a == "--no-contains" || a == "--merged" || a == "--no-merged" ||
			a == "--points-at" || a == "--sort" || a == "--format":
			i++
		case strings.HasPrefix(a, "-"):
		default:
			if !list {
				return false
			}
		}
	}
	return true
}

// gitConfigReads: git config only with one of its reading actions.
func gitConfigReads(args []field) bool {
	for _, f := range args[1:] {
		switch f.s {
		case "--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "get", "list":
			return true
		}
	}
	return false
}

// gitStashReads: git stash list and git stash show.
func gitStashReads(args []field) bool {
	if len(args) < 2 || args[1].dyn {
		return false
	}
	switch args[1].s {
	case "list":
		return (&grammar{flags: gitDiffFlags + "gLm", vals: "n", long: gitLogLong, ops: -1}).reads(args[1:])
	case "show":
		return (&grammar{flags: gitDiffFlags, vals: "U", long: gitDiffLong + " include-untracked only-untracked", ops: -1}).reads(args[1:])
	}
	return false
}

// gitGlobals reads git's global options up to the subcommand and reports
// its index (or -1) and whether they are harmless: -C only into a
// relative path without .. (the working directory, as the analysis of a
// command's text cannot know it, is not taken into account).
func gitGlobals(args []field) (int, bool) {
	for i := 1; i < len(args); i++ {
		f := args[i]
		switch a := f.s; {
		case f.dyn:
			return -1, false
		case a == "-C":
			if i+1 >= len(args) || !insideDir(args[i+1]) {
				return -1, false
			}
			i++
		case a == "--no-pager" || a == "-P" || a == "--no-optional-locks" || a == "--literal-pathspecs" ||
			a == "--no-replace-objects" || a == "--glob-pathspecs" || a == "--noglob-pathspecs" ||
			a == "--icase-pathspecs" || a == "--no-lazy-fetch" || a == "--version" || a == "--no-advice":
		case strings.HasPrefix(a, "-"):
			return -1, false // -c, --git-dir, --work-tree, --exec-path, --config-env, ...
		default:
			return i, true
		}
	}
	return -1, true
}

// insideDir reports whether the path f stays in the working directory: a
// relative path without ...
func insideDir(f field) bool {
	if f.dyn || strings.HasPrefix(f.s, homeMark) || strings.HasPrefix(f.s, "/") {
		return false
	}
	p := cleanPath(f.s)
	return p != ".." && !strings.HasPrefix(p, "../")
}

// harmlessEnv are the variables a read-only command may be given: they
// select no program, configuration or file.
func harmlessEnv(name string) bool {
	switch name {
	case "LANG", "LANGUAGE", "TZ", "COLUMNS", "LINES", "NO_COLOR", "CLICOLOR", "TERM", "GREP_COLOR", "GREP_COLORS":
		return true
	}
	return strings.HasPrefix(name, "LC_")
}

// grammarOrGit reports whether name has a grammar.
func grammarOrGit(name string) (string, bool) {
	return name, name == "git" || name == "xargs" || name == "pip" || name == "pip3" || grammarOf(name) != nil
}

// readOnlyArgv reports whether the simple command args only reads (see
// the grammars above).
func readOnlyArgv(args []field) bool {
	if len(args) == 0 || args[0].dyn {
		return false
	}
	name := args[0].s
	switch name {
	case "git":
		i, ok := gitGlobals(args)
		switch {
		case !ok:
			return false
		case i < 0:
			return true // git --version, git --no-pager: prints
		}
		g := grammarOf("git " + args[i].s)
		return g != nil && !args[i].dyn && g.reads(args[i:])
	case "pip", "pip3":
		g := (*grammar)(nil)
		if len(args) > 1 && !args[1].dyn {
			g = grammarOf("pip " + args[1].s)
		}
		return g != nil && g.reads(args[1:]) || infoQuery(args)
	case "xargs":
		rest, kind := unwrapOne(args)
		if kind != wrapped || rest[0].dyn {
			return kind == noCommand && len(args) == 1
		}
		if !(&grammar{flags: "0rtpx", vals: "adEILnPs", ops: -1,
			long: "null no-run-if-empty verbose exit open-tty arg-file= delimiter= max-args= max-lines= max-procs= replace= max-chars= eof="}).reads(args[:len(args)-len(rest)]) {
			return false
		}
		g := grammarOf(rest[0].s)
		return g != nil && g.closed && g.check == nil
	}
	if g := grammarOf(name); g != nil {
		return g.reads(args)
	}
	// a compiler or interpreter of the PATH asked only for its version or
	// usage (not a tool that loads the project's configuration or
	// plugins first, as pytest, pylint, mvn and gradle do)
	return infoQuery(args) && versionOnly(args[0].s)
}

// versionOnly reports whether program name (as given, with no directory)
// answers --version, -V, --help and -h without reading the project's
// files.
func versionOnly(name string) bool {
	switch name {
	case "python", "python3", "python2", "node", "npm", "ruby", "perl", "java", "javac", "gcc", "g++", "cc",
		"c++", "clang", "clang++", "rustc", "make", "cmake", "tsc", "sphinx-build",
		"pyreverse", "go", "gofmt", "jq", "curl", "wget", "sed", "awk", "gawk", "tar", "gzip", "rsync", "ssh",
		"psql", "msgfmt", "unzip":
		return true
	}
	return strings.HasPrefix(name, "python3.") && !strings.Contains(name, "/")
}

// readOnlyStmt reports whether st is a simple command that only reads:
// a program of the table with harmless words, harmless variables, and no
// redirection that writes (to anything but /dev/null, /dev/stdout,
// /dev/stderr or a descriptor). Words are expanded statically without
// context: a variable is only known at run time. What surrounds the
// simple commands of a text is readOnlyFrame's to judge.
func readOnlyStmt(st *syntax.Stmt) bool {
	x, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || len(x.Args) == 0 {
		return false
	}
	for _, a := range x.Assigns {
		if a.Name == nil || !harmlessEnv(a.Name.Value) || a.Index != nil || a.Array != nil {
			return false
		}
	}
	if !readOnlyRedirs(st) {
		return false
	}
	var scan arithScan
	if scan.stmt(st); !scan.plain() {
		return false
	}
	var r resolver
	var args []field
	for i, w := range x.Args {
		args = r.resolveWord(w, i, args)
	}
	if len(args) == 0 {
		return false
	}
	if _, ok := grammarOrGit(base(args[0].s)); ok {
		args[0].s = base(args[0].s)
	}
	return readOnlyArgv(args)
}

// readOnlyRedirs reports whether st's redirections only read or write to
// /dev/null, /dev/stdout, /dev/stderr or a descriptor.
func readOnlyRedirs(st *syntax.Stmt) bool {
	var r resolver
	for _, rd := range st.Redirs {
		switch rd.Op {
		case syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc, syntax.DplIn:
			continue
		case syntax.RdrIn:
			// bash opens /dev/tcp/HOST/PORT and /dev/udp/... itself: a
			// connection, and a name that may carry data out
			if t, ok := r.wordLit(rd.Word); ok && !strings.HasPrefix(cleanPath(t), "/dev/tcp/") && !strings.HasPrefix(cleanPath(t), "/dev/udp/") {
				continue
			}
		case syntax.DplOut:
			if t, ok := r.wordLit(rd.Word); ok && (isDigits(t) || t == "-") {
				continue
			}
		case syntax.RdrOut, syntax.AppOut, syntax.RdrAll, syntax.AppAll, syntax.RdrClob, syntax.RdrAllClob, syntax.AppAllClob:
			if t, ok := r.wordLit(rd.Word); ok && (t == "/dev/null" || t == "/dev/stdout" || t == "/dev/stderr") {
				continue
			}
		}
		return false
	}
	return true
}
