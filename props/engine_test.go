package props

import (
	"context"
	"errors"
	"flag"
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
	"github.com/bashvisor/bashvisor/proc"
)

// Engine timings of the state machine: short, so a run takes well under a
// second.
const (
	smTimeout = 300 * time.Millisecond
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

var bgKinds = map[string]string{
	"short":   "echo hi; sleep 0.05",
	"failing": "echo bad; exit 5",
	"long":    "sleep 30 & echo $! > pid; echo $$ > pid2; wait",
}

// fgCall is one foreground call and what happened around it.
type fgCall struct {
	kind     string
	dir      string
	cancel   context.CancelFunc
	cancelAt atomic.Int64 // unix nanos of the cancel request, 0 if none
	calledAt atomic.Int64 // when Run was entered
	reports  atomic.Int32
	result   chan engine.Result
}

type bgJob struct {
	kind   string
	dir    string
	res    engine.Result
	killed *engine.JobInfo // the state Kill returned
	err    error
}

// machine is the engine under test and the model of what was asked of it.
type machine struct {
	t          *rapid.T
	e          *engine.Engine
	root       string
	outDir     string
	calls      []*fgCall
	jobs       []*bgJob
	shutdownAt time.Time // when Shutdown was called
	shutdownOK time.Time // when it returned
	wg         sync.WaitGroup
	n          int
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
	c := &fgCall{kind: kind, dir: m.dir(), result: make(chan engine.Result, 4)}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	m.calls = append(m.calls, c)
	m.wg.Go(func() {
		c.calledAt.Store(time.Now().UnixNano())
		r := m.e.Run(ctx, engine.ToolContext{WorkingDir: c.dir, ConversationID: "props"}, engine.Input{Command: fgKinds[kind]})
		c.reports.Add(1)
		c.result <- r
	})
}

func (m *machine) startBg(kind string) {
	j := &bgJob{kind: kind, dir: m.dir()}
	j.res = m.e.Run(context.Background(), engine.ToolContext{WorkingDir: j.dir}, engine.Input{Command: bgKinds[kind], Mode: engine.ModeBackground})
	m.jobs = append(m.jobs, j)
	switch {
	case !m.shutdownOK.IsZero():
		if j.res.Status != engine.StatusError || !errors.Is(j.res.Err, engine.ErrShutdown) {
			m.t.Fatalf("background start after shutdown: %s %q", j.res.Status, j.res.Output)
		}
	case j.res.Status != engine.StatusStarted && !(m.shuttingDown() && errors.Is(j.res.Err, engine.ErrShutdown)):
		m.t.Fatalf("background start: %s %q", j.res.Status, j.res.Output)
	}
}

func (m *machine) shuttingDown() bool { return !m.shutdownAt.IsZero() }

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
	var started []*bgJob
	for _, j := range m.jobs {
		if j.res.Status == engine.StatusStarted {
			started = append(started, j)
		}
	}
	if len(started) == 0 {
		return
	}
	j := rapid.SampledFrom(started).Draw(m.t, "kill")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	info, err := m.e.Kill(ctx, engine.ToolContext{}, j.res.JobID)
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
		if c.kind != "sleepy" && c.kind != "termignore" {
			t.Fatalf("%s timed out: %q", c.kind, r.Output)
		}
		if time.Duration(r.DurationMS)*time.Millisecond < smTimeout-10*time.Millisecond {
			t.Fatalf("%s timed out after %d ms", c.kind, r.DurationMS)
		}
		if !strings.HasPrefix(r.Output, "[command timed out after 300ms]\n") {
			t.Fatalf("%s: timeout output %q", c.kind, r.Output)
		}
		if c.kind == "termignore" && r.Signal != "SIGKILL" {
			t.Fatalf("termignore ended by %q", r.Signal)
		}
		return
	}
	want := map[string]struct {
		status engine.Status
		output string
	}{
		"quick":    {engine.StatusOK, "x\n"},
		"fail":     {engine.StatusFailed, "[command failed: exit code 3]\nbad\n"},
		"leftover": {engine.StatusOK, "done\n[killed processes left running after the shell exited: sleep (pid "},
	}[c.kind]
	if want.status == "" || r.Status != want.status || !strings.HasPrefix(r.Output, want.output) {
		t.Fatalf("%s: %s %q (cancelled %v, shutdown %v)", c.kind, r.Status, r.Output, cancelled, m.shuttingDown())
	}
}

// checkJob checks a background job's final state and its output file.
func (m *machine) checkJob(j *bgJob, final map[string]engine.JobInfo) {
	t := m.t
	if j.res.Status != engine.StatusStarted {
		return
	}
	info, ok := final[j.res.JobID]
	if !ok {
		t.Fatalf("job %s missing from Jobs()", j.res.JobID)
	}
	allowed := map[string]bool{}
	switch j.kind {
	case "short":
		allowed["completed/"] = true
	case "failing":
		allowed["failed/"] = true
	}
	if j.killed != nil {
		allowed["killed/killed by request"] = true
		if info.Status != j.killed.Status || info.Reason != j.killed.Reason {
			t.Fatalf("job %s: Kill said %s/%s, Jobs says %s/%s", info.JobID, j.killed.Status, j.killed.Reason, info.Status, info.Reason)
		}
	}
	allowed["killed/engine shutdown"] = true
	got := string(info.Status) + "/" + info.Reason
	if !allowed[got] {
		t.Fatalf("%s job %s ended %s (allowed %v)", j.kind, info.JobID, got, allowed)
	}
	b, err := os.ReadFile(j.res.OutputFile)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "[background process "); n != 1 {
		t.Fatalf("job %s: %d completion lines in %q", info.JobID, n, b)
	}
	line := map[string]string{
		"completed/":               "[background process completed]",
		"failed/":                  "[background process failed: exit code 5]",
		"killed/killed by request": "[background process killed: killed by request]",
		"killed/engine shutdown":   "[background process killed: engine shutdown]",
	}[got]
	if !strings.HasSuffix(string(b), "\n\n"+line) {
		t.Fatalf("job %s (%s): file %q", info.JobID, got, b)
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
// foreground and background starts, cancellations, kills, pauses and a
// shutdown. Every call reports exactly once with a status consistent with
// what happened; afterwards no process the commands started is alive and
// no goroutine or fd is left.
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
	cfg.Timeout, cfg.Grace, cfg.CleanupWait, cfg.DrainWait = smTimeout, smGrace, 3*time.Second, 100*time.Millisecond
	cfg.BackgroundLifetime = 30 * time.Second
	cfg.OutputDir, cfg.KeepFiles = filepath.Join(root, "out"), true
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := &machine{t: t, e: e, root: root}
	defer func() {
		m.shutdown()
		for _, c := range m.calls {
			c.cancel()
		}
		m.wg.Wait()
	}()
	fgNames := []string{"quick", "fail", "sleepy", "leftover", "termignore"}
	bgNames := []string{"short", "failing", "long"}
	steps := rapid.IntRange(1, 10).Draw(t, "steps")
	for range steps {
		switch rapid.SampledFrom([]string{"fg", "fg", "bg", "cancel", "kill", "pause", "shutdown"}).Draw(t, "action") {
		case "fg":
			m.startFg(rapid.SampledFrom(fgNames).Draw(t, "fg"))
		case "bg":
			m.startBg(rapid.SampledFrom(bgNames).Draw(t, "bg"))
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
	// Foreground calls end on their own (timeouts) or by shutdown; every
	// one must report, once.
	if rapid.Bool().Draw(t, "wait before shutdown") {
		waitCalls(t, m.calls, 20*time.Second)
	}
	m.shutdown()
	waitCalls(t, m.calls, 30*time.Second)
	for _, c := range m.calls {
		r := <-c.result
		if n := c.reports.Load(); n != 1 {
			t.Fatalf("%s reported %d times", c.kind, n)
		}
		m.checkFg(c, r)
	}
	final := map[string]engine.JobInfo{}
	for _, j := range e.Jobs(engine.ToolContext{}) {
		if _, dup := final[j.JobID]; dup {
			t.Fatalf("job %s listed twice", j.JobID)
		}
		if j.Status == engine.JobRunning {
			t.Fatalf("job %s running after shutdown", j.JobID)
		}
		final[j.JobID] = j
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
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for liveProcess(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d survived", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	m.wg.Wait()
	if err := goleak.Find(ignore); err != nil {
		t.Fatalf("goroutines left: %v", err)
	}
	for deadline := time.Now().Add(3 * time.Second); countFDs() > fds; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("fds: %d before, %d after", fds, countFDs())
		}
	}
}

// waitCalls waits until every call has reported or fails the test.
func waitCalls(t *rapid.T, calls []*fgCall, within time.Duration) {
	deadline := time.Now().Add(within)
	for _, c := range calls {
		for c.reports.Load() == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s call did not report within %v (lost result)", c.kind, within)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
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
