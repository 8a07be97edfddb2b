package safety

import "github.com/bashvisor/bashvisor/internal/secret"

// Options are what an analysis depends on besides the command's text.
type Options struct {
	// WorkDir is the directory the command runs in, for Display and the
	// stdin gate (a program under it is the workspace's, like ./prog).
	WorkDir string
	// Profile is the permission profile applied after the safety rules;
	// nil: none.
	Profile *Profile
	// CoAuthor is "Name <email>" to add as a Co-authored-by trailer to
	// the command's git commits (Analysis.Run); "": none. The trailer is
	// inserted as ` --trailer "Co-authored-by: TRAILER"` right after the
	// `commit` word of every real `git … commit` invocation (after git's
	// global options and wrappers such as sudo or env; `git show commit`
	// or `echo git commit` are not commits). An invocation that already
	// carries that trailer is left alone, so re-running a rewritten
	// command adds nothing. Nothing else in the text changes. The command
	// is unchanged when it cannot be parsed or contains no commit.
	// Commits inside nested shell strings (bash -c '...') are not
	// rewritten.
	CoAuthor string
	// Secrets holds the known secret values (those stripped from the
	// command's environment) that Log must not show; nil: none.
	Secrets *secret.Redactor
	// Log asks for Analysis.Log, the command as the audit log shows it.
	// Computing it (replacing the known secret values and the credentials
	// RedactSecrets recognises) costs more than the rest of the analysis
	// of a long command, so it is done only when asked for; false leaves
	// Log empty.
	Log bool
	// StdinFed says the command's stdin takes input sent later (a job's
	// stdin pipe or terminal) rather than /dev/null. A program that reads
	// that input then asks unless it is known to treat it as data (see
	// Check's rules stdin-shell and stdin-program): a shell, REPL or
	// editor would run code nobody can analyse now.
	StdinFed bool
	// Terminal says the job's stdin (and output) is a terminal; it implies
	// StdinFed, and pagers and editors with shell escapes (less's !cmd,
	// vi's :!cmd) ask as well (rule "stdin-tty").
	Terminal bool
}

// Analysis is what one parse of a command tells the engine.
type Analysis struct {
	// Display is the command as shown to the user (see Display).
	Display string
	// Outcome is the safety rules' and the permission profile's decision
	// (see Gate).
	Outcome Outcome
	// Part is, when the permission profile rather than the safety rules
	// decided Deny or Ask, the simple command it objected to, for telling
	// the agent what was refused: the first one, with its redirections,
	// that the profile answers with that decision when matched with the
	// commands nested in its text (`echo $(sudo x)`; one with a heredoc
	// is matched alone), or the whole command when no single one does (a
	// rule written for the whole text). It is "" otherwise.
	Part string
	// Run is the command to run: with the co-author trailer when
	// Options.CoAuthor is set and the command has git commits, otherwise
	// the command itself. It is computed whatever Outcome says.
	Run string
	// Log is the command as a log (the audit log) may show it: the
	// values of Options.Secrets replaced, then the credentials
	// RedactSecrets recognises. It is set only with Options.Log.
	Log string
}

// Analyze answers everything the engine needs to know about command
// before running it, from one parse of its text; shell code nested in
// strings (bash -c '...', eval, heredocs fed to a shell) is parsed on its
// own when the safety rules examine it. Each field equals what the
// separate function gives: Display(command, opts.WorkDir),
// Gate(command, opts.Profile) and,
// with opts.Log, RedactSecrets of the command with opts.Secrets replaced.
//
// A command that does not parse is blocked (rule "parse-error"); its
// Display and Run are the command itself, and Log is still redacted, by
// the known values and the patterns RedactSecrets applies to any text.
// Analyze never executes anything and is safe for concurrent use.
func Analyze(command string, opts Options) Analysis {
	return analyze(&source{text: command, stdinFed: opts.StdinFed || opts.Terminal, terminal: opts.Terminal, workDir: opts.WorkDir}, opts)
}

// analyze is Analyze on a source.
func analyze(src *source, opts Options) Analysis {
	a := Analysis{
		Display: display(src, opts.WorkDir),
		Outcome: gate(src, opts.Profile),
		Run:     addCoAuthor(src, opts.CoAuthor),
	}
	if opts.Log {
		a.Log = redactLog(src, opts.Secrets)
	}
	if p := opts.Profile; p != nil && a.Outcome.Decision != a.Outcome.Verdict.Decision {
		a.Part = p.decidingPart(src, a.Outcome.Decision)
	}
	return a
}
