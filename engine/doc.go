// Package engine runs shell commands for LLM coding agents: it is the
// "bash tool" behind an agent server, and the only package an embedding
// program needs. One [Engine] serves any number of conversations at once;
// each call brings its own [ToolContext] (working directory, conversation,
// restricted or not) and a context.Context that cancels it. [Runner] is the
// interface the MCP adapter and the CLI take, so that a remote
// implementation can stand in for a local Engine.
//
// # The tool contract
//
// Input: {"command": "...", "mode": "default" | "slow" | "background"},
// and optionally "stdin", "tty" and "yield_ms" ([InputSchema]). The
// command runs as `bash -c COMMAND` in the working directory, in a new
// session (no controlling terminal, stdin /dev/null, unless the call asks
// for a pipe or a terminal), with SIGINT and SIGQUIT at their defaults even
// when the program running the engine ignores them (nohup, a script's
// background job): the engine leaves the program's own dispositions alone
// and, only while it ignores one, starts commands through
// `env --default-signal=INT,QUIT` (GNU coreutils 8.31+; without it they
// inherit the ignored signals and ^C on a job's terminal does nothing),
// stdout and stderr on one pipe in the order written, with the
// environment policy's secrets removed and EDITOR, PAGER and friends set so
// nothing waits for a person. Default mode stops the command after
// Config.Timeout, slow mode after Config.SlowTimeout; a background job
// returns at once and lives up to Config.BackgroundLifetime. With
// Config.OnTimeout "background" (or a call's yield_ms), a command that is
// still running at its timeout is not stopped but yields: it becomes a
// background job of the conversation, the result (status started) has the
// output so far and "[command still running after 30s: moved to
// background as job-7; read it with bash_output, stop it with bash_kill]"
// (a job started with stdin "pipe" or a terminal adds "send it input with
// bash_write"), and the rest goes to the job's file. A job may read input sent with
// [Engine.Write] (stdin "pipe") and run on a terminal (tty); see
// interactive.go for the choices. Ending a
// command always targets its whole process group (and its cgroup): SIGTERM,
// Config.Lifecycle.Grace, SIGKILL, then a bounded wait after which the call returns
// regardless and says what survived.
//
// What the model reads ([Result.Output]), by [Result.Status]:
//
//	ok              the output
//	failed          [command failed: exit code N] or [command failed: killed by SIGNAME], then the output;
//	                [command failed: out of memory (limit 4 GiB)] or [command failed: CPU time limit exceeded (limit 10m)]
//	                when a resource limit ended it; [command failed: its changes to the workspace were not applied]
//	                (or [command failed: not all of its changes to the workspace were applied], when only its inert
//	                part was and the rest could not be held)
//	                when a workspace-write command that ended well could not have its changes applied (a note says why;
//	                when they are held for review, the held lines say how to review them)
//	timed_out       [command timed out after 30s], then the partial output
//	cancelled       [command cancelled], then the partial output
//	blocked         [command blocked: REASON; instead: ALTERNATIVE] (never executed)
//	denied          [command denied: ...] (a permission profile; never executed)
//	needs_approval  [command needs approval: ...] (ToolContext.Approved lets it run)
//	error           [error: MESSAGE]: bad input, bad working directory, cannot start
//	started         <pid>PID</pid>\n<output_file>PATH</output_file>\n<reminder>To stop: bash_kill job_id=ID</reminder>
//	lost            [command lost: executor NAME stopped answering 12.3s into the command; ...] (a remote Runner only: cluster.Client)
//
// Output over Config.Output.Max is cut in the middle with the header
// "[output truncated in middle: got 300.0 KiB, showing the first 32 KiB and the last 96 KiB]"
// (the first quarter and the last three quarters of Max) and the
// complete output is kept in a file the result names. Notes on lines of
// their own follow the output: processes the shell left running were ended
// ("[killed processes left running after the shell exited: ...]"), the
// full output's file, an incomplete cleanup, and last, for a sandboxed
// command, the ports its conversation listens on ("[listening: 3000
// (job-1), 5173 (pid 812)]", see [Result.Listening] and [Engine.Forward]). A background job's output
// file ends with "[background process completed]", "[background process
// failed: exit code N]" or "[background process killed: REASON]". These
// texts are written by this package (render.go, and its notes.go for the
// sandbox's) from the data the lower layers return; two lines of a
// workspace-write command's change report come worded from below: the
// summary of what was applied (package layer) and the policy's refusals
// (package gitpolicy). The engine holds no state of a conversation: the
// supervisor's record of it owns its jobs, its world, its undo store and
// its commands' layers. The output itself reads as a terminal
// shows it, escape sequences and control bytes rendered out, a terminal
// job's as its screen and scrollback (see output.go and
// config.Output.Raw); the files keep the raw bytes.
//
// # Held changes and review
//
// A workspace-write command runs over a copy-on-write layer; once its
// processes are gone, what policy allows is applied to the workspace
// (and kept for [Engine.Undo]). What is not applied is held, not
// dropped: the changes policy refused, every change set in the "hold"
// review mode, and the changes of a command that left processes running
// over its layer. The result names each held path and why, one line
// each ("[held: A .git/hooks/pre-commit (policy: git-hooks: ...)]"),
// then how to review them ("[these changes are held, not applied: a
// person reviews them (bash_review, id 3, digest ...); accepting
// applies exactly them]"), and carries them in ChangeSet.Held.
// [Engine.Held] lists a conversation's held change sets as they are
// now, each with a digest of its content; [Engine.Review] accepts one
// (applies exactly what the digest names, as one undo step, and refuses
// with ErrBadInput, applying nothing, when the changes are not those any
// more) or rejects it. Accepting is a person's decision (or the
// embedding program's): policy is not asked again. Held changes are
// discarded when the conversation ends. The review mode is "apply" (the
// default) or "hold", per engine (Config.Review) and per conversation
// (ToolContext.Review, from that call on); Config.OnHeld lets an
// embedding program decide on each held change set before Run returns.
// A fleet (cluster) does not carry held changes yet.
//
// The result is approved, not the command: a workspace-write command
// asked about only for what it does in the workspace
// (safety.Outcome.Contained: every safety-rule ask, and a permission
// profile's asks through rules marked safety.Rule.Contained, such as
// guarded's file writes, file operations and the agent's own code, and
// standard's git reset --hard) runs without asking when none of its
// effects can leave its layer and the conversation's world (a layer, no
// network grant, no writable roots besides the workspace, signals
// scoped by Landlock). When only the safety rules asked, what it changed
// is judged as any command's change set, and what is not proven harmless
// is held for review; when a permission profile asked, everything it
// changed is held (the hold review mode for that command) until a person
// accepts it, so later commands do not see it before then. A profile's
// ask for what leaves the workspace (publishing, deploying, the system's
// services and packages; safety.Rule.Contained unset) still asks, a
// denial stays a denial (locked is unchanged), and so does every ask of
// a command with a network grant or other writable roots, or outside
// workspace-write, except in the read-only sandbox: there a contained ask
// runs without asking under the same conditions, since approving it would
// not lift the sandbox (its writes fail).
//
// Every command runs under resource limits of all its processes together
// ([config.Limits]: memory, CPU time, processes; per engine in Config.Limits, per
// call in ToolContext.Limits), and every result reports what it used:
// [Usage] (CPU time, peak memory, processes, OOM kills), read from the
// kernel's accounting of the command's cgroup (each field says when it is
// exact, approximate or absent).
//
// Before anything runs, the command is analysed once (package safety):
// safety rules that block mistakes such as blind `git add -A` or `rm -rf /`,
// then an optional permission profile; the audit log (Config.Audit) records
// every call, never its output, with secrets redacted.
package engine
