package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestConversationsAreIsolated: a conversation sees, reads and kills only
// its own background jobs; another's job id is "no such job"; each keeps
// its output in a 0700 directory of its own and numbers its jobs from 1.
func TestConversationsAreIsolated(t *testing.T) {
	e := newEngine(t)
	a := engine.ToolContext{WorkingDir: t.TempDir(), ConversationID: "alice"}
	b := engine.ToolContext{WorkingDir: t.TempDir(), ConversationID: "bob"}
	ra := e.Run(context.Background(), a, engine.Input{Command: "echo alice; sleep 60", Mode: engine.ModeBackground})
	rb := e.Run(context.Background(), b, engine.Input{Command: "echo bob; sleep 60", Mode: engine.ModeBackground})
	if ra.Status != engine.StatusStarted || rb.Status != engine.StatusStarted {
		t.Fatalf("%+v %+v", ra, rb)
	}
	if ra.JobID != "job-1" || rb.JobID != "job-1" {
		t.Errorf("each conversation numbers its own jobs: %s %s", ra.JobID, rb.JobID)
	}
	if filepath.Dir(ra.OutputFile) == filepath.Dir(rb.OutputFile) {
		t.Errorf("conversations share an output directory: %s", ra.OutputFile)
	}
	for _, f := range []string{ra.OutputFile, rb.OutputFile} {
		if st, err := os.Stat(filepath.Dir(f)); err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v", filepath.Dir(f), st.Mode(), err)
		}
	}
	if jobs := e.Jobs(a); len(jobs) != 1 || jobs[0].ConversationID != "alice" || jobs[0].PID != ra.PID {
		t.Fatalf("alice sees %+v", jobs)
	}
	// A third conversation sees nothing, and every way to reach alice's
	// job by its id answers exactly as for a job that never existed.
	c := engine.ToolContext{WorkingDir: t.TempDir(), ConversationID: "mallory"}
	if jobs := e.Jobs(c); len(jobs) != 0 {
		t.Fatalf("mallory sees %+v", jobs)
	}
	_, errJob := e.Job(c, "job-1")
	_, errOut := e.JobOutput(c, "job-1", 0, 0, 0)
	_, errKill := e.Kill(context.Background(), c, "job-1")
	_, errNever := e.Job(c, "job-99")
	for _, err := range []error{errJob, errOut, errKill} {
		if !errors.Is(err, engine.ErrNoSuchJob) || strings.ReplaceAll(err.Error(), "job-1", "job-99") != errNever.Error() {
			t.Errorf("another conversation's job: %v (a missing one: %v)", err, errNever)
		}
	}
	// Bob's kill ends bob's job only.
	if j, err := e.Kill(context.Background(), b, "job-1"); err != nil || j.Status != engine.JobKilled || j.PID != rb.PID {
		t.Fatalf("bob's kill: %+v %v", j, err)
	}
	if j, err := e.Job(a, "job-1"); err != nil || j.Status != engine.JobRunning {
		t.Fatalf("alice's job after bob's kill: %+v %v", j, err)
	}
	// The job may not have printed yet on a loaded machine: wait for it.
	var out engine.JobOutput
	testenv.Eventually(t, 10*time.Second, func() bool {
		var err error
		if out, err = e.JobOutput(a, "job-1", 0, 0, 0); err != nil {
			t.Fatalf("alice's output: %+v %v", out, err)
		}
		return strings.HasPrefix(out.Data, "alice")
	}, "alice's output: %+v", testenv.Last(&out))
	if all := e.AllJobs(); len(all) != 2 {
		t.Errorf("the administrator's view: %+v", all)
	}
	// Ending alice's conversation ends her job and forgets it.
	if err := e.EndConversation(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ra.PID, 10*time.Second)
	if jobs := e.Jobs(a); len(jobs) != 0 {
		t.Errorf("an ended conversation's jobs are listed: %+v", jobs)
	}
	testenv.Eventually(t, 10*time.Second, func() bool {
		_, err := os.Stat(filepath.Dir(ra.OutputFile))
		return os.IsNotExist(err)
	}, "an ended conversation's directory is left")
}

// TestAdmissionCapHolds: 200 concurrent calls under a cap of 4 running at
// once: never more than 4 run, every call is answered exactly once, and
// the ones that waited say so (their timeout started only when they ran).
func TestAdmissionCapHolds(t *testing.T) {
	e := newEngine(t, func(c *engine.Config) {
		c.Admission = config.Admission{MaxRunning: 4, MaxRunningPerConversation: 4, MaxQueue: 400, QueueWait: 2 * time.Minute}
		c.Timeout = 5 * time.Second
	})
	dir := t.TempDir()
	slots := filepath.Join(dir, "running")
	if err := os.Mkdir(slots, 0o755); err != nil {
		t.Fatal(err)
	}
	var peak atomic.Int64
	stop := make(chan struct{})
	var monitor sync.WaitGroup
	monitor.Add(1)
	go func() {
		defer monitor.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if ents, err := os.ReadDir(slots); err == nil && int64(len(ents)) > peak.Load() {
				peak.Store(int64(len(ents)))
			}
			time.Sleep(time.Millisecond)
		}
	}()
	const n = 200
	results := make([]engine.Result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = e.Run(context.Background(), engine.ToolContext{WorkingDir: dir, ConversationID: "one"},
				engine.Input{Command: `f=$(mktemp -p running); sleep 0.02; rm "$f"; echo ok`})
		}()
	}
	wg.Wait()
	close(stop)
	monitor.Wait()
	waited := 0
	for i, r := range results {
		if r.Status != engine.StatusOK || r.Output != "ok\n" {
			t.Fatalf("call %d: %s %q", i, r.Status, r.Output)
		}
		if r.QueuedMS > 0 {
			waited++
		}
	}
	if p := peak.Load(); p > 4 || p < 2 {
		t.Errorf("at most %d ran at once, want between 2 and the cap of 4", p)
	}
	if waited < n/2 {
		t.Errorf("only %d of %d calls waited for a slot", waited, n)
	}
	// The engine is healthy afterwards.
	if r := run(t, e, "echo after"); r.Output != "after\n" {
		t.Fatal(r.Output)
	}
}

// TestAdmissionBusy: a full queue and a wait past QueueWait are refused
// with ErrBusy saying what is full; a call cancelled while it waits is
// cancelled; a conversation over its background jobs is refused at once,
// and another conversation is not.
func TestAdmissionBusy(t *testing.T) {
	e := newEngine(t, func(c *engine.Config) {
		c.Admission = config.Admission{MaxRunning: 1, MaxRunningPerConversation: 1, MaxQueue: 1, QueueWait: 300 * time.Millisecond,
			MaxJobsPerConversation: 1}
	})
	dir := t.TempDir()
	tc := engine.ToolContext{WorkingDir: dir, ConversationID: "busy"}
	hold := make(chan engine.Result, 1)
	go func() { hold <- e.Run(context.Background(), tc, engine.Input{Command: "touch held; sleep 3"}) }()
	select {
	case h := <-hold:
		t.Fatalf("the first call ended early: %s %q", h.Status, h.Output)
	case <-waitFileC(filepath.Join(dir, "held")):
	}

	queued := make(chan engine.Result, 1)
	go func() { queued <- e.Run(context.Background(), tc, engine.Input{Command: "echo late"}) }()
	waitLoad(t, e, engine.Load{Running: 1, Queued: 1})
	// The queue (of one) is full: the next call is refused at once.
	r := e.Run(context.Background(), tc, engine.Input{Command: "echo refused"})
	if !errors.Is(r.Err, engine.ErrBusy) || r.Status != engine.StatusError || !strings.Contains(r.Output, "[error: busy: ") {
		t.Fatalf("full queue: %s %q", r.Status, r.Output)
	}
	// The queued call gives up after QueueWait.
	if q := <-queued; !errors.Is(q.Err, engine.ErrBusy) || !strings.Contains(q.Output, "waited 300ms") {
		t.Fatalf("waited too long: %s %q", q.Status, q.Output)
	}
	// A call cancelled while it waits is cancelled, and never runs.
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan engine.Result, 1)
	go func() {
		cancelled <- e.Run(ctx, tc, engine.Input{Command: "touch ran-after-cancel"})
	}()
	waitLoad(t, e, engine.Load{Running: 1, Queued: 1})
	cancel()
	if c := <-cancelled; c.Status != engine.StatusCancelled {
		t.Fatalf("cancelled while waiting: %s %q", c.Status, c.Output)
	}
	if h := <-hold; h.Status != engine.StatusOK {
		t.Fatalf("the running call: %s %q", h.Status, h.Output)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran-after-cancel")); err == nil {
		t.Error("a call cancelled while it waited ran anyway")
	}

	// Background jobs: the conversation's one slot, then busy at once.
	if r := e.Run(context.Background(), tc, engine.Input{Command: "sleep 60", Mode: engine.ModeBackground}); r.Status != engine.StatusStarted {
		t.Fatalf("%s %q", r.Status, r.Output)
	}
	start := time.Now()
	r = e.Run(context.Background(), tc, engine.Input{Command: "sleep 60", Mode: engine.ModeBackground})
	if !errors.Is(r.Err, engine.ErrBusy) || !strings.Contains(r.Output, "background jobs running") || time.Since(start) > 5*time.Second {
		t.Fatalf("second job: %s %q", r.Status, r.Output)
	}
	other := engine.ToolContext{WorkingDir: dir, ConversationID: "other"}
	if r := e.Run(context.Background(), other, engine.Input{Command: "sleep 60", Mode: engine.ModeBackground}); r.Status != engine.StatusStarted {
		t.Fatalf("another conversation's job: %s %q", r.Status, r.Output)
	}
}

// waitFileC closes the returned channel once path exists (bounded by the
// test's own timeout).
func waitFileC(path string) <-chan struct{} {
	c := make(chan struct{})
	go func() {
		defer close(c)
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if _, err := os.Stat(path); err == nil {
				return
			}
		}
	}()
	return c
}

// waitLoad waits until the engine's load is want.
func waitLoad(t *testing.T, e *engine.Engine, want engine.Load) {
	t.Helper()
	var got engine.Load
	testenv.Eventually(t, 20*time.Second, func() bool {
		got = e.Load()
		return got == want
	}, "load %+v, want %+v", testenv.Last(&got), want)
}
