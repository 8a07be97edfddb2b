package safety

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

const (
	// MaxCommandBytes bounds the analyser's work, not what can run: Check
	// blocks anything longer (rule "too-long"). It is deliberately separate
	// from, and larger than, engine.MaxCommandBytes (131071 bytes, Linux's
	// limit on one argument), which the engine checks first, so no command
	// the engine would run ever reaches this bound.
	MaxCommandBytes = 1 << 20
	// MaxNesting bounds how deep nested shell code (bash -c, eval, su -c,
	// heredocs fed to a shell, ...) is re-parsed; deeper nesting is blocked
	// (rule "too-deep").
	MaxNesting = 8
	// maxSteps bounds the statements visited for one command.
	maxSteps = 200000
	// maxLoopIter bounds how many static values of a for loop are checked.
	maxLoopIter = 16
)

// Check analyses command (bash syntax) and returns whether it may run: a
// Verdict whose Decision is Allow, Block (never executed; the engine
// answers "[command blocked: REASON; instead: ALTERNATIVE]") or Ask (status
// needs_approval), with the rule name, a one-line reason and a safer
// alternative. It never executes anything and is safe for concurrent use.
//
// # What Check examines
//
// Every simple command anywhere in the syntax tree: pipelines, && / || / ;
// lists, subshells, { groups }, function bodies, if/while/for/case, $(...),
// backticks, <(...) and >(...), and redirections.
//
// Words are expanded statically the way bash would where that is possible:
// quotes, backslash escapes, $'...', brace expansion (rm -{r,f}, /{,}), a
// leading \ or a path on the command name (\rm, /bin/rm), ~, ~user (any
// user's home is as critical as ~), ~+ (the working directory), $HOME /
// ${HOME}, and variables and indexed arrays assigned constant values earlier
// in the same command (X=/; rm -rf $X, export X=..., a=(/ /bin); rm -rf
// "${a[@]}", for d in / ...; do rm -rf $d; done, at most 16 values per
// loop). Variables keep their last constant value in textual order,
// whatever subshell or branch assigned them, and a cd changes the known
// working directory the same way: both err on the side of finding a
// problem. Unknown values are not guessed: rm -rf "$DIR"/ with an unknown
// DIR is allowed (it need not be empty), find -exec rm -rf {} is checked
// with {} as a literal, and ~- is left alone.
//
// Unquoted expansions are split on IFS as bash splits them (IFS=,;
// cmd=rm,-rf,/; $cmd): a constant IFS splits, unset IFS restores the
// default, local IFS ends with its function. With an IFS only known at run
// time (read IFS, IFS=$1), a command name from an unquoted expansion asks;
// other words are split on the default.
//
// Parameter operators with static operands resolve: ${X:-d}, ${X:?},
// ${X:+alt}, ${X%pat}, ${X##pat}, ${X/pat/s}, ${X//pat/s}, ${X:off:len},
// ${X^^}, ${X,,}, ${#X}, ${!X}, ${a[i]}, ${a[@]}, $@, $1... They work on
// the real home path (${HOME%/*} is its parent) and on values up to 1 KiB,
// within a shared work budget; past it, and for ${x/p/&}, patterns matching
// "", associative arrays and name references, values are unknown.
//
// Glob words are matched against the critical names the way bash would
// expand them (/[b]in, /bi?, .[!.]*), never against the file system. A
// component matching every probe name (*, ?*, [!.]*; .*, .[!.]*, .??* for
// dot names) stands for all entries, like * and .*; others are matched
// against /'s system directories, the directories down to the home
// directory, and .git. Quoted characters in a word with an unquoted glob
// character count as pattern characters.
//
// A shell function called with static words is checked again with $1...
// bound to them (f() { rm -rf "$1"; }; f /), once per distinct call (at
// most 64 calls, 16 deep); its body is also checked at its definition. A
// function named like a command (rm() {...}) does not turn off that
// command's rules. After a word that may be any number of words ($(...),
// $X, a glob) the parameters are unknown. set -- ARGS and sh -c CODE NAME
// ARGS bind ARGS too, except behind xargs, which adds arguments.
//
// Wrappers are looked through, each parsing its own options: sudo and doas
// (including options taking an argument such as -u USER), env (options,
// NAME=value, -S/--split-string), nohup, time, command, exec, builtin, nice,
// timeout, xargs, busybox, setsid, stdbuf, ionice, watch, flock (also FILE
// -c CODE), chroot, strace, ltrace, script -c, runuser (without -u, like
// su), unshare, setpriv, firejail, systemd-run and sg. A wrapper that runs
// no command (chroot DIR, script FILE, strace -p PID, flock FD) is allowed.
//
// Shell code nested in strings is re-parsed and checked like the command
// itself, at most MaxNesting deep: bash/sh/zsh/dash/ksh -c (zsh code is
// parsed as zsh first, then as bash), eval, su -c, runuser -c, script -c,
// flock -c, sg, watch, env -S, find -exec/-execdir/-ok, trap handlers, ssh
// remote commands, git shell aliases, and heredocs, here-strings or the
// static output of echo, printf, cat and tee fed to a shell. git -c
// alias.NAME=VALUE is expanded for subcommand NAME (any case, up to 8
// levels, then ask; an alias named like a git command is expanded,
// although git ignores it) before the git rules apply; !VALUE runs as sh -c
// 'VALUE "$@"' ARGS.
//
// Strings that merely mention a command (echo "rm -rf /", grep -r "git add
// -A", commit messages, heredoc bodies given to non-shells) are data, not
// commands, and are allowed.
//
// # Rules that block
//
//   - git-add-blind: git add (or git stage) -A / --all (and its
//     abbreviations --a, --al), also with a pathspec, and . / * / :/ / .. /
//     exclude-only pathspecs, also behind git's global options (git -C dir
//     -c k=v add -A). git add -u is allowed.
//   - git-push-force: git push --force / -f (also inside -uf), --mirror,
//     +refspec. --force-with-lease and --force-if-includes are allowed.
//   - rm-critical: recursive rm (-r, -R, --recursive, in any cluster or
//     order; -f is not needed, rm -r ~ is as destructive as rm -rf ~, and -f
//     alone is not blocked) of /, /*, a top-level system directory (/bin
//     /boot /dev /etc /home /lib /lib64 /opt /proc /root /sbin /srv /sys
//     /usr /var ... and their /*), ~, ~/, $HOME, the home directory's
//     absolute path, .git, *, .*, ., .. (* and .* whatever the working
//     directory), or a relative path that lands on one of these after a
//     preceding cd (cd / && rm -rf usr); also --no-preserve-root and find
//     CRITICAL -delete without filter tests (find / -delete, find . -delete;
//     find ~ -name '*.tmp' -delete is allowed).
//   - fork-bomb: a function that calls itself on both sides of a pipe or in
//     the background (:(){ :|:& };:, bomb(){ bomb|bomb& };bomb), blocked at
//     its definition.
//   - chmod-critical: chmod/chown/chgrp -R on /, a top-level system
//     directory or the home directory; rsync --delete into one of those is
//     rm-critical.
//   - kill-all: kill -1 (every process the user owns).
//   - mkfs: mkfs, mkfs.TYPE, mke2fs, mkswap, mkdosfs, mkntfs, mkexfatfs,
//     mkudffs, mkreiserfs, newfs, newfs_TYPE, and wipefs -a / -o (erasing
//     signatures; without them it only lists), matched on the command's base
//     name, whatever the target (often a variable; disk images are the
//     user's to prepare).
//   - partition: a partitioning tool that writes a partition table, whatever
//     the target: sgdisk with any option but the read-only ones (-Z, -z,
//     -o, -n, -d, ...; -P only pretends), sfdisk, fdisk, gdisk and cfdisk
//     naming a disk without a list/dump/verify option (fdisk -l, sfdisk -d),
//     parted naming a disk with commands other than print/unit/help.
//   - dd-device: dd of=/dev/DISK; write-device: redirection (>, >>, &>, <>,
//     >|) into a disk-like block device (/dev/sd*, nvme*, vd*, xvd*, hd*,
//     mmcblk*, loop*, md*, dm-*, mapper/*, disk/*, block/* ...), and tee,
//     shred, blkdiscard, cp/mv onto one. Reading a device, /dev/null and
//     friends are fine.
//   - parse-error: a command, or nested shell code, that does not parse:
//     fail closed, with the parser's message.
//   - too-long: commands over MaxCommandBytes; too-deep: shell code nested
//     deeper than MaxNesting; too-complex: more than 200000 statements or
//     brackets nested more than 1000 deep.
//
// # Rules that ask
//
// Code only known at run time that feeds a shell:
//   - pipe-to-shell: a pipe into a shell or interpreter reading its program
//     from stdin (curl ... | sh, wget -O- ... | sudo bash, ... | python3),
//     or source /dev/stdin. Static text is analysed as code instead: echo
//     (-n/-e/-E), printf (%s %b %c %q and integers, with flags and widths),
//     cat of a heredoc or here-string, cat and tee of static input, and
//     lists of those. A file, a glob, a variable or printf %f is run-time
//     text and asks.
//   - stdin-shell: with Options.StdinFed (a job whose stdin takes input
//     sent later), a shell or interpreter reading its program from stdin
//     (bash, sh -s, python3 -i, node, source /dev/stdin).
//   - procsubst-shell: bash <(curl ...), source <(...).
//   - dynamic-eval: eval "$(...)", eval $X.
//   - dynamic-shell: sh -c "$X", su -c "$X", a heredoc with expansions fed
//     to a shell; an interpreter's program text with a command substitution
//     or wholly unknown (ruby -e "$(curl ...)", python3 -c "$(wget -qO-
//     ...)", python3 -c "$CODE", python3 - <<< "$(curl ...)"), but not one
//     with only parameter expansions (python3 -c "print('$HOME')").
//   - dynamic-command: a command name only known at run time ($CMD args,
//     $(which foo) args, $x split on an IFS only known at run time), a git
//     alias whose value is only known at run time.
//
// The analysis does work linear in the command's length: nested code is
// re-parsed at most MaxNesting deep, a loop body is walked for at most 16
// values, and function calls, pattern matching and expansions have fixed
// budgets.
func Check(command string) Verdict {
	v, _ := check(command)
	return v
}

// check is Check that also reports the units of work the analysis did
// (statements visited, fields expanded, bytes parsed or matched), which
// tests bound to prove the analysis stays linear in the input.
func check(command string) (Verdict, int) {
	return checkSource(&source{text: command})
}

// checkSource is check on a source that other analyses share.
func checkSource(src *source) (Verdict, int) {
	command := src.text
	if len(command) > MaxCommandBytes {
		return Verdict{Decision: Block, Rule: "too-long",
			Reason:      "command is too long to analyse (over 1 MiB)",
			Alternative: "write the script to a file and run it with bash FILE"}, 0
	}
	if strings.TrimSpace(command) == "" {
		return Verdict{Decision: Allow}, 0
	}
	f, err := src.tree()
	if err == errTooDeep {
		return tooComplex, len(command)
	}
	if err != nil {
		return finish(parseErrorVerdict(err)), len(command)
	}
	c := checker{}
	c.work = len(command)
	c.v.Decision = Allow
	c.stmts(f.Stmts, stdinSrc{piped: src.stdinFed, later: src.stdinFed})
	return finish(c.v), c.work
}

// maxReason caps the length of a verdict's reason.
const maxReason = 240

// finish makes the reason one printable line of bounded length: words from
// the command may carry newlines, control bytes or be huge.
func finish(v Verdict) Verdict {
	r := v.Reason
	clean := len(r) <= maxReason
	for i := 0; i < len(r) && clean; i++ {
		if r[i] < 0x20 || r[i] == 0x7f {
			clean = false
		}
	}
	if clean && utf8.ValidString(r) {
		return v
	}
	var b strings.Builder
	n := 0
	for _, ch := range r {
		if n >= maxReason {
			b.WriteString("…")
			break
		}
		switch {
		case ch == 0:
			b.WriteString("$…")
		case ch == 1:
			b.WriteByte('~')
		case ch < 0x20 || ch == 0x7f:
			b.WriteByte(' ')
		case ch == utf8.RuneError:
			b.WriteByte('?')
		default:
			b.WriteRune(ch)
		}
		n++
	}
	v.Reason = b.String()
	return v
}

var tooComplex = Verdict{Decision: Block, Rule: "too-complex",
	Reason:      "command is too complex to analyse (too many statements or too deeply nested)",
	Alternative: "split it into smaller commands or put it in a script file"}

func parseErrorVerdict(err error) Verdict {
	return Verdict{Decision: Block, Rule: "parse-error",
		Reason:      "cannot parse command: " + oneLine(err.Error()),
		Alternative: "fix the shell syntax (unbalanced quotes, brackets, heredoc or keywords) and run it again"}
}

func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// checker walks one command's syntax tree.
type checker struct {
	resolver
	v         Verdict
	depth     int
	steps     int
	cwd       string // statically known working directory, "" if unknown
	inLoop    bool   // already iterating a for loop's static values
	nameBuf   []field
	funcs     map[string]*syntax.Stmt // bodies of the functions defined so far
	calls     map[string]bool         // function calls already followed (name and arguments)
	callDepth int
	callWork  int                   // work spent following function calls
	frames    []map[string]savedVar // per function walk: variables to restore (local)
	appended  bool                  // the command being checked gets more arguments at run time (xargs)
}

// savedVar is a variable's state before a function made it local.
type savedVar struct {
	st  varState
	set bool
}

// posParams is a saved set of positional parameters.
type posParams struct {
	params      []string
	known, open bool
}

func (c *checker) saveParams() posParams {
	return posParams{c.params, c.posKnown, c.posOpen}
}

func (c *checker) restoreParams(p posParams) {
	c.params, c.posKnown, c.posOpen = p.params, p.known, p.open
}

// enterFunc starts walking a function body with the positional parameters
// set to args, or unknown when args is nil; leaveFunc restores the
// caller's parameters and the variables the body made local.
func (c *checker) enterFunc(args []field) posParams {
	saved := c.saveParams()
	if args != nil {
		c.setParams(args)
	} else {
		c.params, c.posKnown, c.posOpen = nil, false, false
	}
	c.frames = append(c.frames, nil)
	c.callDepth++
	return saved
}

func (c *checker) leaveFunc(saved posParams) {
	c.callDepth--
	top := c.frames[len(c.frames)-1]
	c.frames = c.frames[:len(c.frames)-1]
	for name, sv := range top {
		if sv.set {
			c.vars[name] = sv.st
		} else {
			delete(c.vars, name)
		}
	}
	c.restoreParams(saved)
}

// local remembers name's state so that leaving the function restores it.
func (c *checker) local(name string) {
	if len(c.frames) == 0 {
		return
	}
	top := &c.frames[len(c.frames)-1]
	if _, ok := (*top)[name]; ok {
		return
	}
	if *top == nil {
		*top = make(map[string]savedVar)
	}
	st, ok := c.vars[name]
	(*top)[name] = savedVar{st: st, set: ok}
}

func (c *checker) done() bool { return c.v.Decision == Block }

// report records v when it is more severe than what was found so far.
func (c *checker) report(v Verdict) {
	if v.Decision.severity() > c.v.Decision.severity() {
		c.v = v
	}
}

func (c *checker) stmts(ss []*syntax.Stmt, piped stdinSrc) {
	for _, s := range ss {
		if c.done() {
			return
		}
		c.stmt(s, piped)
	}
}

// stdinSrc says where a simple command's standard input comes from.
type stdinSrc struct {
	piped bool   // a pipe from a previous command
	later bool   // with piped: the job's stdin, input sent later (Options.StdinFed)
	code  string // heredoc or here-string text
	isDoc bool   // code is set
	dyn   bool   // code has parts only known at run time
	sub   bool   // those include a command substitution
}

func (c *checker) stmt(s *syntax.Stmt, piped stdinSrc) {
	if s == nil || c.done() {
		return
	}
	c.steps++
	if c.steps > maxSteps {
		c.report(tooComplex)
		return
	}
	in := piped
	for _, r := range s.Redirs {
		c.redirect(r)
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			in = stdinSrc{isDoc: true}
			in.code, in.dyn, in.sub = c.docText(r.Hdoc)
			c.wordSubs(r.Hdoc)
		case syntax.WordHdoc:
			in = stdinSrc{isDoc: true}
			fs := c.resolveWord(r.Word, -1, nil)
			var b strings.Builder
			for i, f := range fs {
				if i > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(f.s)
				in.dyn = in.dyn || f.dyn
				in.sub = in.sub || f.sub
			}
			in.code = b.String()
		case syntax.RdrIn, syntax.DplIn:
			// < <(curl ...) is as unknown as a pipe; < file is a file.
			in = stdinSrc{piped: hasProcSubst(r.Word)}
		}
	}
	if c.done() {
		return
	}
	switch x := s.Cmd.(type) {
	case *syntax.CallExpr:
		c.call(x, in)
	case *syntax.BinaryCmd:
		if x.Op == syntax.Pipe || x.Op == syntax.PipeAll {
			c.stmt(x.X, in)
			if code, ok := c.staticOutput(x.X, in, 0); ok {
				c.stmt(x.Y, stdinSrc{isDoc: true, code: code})
			} else {
				c.stmt(x.Y, stdinSrc{piped: true})
			}
		} else {
			c.stmt(x.X, in)
			c.stmt(x.Y, in)
		}
	case *syntax.Subshell:
		c.stmts(x.Stmts, in)
	case *syntax.Block:
		c.stmts(x.Stmts, in)
	case *syntax.IfClause:
		for ic := x; ic != nil && !c.done(); ic = ic.Else {
			c.stmts(ic.Cond, in)
			c.stmts(ic.Then, in)
		}
	case *syntax.WhileClause:
		c.stmts(x.Cond, in)
		c.stmts(x.Do, in)
	case *syntax.ForClause:
		c.forClause(x, in)
	case *syntax.CaseClause:
		c.wordSubs(x.Word)
		for _, it := range x.Items {
			for _, p := range it.Patterns {
				c.wordSubs(p)
			}
			c.stmts(it.Stmts, in)
		}
	case *syntax.FuncDecl:
		c.funcDecl(x)
	case *syntax.DeclClause:
		c.decl(x)
	case *syntax.TimeClause:
		c.stmt(x.Stmt, in)
	case *syntax.CoprocClause:
		c.stmt(x.Stmt, stdinSrc{})
	case *syntax.TestDecl:
		c.stmt(x.Body, in)
	case nil:
	default: // ArithmCmd, TestClause, LetClause: only substitutions matter
		c.nodeSubs(x)
	}
}

func (c *checker) forClause(x *syntax.ForClause, piped stdinSrc) {
	wi, ok := x.Loop.(*syntax.WordIter)
	if !ok {
		c.nodeSubs(x.Loop)
		c.stmts(x.Do, piped)
		return
	}
	var vals []field
	dyn := false
	for _, w := range wi.Items {
		c.wordSubs(w)
		vals = c.resolveWord(w, -1, vals)
	}
	for _, v := range vals {
		dyn = dyn || v.dyn
	}
	name := ""
	if wi.Name != nil {
		name = wi.Name.Value
	}
	if name == "" || dyn || len(vals) == 0 || len(vals) > maxLoopIter || c.inLoop {
		if name != "" {
			c.setVar(name, "", false)
		}
		c.stmts(x.Do, piped)
		return
	}
	c.inLoop = true
	for _, v := range vals {
		if c.done() {
			break
		}
		c.setVar(name, v.s, true)
		c.stmts(x.Do, piped)
	}
	c.inLoop = false
}

// assign records constant assignments (X=val, export X=val, a=(x y),
// a+=(z), a[1]=x) and checks substitutions in the value.
func (c *checker) assign(a *syntax.Assign, record bool) {
	if a == nil {
		return
	}
	c.wordSubs(a.Value)
	if a.Array != nil {
		for _, e := range a.Array.Elems {
			c.wordSubs(e.Value)
		}
	}
	if !record || a.Name == nil || a.Naked {
		return
	}
	name := a.Name.Value
	switch {
	case a.Array != nil:
		c.assignArray(name, a.Array, a.Append)
	case a.Index != nil:
		c.assignElem(name, a.Index, a.Value)
	case a.Append:
		prev, ok := c.lookup(&syntax.ParamExp{Param: a.Name})
		val, ok2 := c.literal(a.Value)
		c.setVar(name, prev+val, ok && ok2)
	default:
		val, ok := c.literal(a.Value)
		c.setVar(name, val, ok)
	}
}

// assignArray records name=(...) or name+=(...).
func (c *checker) assignArray(name string, arr *syntax.ArrayExpr, appending bool) {
	var list []string
	if appending {
		st, ok := c.vars[name]
		switch {
		case !ok || !st.known:
			c.setArray(name, nil, false)
			return
		case st.array:
			list = st.list
		default:
			list = []string{st.val}
		}
	}
	var fs []field
	for _, e := range arr.Elems {
		fs = c.resolveWord(e.Value, -1, fs[:0])
		if e.Index != nil {
			i, ok := c.arith(e.Index, 0)
			switch {
			case !ok || i < 0 || i > len(list) || len(fs) != 1:
				c.setArray(name, nil, false) // sparse or associative
				return
			case i < len(list):
				list[i] = fs[0].s
				continue
			}
		}
		for _, f := range fs {
			list = append(list, f.s)
		}
	}
	c.setArray(name, list, true)
}

// assignElem records name[index]=value.
func (c *checker) assignElem(name string, index syntax.ArithmExpr, w *syntax.Word) {
	st, ok := c.vars[name]
	i, ok2 := c.arith(index, 0)
	val, ok3 := c.literal(w)
	if !ok || !st.known || !ok2 || !ok3 || i < 0 {
		c.setArray(name, nil, false)
		return
	}
	if !st.array {
		st.list = []string{st.val}
	}
	switch {
	case i < len(st.list):
		list := append([]string(nil), st.list...)
		list[i] = val
		c.setArray(name, list, true)
	case i == len(st.list):
		c.setArray(name, append(st.list, val), true)
	default:
		c.setArray(name, nil, false)
	}
}

// decl handles declare/local/export/readonly/typeset: constant values are
// recorded, except for associative arrays and name references; in a
// function, local/declare/typeset variables are restored when it returns.
func (c *checker) decl(x *syntax.DeclClause) {
	scoped := x.Variant != nil && (x.Variant.Value == "local" || x.Variant.Value == "declare" || x.Variant.Value == "typeset")
	opaque := false
	for _, a := range x.Args {
		if a.Naked && a.Name == nil && a.Value != nil {
			if s := a.Value.Lit(); strings.HasPrefix(s, "-") {
				opaque = opaque || strings.ContainsAny(s, "An")
				scoped = scoped && !strings.Contains(s, "g")
			}
		}
		if a.Name != nil && scoped {
			c.local(a.Name.Value)
		}
		if opaque && a.Name != nil && !a.Naked {
			c.assign(a, false)
			c.setVar(a.Name.Value, "", false)
			continue
		}
		c.assign(a, true)
	}
}

func (c *checker) call(x *syntax.CallExpr, in stdinSrc) {
	for _, a := range x.Assigns {
		c.assign(a, len(x.Args) == 0)
	}
	if len(x.Args) == 0 {
		return
	}
	// Substitutions first: checking them may recurse into call, which
	// reuses nameBuf.
	for _, w := range x.Args {
		c.wordSubs(w)
	}
	fields := c.nameBuf[:0]
	for i, w := range x.Args {
		fields = c.resolveWord(w, i, fields)
	}
	c.nameBuf = fields[:0]
	if c.done() || len(fields) == 0 {
		return
	}
	// copy: argv may recurse and reuse nameBuf
	argv := make([]field, len(fields))
	copy(argv, fields)
	if body, ok := c.funcs[argv[0].s]; ok && !argv[0].dyn {
		c.callFunc(body, argv, in)
	}
	c.argv(argv, in)
}

// Bounds on following function calls.
const (
	maxCalls     = 64      // distinct calls followed per command
	maxCallDepth = 16      // calls nested in calls
	maxCallWork  = 1 << 20 // work spent in calls before no more are followed
)

// callFunc checks the body of a shell function called with static words,
// with the positional parameters bound to them. Each distinct call is
// followed once, within maxCalls and maxCallDepth.
func (c *checker) callFunc(body *syntax.Stmt, argv []field, in stdinSrc) {
	if c.callDepth >= maxCallDepth || len(c.calls) >= maxCalls || c.callWork > maxCallWork {
		return
	}
	var key strings.Builder
	for _, f := range argv {
		key.WriteString(f.s)
		key.WriteByte(0xff)
	}
	if c.calls[key.String()] {
		return
	}
	if c.calls == nil {
		c.calls = make(map[string]bool)
	}
	c.calls[key.String()] = true
	start := c.work
	saved := c.enterFunc(argv[1:len(argv):len(argv)])
	c.stmt(body, in)
	c.leaveFunc(saved)
	if c.callDepth == 0 {
		c.callWork += c.work - start
	}
}

// wordSubs checks the commands inside $(...), `...` and <(...) of a word.
func (c *checker) wordSubs(w *syntax.Word) {
	if w == nil {
		return
	}
	simple := true
	for _, p := range w.Parts {
		switch p.(type) {
		case *syntax.Lit, *syntax.SglQuoted:
		default:
			simple = false
		}
	}
	if !simple {
		c.nodeSubs(w)
	}
}

// nodeSubs walks any node for command and process substitutions.
func (c *checker) nodeSubs(n syntax.Node) {
	if n == nil {
		return
	}
	syntax.Walk(n, func(n syntax.Node) bool {
		if c.done() {
			return false
		}
		switch n := n.(type) {
		case *syntax.CmdSubst:
			c.stmts(n.Stmts, stdinSrc{})
			return false
		case *syntax.ProcSubst:
			c.stmts(n.Stmts, stdinSrc{})
			return false
		}
		return true
	})
}

// nestedParams checks code run by a new shell whose positional
// parameters are params (sh -c CODE NAME ARGS..., git's shell aliases).
func (c *checker) nestedParams(code string, zsh bool, in stdinSrc, params []field) {
	saved := c.saveParams()
	c.setParams(params)
	c.nested(code, zsh, in)
	c.restoreParams(saved)
}

// nested re-parses and checks shell code found inside the command.
func (c *checker) nested(code string, zsh bool, in stdinSrc) {
	if c.depth >= MaxNesting {
		c.report(Verdict{Decision: Block, Rule: "too-deep",
			Reason:      "nested shell code is too deep to analyse",
			Alternative: "run the inner command directly instead of wrapping it in further shells"})
		return
	}
	c.work += len(code)
	f, err := parse(code, zsh)
	if err != nil && zsh {
		f, err = parse(code, false)
	}
	if err == errTooDeep {
		c.report(tooComplex)
		return
	}
	if err != nil {
		v := parseErrorVerdict(err)
		v.Reason = "cannot parse nested shell code: " + oneLine(err.Error())
		c.report(v)
		return
	}
	c.depth++
	saved := c.cwd
	c.stmts(f.Stmts, in)
	c.cwd = saved
	c.depth--
}

func (c *checker) redirect(r *syntax.Redirect) {
	c.wordSubs(r.Word)
	switch r.Op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrInOut, syntax.RdrClob,
		syntax.RdrAll, syntax.AppAll, syntax.RdrAllClob, syntax.AppAllClob, syntax.DplOut:
	default:
		return
	}
	t, ok := c.wordLit(r.Word)
	if !ok {
		return
	}
	if dev, ok := blockDevice(t); ok {
		c.report(Verdict{Decision: Block, Rule: "write-device",
			Reason:      "redirection writes directly to block device " + dev + ", destroying its data",
			Alternative: "write to a regular file (e.g. > ./disk.img) and let the user flash devices themselves"})
	}
}

func hasProcSubst(w *syntax.Word) bool {
	if w == nil {
		return false
	}
	for _, p := range w.Parts {
		if _, ok := p.(*syntax.ProcSubst); ok {
			return true
		}
	}
	return false
}

// maxStaticOutput caps the text taken from commands feeding a pipe.
const maxStaticOutput = 64 << 10

// staticOutput returns what s writes to its standard output when that is
// known statically, so `echo CODE | sh` is checked as code instead of
// asking: echo and printf of static words, cat of a heredoc, a here-string
// or static input, tee of static input, and pipelines or { } and ( ) lists
// of those. in is s's standard input.
func (c *checker) staticOutput(s *syntax.Stmt, in stdinSrc, depth int) (string, bool) {
	if s == nil || s.Background || depth > MaxNesting {
		return "", false
	}
	for _, r := range s.Redirs {
		switch {
		case r.Op == syntax.Hdoc || r.Op == syntax.DashHdoc:
			in = stdinSrc{isDoc: true}
			in.code, in.dyn, _ = c.docText(r.Hdoc)
		case r.Op == syntax.WordHdoc:
			txt, ok := c.literal(r.Word)
			in = stdinSrc{isDoc: true, code: txt + "\n", dyn: !ok}
		case r.N != nil && r.N.Value == "2":
			// 2>/dev/null and friends leave standard output alone
		default:
			return "", false
		}
	}
	var out string
	ok := false
	switch x := s.Cmd.(type) {
	case *syntax.CallExpr:
		out, ok = c.callOutput(x, in)
	case *syntax.Block:
		out, ok = c.listOutput(x.Stmts, in, depth)
	case *syntax.Subshell:
		out, ok = c.listOutput(x.Stmts, in, depth)
	case *syntax.BinaryCmd:
		switch x.Op {
		case syntax.Pipe, syntax.PipeAll:
			if out, ok = c.staticOutput(x.X, in, depth+1); ok {
				out, ok = c.staticOutput(x.Y, stdinSrc{isDoc: true, code: out}, depth+1)
			}
		default: // && and ||: both may run
			out, ok = c.listOutput([]*syntax.Stmt{x.X, x.Y}, in, depth)
		}
	}
	if len(out) > maxStaticOutput {
		return "", false
	}
	return out, ok
}

// listOutput concatenates the static output of a list of statements.
func (c *checker) listOutput(ss []*syntax.Stmt, in stdinSrc, depth int) (string, bool) {
	var b strings.Builder
	for _, s := range ss {
		out, ok := c.staticOutput(s, in, depth+1)
		if !ok || b.Len()+len(out) > maxStaticOutput {
			return "", false
		}
		b.WriteString(out)
	}
	return b.String(), true
}

// callOutput is staticOutput for a simple command.
func (c *checker) callOutput(x *syntax.CallExpr, in stdinSrc) (string, bool) {
	if len(x.Args) == 0 || len(x.Assigns) > 0 {
		return "", false
	}
	switch name, _ := c.wordLit(x.Args[0]); name {
	case "echo", "printf", "cat", "tee":
	default:
		return "", false
	}
	var fs []field
	for i, w := range x.Args {
		fs = c.resolveWord(w, i, fs)
	}
	for _, f := range fs {
		if f.dyn || f.glob {
			return "", false // globs expand to file names
		}
	}
	args := fs[1:]
	switch fs[0].s {
	case "echo":
		return echoOutput(args), true
	case "printf":
		return printfOutput(args)
	case "cat":
		for _, f := range args {
			if f.s != "-" {
				return "", false // a file
			}
		}
	case "tee":
		for _, f := range args {
			if strings.HasPrefix(f.s, "--") && f.s != "--append" && f.s != "--ignore-interrupts" ||
				len(f.s) > 1 && f.s[0] == '-' && strings.Trim(f.s[1:], "aip") != "" {
				return "", false
			}
		}
	}
	if !in.isDoc || in.dyn {
		return "", false
	}
	return in.code, true
}

// echoOutput returns what bash's echo builtin prints for args.
func echoOutput(args []field) string {
	esc, nl := false, true
	i := 0
	for ; i < len(args); i++ {
		a := args[i].s
		if len(a) < 2 || a[0] != '-' || strings.Trim(a[1:], "neE") != "" {
			break
		}
		for _, ch := range a[1:] {
			switch ch {
			case 'n':
				nl = false
			case 'e':
				esc = true
			case 'E':
				esc = false
			}
		}
	}
	var b strings.Builder
	for k, f := range args[i:] {
		if k > 0 {
			b.WriteByte(' ')
		}
		if !esc {
			b.WriteString(f.s)
		} else if echoEscapes(&b, f.s) {
			return b.String() // \c: no further output
		}
	}
	if nl {
		b.WriteByte('\n')
	}
	return b.String()
}

// echoEscapes writes s with the escapes of echo -e and printf %b decoded
// and reports whether it ended at \c.
func echoEscapes(b *strings.Builder, s string) (stop bool) {
	if strings.IndexByte(s, '\\') < 0 {
		b.WriteString(s)
		return false
	}
	// Rewrite what differs from $'...' (\c, \0NNN), then decode as $'...'.
	var pre strings.Builder
	for i := 0; i < len(s) && !stop; i++ {
		switch {
		case s[i] != '\\' || i+1 >= len(s):
			pre.WriteByte(s[i])
		case s[i+1] == 'c':
			stop = true
		case s[i+1] == '0':
			j := i + 2
			for j < len(s) && j < i+5 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			n, _ := strconv.ParseUint("0"+s[i+2:j], 8, 16)
			fmt.Fprintf(&pre, "\\x%02x", byte(n))
			i = j - 1
		default:
			pre.WriteString(s[i : i+2])
			i++
		}
	}
	ansiC(b, pre.String())
	return stop
}

// printfOutput returns what printf prints for args (format and
// arguments), for the common conversions; ok is false for anything else.
func printfOutput(args []field) (string, bool) {
	if len(args) > 0 && args[0].s == "--" {
		args = args[1:]
	}
	if len(args) == 0 || strings.HasPrefix(args[0].s, "-") {
		return "", false // printf -v VAR and friends
	}
	format, rest := args[0].s, args[1:]
	var b strings.Builder
	for {
		used, stop, ok := printfOnce(&b, format, rest)
		if !ok || b.Len() > maxStaticOutput {
			return "", false
		}
		rest = rest[used:]
		if stop || used == 0 || len(rest) == 0 {
			return b.String(), true
		}
	}
}

// printfOnce applies format once, consuming arguments from args.
func printfOnce(b *strings.Builder, format string, args []field) (used int, stop, ok bool) {
	next := func() string {
		if used < len(args) {
			used++
			return args[used-1].s
		}
		return ""
	}
	for len(format) > 0 {
		i := strings.IndexByte(format, '%')
		if i < 0 {
			i = len(format)
		}
		ansiC(b, format[:i])
		if i == len(format) {
			break
		}
		format = format[i+1:]
		j := 0
		for j < len(format) && strings.IndexByte("-+ #0", format[j]) >= 0 {
			j++
		}
		for j < len(format) && (format[j] >= '0' && format[j] <= '9' || format[j] == '.') {
			j++
		}
		if j >= len(format) {
			return used, false, false
		}
		spec := "%" + format[:j]
		conv := format[j]
		format = format[j+1:]
		switch conv {
		case '%':
			b.WriteByte('%')
		case 's':
			fmt.Fprintf(b, spec+"s", next())
		case 'q':
			fmt.Fprintf(b, spec+"s", shellQuote(next()))
		case 'b':
			var e strings.Builder
			stop = echoEscapes(&e, next())
			fmt.Fprintf(b, spec+"s", e.String())
			if stop {
				return used, true, true
			}
		case 'c':
			a := next()
			if a != "" {
				_, n := utf8.DecodeRuneInString(a)
				a = a[:n]
			}
			fmt.Fprintf(b, spec+"s", a)
		case 'd', 'i', 'u', 'x', 'X', 'o':
			a := strings.TrimSpace(next())
			if a == "" {
				a = "0"
			}
			n, err := strconv.ParseInt(a, 0, 64)
			if err != nil || n < 0 && conv != 'd' && conv != 'i' {
				return used, false, false
			}
			if conv == 'i' || conv == 'u' {
				conv = 'd'
			}
			fmt.Fprintf(b, spec+string(conv), n)
		default:
			return used, false, false
		}
	}
	return used, false, true
}
