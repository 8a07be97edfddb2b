//go:build linux

package gitpolicy

import (
	"github.com/bashvisor/bashvisor/internal/layer"

	"slices"
	"strings"
)

// The states of rebase (rebase-merge/), am (rebase-apply/) and the
// sequencer of cherry-pick and revert (sequencer/): git reads them to
// go on when the user runs git rebase --continue, git am --continue or
// git cherry-pick --continue. Each file git writes there has a check;
// any other file is refused.

// stateFiles are the files of the three states and their checks.
var stateFiles = map[string]fileCheck{
	// Todo lists.
	"git-rebase-todo": todoList, "git-rebase-todo.backup": todoList, "done": todoList, "todo": todoList,
	// Merge strategies and their options.
	"strategy": strategyFile, "strategy_opts": strategyOptsFile, "opts": sequencerOpts,
	// Signing runs gpg.
	"gpg_sign_opt": emptyOnly, "sign": anyText,
	"allow_rerere_autoupdate": oneOfFile("--rerere-autoupdate", "--no-rerere-autoupdate"),
	"apply-opt":               applyOpts,
	// Object ids.
	"onto": oidLines, "orig-head": oidLines, "head": oidLines, "abort-safety": oidLines, "autostash": oidLines,
	"amend": oidLines, "stopped-sha": oidLines, "squash-onto": oidLines, "original-commit": oidLines,
	// Data: messages, names, numbers, flags, patches, author
	// scripts (git parses them itself, no shell reads them).
	"head-name": anyText, "quiet": anyText, "verbose": anyText, "signoff": anyText, "interactive": anyText,
	"message": anyText, "author-script": anyText, "rewritten-list": anyText, "rewritten-pending": anyText,
	"current-fixups": anyText, "message-squash": anyText, "message-fixup": anyText, "msgnum": anyText,
	"end": anyText, "patch": anyText, "dropped": anyText, "drop_redundant_commits": anyText,
	"keep_redundant_commits": anyText, "reschedule-failed-exec": anyText, "no-reschedule-failed-exec": anyText,
	"cdate_is_adate": anyText, "ignore_date": anyText, "update-refs": anyText, "next": anyText, "last": anyText,
	"info": anyText, "msg": anyText, "msg-clean": anyText, "final-commit": anyText, "keep": anyText,
	"threeway": anyText, "utf8": anyText, "messageid": anyText, "applying": anyText, "rebasing": anyText,
	"dirtyindex": anyText, "scissors": anyText, "quoted-cr": anyText, "empty": anyText,
	"patch-merge-index": anyText, "onto_name": anyText, "rerere-autoupdate": anyText,
}

// rebaseState judges a file of a rebase's, am's or sequencer's state.
func (k *checker) rebaseState(e entry) verdict {
	switch {
	case len(e.parts) == 1 && (e.dir || e.kind == layer.Deleted):
		return allowed
	case len(e.parts) != 2:
		return refuse(RebaseExec, "a file "+e.top+"/ does not hold")
	}
	check, ok := stateFiles[e.name]
	if !ok && isNumber(e.name) && e.top == "rebase-apply" {
		check, ok = anyText, true // a patch of git am
	}
	if !ok {
		return refuse(RebaseExec, "a file git does not write in "+e.top+"/")
	}
	return k.file(e, RebaseExec, maxDataFile, check)
}

func isNumber(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// todoCommands are the commands of a todo list (sequencer.c's
// todo_command_info) but exec.
var todoCommands = []string{
	"pick", "p", "revert", "reword", "r", "edit", "e", "squash", "s", "fixup", "f", "drop", "d",
	"break", "b", "label", "l", "reset", "t", "merge", "m", "update-ref", "u", "noop",
}

// todoList checks a todo list: comments, and git's commands but exec.
func todoList(_ *checker, _ entry, b []byte) string {
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 0, f[0][0] == '#', f[0][0] == ';':
		case f[0] == "exec" || f[0] == "x":
			return "an exec line in a todo list"
		case !slices.Contains(todoCommands, f[0]):
			return "a todo list command " + quote(f[0]) + " that is not git's"
		case (f[0] == "update-ref" || f[0] == "u") && (len(f) < 2 || checkRefname(f[1]) != ""):
			return "an update-ref of a bad ref name"
		}
	}
	return ""
}

// strategies are git's merge strategies (a rebase's state may name
// one; git runs git-merge-NAME for any other name, and a NAME with a
// slash as a path).
var strategies = []string{"ort", "recursive", "resolve", "octopus", "ours", "subtree"}

func strategyFile(_ *checker, _ entry, b []byte) string {
	if !slices.Contains(strategies, strings.TrimSpace(string(b))) {
		return "a merge strategy that is not git's"
	}
	return ""
}

// strategyOptions are the options of git's strategies (-X), without
// their "=value".
var strategyOptions = []string{
	"ours", "theirs", "subtree", "renormalize", "no-renormalize", "ignore-space-change", "ignore-all-space",
	"ignore-space-at-eol", "ignore-cr-at-eol", "patience", "histogram", "minimal", "diff-algorithm",
	"find-renames", "rename-threshold", "no-renames",
}

// badStrategyOption says what is wrong with a -X option, or "".
func badStrategyOption(o string) string {
	o = strings.TrimPrefix(o, "--")
	name, val, _ := strings.Cut(o, "=")
	if !slices.Contains(strategyOptions, name) || strings.Contains(val, "..") || strings.HasPrefix(val, "/") {
		return "a strategy option " + quote(o) + " that is not git's"
	}
	return ""
}

// strategyOptsFile checks strategy_opts: options quoted as git's
// sq_quote does (' --theirs' ' --renormalize').
func strategyOptsFile(_ *checker, _ entry, b []byte) string {
	for _, w := range strings.Fields(string(b)) {
		if why := badStrategyOption(strings.Trim(w, "'")); why != "" {
			return why
		}
	}
	return ""
}

func emptyOnly(_ *checker, _ entry, b []byte) string {
	if strings.TrimSpace(string(b)) != "" {
		return "signing runs a program (gpg)"
	}
	return ""
}

func oneOfFile(vals ...string) fileCheck {
	return func(_ *checker, _ entry, b []byte) string {
		if !slices.Contains(vals, strings.TrimSpace(string(b))) {
			return "a value git does not write"
		}
		return ""
	}
}

// applyOpts checks am's apply-opt: options for git apply, quoted.
func applyOpts(_ *checker, _ entry, b []byte) string {
	for _, w := range strings.Fields(string(b)) {
		w = strings.Trim(w, "'")
		name, val, _ := strings.Cut(w, "=")
		ok := slices.Contains([]string{"--whitespace", "--ignore-space-change", "--ignore-whitespace",
			"--exclude", "--include", "--reject", "--directory"}, name) ||
			(len(w) > 2 && (w[:2] == "-p" || w[:2] == "-C") && isNumber(w[2:]))
		if !ok || strings.Contains(val, "..") || strings.HasPrefix(val, "/") {
			return "an option for git apply " + quote(w) + " that git am does not write"
		}
	}
	return ""
}

// sequencerOpts checks sequencer/opts, a config file of [options]
// (sequencer.c populate_opts_cb).
func sequencerOpts(_ *checker, _ entry, b []byte) string {
	entries, err := parseConfig(b)
	if err != nil {
		return "opts that do not parse: " + err.Error()
	}
	for _, e := range entries {
		if why := sequencerOpt(e); why != "" {
			return e.name() + ": " + why
		}
	}
	return ""
}

func sequencerOpt(e configEntry) string {
	if e.Section != "options" || e.Sub != "" {
		return "not an option of the sequencer"
	}
	switch e.Key {
	case "no-commit", "edit", "allow-empty", "allow-empty-message", "drop-redundant-commits",
		"keep-redundant-commits", "signoff", "record-origin", "allow-ff", "allow-rerere-auto":
		if !isBool(e) {
			return "not a boolean"
		}
	case "mainline":
		if !isNumber(e.Value) {
			return "not a number"
		}
	case "strategy":
		if !slices.Contains(strategies, e.Value) {
			return "a merge strategy that is not git's"
		}
	case "strategy-option":
		return badStrategyOption(e.Value)
	case "default-msg-cleanup":
		if !slices.Contains([]string{"strip", "whitespace", "verbatim", "scissors", "default"}, e.Value) {
			return "not a cleanup mode"
		}
	case "gpg-sign":
		return "signing runs a program (gpg)"
	default:
		return "not an option git writes"
	}
	return ""
}
