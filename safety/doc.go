// Package safety analyses shell commands before bashvisor runs them.
//
// It parses each command with mvdan.cc/sh/v3/syntax (bash dialect) and
// provides:
//
//   - Check: the dangerous-command analyser (SPEC §2.7). It returns a
//     Verdict whose Decision is Allow, Block (never executed; the engine
//     answers "[command blocked: REASON; instead: ALTERNATIVE]") or Ask
//     (status needs_approval), with the rule name, a one-line reason and a
//     safer alternative.
//   - Display: the display form of a command (REQ-BASH-011), dropping a
//     leading `cd WORKDIR &&` / `cd WORKDIR;` by slicing the original text.
//   - AddCoAuthor: the optional git co-author trailer rewrite.
//   - Profile, Preset: permission profiles over the action string
//     "tool:bash:<command>" (allow / deny / ask by ordered regex rules).
//   - Auditor: the audit log, one JSON line per command, secrets redacted.
//
// # What Check examines
//
// Every simple command anywhere in the syntax tree: pipelines, && / || / ;
// lists, subshells, { groups }, function bodies, if/while/for/case, $(...),
// backticks, <(...) and >(...), and redirections. Words are expanded
// statically the way bash would where that is possible: quotes, backslash
// escapes, $'...', brace expansion (rm -{r,f}, /{,}), a leading \ or a path
// on the command name (\rm, /bin/rm), ~, ~user, ~+, $HOME / ${HOME}, and
// variables and indexed arrays assigned constant values earlier in the same
// command (X=/; rm -rf $X, export X=..., a=(/ /bin); rm -rf "${a[@]}", for
// d in / ...; do rm -rf $d; done). Unquoted expansions are split on IFS as
// bash splits them (IFS=,; cmd=rm,-rf,/; $cmd). Parameter operators with
// static operands resolve: ${X:-d}, ${X:?}, ${X:+alt}, ${X%pat}, ${X##pat},
// ${X/pat/s}, ${X//pat/s}, ${X:off:len}, ${X^^}, ${X,,}, ${#X}, ${!X},
// ${a[i]}, ${a[@]}, $@, $1... Glob words are matched against the critical
// names the way bash would expand them (/[b]in, /bi?, .[!.]*), never against
// the file system. A shell function called with static words is checked
// again with $1... bound to them (f() { rm -rf "$1"; }; f /), and so is
// sh -c CODE NAME ARGS. Wrappers are looked through: sudo and doas (with
// their options, including ones taking an argument such as -u USER), env
// (options, NAME=value, -S/--split-string), nohup, time, command, exec,
// builtin, nice, timeout, xargs, busybox, setsid, stdbuf, ionice, watch,
// flock (also FILE -c CODE), chroot, strace, ltrace, script -c, runuser,
// unshare, setpriv, firejail, systemd-run and sg. Shell code nested in
// strings is re-parsed and checked: bash/sh/zsh/dash/ksh -c, eval, su -c,
// runuser -c, script -c, flock -c, sg, watch, env -S, find
// -exec/-execdir/-ok, trap handlers, ssh remote commands, git shell aliases
// (git -c alias.x='!CODE' x), and heredocs, here-strings or the static
// output of echo, printf, cat and tee fed to a shell. One-shot git aliases
// (git -c alias.x='add -A' x) are expanded before the git rules apply.
//
// # Rules
//
// Block (rule name in brackets):
//   - [git-add-blind] git add (or git stage) -A / --all (and its abbreviations --a, --al)
//     / . / * / :/ / .. / exclude-only pathspecs, also behind git's global
//     options (git -C dir -c k=v add -A).
//   - [git-push-force] git push --force / -f (also inside -uf), --mirror,
//     +refspec. --force-with-lease and --force-if-includes are allowed.
//   - [rm-critical] recursive rm (-r, -R, --recursive, in any cluster or
//     order, with or without -f) of /, /*, a top-level system directory
//     (/bin /boot /dev /etc /home /lib /lib64 /opt /proc /root /sbin /srv
//     /sys /usr /var ... and their /*), ~, ~/, $HOME, the home directory's
//     absolute path, .git, *, .*, ., .., or a relative path that lands on
//     one of these after a preceding `cd` (cd / && rm -rf usr); also
//     --no-preserve-root and find CRITICAL -delete.
//   - [fork-bomb] a function that calls itself on both sides of a pipe or
//     in the background (:(){ :|:& };:, bomb(){ bomb|bomb& };bomb), blocked
//     at its definition.
//   - [chmod-critical] chmod/chown/chgrp -R on /, a top-level system
//     directory or the home directory; rsync --delete into one of those is
//     [rm-critical].
//   - [kill-all] kill -1 (every process the user owns).
//   - [mkfs] mkfs, mkfs.TYPE, mke2fs, mkswap, mkdosfs, mkntfs, mkexfatfs,
//     mkudffs, mkreiserfs, newfs, newfs_TYPE, and wipefs -a / -o (erasing
//     signatures), matched on the command's base name.
//   - [partition] a partitioning tool that writes a partition table:
//     sgdisk with any option but the read-only ones (-Z, -z, -o, -n, -d,
//     ...), sfdisk, fdisk, gdisk and cfdisk naming a disk without a
//     list/dump/verify option, parted naming a disk with commands other than
//     print/unit/help.
//   - [dd-device] dd of=/dev/DISK; [write-device] redirection (>, >>, &>,
//     <>, >|) into a disk-like block device (/dev/sd*, nvme*, vd*, xvd*,
//     hd*, mmcblk*, loop*, md*, dm-*, mapper/*, disk/*, block/* ...), and
//     tee, shred, blkdiscard, cp/mv onto one. Reading a device, /dev/null
//     and friends are fine.
//   - [parse-error] a command (or nested shell code) that does not parse:
//     fail closed, with the parser's message.
//   - [too-long] commands over MaxCommandBytes; [too-deep] shell code nested
//     deeper than MaxNesting; [too-complex] more than 200000 statements or
//     brackets nested more than 1000 deep.
//
// Ask: code only known at run time that feeds a shell:
//   - [pipe-to-shell] a pipe into a shell or interpreter reading its
//     program from stdin (curl ... | sh, wget -O- ... | sudo bash,
//     ... | python3), or source /dev/stdin.
//   - [procsubst-shell] bash <(curl ...), source <(...).
//   - [dynamic-eval] eval "$(...)", eval $X.
//   - [dynamic-shell] sh -c "$X", su -c "$X", a heredoc with expansions
//     fed to a shell; an interpreter's program text with a command
//     substitution or wholly unknown (ruby -e "$(curl ...)", python3 -c
//     "$(wget -qO- ...)", python3 -c "$CODE", python3 - <<< "$(curl ...)").
//   - [dynamic-command] a command name only known at run time ($CMD args,
//     $(which foo) args, $x split on an IFS only known at run time), a git
//     alias whose value is only known at run time.
//
// Strings that merely mention a command (echo "rm -rf /", grep -r "git add
// -A", commit messages, heredoc bodies given to non-shells) are data, not
// commands, and are allowed.
//
// # Choices where the spec is silent
//
//   - rm needs only the recursive flag to be blocked on a critical target
//     (rm -r ~ is as destructive as rm -rf ~); -f alone is not blocked.
//   - git add -A / --all is blocked even with a pathspec; git add -u is
//     allowed.
//   - Unknown values are not guessed: rm -rf "$DIR"/ with an unknown DIR is
//     allowed (the analyser cannot know it is empty), find -exec rm -rf {}
//     is checked with {} as a literal.
//   - Variables keep their last constant value in textual order, whatever
//     subshell or branch assigned them; cd tracking works the same way.
//     Both err on the side of finding a problem.
//   - Nested code that does not parse is blocked like top-level code;
//     zsh -c code is parsed as zsh first, then as bash.
//   - A `*` or `.*` target is blocked whatever the working directory.
//   - A pipe into a shell reading stdin asks, except from static text,
//     which is analysed as code: echo (-n/-e/-E), printf (%s %b %c %q and
//     integers, with flags and widths), cat of a heredoc or here-string, cat
//     and tee of static input, and lists of those. A file, a glob, a
//     variable or printf %f is run-time text and asks.
//   - IFS: a constant IFS splits unquoted expansions, unset IFS restores the
//     default, local IFS ends with its function. With an IFS only known at
//     run time (read IFS, IFS=$1) a command name from an unquoted expansion
//     asks; other words are split on the default.
//   - Globs: a component matching every probe name (*, ?*, [!.]*; .*,
//     .[!.]*, .??* for dot names) stands for all entries, like * and .*;
//     others are matched against /'s system directories, the directories
//     down to the home directory, and .git. Quoted characters in a word
//     with an unquoted glob character count as pattern characters.
//   - ~user is a home directory (as critical as ~), ~+ the working
//     directory; ~- is left alone.
//   - Parameter operators work on the real home path (${HOME%/*} is its
//     parent), on values up to 1 KiB, within a shared work budget; past it,
//     and for ${x/p/&}, patterns matching "", associative arrays and name
//     references, values are unknown.
//   - A function called with static words is checked again with $1...
//     bound, once per distinct call (at most 64 calls, 16 deep); its body
//     is also checked at its definition. A function named like a command
//     (rm() {...}) does not turn off that command's rules. After a word
//     that may be any number of words ($(...), $X, a glob) the parameters
//     are unknown. set -- ARGS and sh -c CODE NAME ARGS bind ARGS too,
//     except behind xargs, which adds arguments.
//   - Wrappers parse their own options; one that runs no command (chroot
//     DIR, script FILE, strace -p PID, flock FD) is allowed. runuser
//     without -u is treated like su.
//   - git -c alias.NAME=VALUE is expanded for subcommand NAME (any case, up
//     to 8 levels, then ask); !VALUE runs as sh -c 'VALUE "$@"' ARGS. An
//     alias named like a git command is expanded, although git ignores it.
//   - Formatters and partition-table writers are blocked whatever the
//     target (often a variable; disk images are the user's to prepare).
//     wipefs without -a/-o only lists; sgdisk -P only pretends; fdisk -l,
//     sfdisk -d and parted DISK print only read.
//   - Interpreter program text asks only with a command substitution or
//     when wholly unknown: python3 -c "print('$HOME')" is allowed,
//     python3 -c "print('$(date)')" asks.
//   - find -delete is blocked only without filter tests (find / -delete,
//     find . -delete); find ~ -name '*.tmp' -delete is allowed.
//   - Display compares directories after cleaning, and also after resolving
//     symlinks when both exist.
//   - AddCoAuthor inserts the trailer right after the `commit` word, so it
//     stays before any `--` and pathspecs; commits inside nested shell
//     strings are not rewritten.
//   - Permission rules are matched against each simple command separately
//     (the most restrictive result wins); a rule matching the whole text
//     can only tighten the result. See Profile.Evaluate.
//
// The analysis does work linear in the command's length: nested code is
// re-parsed at most MaxNesting deep, a loop body is walked at most for 16
// values, and function calls, pattern matching and expansions have fixed
// budgets.
//
// Check is a guard against mistakes (and against the obvious forms of
// prompt injection), not a security boundary: a determined program can
// always compute a destructive command at run time. Restricted mode
// (package sandbox) is the boundary.
package safety
