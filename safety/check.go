package safety

import (
	"strings"
	"unicode/utf8"
)

const (
	// maxCommandBytes bounds the analyser's work, not what can run: Check
	// blocks anything longer (rule "too-long"). It is deliberately separate
	// from, and larger than, engine.MaxCommandBytes (131071 bytes, Linux's
	// limit on one argument), which the engine checks first, so no command
	// the engine would run ever reaches this bound.
	maxCommandBytes = 1 << 20
	// maxNesting bounds how deep nested shell code (bash -c, eval, su -c,
	// heredocs fed to a shell, ...) is re-parsed; deeper nesting is blocked
	// (rule "too-deep").
	maxNesting = 8
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
// DIR is allowed (it need not be empty), and ~- is left alone. A command
// path whose directory is only known at run time names its program
// ("$TMPDIR/app", $(go env GOPATH)/bin/tool: the rules of app and tool
// apply).
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
// character count as pattern characters; a quoted * alone is a file name
// (rm -rf '*' removes a file named *).
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
// su), unshare, setpriv, firejail, systemd-run and sg, and the package
// runners npx, npm exec/x, pnpm dlx/exec, yarn dlx/exec, bunx, bun x, uvx,
// uv run, uv tool run and pipx run (their -c/--call text is shell code). A
// wrapper that runs no command (chroot DIR, script FILE, strace -p PID,
// flock FD) is allowed. sh -c CODE NAME ARGS binds $0 to NAME as well.
//
// Shell code nested in strings is re-parsed and checked like the command
// itself, at most maxNesting deep: bash/sh/zsh/dash/ksh -c (zsh code is
// parsed as zsh first, then as bash), eval, su -c, runuser -c, script -c,
// flock -c, sg, watch, env -S, trap handlers, ssh remote commands, and
// heredocs, here-strings or the static output of echo, printf, cat and tee
// fed to a shell. git -c alias.NAME=VALUE, and an alias written by git
// config earlier in the command, is expanded for subcommand NAME (any case,
// up to 8 levels, then ask; an alias named like a git command is expanded,
// although git ignores it) before the git rules apply; !VALUE runs as sh
// -c 'VALUE "$@"' ARGS. A shell alias defined earlier in the command is
// expanded where its name is a command (bash does so only with shopt -s
// expand_aliases; a definition is taken as a use): alias [--] NAME=VALUE
// (NAME may start with - after --) and any assignment to BASH_ALIASES[NAME]
// (=, +=, compound, declare/typeset/local, printf -v, ${...:=v}, a for
// loop; read and mapfile into it, and a value naming it, as a name
// reference's target, ask).
//
// Commands other programs run are checked as commands too:
//   - find -exec/-execdir/-ok CMD: {} stands for each starting point (from
//     -mindepth 1, for START/* and START/.*) when no test filters the
//     names first (find / -maxdepth 0 -exec rm -rf {} +), for the literal
//     {} otherwise;
//   - xargs CMD with static input (echo / | xargs rm -rf, also -I, -0) gets
//     the words xargs gives it; with input only known at run time, a shell
//     whose code or script would come from that input asks (xargs sh -c);
//   - parallel CMD ::: ARGS runs CMD with each ARG as shell code, and
//     parallel ::: CMD... each CMD;
//   - git's command-valued settings from -c, clone -c, GIT_CONFIG_COUNT /
//     KEY_n / VALUE_n and GIT_CONFIG_PARAMETERS (core.pager, core.editor,
//     core.sshCommand, core.fsmonitor, credential.helper !..., diff and
//     merge drivers, filters, pager.CMD, ...), --upload-pack, --receive-pack,
//     --exec, rebase -x, submodule foreach, bisect run, filter-branch's
//     filters;
//   - variables whose value is a command line: GIT_SSH_COMMAND, GIT_PAGER,
//     GIT_EDITOR, GIT_SEQUENCE_EDITOR, GIT_EXTERNAL_DIFF, GIT_ASKPASS,
//     PAGER, MANPAGER, EDITOR, VISUAL, LESSOPEN, PROMPT_COMMAND (as
//     NAME=value, export, env or sudo);
//   - the shell-outs of other languages: awk's system("CMD"), print |
//     "CMD" and "CMD" | getline; sed's e CMD (e alone and s///e run the
//     input: ask); python's os.system, os.popen and subprocess (a command
//     line with shell=True, otherwise an argument vector), node's
//     child_process, perl's system, exec, qx and backquotes, ruby's system
//     and backquotes, php's system and shell_exec, in -c/-e text or in a
//     static heredoc given to the interpreter. A literal command line is
//     checked as shell code, a literal argument vector as a command; a
//     command line built at run time asks (dynamic-shell), an argument
//     vector with unknown words passes like any command with unknown
//     arguments. A command line found this way that does not parse asks
//     (unparsed-code) rather than blocks: finding it is a heuristic.
//
// Strings that merely mention a command (echo "rm -rf /", grep -r "git add
// -A", commit messages, heredoc bodies given to non-shells) are data, not
// commands, and are allowed.
//
// # Rules that block
//
// A block cannot be approved, so it is kept for what nobody should run
// unreviewed and has a safe alternative; what a person may well mean (a
// blind git add and commit, emptying the working directory, git reset
// --hard) asks instead.
//
//   - git-push-force: git push --force / -f (also inside -uf), --mirror,
//     +refspec. --force-with-lease and --force-if-includes are allowed.
//   - rm-critical: recursive rm (-r, -R, --recursive, in any cluster or
//     order; -f is not needed, rm -r ~ is as destructive as rm -rf ~, and -f
//     alone is not blocked) of /, /*, a top-level system directory (/bin
//     /boot /dev /etc /home /lib /lib64 /opt /proc /root /sbin /srv /sys
//     /usr /var ... and their /*), ~, ~/, $HOME, the home directory's
//     absolute path, .git, .*, ., .., or a relative path that lands on one
//     of these after a preceding cd (cd / && rm -rf usr, cd / && rm -rf
//     *); also --no-preserve-root and find CRITICAL -delete without filter
//     tests (find / -delete, find . -delete; find ~ -name '*.tmp' -delete
//     is allowed). Emptying the working directory (*, ./*, ?*, [!.]*) asks
//     instead (rm-workdir): it deletes the project, but a person may mean
//     it in a build directory.
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
//   - too-long: commands over 1 MiB; too-deep: shell code nested
//     more than 8 deep; too-complex: more than 200000 statements or
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
//   - stdin-shell: a program reading the code it runs from input sent
//     later (Options.StdinFed) or from a pipe of unknown text (then
//     pipe-to-shell): shells, interpreters (python3, python3 -i app.py,
//     python3 -m pdb, node, php -a), REPLs with shell escapes (tclsh, lua,
//     sqlite3, psql, mysql, gdb, dc, m4, ...), editors (ed, ex, vi, vim -es,
//     nano, emacs), awk/sed/make -f -, scripts named -, /dev/stdin,
//     /dev/fd/N or /proc/self/fd/N, ssh HOST without a command, script,
//     sudo -s, tmux.
//   - stdin-program: with Options.StdinFed, any other program that reads
//     the job's input and is not known to treat it as data (see the stdin
//     gate in stdin.go: cat, grep, read, jq, git, npm, a script run by its
//     interpreter, a program of the workspace named ./prog pass); xargs
//     and parallel reading that input, unless the program they run takes
//     only data as arguments (rm, grep, cat, gzip; not env, an
//     interpreter, awk, sed, git, find, sort, printf or a wrapper); a tool
//     given that input as a file (git -c include.path=/dev/stdin,
//     GIT_CONFIG_GLOBAL=/dev/stdin, java /dev/stdin, gdb -x /dev/stdin);
//     and an interpreter whose -c/-e text reads stdin and evaluates code
//     (python3 -c 'exec(sys.stdin.read())', perl -e 'eval <STDIN>'; the
//     rule is stdin-shell). npx, npm exec, pnpm dlx, yarn dlx, bunx, uvx,
//     uv run and pipx run are looked through to the command they run.
//   - stdin-tty: with Options.Terminal, pagers and viewers with shell
//     escapes (less, more, man, info, w3m, ...).
//   - persist-code: a write that keeps code for later, outside this
//     analysis: shell start-up files (~/.bashrc, ~/.profile, /etc/profile.d,
//     ...), git hooks and configuration (.git/hooks/*, chmod +x of a hook,
//     .git/config, ~/.gitconfig, git config of a command-valued setting, a
//     shell alias or core.hooksPath), ~/.ssh/rc, config and
//     authorized_keys, crontabs, systemd units, autostart entries, .envrc,
//     Python .pth and sitecustomize files, /etc/ld.so.preload; and setting
//     BASH_ENV, ENV, PROMPT_COMMAND, LD_PRELOAD or LD_AUDIT. Writes are
//     redirections, tee, cp/mv/install/ln targets, dd of=, sed/perl -i.
//   - procsubst-shell: bash <(curl ...), source <(...).
//   - dynamic-eval: eval "$(...)", eval $X; and a value read at run time
//     (read, mapfile, readarray, and variables assigned from them) where
//     bash evaluates it as code: operands of ((...)), let, $((...)) and
//     the arithmetic comparisons of [[ ]] (bash evaluates a variable's
//     value as arithmetic, and the $(...) of a subscript in it runs),
//     array subscripts and ${x:offset}, ${!x}, the names of test -v, [ -v,
//     [[ -v ]], printf -v, declare/local/typeset/readonly/export, read and
//     unset, and mapfile -C callbacks. The same words written literally
//     are parsed and analysed like $(...) (test -v 'x[$(rm -rf ~)]' is the
//     rm). A value another program prints ($(wc -l < f)) is taken as data.
//   - git-add-blind: a blind git add (git add or git stage -A / --all and
//     its abbreviations --a, --al, also with a pathspec, and . / * / :/ /
//     .. / $(git rev-parse --show-toplevel) (or a variable assigned it:
//     top=$(git rev-parse --show-toplevel); git add "$top") / exclude-only
//     pathspecs, also behind git's global options: git -C dir -c k=v add -A). Followed only
//     by commands showing the state (git diff --cached, git status, git
//     log, git show; echo, cat and the like are neutral) it is allowed:
//     mini-SWE-agent submits with git add -A && git diff --cached.
//     Otherwise (alone, followed by git commit, stash, push, commit-tree,
//     write-tree, a --continue that commits, or anything else) it asks.
//     git add -u is allowed.
//   - git-reset-hard: git reset --hard, which discards uncommitted changes
//     (and, with a revision, commits) with no undo.
//   - dynamic-shell: sh -c "$X", su -c "$X", a heredoc with expansions fed
//     to a shell; an interpreter's program text with a command substitution
//     or wholly unknown (ruby -e "$(curl ...)", python3 -c "$(wget -qO-
//     ...)", python3 -c "$CODE", python3 - <<< "$(curl ...)"), but not one
//     with only parameter expansions (python3 -c "print('$HOME')").
//   - dynamic-command: a command name only known at run time ($CMD args,
//     $(which foo) args, $x split on an IFS only known at run time), a git
//     or shell alias whose name or value is only known at run time, and an
//     assignment to a variable whose name is only known at run time, which
//     may be BASH_ALIASES (printf -v "$n[k]", declare/typeset/local
//     "$n[k]=v", read "$n", mapfile, getopts, let "$n[k]=1", a name
//     reference's target, eval of built text); export and readonly without
//     -a/-A and ${!n:=v} reach only alias 0, so a later command named 0
//     asks instead.
//   - rm-workdir: see above.
//
// The analysis does work linear in the command's length: nested code is
// re-parsed at most maxNesting deep, a loop body is walked for at most 16
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
	src.checked = true
	command := src.text
	if len(command) > maxCommandBytes {
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
	c := checker{terminal: src.terminal, workDir: src.workDir, fed: fedRun{on: src.stdinFed}}
	c.work = len(command)
	c.v.Decision = Allow
	c.stmts(f.Stmts, stdinSrc{piped: src.stdinFed, later: src.stdinFed})
	if !c.done() {
		c.addAllVerdict()
		c.report(c.fed.verdict())
	}
	src.discard = c.discard
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
