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
// on the command name (\rm, /bin/rm), ~, $HOME / ${HOME}, and variables
// assigned constant values earlier in the same command (X=/; rm -rf $X,
// export X=..., for d in / ...; do rm -rf $d; done). Wrappers are looked
// through: sudo and doas (with their options, including ones taking an
// argument such as -u USER), env (options, NAME=value, -S/--split-string),
// nohup, time, command, exec, builtin, nice, timeout, xargs, busybox,
// setsid, stdbuf, ionice and watch. Shell code nested in strings is
// re-parsed and checked: bash/sh/zsh/dash/ksh -c, eval, su -c, watch,
// env -S, find -exec/-execdir/-ok, trap handlers, ssh remote commands, and
// heredocs or here-strings fed to a shell. ${X:?}, ${X:-default} and
// friends resolve when X is known (rm -rf "${HOME:?}"/* is blocked).
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
//   - [mkfs] mkfs, mkfs.*, mke2fs, mkswap.
//   - [dd-device] dd of=/dev/DISK; [write-device] redirection (>, >>, &>,
//     <>, >|) into a disk-like block device (/dev/sd*, nvme*, vd*, xvd*,
//     hd*, mmcblk*, loop*, md*, dm-*, mapper/*, disk/* ...), and tee,
//     shred, wipefs, blkdiscard, cp/mv onto one. Reading a device, /dev/null
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
//     fed to a shell.
//   - [dynamic-command] a command name only known at run time ($CMD args,
//     $(which foo) args).
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
//   - A pipe into a shell reading stdin asks, except from a plain echo or
//     printf of static text (echo ls | sh), which is analysed as code like
//     a heredoc or here-string fed to a shell.
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
// Check is a guard against mistakes (and against the obvious forms of
// prompt injection), not a security boundary: a determined program can
// always compute a destructive command at run time. Restricted mode
// (package sandbox) is the boundary.
package safety
