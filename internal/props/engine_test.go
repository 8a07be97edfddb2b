package props

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"pgregory.net/rapid"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// Engine timings of the state machine: short, so a run takes a second or
// two (yields are at most the timeout), yet long enough that the quick
// commands ("echo x", "sleep 30 & …; echo done") end before the timeout
// on a loaded machine: at load 20 on 2 cores they took up to 166 ms, more
// than half the 300 ms this was.
const (
	smTimeout = time.Second
	smGrace   = 150 * time.Millisecond
)

// fgKinds are the foreground commands; each writes the pids of the
// processes it starts into files named pid*.
var fgKinds = map[string]string{
	"quick":      "echo x",
	"fail":       "echo bad; exit 3",
	"sleepy":     "echo $$ > pid; echo partial; sleep 30",
	"leftover":   "sleep 30 & echo $! > pid; echo done",
	"termignore": "trap '' TERM; sleep 30 & echo $! > pid; echo $$ > pid2; wait",
}

// readLoop echoes each line of its stdin once, then "eof".
const readLoop = `while read l; do echo "got:$l"; done; echo eof`

// yieldKinds are foreground commands called with Input.YieldMS; each
// outlives its yield (the shortest sleeps 1.5 s, the longest yield is the
// 1 s timeout). yread has stdin "pipe".
var yieldKinds = map[string]string{
	"ydone": "echo $$ > pid; echo one; sleep 1.5; echo two",
	"yfail": "echo $$ > pid; echo one; sleep 1.5; echo two; exit 4",
	"ylong": "sleep 30 & echo $! > pid; echo $$ > pid2; echo one; wait",
	"yread": "echo $$ > pid; echo ready; " + readLoop,
}

// bgKinds are the background commands; read and linger have stdin "pipe"
// (linger runs on after its input closed).
var bgKinds = map[string]string{
	"short":   "echo hi; sleep 0.05",
	"failing": "echo bad; exit 5",
	"long":    "sleep 30 & echo $! > pid; echo $$ > pid2; wait",
	"read":    readLoop,
	"linger":  readLoop + "; sleep 30 & echo $! > pid; wait",
}

// fixedOutput is the output of the kinds that read no input when they run
// to their end.
var fixedOutput = map[string]string{
	"short": "hi\n", "failing": "bad\n", "long": "",
	"ydone": "one\ntwo\n", "yfail": "one\ntwo\n", "ylong": "one\n",
	// Foreground kinds that yield at the timeout (OnTimeoutBackground).
	"sleepy": "partial\n", "termignore": "", "leftover": "done\n",
}

// exitCode is the exit code of the kinds that fail on their own.
var exitCode = map[string]int{"failing": 5, "yfail": 4}

// endsAlone lists the job kinds that end without input, a kill or a
// shutdown (within two seconds).
var endsAlone = map[string]bool{"short": true, "failing": true, "ydone": true, "yfail": true}

// fgCall is one foreground call and what happened around it.
type fgCall struct {
	kind     string
	in       engine.Input
	dir      string
	cancel   context.CancelFunc
	cancelAt atomic.Int64 // unix nanos of the cancel request, 0 if none
	calledAt atomic.Int64 // when Run was entered
	reports  atomic.Int32
	res      atomic.Pointer[engine.Result] // set before reports counts it
	result   chan engine.Result
	adopted  bool // its result was seen by the machine (adopt)
}

// bgJob is a background job: started in the background, or a foreground
// call that yielded. The stdin fields model what its input was sent.
type bgJob struct {
	kind   string
	dir    string
	conv   string
	res    engine.Result
	soFar  string          // a yielded call's output before it moved to the background
	killed *engine.JobInfo // the state Kill returned

	pipe      bool
	lines     []string // complete lines written, in order
	partial   string   // written after the last newline
	closed    bool     // a Write closed its stdin
	ended     bool     // the machine saw it end (after closing its stdin)
	confirmed int      // bytes of its expected output the machine saw
}

func (j *bgJob) tc() engine.ToolContext { return engine.ToolContext{ConversationID: j.conv} }

// want is the output j prints when it runs to its end (with what was
// written to it so far, for one that reads its input).
func (j *bgJob) want() string {
	if !j.pipe {
		return fixedOutput[j.kind]
	}
	var b strings.Builder
	if j.kind == "yread" {
		b.WriteString("ready\n")
	}
	for _, l := range j.lines {
		b.WriteString("got:" + l + "\n")
	}
	if j.closed {
		b.WriteString("eof\n")
	}
	return b.String()
}

// machine is the engine under test and the model of what was asked of it.
type machine struct {
	t           *rapid.T
	e           *engine.Engine
	root        string
	onTimeoutBg bool // Config.OnTimeout is OnTimeoutBackground
	calls       []*fgCall
	jobs        []*bgJob
	shutdownAt  time.Time // when Shutdown was called
	shutdownOK  time.Time // when it returned
	wg          sync.WaitGroup
	n           int
	seq         int // names the lines written
}

func (m *machine) dir() string {
	m.n++
	d := filepath.Join(m.root, "c"+strconv.Itoa(m.n))
	if err := os.Mkdir(d, 0o700); err != nil {
		m.t.Fatal(err)
	}
	return d
}

func (m *machine) startFg(kind string) {
	m.call(kind, engine.Input{Command: fgKinds[kind]})
}

// startYield starts a call that yields after 40 ms, 150 ms, or at the
// 1 s timeout (a yield_ms beyond it).
func (m *machine) startYield(kind string) {
	in := engine.Input{Command: yieldKinds[kind], YieldMS: rapid.SampledFrom([]int64{40, 150, 2000}).Draw(m.t, "yield_ms")}
	if kind == "yread" {
		in.Stdin = engine.StdinPipe
	}
	c := m.call(kind, in)
	if !rapid.Bool().Draw(m.t, "await yield") {
		return
	}
	// Wait for the call to return, and write to the job it became.
	waitCalls(m.t, []*fgCall{c}, 20*time.Second)
	m.adopt()
	if kind == "yread" && c.res.Load().Status == engine.StatusStarted {
		j := m.jobs[len(m.jobs)-1] // adopt appended it
		for range rapid.IntRange(0, 3).Draw(m.t, "writes") {
			m.write(j)
		}
	}
}

func (m *machine) call(kind string, in engine.Input) *fgCall {
	c := &fgCall{kind: kind, in: in, dir: m.dir(), result: make(chan engine.Result, 4)}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	m.calls = append(m.calls, c)
	m.wg.Go(func() {
		c.calledAt.Store(time.Now().UnixNano())
		r := m.e.Run(ctx, engine.ToolContext{WorkingDir: c.dir, ConversationID: "props"}, in)
		c.res.Store(&r)
		c.reports.Add(1)
		c.result <- r
	})
	return c
}

func (m *machine) startBg(kind string) *bgJob {
	j := &bgJob{kind: kind, dir: m.dir(), pipe: kind == "read" || kind == "linger"}
	in := engine.Input{Command: bgKinds[kind], Mode: engine.ModeBackground}
	if j.pipe {
		in.Stdin = engine.StdinPipe
	}
	j.res = m.e.Run(context.Background(), engine.ToolContext{WorkingDir: j.dir}, in)
	m.jobs = append(m.jobs, j)
	switch {
	case !m.shutdownOK.IsZero():
		if j.res.Status != engine.StatusError || !errors.Is(j.res.Err, engine.ErrShutdown) {
			m.t.Fatalf("background start after shutdown: %s %q", j.res.Status, j.res.Output)
		}
	case j.res.Status != engine.StatusStarted && !(m.shuttingDown() && errors.Is(j.res.Err, engine.ErrShutdown)):
		m.t.Fatalf("background start: %s %q", j.res.Status, j.res.Output)
	}
	return j
}

// startStdin starts a job that reads its input and writes to it a few
// times.
func (m *machine) startStdin(kind string) {
	j := m.startBg(kind)
	if j.res.Status != engine.StatusStarted {
		return
	}
	for range rapid.IntRange(0, 3).Draw(m.t, "writes") {
		m.write(j)
	}
}

func (m *machine) shuttingDown() bool { return !m.shutdownAt.IsZero() }

// mayYield reports whether call c may move to the background.
func (m *machine) mayYield(c *fgCall) bool {
	if c.in.YieldMS > 0 {
		return true
	}
	return m.onTimeoutBg && (c.kind == "sleepy" || c.kind == "termignore" || c.kind == "leftover")
}

// yieldAfter is when call c yields.
func (m *machine) yieldAfter(c *fgCall) time.Duration {
	if c.in.YieldMS > 0 {
		return min(time.Duration(c.in.YieldMS)*time.Millisecond, smTimeout)
	}
	return smTimeout
}

// adopt turns the calls that returned as started into jobs, checking
// their results: the output so far (a prefix of the command's output, in
// whole lines) and the line that names the job.
func (m *machine) adopt() {
	t := m.t
	for _, c := range m.calls {
		r := c.res.Load()
		if c.adopted || r == nil {
			continue
		}
		c.adopted = true
		if r.Status != engine.StatusStarted {
			continue
		}
		if !m.mayYield(c) {
			t.Fatalf("%s moved to the background: %q", c.kind, r.Output)
		}
		after := m.yieldAfter(c)
		send := ""
		if c.kind == "yread" { // stdin "pipe": the line says how to send input
			send = ", send it input with bash_write"
		}
		line := "[command still running after " + after.String() + ": moved to background as " + r.JobID +
			"; read it with bash_output" + send + ", stop it with bash_kill]"
		soFar, ok := strings.CutSuffix(r.Output, line)
		if !ok || !strings.HasPrefix(r.JobID, "job-") || r.PID <= 0 || r.OutputFile == "" {
			t.Fatalf("%s yielded: %+v", c.kind, *r)
		}
		want := fixedOutput[c.kind]
		if c.kind == "yread" {
			want = "ready\n"
		}
		if (soFar != "" && !strings.HasSuffix(soFar, "\n")) || !strings.HasPrefix(want, soFar) {
			t.Fatalf("%s yielded with output %q, want a prefix of %q in lines", c.kind, soFar, want)
		}
		if d := time.Duration(r.DurationMS) * time.Millisecond; d < after-10*time.Millisecond {
			t.Fatalf("%s yielded after %v, want %v", c.kind, d, after)
		}
		j := &bgJob{kind: c.kind, dir: c.dir, conv: "props", res: *r, soFar: soFar, pipe: c.in.Stdin == engine.StdinPipe}
		m.jobs = append(m.jobs, j)
		if !m.shuttingDown() {
			m.awaitListed(j)
		}
	}
}

// awaitListed checks that yielded job j is listed: at once, since the
// supervisor knows the job by its new id before the call returns it.
func (m *machine) awaitListed(j *bgJob) {
	if _, err := m.e.Job(j.tc(), j.res.JobID); err != nil {
		m.t.Fatalf("yielded job %s, right after the call returned: %v", j.res.JobID, err)
	}
}

// started lists the jobs that started (adopting the yields first).
func (m *machine) started() []*bgJob {
	m.adopt()
	var js []*bgJob
	for _, j := range m.jobs {
		if j.res.Status == engine.StatusStarted {
			js = append(js, j)
		}
	}
	return js
}

func (m *machine) cancelOne() {
	var open []*fgCall
	for _, c := range m.calls {
		if c.cancelAt.Load() == 0 {
			open = append(open, c)
		}
	}
	if len(open) == 0 {
		return
	}
	// Draw an index: rapid logs drawn values, and formatting a call would
	// read its atomics while its goroutine writes them.
	c := open[rapid.IntRange(0, len(open)-1).Draw(m.t, "cancel")]
	c.cancelAt.Store(time.Now().UnixNano())
	c.cancel()
}

func (m *machine) killOne() {
	started := m.started()
	if len(started) == 0 {
		return
	}
	j := started[rapid.IntRange(0, len(started)-1).Draw(m.t, "kill")]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Another conversation cannot reach it.
	if _, err := m.e.Kill(ctx, engine.ToolContext{ConversationID: "nobody"}, j.res.JobID); !errors.Is(err, engine.ErrNoSuchJob) && !(m.shuttingDown() && errors.Is(err, engine.ErrShutdown)) {
		m.t.Fatalf("Kill(%s) from another conversation: %v", j.res.JobID, err)
	}
	info, err := m.e.Kill(ctx, j.tc(), j.res.JobID)
	if err != nil {
		if m.shuttingDown() && errors.Is(err, engine.ErrShutdown) {
			return
		}
		m.t.Fatalf("Kill(%s): %v", j.res.JobID, err)
	}
	if info.Status == engine.JobRunning {
		m.t.Fatalf("Kill returned a running job: %+v", info)
	}
	if j.killed != nil && (j.killed.Status != info.Status || j.killed.Reason != info.Reason) {
		m.t.Fatalf("second Kill changed the state: %+v then %+v", *j.killed, info)
	}
	if j.killed == nil {
		j.killed = &info
	}
}

// writeOne writes to a started job, one with stdin "pipe" or not.
func (m *machine) writeOne() {
	started := m.started()
	if len(started) == 0 {
		return
	}
	m.write(started[rapid.IntRange(0, len(started)-1).Draw(m.t, "write to")])
}

// write sends job j lines, a partial line, or EOF (or writes from another
// conversation), and checks Write's answer against the model: a job that
// reads its input takes everything until it ends; one whose input was
// closed answers ErrStdinClosed while it runs and ErrJobEnded after; one
// without stdin "pipe" answers ErrNoStdin. Writes that close the input
// wait for the job's "eof" (and its end, unless it lingers) and check its
// output then; others may wait for the echo.
func (m *machine) write(j *bgJob) {
	t := m.t
	op := rapid.SampledFrom([]string{"lines", "lines", "partial", "close", "lines+close", "other conversation"}).Draw(t, "write")
	var data string
	switch op {
	case "lines", "lines+close":
		for range rapid.IntRange(1, 3).Draw(t, "lines") {
			m.seq++
			data += "l" + strconv.Itoa(m.seq) + "\n"
		}
	case "partial", "other conversation":
		m.seq++
		data = "p" + strconv.Itoa(m.seq)
	}
	closing := op == "close" || op == "lines+close"
	tc := j.tc()
	if op == "other conversation" {
		tc.ConversationID = "nobody"
	}
	var allowed []error // nil: success
	switch {
	case op == "other conversation":
		allowed = []error{engine.ErrNoSuchJob}
		if m.shuttingDown() {
			allowed = append(allowed, engine.ErrShutdown)
		}
	case m.shuttingDown():
		allowed = []error{engine.ErrShutdown, engine.ErrJobEnded}
	case !j.pipe:
		allowed = []error{engine.ErrNoStdin}
		if j.killed != nil || endsAlone[j.kind] {
			allowed = append(allowed, engine.ErrJobEnded)
		}
	case j.killed != nil || j.ended:
		allowed = []error{engine.ErrJobEnded}
	case j.closed: // a lingering job, still running
		allowed = []error{engine.ErrStdinClosed}
	default:
		allowed = []error{nil}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := m.e.Write(ctx, tc, j.res.JobID, []byte(data), closing)
	ok := false
	for _, a := range allowed {
		if (a == nil && err == nil) || (a != nil && errors.Is(err, a)) {
			ok = true
		}
	}
	if !ok {
		t.Fatalf("Write(%s %s, %q, close %v) to a %s job (closed %v, killed %v, shutdown %v): %v, want one of %v",
			tc.ConversationID, j.res.JobID, data, closing, j.kind, j.closed, j.killed != nil, m.shuttingDown(), err, allowed)
	}
	if err != nil {
		return
	}
	text := j.partial + data
	for {
		l, rest, found := strings.Cut(text, "\n")
		if !found {
			break
		}
		j.lines, text = append(j.lines, l), rest
	}
	j.partial = text
	if closing {
		// read ignores a last line without a newline.
		j.closed, j.partial = true, ""
	}
	switch {
	case closing && j.kind != "linger":
		info := m.waitEnd(j)
		if info.Status != engine.JobCompleted {
			t.Fatalf("%s job %s ended %s/%s after its input closed", j.kind, j.res.JobID, info.Status, info.Reason)
		}
		j.ended = true
		m.checkOutput(j, info)
	case closing, rapid.Bool().Draw(t, "await echo"):
		m.awaitOutput(j)
	}
}

// output returns job j's whole output as the model sees it (a yielded
// call's output so far, then its file) and the file's completion line,
// if any.
func (m *machine) output(j *bgJob) (string, string) {
	b, err := os.ReadFile(j.res.OutputFile)
	if err != nil {
		m.t.Fatal(err)
	}
	out, line, _ := strings.Cut(string(b), "\n\n[background process ")
	if line != "" {
		line = "[background process " + line
	}
	return j.soFar + out, line
}

// awaitOutput waits until running job j printed everything the model
// expects of it so far.
func (m *machine) awaitOutput(j *bgJob) {
	want := j.want()
	got, read := "", false
	testenv.Eventually(m.t, 20*time.Second, func() bool {
		if read { // block until output beyond what was read (or a second)
			_, err := m.e.WaitOutput(context.Background(), j.tc(), j.res.JobID, int64(len(got)-len(j.soFar)), time.Second)
			if err != nil {
				m.t.Fatalf("WaitOutput(%s): %v", j.res.JobID, err)
			}
		}
		read = true
		var line string
		got, line = m.output(j)
		if line != "" || !strings.HasPrefix(want, got) {
			m.t.Fatalf("%s job %s: output %q then %q, want %q so far", j.kind, j.res.JobID, got, line, want)
		}
		return got == want
	}, "%s job %s: output %q, want %q", j.kind, j.res.JobID, testenv.Last(&got), want)
	j.confirmed = len(want)
}

// waitEnd waits for job j to end.
func (m *machine) waitEnd(j *bgJob) engine.JobInfo {
	var info engine.JobInfo
	testenv.Eventually(m.t, 20*time.Second, func() bool {
		var err error
		if info, err = m.e.WaitOutput(context.Background(), j.tc(), j.res.JobID, 1<<40, time.Second); err != nil {
			m.t.Fatalf("job %s: %v", j.res.JobID, err)
		}
		return info.Status != engine.JobRunning
	}, "%s job %s still running", j.kind, j.res.JobID)
	return info
}

func (m *machine) shutdown() {
	if m.shuttingDown() {
		return
	}
	m.shutdownAt = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.e.Shutdown(ctx); err != nil {
		m.t.Fatalf("Shutdown: %v", err)
	}
	m.shutdownOK = time.Now()
}

// checkFg checks that a foreground call reported exactly once with a
// status consistent with what happened to it.
func (m *machine) checkFg(c *fgCall, r engine.Result) {
	t := m.t
	called := time.Unix(0, c.calledAt.Load())
	cancelled := c.cancelAt.Load() != 0
	isShutdownErr := errors.Is(r.Err, engine.ErrShutdown)
	if !m.shutdownOK.IsZero() && called.After(m.shutdownOK) {
		if r.Status != engine.StatusError || !isShutdownErr {
			t.Fatalf("%s called after shutdown: %s %q", c.kind, r.Status, r.Output)
		}
		return
	}
	switch r.Status {
	case engine.StatusStarted:
		if !c.adopted {
			t.Fatalf("%s: started but not adopted", c.kind)
		}
		return // adopt checked it
	case engine.StatusError:
		if !(m.shuttingDown() && isShutdownErr) {
			t.Fatalf("%s: error %v %q", c.kind, r.Err, r.Output)
		}
		return
	case engine.StatusCancelled:
		switch {
		case isShutdownErr && m.shuttingDown():
		case errors.Is(r.Err, context.Canceled) && cancelled:
		default:
			t.Fatalf("%s: cancelled (%v) without a cancel (%v) or shutdown (%v): %q", c.kind, r.Err, cancelled, m.shuttingDown(), r.Output)
		}
		if !strings.HasPrefix(r.Output, "[command cancelled]\n") {
			t.Fatalf("%s: cancelled output %q", c.kind, r.Output)
		}
		return
	case engine.StatusTimedOut:
		if m.mayYield(c) {
			// A yield is refused only while the engine shuts down (the
			// conversation's job cap is never reached here).
			after := m.yieldAfter(c)
			const refused = "\n[it could not move to the background: engine is shut down: the engine or the conversation is ending]"
			if !m.shuttingDown() || !strings.HasPrefix(r.Output, "[command timed out after "+after.String()+"]\n") || !strings.HasSuffix(r.Output, refused) {
				t.Fatalf("%s (yield after %v, shutdown %v) timed out: %q", c.kind, after, m.shuttingDown(), r.Output)
			}
			return
		}
		if c.kind != "sleepy" && c.kind != "termignore" {
			t.Fatalf("%s timed out: %q", c.kind, r.Output)
		}
		if time.Duration(r.DurationMS)*time.Millisecond < smTimeout-10*time.Millisecond {
			t.Fatalf("%s timed out after %d ms", c.kind, r.DurationMS)
		}
		if !strings.HasPrefix(r.Output, "[command timed out after "+smTimeout.String()+"]\n") {
			t.Fatalf("%s: timeout output %q", c.kind, r.Output)
		}
		// termignore ignores TERM once its shell has set the trap, which it
		// does before it writes pid2: a TERM before that (a start slower
		// than the timeout) ends it.
		if _, err := os.Stat(filepath.Join(c.dir, "pid2")); c.kind == "termignore" && r.Signal != "SIGKILL" && (err == nil || r.Signal != "SIGTERM") {
			t.Fatalf("termignore ended by %q (pid2 written: %v)", r.Signal, err == nil)
		}
		return
	}
	// Ended on its own. A yield kind can do so only if the engine did not
	// act on the yield in the 1.5 s its command sleeps (a loaded
	// machine); then its output is whole.
	want := map[string]struct {
		status engine.Status
		output string
	}{
		"quick":    {engine.StatusOK, "x\n"},
		"fail":     {engine.StatusFailed, "[command failed: exit code 3]\nbad\n"},
		"leftover": {engine.StatusOK, "done\n[killed processes left running after the shell exited: "},
		"ydone":    {engine.StatusOK, "one\ntwo\n"},
		"yfail":    {engine.StatusFailed, "[command failed: exit code 4]\none\ntwo\n"},
	}[c.kind]
	if want.status == "" || r.Status != want.status || !strings.HasPrefix(r.Output, want.output) {
		t.Fatalf("%s: %s %q (cancelled %v, shutdown %v)", c.kind, r.Status, r.Output, cancelled, m.shuttingDown())
	}
	// leftover's child is named sleep once it has exec'd, and bash (the
	// forked shell) until then: the shell may exit and the engine kill
	// the child before it does (seen at load 24).
	if rest := strings.TrimPrefix(r.Output, want.output); c.kind == "leftover" && !strings.HasPrefix(rest, "sleep (pid ") && !strings.HasPrefix(rest, "bash (pid ") {
		t.Fatalf("%s: %s %q, want the leftover sleep (or its shell before the exec) named", c.kind, r.Status, r.Output)
	}
	if c.in.YieldMS > 0 && r.Output != want.output {
		t.Fatalf("%s: %s %q, want %q", c.kind, r.Status, r.Output, want.output)
	}
}

// checkJob checks a job's final state and its output: the file ends with
// one completion line, and the output so far plus the file's is what the
// command prints (all of it when it ended on its own; a prefix when it was
// killed, at least what the machine saw before), each line once.
func (m *machine) checkJob(j *bgJob, final map[string]engine.JobInfo) {
	t := m.t
	if j.res.Status != engine.StatusStarted {
		return
	}
	info, ok := final[j.conv+"/"+j.res.JobID]
	if !ok {
		t.Fatalf("job %s/%s missing from AllJobs()", j.conv, j.res.JobID)
	}
	if info.PID != j.res.PID || info.OutputFile != j.res.OutputFile {
		t.Fatalf("job %s: started as pid %d with %s, listed as %+v", j.res.JobID, j.res.PID, j.res.OutputFile, info)
	}
	allowed := map[string]bool{}
	switch {
	case j.kind == "short", j.kind == "ydone", j.pipe && j.closed && j.kind != "linger":
		allowed["completed/"] = true
	case exitCode[j.kind] != 0:
		allowed["failed/"] = true
	}
	if j.killed != nil {
		allowed["killed/killed by request"] = true
		if info.Status != j.killed.Status || info.Reason != j.killed.Reason {
			t.Fatalf("job %s: Kill said %s/%s, Jobs says %s/%s", info.JobID, j.killed.Status, j.killed.Reason, info.Status, info.Reason)
		}
	}
	if !j.ended {
		allowed["killed/engine shutdown"] = true
	}
	got := string(info.Status) + "/" + info.Reason
	if !allowed[got] {
		t.Fatalf("%s job %s ended %s (allowed %v)", j.kind, info.JobID, got, allowed)
	}
	m.checkOutput(j, info)
}

// checkOutput checks ended job j's output file against the model.
func (m *machine) checkOutput(j *bgJob, info engine.JobInfo) {
	t := m.t
	b, err := os.ReadFile(j.res.OutputFile)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "[background process "); n != 1 {
		t.Fatalf("job %s: %d completion lines in %q", info.JobID, n, b)
	}
	line := map[engine.JobStatus]string{
		engine.JobCompleted: "[background process completed]",
		engine.JobFailed:    fmt.Sprintf("[background process failed: exit code %d]", exitCode[j.kind]),
		engine.JobKilled:    "[background process killed: " + info.Reason + "]",
	}[info.Status]
	out, ok := strings.CutSuffix(string(b), "\n\n"+line)
	if line == "" || !ok {
		t.Fatalf("job %s (%s/%s): file %q", info.JobID, info.Status, info.Reason, b)
	}
	whole, want := j.soFar+out, j.want()
	switch {
	case info.Status == engine.JobCompleted || info.Status == engine.JobFailed:
		if whole != want {
			t.Fatalf("%s job %s (%s): output %q + %q, want %q", j.kind, info.JobID, info.Status, j.soFar, out, want)
		}
	case !strings.HasPrefix(want, whole) || len(whole) < j.confirmed:
		t.Fatalf("%s job %s (%s): output %q + %q, want a prefix of %q of at least %d bytes", j.kind, info.JobID, info.Status, j.soFar, out, want, j.confirmed)
	}
}

// engineRuns counts the state machine's iterations; failing is set once
// one failed, so rapid's shrinking runs are never skipped.
var (
	engineRuns atomic.Int64
	failing    atomic.Bool
)

// engineRunLimit is a quarter of -rapid.checks (at least 5): each iteration
// starts an engine and real processes.
func engineRunLimit() int64 {
	checks := 100
	if f := flag.Lookup("rapid.checks"); f != nil {
		if n, err := strconv.Atoi(f.Value.String()); err == nil {
			checks = n
		}
	}
	return int64(max(5, checks/4))
}

// TestEngineStateMachine drives one engine through random sequences of
// foreground and background starts, calls that yield (Input.YieldMS, and
// the timeout with Config.OnTimeout "background"), jobs that read their
// stdin and writes to them (Write: lines, partial lines, EOF, from another
// conversation), cancellations, kills, pauses and a shutdown. Every call
// reports exactly once with a status consistent with what happened; a
// yielded call's output so far plus its job's file is the command's
// output, nothing lost or repeated; a job that reads its input echoes each
// line written once, in order; Write answers as the model predicts; the
// engine lists exactly the jobs that started; afterwards no process the
// commands started is alive and no goroutine or fd is left.
func TestEngineStateMachine(t *testing.T) {
	// Warm up process-wide singletons (the shared /dev/null) before
	// counting fds.
	warm, err := engine.New(engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	warm.Run(context.Background(), engine.ToolContext{WorkingDir: t.TempDir()}, engine.Input{Command: "true"})
	_ = warm.Shutdown(context.Background())
	limit := engineRunLimit()
	engineRuns.Store(0)
	rapid.Check(t, func(rt *rapid.T) {
		if engineRuns.Add(1) > limit && !failing.Load() {
			return
		}
		defer func() {
			if r := recover(); r != nil || rt.Failed() {
				failing.Store(true)
				if r != nil {
					panic(r)
				}
			}
		}()
		runMachine(t, rt)
	})
}

func runMachine(tt *testing.T, t *rapid.T) {
	ignore := goleak.IgnoreCurrent()
	fds := countFDs()
	root, err := os.MkdirTemp(tt.TempDir(), "sm-")
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.DefaultConfig()
	cfg.Timeout, cfg.Lifecycle.Grace, cfg.Lifecycle.CleanupWait, cfg.Lifecycle.DrainWait = smTimeout, smGrace, 3*time.Second, 100*time.Millisecond
	cfg.BackgroundLifetime = 30 * time.Second
	cfg.OutputDir, cfg.KeepFiles = filepath.Join(root, "out"), true
	cfg.OnTimeout = engine.OnTimeoutKill
	onTimeoutBg := rapid.Bool().Draw(t, "on timeout background")
	if onTimeoutBg {
		cfg.OnTimeout = engine.OnTimeoutBackground
	}
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := &machine{t: t, e: e, root: root, onTimeoutBg: onTimeoutBg}
	defer func() {
		m.shutdown()
		for _, c := range m.calls {
			c.cancel()
		}
		m.wg.Wait()
	}()
	fgNames := []string{"quick", "fail", "sleepy", "leftover", "termignore"}
	yieldNames := []string{"ydone", "yfail", "ylong", "yread"}
	bgNames := []string{"short", "failing", "long"}
	steps := rapid.IntRange(1, 10).Draw(t, "steps")
	for range steps {
		switch rapid.SampledFrom([]string{"fg", "fg", "yield", "bg", "stdin", "write", "cancel", "kill", "pause", "shutdown"}).Draw(t, "action") {
		case "fg":
			m.startFg(rapid.SampledFrom(fgNames).Draw(t, "fg"))
		case "yield":
			m.startYield(rapid.SampledFrom(yieldNames).Draw(t, "yield"))
		case "bg":
			m.startBg(rapid.SampledFrom(bgNames).Draw(t, "bg"))
		case "stdin":
			m.startStdin(rapid.SampledFrom([]string{"read", "linger"}).Draw(t, "stdin"))
		case "write":
			m.writeOne()
		case "cancel":
			m.cancelOne()
		case "kill":
			m.killOne()
		case "pause":
			time.Sleep(time.Duration(rapid.IntRange(0, 120).Draw(t, "ms")) * time.Millisecond)
		case "shutdown":
			m.shutdown()
		}
	}
	// Foreground calls end on their own (timeouts, yields) or by shutdown;
	// every one must report, once. Jobs that end on their own may be
	// left to do so.
	if rapid.Bool().Draw(t, "wait before shutdown") {
		waitCalls(t, m.calls, 20*time.Second)
		for _, j := range m.started() {
			if endsAlone[j.kind] && !m.shuttingDown() {
				m.waitEnd(j)
			}
		}
	}
	m.shutdown()
	waitCalls(t, m.calls, 30*time.Second)
	m.adopt()
	for _, c := range m.calls {
		r := <-c.result
		if n := c.reports.Load(); n != 1 {
			t.Fatalf("%s reported %d times", c.kind, n)
		}
		m.checkFg(c, r)
	}
	// The engine lists exactly the jobs that started, none running.
	final := map[string]engine.JobInfo{}
	for _, j := range e.AllJobs() {
		k := j.ConversationID + "/" + j.JobID
		if _, dup := final[k]; dup {
			t.Fatalf("job %s listed twice", k)
		}
		if j.Status == engine.JobRunning {
			t.Fatalf("job %s running after shutdown", k)
		}
		final[k] = j
	}
	if n := len(m.started()); n != len(final) {
		t.Fatalf("%d jobs started, the engine lists %d: %+v", n, len(final), final)
	}
	for _, j := range m.jobs {
		m.checkJob(j, final)
	}
	// Nothing left: processes (by the pids the commands recorded and the
	// leaders' pids), goroutines, fds.
	var pids []int
	for _, c := range m.calls {
		pids = append(pids, recorded(c.dir)...)
	}
	for _, j := range m.jobs {
		pids = append(pids, recorded(j.dir)...)
		if j.res.PID > 0 {
			pids = append(pids, j.res.PID)
		}
	}
	var pid int
	testenv.Eventually(t, 5*time.Second, func() bool {
		for _, pid = range pids {
			if liveProcess(pid) {
				return false
			}
		}
		return true
	}, "process %d survived", testenv.Last(&pid))
	m.wg.Wait()
	var leak error
	testenv.Eventually(t, 10*time.Second, func() bool {
		leak = goleak.Find(ignore) // retries for about a second itself
		return leak == nil
	}, "goroutines left: %v", testenv.Last(&leak))
	var after int
	testenv.Eventually(t, 3*time.Second, func() bool {
		after = countFDs()
		return after <= fds
	}, "fds: %d before, %d after", fds, testenv.Last(&after))
}

// waitCalls waits until every call has reported or fails the test.
func waitCalls(t *rapid.T, calls []*fgCall, within time.Duration) {
	var kind string
	testenv.Eventually(t, within, func() bool {
		for _, c := range calls {
			if c.reports.Load() == 0 {
				kind = c.kind
				return false
			}
		}
		return true
	}, "%s call did not report (lost result)", testenv.Last(&kind))
}

func recorded(dir string) []int {
	files, _ := filepath.Glob(filepath.Join(dir, "pid*"))
	var pids []int
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// liveProcess reports whether pid is alive and not a zombie.
func liveProcess(pid int) bool {
	st, err := proc.ReadStat(pid)
	return err == nil && st.State != 'Z' && st.State != 'X'
}

func countFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}
