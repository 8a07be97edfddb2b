// Package safety analyses the text of a shell command before bashvisor
// runs it. The safety rules, the display form, the co-author rewrite of git
// commits, the permission profile's decision and the redaction of secrets
// for logs are all analyses of the same text, parsed once as bash with
// mvdan.cc/sh/v3/syntax: Analyze gives them all from one parse, and Check,
// Display, Gate, Profile.Evaluate and RedactSecrets give one each (the
// co-author rewrite is Analyze's alone: Options.CoAuthor). Nothing here
// executes the command.
//
// # The gates, their promise and their limit
//
// The safety rules (Check) block what nobody should run unreviewed and
// has a safer alternative (recursive rm of critical directories, force
// pushes, fork bombs, mkfs, writes to disks) and ask for what a person
// may mean but should see (staging everything, git reset --hard, code
// only known at run time). Nothing a person could approve is blocked.
// They look through wrappers, nested shell code, other languages'
// shell-outs and the words bash evaluates as code (arithmetic, array
// subscripts, test -v, printf -v, declare names, mapfile -C callbacks,
// traps). Limit: they guard against mistakes and the obvious forms of
// prompt injection; they are not a security boundary, since a program
// can always compute a destructive command at run time (a script file,
// a value another program prints). Restricted mode (package sandbox) is
// the boundary.
//
// The stdin gate (Options.StdinFed, Options.Terminal) promises that a job
// fed later runs no code sent later without approval: a program reading
// that input asks unless it is known to treat it as data; xargs and
// parallel ask unless the program they run takes only data as
// arguments; an interpreter's -c text that reads stdin and evaluates
// asks; a value read at run time asks where bash evaluates it; a file
// written from that input and run in the same command (cat > s.sh; bash
// s.sh) asks, and so does any program but a plain data filter in a
// command that writes a file from that input (cat > Makefile; make: make,
// python, git or a test runner may read it as code without being given
// its name). Limit: "known to treat it as data" is a table of programs,
// and a data reader's output (or a file it writes) may still reach a
// program that runs it later, outside this command.
//
// The permission profiles (Profile, Preset) decide by rules matched
// against each simple command; a rule with ReadOnly set matches only
// what the argument grammars prove only reads: a program of a
// declarative table given only the options it declares harmless, only
// harmless variables and no redirection that writes. The locked profile
// allows only that. Limit: the proof covers the command's text, not what
// the programs read (configuration files, the environment the engine
// gives them); running locked and guarded commands in a read-only sandbox
// is what makes a wrong answer harmless.
//
// An ask says why it asks (Outcome.Contained): for what the command does
// in the workspace, or for what leaves it. Every safety-rule ask is of
// the first kind; a profile's ask is when every rule that asked has
// Rule.Contained set (Profile.DefaultContained for its default).
// Guarded's writes (a redirection to a file) and its default (sed -i,
// rm, mkdir, cp, mv, python3 script.py, python -c: whatever it does not
// prove a read or list as a build) are, and so are standard's asks before
// losing work (git reset --hard, git clean -f, git rebase, git branch
// -D, git checkout/restore ., chmod -R); the asks before publishing,
// deploying, the system's services, mounts, firewall and packages, and
// privilege, are not. Where the command's effects cannot leave the
// workspace (package engine: workspace-write over a layer, no network,
// no other writable roots, signals scoped), a contained ask runs and
// what it changed is reviewed instead; in the read-only sandbox, where a
// person's approval would not let it write either, it runs and its
// writes fail. Limit: what stays in the sandbox but outside the workspace
// (its scratch $TMPDIR, the conversation's build caches) is not
// reviewed.
package safety
