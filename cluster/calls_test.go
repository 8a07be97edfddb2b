package cluster_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/cluster"
	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// oneExecutor starts an executor subprocess and a front on it.
func oneExecutor(t *testing.T) (*proc, *cluster.Client, string) {
	t.Helper()
	mark := t.Name()
	ex := startExecutor(t, execSpec{name: "exec-1", mark: mark})
	c := newClient(t, cluster.ClientOptions{Membership: cluster.Static(ex.addr)})
	t.Cleanup(func() {
		shutdown(t, c)
		ex.stop()
		waitNoLeftovers(t, mark)
	})
	waitReady(t, c, 1)
	return ex, c, t.TempDir()
}

// TestProgressAndCancel: progress snapshots reach the caller's callback;
// cancelling the caller's context kills the remote process group and the
// result is "cancelled", as locally.
func TestProgressAndCancel(t *testing.T) {
	if inFreshProcess(t) {
		return
	}
	_, c, dir := oneExecutor(t)
	var mu sync.Mutex
	var seen []engine.Progress
	tc := engine.ToolContext{WorkingDir: dir, ConversationID: "p", Progress: func(p engine.Progress) {
		mu.Lock()
		seen = append(seen, p)
		mu.Unlock()
	}}
	r := c.Run(context.Background(), tc, engine.Input{Command: "for i in 1 2 3 4 5 6; do echo line$i; sleep 0.15; done"})
	if r.Status != engine.StatusOK {
		t.Fatalf("status %s: %s", r.Status, r.Output)
	}
	mu.Lock()
	if len(seen) < 2 || !strings.HasPrefix(seen[len(seen)-1].LastLine, "line") || seen[len(seen)-1].Bytes == 0 {
		t.Errorf("progress not forwarded: %+v", seen)
	}
	mu.Unlock()

	pidFile := filepath.Join(dir, "pid")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan engine.Result, 1)
	go func() {
		done <- c.Run(ctx, engine.ToolContext{WorkingDir: dir, ConversationID: "p"},
			engine.Input{Command: "echo $$ > pid; sleep 30 & sleep 30; echo never"})
	}()
	pgid := waitPid(t, pidFile)
	cancel()
	select {
	case r := <-done:
		if r.Status != engine.StatusCancelled || !strings.HasPrefix(r.Output, "[command cancelled]") || !errors.Is(r.Err, context.Canceled) {
			t.Errorf("cancelled call: status %s err %v output %q", r.Status, r.Err, r.Output)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("cancelled call did not return")
	}
	if live := groupMembers(pgid); len(live) > 0 {
		t.Errorf("process group %d still has live processes after the cancelled call returned: %v", pgid, live)
	}
}

// groupMembers lists the processes of group pgid that are not zombies
// (a zombie waits for its parent, the executor, to reap it; it runs
// nothing).
func groupMembers(pgid int) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			out = append(out, e.Name()+" "+s[:strings.LastIndexByte(s, ')')+1])
		}
	}
	return out
}

// waitPid waits for a command to write its pid to path.
func waitPid(t *testing.T, path string) int {
	t.Helper()
	var b []byte
	testenv.Eventually(t, 20*time.Second, func() bool {
		var err error
		b, err = os.ReadFile(path) // written by another process: nothing to wait on but the file
		return err == nil && strings.HasSuffix(string(b), "\n")
	}, "%s not written", path)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestCallIDRunsOnce: concurrent and later duplicates of one call id run
// the command once and all get its result; the same id for another
// command is refused.
func TestCallIDRunsOnce(t *testing.T) {
	if inFreshProcess(t) {
		return
	}
	_, c, dir := oneExecutor(t)
	tc := engine.ToolContext{WorkingDir: dir, ConversationID: "dup", CallID: "toolu_01"}
	in := engine.Input{Command: "echo run >> marker; sleep 0.3; echo out $RANDOM"}
	results := make([]engine.Result, 5)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = c.Run(context.Background(), tc, in)
		}()
	}
	wg.Wait()
	results = append(results, c.Run(context.Background(), tc, in)) // after it finished: the record
	for i, r := range results {
		if r.Status != engine.StatusOK || r.Output != results[0].Output {
			t.Errorf("call %d: %s %q, want ok %q", i, r.Status, r.Output, results[0].Output)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "marker")); string(b) != "run\n" {
		t.Errorf("marker %q: the command ran more than once", b)
	}
	r := c.Run(context.Background(), tc, engine.Input{Command: "echo other"})
	if r.Status != engine.StatusError || !errors.Is(r.Err, engine.ErrBadInput) || !strings.Contains(r.Output, "already used") {
		t.Errorf("reused call id for another command: %s %q", r.Status, r.Output)
	}
}

// TestJobsRouted: background jobs are listed, read and killed through the
// front, scoped by conversation like the local engine.
// A call asking for hosts (Input.Network) reaches the executor with them:
// through a front it asks as a local engine does, and approved it runs.
func TestNetworkAskRouted(t *testing.T) {
	if inFreshProcess(t) {
		return
	}
	_, c, dir := oneExecutor(t)
	tc := engine.ToolContext{WorkingDir: dir, ConversationID: "net-ask",
		Sandbox: engine.Sandbox{Profile: engine.ReadOnly, Network: []string{"pypi"}}}
	in := engine.Input{Command: "echo ran", Network: []string{"example.invalid:8443"}}
	if r := c.Run(context.Background(), tc, in); r.Status != engine.StatusNeedsApproval || !strings.Contains(r.Output, "example.invalid:8443") {
		t.Fatalf("through the front: %s %q, want needs_approval naming example.invalid:8443", r.Status, r.Output)
	}
	tc.Approved = true
	if r := c.Run(context.Background(), tc, in); r.Status != engine.StatusOK || r.Output != "ran\n" {
		t.Errorf("approved: %s %q", r.Status, r.Output)
	}
	shutdown(t, c)
}

func TestJobsRouted(t *testing.T) {
	if inFreshProcess(t) {
		return
	}
	_, c, dir := oneExecutor(t)
	tc := engine.ToolContext{WorkingDir: dir, ConversationID: "jobs"}
	r := c.Run(context.Background(), tc, engine.Input{Command: "echo hi; sleep 30", Mode: engine.ModeBackground})
	if r.Status != engine.StatusStarted || r.JobID != "job-1" {
		t.Fatalf("background: %s %q job %q", r.Status, r.Output, r.JobID)
	}
	jobs := c.Jobs(tc)
	if len(jobs) != 1 || jobs[0].JobID != "job-1" || jobs[0].Status != engine.JobRunning {
		t.Fatalf("jobs: %+v", jobs)
	}
	if _, err := c.Job(engine.ToolContext{WorkingDir: dir, ConversationID: "other"}, "job-1"); !errors.Is(err, engine.ErrNoSuchJob) {
		t.Errorf("another conversation's job: %v", err)
	}
	var o engine.JobOutput
	testenv.Eventually(t, 10*time.Second, func() bool {
		var err error
		if o, err = c.JobOutput(tc, "job-1", 0, 0, 0); err != nil {
			t.Fatal(err)
		}
		return o.Data == "hi\n" // the job writes its file on its own time
	}, "job output %q", testenv.Last(&o.Data))
	j, err := c.Kill(context.Background(), tc, "job-1")
	if err != nil || j.Status != engine.JobKilled {
		t.Fatalf("kill: %+v %v", j, err)
	}
	if err := c.EndConversation(context.Background(), "jobs"); err != nil {
		t.Fatal(err)
	}
	if jobs := c.Jobs(tc); len(jobs) != 0 {
		t.Errorf("jobs after EndConversation: %+v", jobs)
	}
}

// TestMoveWhenDirSurvives: when the front says working directories
// survive an executor's loss, the conversation's next call runs on
// another executor; the lost executor's jobs stay listed as lost, and the
// new executor's job ids carry the placement generation.
func TestMoveWhenDirSurvives(t *testing.T) {
	if inFreshProcess(t) {
		return
	}
	mark := t.Name()
	a := startExecutor(t, execSpec{name: "exec-a", mark: mark})
	b := startExecutor(t, execSpec{name: "exec-b", mark: mark})
	c := newClient(t, cluster.ClientOptions{Membership: cluster.Static(a.addr, b.addr), SharedDirs: true})
	waitReady(t, c, 2)
	dir := t.TempDir()
	tc := engine.ToolContext{WorkingDir: dir, ConversationID: "moving"}
	first := c.Run(context.Background(), tc, engine.Input{Command: "echo $BV_NAME"})
	bg := c.Run(context.Background(), tc, engine.Input{Command: "sleep 30", Mode: engine.ModeBackground})
	bgGroup := testenv.GroupOf(t, bg.PID) // it runs
	victim, other := a, b
	if first.Output != "exec-a\n" {
		victim, other = b, a
	}
	victim.signal(syscall.SIGKILL)
	<-victim.done
	bgGroup.Kill() // its executor is gone; the test ends the orphan
	var r engine.Result
	// The loss may not be known yet (the kill's connection close is
	// milliseconds away): such a call answers lost, never runs twice.
	testenv.Eventually(t, 10*time.Second, func() bool {
		r = c.Run(context.Background(), tc, engine.Input{Command: "echo $BV_NAME"})
		return r.Status != engine.StatusLost
	}, "after the loss: %s %q, want ok on %s", testenv.Last(&r.Status), testenv.Last(&r.Output), other.name)
	if r.Status != engine.StatusOK || r.Output != other.name+"\n" {
		t.Fatalf("after the loss: %s %q, want ok on %s", r.Status, r.Output, other.name)
	}
	bg2 := c.Run(context.Background(), tc, engine.Input{Command: "sleep 30", Mode: engine.ModeBackground})
	if bg2.JobID != "g2.job-1" {
		t.Errorf("job id on the second executor: %q, want g2.job-1", bg2.JobID)
	}
	jobs := c.Jobs(tc)
	if len(jobs) != 2 || jobs[0].JobID != "job-1" || jobs[0].Status != engine.JobLost || jobs[1].JobID != "g2.job-1" || jobs[1].Status != engine.JobRunning {
		t.Errorf("jobs after the move: %+v", jobs)
	}
	if j, err := c.Kill(context.Background(), tc, "g2.job-1"); err != nil || j.Status != engine.JobKilled {
		t.Errorf("kill on the second executor: %+v %v", j, err)
	}
	// A yielded call's text names the job by the id the front knows.
	y := c.Run(context.Background(), tc, engine.Input{Command: "echo early; sleep 30", YieldMS: 300})
	if y.JobID != "g2.job-2" || !strings.Contains(y.Output, "moved to background as g2.job-2;") {
		t.Errorf("yield on the second executor: %q %q", y.JobID, y.Output)
	}
	shutdown(t, c)
	other.stop()
	waitNoLeftovers(t, mark)
}

// TestInteractiveRouted: a job's stdin, a yielded call and streamed
// progress work through the front as on a local engine, and Write's errors
// keep their sentinels across the wire.
func TestInteractiveRouted(t *testing.T) {
	if inFreshProcess(t) {
		return
	}
	_, c, dir := oneExecutor(t)
	tc := engine.ToolContext{WorkingDir: dir, ConversationID: "interactive"}
	ctx := context.Background()
	r := c.Run(ctx, tc, engine.Input{Command: "read x; echo got:$x; sleep 30", Mode: engine.ModeBackground, Stdin: engine.StdinPipe})
	if r.Status != engine.StatusStarted {
		t.Fatalf("%s %q", r.Status, r.Output)
	}
	if err := c.Write(ctx, tc, r.JobID, []byte("abc\n"), true); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, tc, r.JobID, []byte("more\n"), false); !errors.Is(err, engine.ErrStdinClosed) {
		t.Errorf("write after close: %v", err)
	}
	j, err := c.WaitOutput(ctx, tc, r.JobID, 0, 10*time.Second)
	if err != nil || j.Bytes == 0 {
		t.Fatalf("wait: %+v %v", j, err)
	}
	if o, err := c.JobOutput(tc, r.JobID, 0, 0, 0); err != nil || o.Data != "got:abc\n" {
		t.Fatalf("output %+v %v", o, err)
	}
	other := engine.ToolContext{WorkingDir: dir, ConversationID: "someone-else"}
	if err := c.Write(ctx, other, r.JobID, []byte("x"), false); !errors.Is(err, engine.ErrNoSuchJob) {
		t.Errorf("another conversation's job: %v", err)
	}
	bg := c.Run(ctx, tc, engine.Input{Command: "sleep 30", Mode: engine.ModeBackground})
	if err := c.Write(ctx, tc, bg.JobID, []byte("x"), false); !errors.Is(err, engine.ErrNoStdin) {
		t.Errorf("a job without a pipe: %v", err)
	}

	// A yielded call, with its progress carrying the output.
	var mu sync.Mutex
	var streamed strings.Builder
	ptc := tc
	ptc.Progress = func(p engine.Progress) {
		mu.Lock()
		streamed.WriteString(p.Output)
		mu.Unlock()
	}
	y := c.Run(ctx, ptc, engine.Input{Command: "echo early; sleep 30", YieldMS: 1500})
	if y.Status != engine.StatusStarted || !strings.HasPrefix(y.Output, "early\n[command still running after 1.5s: moved to background as job-3;") {
		t.Fatalf("yield: %s %q", y.Status, y.Output)
	}
	mu.Lock()
	if streamed.String() != "early\n" {
		t.Errorf("progress output %q", streamed.String())
	}
	mu.Unlock()
	if err := c.EndConversation(ctx, "interactive"); err != nil {
		t.Fatal(err)
	}
}
