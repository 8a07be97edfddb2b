package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// With OnTimeout background, a command that reaches its timeout yields:
// the result has what it printed so far, the job's file gets the rest and
// the completion line, and nothing is lost or repeated.
func TestYieldOnTimeout(t *testing.T) {
	e := newEngine(t, func(c *engine.Config) { c.Timeout, c.OnTimeout = 2*time.Second, engine.OnTimeoutBackground })
	tc := tc(t)
	r := e.Run(context.Background(), tc, engine.Input{Command: "for i in $(seq 5); do echo $i; sleep 1; done"})
	if r.Status != engine.StatusStarted || r.JobID == "" || r.PID == 0 || r.OutputFile == "" {
		t.Fatalf("%+v", r)
	}
	const line = "[command still running after 2s: moved to background as job-1; read it with bash_output, stop it with bash_kill]"
	if !strings.HasSuffix(r.Output, "\n"+line) {
		t.Fatalf("output %q", r.Output)
	}
	before := strings.Fields(strings.TrimSuffix(r.Output, line))
	if len(before) < 1 || len(before) > 3 || before[0] != "1" {
		t.Fatalf("output so far %q", before)
	}
	j := waitJob(t, e, r.JobID, tc.ConversationID)
	if j.Status != engine.JobCompleted {
		t.Fatalf("job %+v", j)
	}
	b, _ := os.ReadFile(r.OutputFile)
	after := strings.TrimSuffix(string(b), "\n\n[background process completed]")
	if after == string(b) {
		t.Fatalf("no completion line in %q", b)
	}
	all := append(before, strings.Fields(after)...)
	if strings.Join(all, " ") != "1 2 3 4 5" {
		t.Fatalf("output before %q and after %q: want 1..5 once each", before, after)
	}
	// A call may yield earlier; without OnTimeout the timeout still kills.
	e2 := newEngine(t, func(c *engine.Config) { c.Timeout = time.Second })
	r = e2.Run(context.Background(), tc, engine.Input{Command: "echo a; sleep 30"})
	if r.Status != engine.StatusTimedOut {
		t.Fatalf("kill stays the default: %+v", r)
	}
	r = e2.Run(context.Background(), tc, engine.Input{Command: "echo early; sleep 30", YieldMS: 300})
	if r.Status != engine.StatusStarted || !strings.HasPrefix(r.Output, "early\n[command still running after 300ms: moved to background as job-1;") {
		t.Fatalf("yield_ms: %+v", r)
	}
	if _, err := e2.Kill(context.Background(), tc, r.JobID); err != nil {
		t.Fatal(err)
	}
}

// A yield over the conversation's background job cap ends the command as a
// timeout and says why.
func TestYieldRefusedAtTheCap(t *testing.T) {
	e := newEngine(t, func(c *engine.Config) {
		c.Timeout, c.OnTimeout = 500*time.Millisecond, engine.OnTimeoutBackground
		c.Admission.MaxJobsPerConversation = 1
	})
	tc := tc(t)
	bg := e.Run(context.Background(), tc, engine.Input{Command: "sleep 30", Mode: engine.ModeBackground})
	if bg.Status != engine.StatusStarted {
		t.Fatalf("%+v", bg)
	}
	r := e.Run(context.Background(), tc, engine.Input{Command: "echo x; sleep 30"})
	if r.Status != engine.StatusTimedOut || !strings.Contains(r.Output, "[it could not move to the background: busy: this conversation already has 1 background jobs running") {
		t.Fatalf("%+v", r)
	}
	// The refused yield took no job id.
	r = e.Run(context.Background(), engine.ToolContext{WorkingDir: tc.WorkingDir, ConversationID: "other"}, engine.Input{Command: "true", Mode: engine.ModeBackground})
	if r.JobID != "job-1" {
		t.Fatalf("%+v", r)
	}
	if jobs := e.Jobs(tc); len(jobs) != 1 {
		t.Fatalf("jobs %+v", jobs)
	}
}

// stdin "pipe": a job reads what Write sends.
func TestStdinPipeJob(t *testing.T) {
	e := newEngine(t)
	tc := tc(t)
	r := e.Run(context.Background(), tc, engine.Input{Command: "read x; echo got:$x", Mode: engine.ModeBackground, Stdin: "pipe"})
	if r.Status != engine.StatusStarted {
		t.Fatalf("%+v", r)
	}
	if err := e.Write(context.Background(), tc, r.JobID, []byte("abc\n"), false); err != nil {
		t.Fatal(err)
	}
	j, err := e.WaitOutput(context.Background(), tc, r.JobID, 0, 10*time.Second)
	if err != nil || j.Bytes == 0 {
		t.Fatalf("%+v %v", j, err)
	}
	j = waitJob(t, e, r.JobID, tc.ConversationID)
	out, _ := e.JobOutput(tc, r.JobID, 0, 0, 0)
	if !strings.HasPrefix(out.Data, "got:abc\n") {
		t.Fatalf("%q", out.Data)
	}
	// Writes that cannot be delivered say why.
	for name, c := range map[string]struct {
		tc  engine.ToolContext
		id  string
		err error
	}{
		"finished":           {tc, r.JobID, engine.ErrJobEnded},
		"other conversation": {engine.ToolContext{ConversationID: "other"}, r.JobID, engine.ErrNoSuchJob},
		"no such job":        {tc, "job-99", engine.ErrNoSuchJob},
	} {
		if err := e.Write(context.Background(), c.tc, c.id, []byte("x\n"), false); !errors.Is(err, c.err) {
			t.Errorf("%s: %v, want %v", name, err, c.err)
		}
	}
	nopipe := e.Run(context.Background(), tc, engine.Input{Command: "sleep 30", Mode: engine.ModeBackground})
	if err := e.Write(context.Background(), tc, nopipe.JobID, []byte("x\n"), false); !errors.Is(err, engine.ErrNoStdin) || !strings.Contains(err.Error(), `started without stdin "pipe" or tty`) {
		t.Errorf("no pipe: %v", err)
	}
	// Closing stdin is EOF for the job.
	cat := e.Run(context.Background(), tc, engine.Input{Command: "cat; echo eof", Mode: engine.ModeBackground, Stdin: "pipe"})
	if err := e.Write(context.Background(), tc, cat.JobID, []byte("line\n"), true); err != nil {
		t.Fatal(err)
	}
	waitJob(t, e, cat.JobID, tc.ConversationID)
	if out, _ := e.JobOutput(tc, cat.JobID, 0, 0, 0); !strings.HasPrefix(out.Data, "line\neof\n") {
		t.Fatalf("%q", out.Data)
	}
	if err := e.Write(context.Background(), tc, cat.JobID, []byte("x"), false); !errors.Is(err, engine.ErrJobEnded) {
		t.Errorf("after close and exit: %v", err)
	}
	// stdin and tty only where the command can become a job.
	for _, in := range []engine.Input{{Command: "cat", Stdin: "pipe"}, {Command: "cat", TTY: true}, {Command: "cat", Stdin: "file"}, {Command: "true", Mode: engine.ModeBackground, YieldMS: 5}} {
		if r := e.Run(context.Background(), tc, in); r.Status != engine.StatusError || !errors.Is(r.Err, engine.ErrBadInput) {
			t.Errorf("%+v: %+v", in, r)
		}
	}
}

// A yielded command with stdin "pipe" takes input after it yielded.
func TestYieldThenWrite(t *testing.T) {
	e := newEngine(t)
	tc := tc(t)
	r := e.Run(context.Background(), tc, engine.Input{Command: "echo question?; read x; echo answer:$x", Stdin: "pipe", YieldMS: 300})
	if r.Status != engine.StatusStarted || !strings.HasPrefix(r.Output, "question?\n") {
		t.Fatalf("%+v", r)
	}
	if err := e.Write(context.Background(), tc, r.JobID, []byte("42\n"), false); err != nil {
		t.Fatal(err)
	}
	waitJob(t, e, r.JobID, tc.ConversationID)
	if out, _ := e.JobOutput(tc, r.JobID, 0, 0, 0); !strings.HasPrefix(out.Data, "answer:42\n") {
		t.Fatalf("%q", out.Data)
	}
}

// tty: python3 -i on a terminal evaluates what Write sends, and Ctrl-C
// interrupts a sleep.
func TestTTYJob(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 (Debian's python3 package) is needed for the terminal test:", err)
	}
	e := newEngine(t)
	tc := tc(t)
	approved := tc // a REPL fed later needs approval (TestStdinShellAsksAndWritesAreAudited)
	approved.Approved = true
	r := e.Run(context.Background(), approved, engine.Input{Command: py + " -i -q", Mode: engine.ModeBackground, TTY: true})
	if r.Status != engine.StatusStarted {
		t.Fatalf("%+v", r)
	}
	waitFor(t, e, tc, r.JobID, ">>> ")
	if err := e.Write(context.Background(), tc, r.JobID, []byte("1+1\n"), false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, e, tc, r.JobID, ">>> 1+1\n2\n>>> ") // the terminal's text
	if err := e.Write(context.Background(), tc, r.JobID, []byte("import os; os.isatty(0), os.environ['TERM'], os.get_terminal_size()\n"), false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, e, tc, r.JobID, "(True, 'xterm-256color', os.terminal_size(columns=120, lines=40))")
	if err := e.Write(context.Background(), tc, r.JobID, nil, true); err != nil { // ^D
		t.Fatal(err)
	}
	if j := waitJob(t, e, r.JobID, tc.ConversationID); j.Status != engine.JobCompleted {
		t.Fatalf("%+v", j)
	}

	r = e.Run(context.Background(), tc, engine.Input{Command: "echo ready; sleep 60; echo after:$?", Mode: engine.ModeBackground, TTY: true})
	waitFor(t, e, tc, r.JobID, "ready")
	// Until bash runs sleep: a ^C before that is caught by bash's own
	// handler, which then runs sleep anyway (seen once in CI's
	// unprivileged pass: the job still ran 10 s later).
	waitChild(t, r.PID, "sleep")
	start := time.Now()
	if err := e.Write(context.Background(), tc, r.JobID, []byte("\x03"), false); err != nil {
		t.Fatal(err)
	}
	j := waitJob(t, e, r.JobID, tc.ConversationID)
	if time.Since(start) > 20*time.Second || j.Status == engine.JobRunning {
		t.Fatalf("Ctrl-C did not interrupt sleep: %+v after %v", j, time.Since(start))
	}
}

// waitChild waits (at most 10 s) until process pid has a child named
// comm.
func waitChild(t *testing.T, pid int, comm string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		stats, _ := filepath.Glob("/proc/[0-9]*/stat")
		for _, f := range stats {
			b, err := os.ReadFile(f)
			i := strings.LastIndexByte(string(b), ')')
			if err != nil || i < 0 {
				continue
			}
			name := string(b[strings.IndexByte(string(b), '(')+1 : i])
			if fields := strings.Fields(string(b[i+1:])); len(fields) > 1 && fields[1] == fmt.Sprint(pid) && name == comm {
				return
			}
		}
	}
	t.Logf("no child %s of %d after 10 s", comm, pid)
}

// waitFor waits until a job's output contains want.
func waitFor(t *testing.T, e *engine.Engine, tc engine.ToolContext, id, want string) {
	t.Helper()
	var out engine.JobOutput
	testenv.Eventually(t, 20*time.Second, func() bool {
		// Block until output beyond what was read (or a second), then read.
		_, _ = e.WaitOutput(context.Background(), tc, id, out.Size, time.Second)
		var err error
		if out, err = e.JobOutput(tc, id, 0, 0, 0); err != nil {
			t.Fatal(err)
		}
		return strings.Contains(out.Data, want)
	}, "%q not in %q", want, testenv.Last(&out.Data))
}

// Progress reports carry the new output: together, the whole output of a
// command that prints every 100 ms for 3 s (the last report, at the exit,
// has what came after the last tick).
func TestProgressStreamsOutput(t *testing.T) {
	e := newEngine(t, func(c *engine.Config) { c.ProgressInterval = 200 * time.Millisecond })
	var mu sync.Mutex
	var streamed strings.Builder
	var skipped int64
	tc := tc(t)
	tc.Progress = func(p engine.Progress) {
		mu.Lock()
		defer mu.Unlock()
		streamed.WriteString(p.Output)
		skipped += p.Skipped
	}
	r := e.Run(context.Background(), tc, engine.Input{Command: "for i in $(seq 30); do echo line $i; sleep 0.1; done"})
	if r.Status != engine.StatusOK {
		t.Fatalf("%+v", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if streamed.String() != r.Output || skipped != 0 {
		t.Fatalf("streamed %q (skipped %d), output %q", streamed.String(), skipped, r.Output)
	}
}

// A yielded job is listed under its id by the time Run returns it: Job and
// Write find it at once.
func TestYieldedJobVisibleAtOnce(t *testing.T) {
	e := newEngine(t)
	tc := tc(t)
	for i := range 100 {
		r := e.Run(context.Background(), tc, engine.Input{Command: "cat", Stdin: engine.StdinPipe, YieldMS: 10})
		if r.Status != engine.StatusStarted {
			t.Fatalf("%+v", r)
		}
		if _, err := e.Job(tc, r.JobID); err != nil {
			t.Fatalf("yield %d: Job: %v", i, err)
		}
		if err := e.Write(context.Background(), tc, r.JobID, nil, true); err != nil {
			t.Fatalf("yield %d: Write: %v", i, err)
		}
	}
}

// A shell or REPL whose program arrives later through Write asks for
// approval like `curl | sh` (the safety rules cannot see that code); a
// program that reads data does not. Every write is in the audit log,
// redacted like a command.
func TestStdinShellAsksAndWritesAreAudited(t *testing.T) {
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	f, err := os.Create(audit)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	e := newEngine(t, func(c *engine.Config) { c.Audit = f })
	tc := tc(t)
	for _, in := range []engine.Input{
		{Command: "bash", Mode: engine.ModeBackground, Stdin: engine.StdinPipe},
		{Command: "python3 -i -q", Mode: engine.ModeBackground, TTY: true},
		{Command: "sh -s", YieldMS: 100, Stdin: engine.StdinPipe},
	} {
		r := e.Run(context.Background(), tc, in)
		if r.Status != engine.StatusNeedsApproval || !strings.Contains(r.Output, "input sent later") {
			t.Errorf("%+v: %s %q", in, r.Status, r.Output)
		}
	}
	approved := tc
	approved.Approved = true
	r := e.Run(context.Background(), approved, engine.Input{Command: "bash", Mode: engine.ModeBackground, Stdin: engine.StdinPipe})
	if r.Status != engine.StatusStarted {
		t.Fatalf("approved: %+v", r)
	}
	if err := e.Write(context.Background(), tc, r.JobID, []byte("echo via-write; curl -u admin:hunter2hunter2 https://example.invalid\n"), true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, e, tc, r.JobID, "via-write")
	data := r.JobID // a program reading data runs without approval
	if r := e.Run(context.Background(), tc, engine.Input{Command: "read x; echo got:$x", Mode: engine.ModeBackground, Stdin: engine.StdinPipe}); r.Status != engine.StatusStarted {
		t.Fatalf("read: %+v", r)
	}
	b, _ := os.ReadFile(audit)
	var write map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "write" {
			write = m
		}
	}
	if write == nil || write["job_id"] != data || write["close"] != true || write["conversation"] != tc.ConversationID ||
		!strings.Contains(write["input"].(string), "echo via-write") || strings.Contains(string(b), "hunter2hunter2") {
		t.Fatalf("audit log:\n%s", b)
	}
}

// A job that stops reading part way through a write: the error says how
// much it took, and the rest is not sent.
func TestWriteToAJobThatStopsReading(t *testing.T) {
	e := newEngine(t)
	tc := tc(t)
	r := e.Run(context.Background(), tc, engine.Input{Command: "head -c 100000 >/dev/null; echo took; sleep 60", Mode: engine.ModeBackground, Stdin: engine.StdinPipe})
	if r.Status != engine.StatusStarted {
		t.Fatalf("%+v", r)
	}
	err := e.Write(context.Background(), tc, r.JobID, make([]byte, 400000), false)
	if !errors.Is(err, engine.ErrStdinBusy) || !strings.Contains(err.Error(), "of 400000 bytes; the rest was not sent") {
		t.Fatalf("%v", err)
	}
	var took int
	if _, serr := fmt.Sscanf(err.Error()[strings.Index(err.Error(), "after it took ")+len("after it took "):], "%d", &took); serr != nil || took < 100000 || took >= 400000 {
		t.Errorf("took %d (%v): %v", took, serr, err)
	}
	if _, err := e.Kill(context.Background(), tc, r.JobID); err != nil {
		t.Fatal(err)
	}
}

// A terminal job in a sandbox can open its own terminal (/dev/tty), as
// password prompts and pagers do.
func TestTTYInSandbox(t *testing.T) {
	needLandlock(t)
	e := newEngine(t)
	for _, p := range []engine.Profile{engine.ReadOnly, engine.WorkspaceWrite} {
		tc := tc(t)
		tc.Sandbox = engine.Sandbox{Profile: p}
		r := e.Run(context.Background(), tc, engine.Input{Command: "stty size </dev/tty && echo opened >/dev/tty; read -r x </dev/tty; echo got:$x", Mode: engine.ModeBackground, TTY: true})
		if r.Status != engine.StatusStarted {
			t.Fatalf("%s: %+v", p, r)
		}
		waitFor(t, e, tc, r.JobID, "opened")
		if err := e.Write(context.Background(), tc, r.JobID, []byte("abc\r"), false); err != nil {
			t.Fatal(err)
		}
		waitFor(t, e, tc, r.JobID, "got:abc")
		out, _ := e.JobOutput(tc, r.JobID, 0, 0, 0)
		if !strings.HasPrefix(out.Data, "40 120\nopened\nabc\ngot:abc\n") {
			t.Errorf("%s: %q", p, out.Data)
		}
	}
}

// Write with close to a job that exits as soon as it read its input never
// reports an error for input that was delivered (the job's end closes its
// stdin too; the two closes used to race: "close |1: file already
// closed").
func TestWriteCloseRacesJobEnd(t *testing.T) {
	e := newEngine(t)
	tc := tc(t)
	for i := range 30 {
		r := e.Run(context.Background(), tc, engine.Input{Command: "read x; echo got:$x", Stdin: engine.StdinPipe, YieldMS: 10})
		if r.Status != engine.StatusStarted {
			t.Fatalf("%+v", r)
		}
		if err := e.Write(context.Background(), tc, r.JobID, []byte("v\n"), true); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		waitJob(t, e, r.JobID, tc.ConversationID)
		if out, _ := e.JobOutput(tc, r.JobID, 0, 0, 0); !strings.Contains(out.Data, "got:v\n") {
			t.Fatalf("run %d: %q", i, out.Data)
		}
	}
}

// The yield text of a job that takes input says how to send it.
func TestYieldTextNamesWrite(t *testing.T) {
	e := newEngine(t)
	tc := tc(t)
	for _, in := range []engine.Input{
		{Command: "cat", Stdin: engine.StdinPipe, YieldMS: 200},
		{Command: "cat", TTY: true, YieldMS: 200},
		{Command: "sleep 30", YieldMS: 200},
	} {
		r := e.Run(context.Background(), tc, in)
		want := "; read it with bash_output, send it input with bash_write, stop it with bash_kill]"
		if in.Stdin == "" && !in.TTY {
			want = "; read it with bash_output, stop it with bash_kill]"
		}
		if r.Status != engine.StatusStarted || !strings.HasSuffix(r.Output, "moved to background as "+r.JobID+want) {
			t.Errorf("%+v: %q", in, r.Output)
		}
		if _, err := e.Kill(context.Background(), tc, r.JobID); err != nil {
			t.Fatal(err)
		}
	}
}
