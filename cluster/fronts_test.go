package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/cluster"
	"github.com/bashvisor/bashvisor/cluster/etcd"
	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// Two fronts, one conversation: each front is a process of its own (the
// test binary with BV_FRONT=serve), which serves the engine.Runner
// methods as JSON lines on stdin and stdout; the test is the load
// balancer, sending a conversation's calls to the fronts in turn.

// frontRequest is one line to a serving front.
type frontRequest struct {
	Op      string         `json:"op"` // run, jobs, output, kill, end, wait (for N executors), undo (N steps)
	Conv    string         `json:"conv"`
	Dir     string         `json:"dir,omitempty"`
	Command string         `json:"command,omitempty"`
	Mode    engine.Mode    `json:"mode,omitempty"`
	Profile engine.Profile `json:"profile,omitempty"` // run: the sandbox profile
	Job     string         `json:"job,omitempty"`
	N       int            `json:"n,omitempty"`
}

// frontReply is a serving front's answer line.
type frontReply struct {
	Result engine.Result     `json:"result"`
	Jobs   []engine.JobInfo  `json:"jobs"`
	Output engine.JobOutput  `json:"output"`
	Job    engine.JobInfo    `json:"job"`
	Undo   engine.UndoResult `json:"undo"`
	Text   string            `json:"text"` // undo: its text
	Err    string            `json:"err"`
}

// frontServe is the test binary as a serving front (BV_FRONT=serve):
// membership from BV_EXECUTORS (static) or BV_MEMBERSHIP (etcd:URL), it
// waits for BV_WAIT executors, prints READY, answers one request a line,
// and shuts down at the end of its input or on SIGTERM.
func frontServe() int {
	o := cluster.ClientOptions{Membership: cluster.Static(strings.Split(os.Getenv("BV_EXECUTORS"), ",")...),
		KeepConversations: os.Getenv("BV_KEEP") != "", LostAfter: lostAfter}
	if kind, arg, _ := strings.Cut(os.Getenv("BV_MEMBERSHIP"), ":"); kind == "etcd" {
		o.Membership = etcd.Membership("bvtest", arg)
	}
	c, err := cluster.NewClient(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "front:", err)
		return 1
	}
	n, _ := strconv.Atoi(os.Getenv("BV_WAIT"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitExecutors(ctx, n); err != nil {
		fmt.Fprintln(os.Stderr, "front:", err)
		_ = c.Shutdown(ctx)
		return 1
	}
	fmt.Println("READY")
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	enc := json.NewEncoder(os.Stdout)
loop:
	for {
		select {
		case <-sig:
			break loop
		case line, ok := <-lines:
			if !ok {
				break loop
			}
			var req frontRequest
			if err := json.Unmarshal([]byte(line), &req); err != nil {
				fmt.Fprintln(os.Stderr, "front: bad request:", err)
				return 1
			}
			_ = enc.Encode(serveOne(c, req))
		}
	}
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	if err := c.Shutdown(sctx); err != nil {
		fmt.Fprintln(os.Stderr, "front shutdown:", err)
		return 1
	}
	return 0
}

func serveOne(c *cluster.Client, req frontRequest) frontReply {
	tc := engine.ToolContext{WorkingDir: req.Dir, ConversationID: req.Conv, Sandbox: engine.Sandbox{Profile: req.Profile}}
	var rep frontReply
	var err error
	switch req.Op {
	case "run":
		rep.Result = c.Run(context.Background(), tc, engine.Input{Command: req.Command, Mode: req.Mode})
		err = rep.Result.Err
	case "jobs":
		rep.Jobs = c.Jobs(tc)
	case "output":
		rep.Output, err = c.JobOutput(tc, req.Job, 0, 0, 0)
	case "kill":
		rep.Job, err = c.Kill(context.Background(), tc, req.Job)
	case "end":
		err = c.EndConversation(context.Background(), req.Conv)
	case "undo":
		rep.Undo, err = c.Undo(context.Background(), tc, req.N)
		rep.Text = rep.Undo.Text()
	case "wait":
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = c.WaitExecutors(ctx, req.N)
		cancel()
	default:
		err = fmt.Errorf("unknown op %q", req.Op)
	}
	if err != nil {
		rep.Err = err.Error()
	}
	return rep
}

// frontProc is a serving front process.
type frontProc struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	done   chan struct{}
	err    error
	stderr *safeBuffer
	mu     sync.Mutex
	group  *testenv.Group // its process group, never another one after Wait reaped it
}

// startFront starts a serving front in a session of its own, with env
// added to its environment, and waits for READY. It is ended (its input
// closed, then SIGKILL of its group) at cleanup.
func startFront(t *testing.T, name string, env ...string) *frontProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), "BV_FRONT=serve", "NO_PROXY=*", "HTTP_PROXY=", "http_proxy="), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	f := &frontProc{t: t, name: name, cmd: cmd, in: in, done: make(chan struct{}), stderr: &safeBuffer{}}
	cmd.Stderr = f.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.group = testenv.GroupOf(t, cmd.Process.Pid) // before t.Cleanup(f.stop), which uses it
	f.out = bufio.NewScanner(out)
	f.out.Buffer(nil, 16<<20)
	go func() { f.err = cmd.Wait(); close(f.done) }()
	t.Cleanup(f.stop)
	ready := make(chan bool, 1)
	go func() { ready <- f.out.Scan() && f.out.Text() == "READY" }()
	select {
	case ok := <-ready:
		if !ok {
			<-f.done
			t.Fatalf("front %s did not start: %v\n%s", name, f.err, f.stderr)
		}
	case <-time.After(40 * time.Second):
		t.Fatalf("front %s not ready after 40s\n%s", name, f.stderr)
	}
	return f
}

// do sends one request and returns the answer.
func (f *frontProc) do(req frontRequest) frontReply {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	b, _ := json.Marshal(req)
	if _, err := f.in.Write(append(b, '\n')); err != nil {
		f.t.Fatalf("front %s: %v\n%s", f.name, err, f.stderr)
	}
	if !f.out.Scan() {
		f.t.Fatalf("front %s answered nothing to %s: %v\n%s", f.name, b, f.out.Err(), f.stderr)
	}
	var rep frontReply
	if err := json.Unmarshal(f.out.Bytes(), &rep); err != nil {
		f.t.Fatalf("front %s: %v: %q", f.name, err, f.out.Bytes())
	}
	return rep
}

// stop ends the front cleanly: its input closed, it must exit 0 within
// 30 s, with no data race in bashvisor's code.
func (f *frontProc) stop() {
	select {
	case <-f.done:
		return
	default:
	}
	f.in.Close()
	select {
	case <-f.done:
		if f.err != nil {
			f.t.Errorf("front %s did not stop cleanly: %v\n%s", f.name, f.err, f.stderr)
		}
		if r := ownRaces(f.stderr.String()); r != "" {
			f.t.Errorf("front %s: data race in bashvisor code:\n%s", f.name, r)
		}
	case <-time.After(30 * time.Second):
		f.group.Kill()
		<-f.done
		f.t.Errorf("front %s did not stop within 30s\n%s", f.name, f.stderr)
	}
}

// kill ends the front with SIGKILL (a crash).
func (f *frontProc) kill() {
	f.group.Kill()
	<-f.done
}

// roundRobin is the load balancer: each request goes to the next front.
type roundRobin struct {
	mu     sync.Mutex
	fronts []*frontProc
	next   int
}

func (rr *roundRobin) pick() *frontProc {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	f := rr.fronts[rr.next%len(rr.fronts)]
	rr.next++
	return f
}

// TestTwoFrontsStatic: two fronts behind a round-robin balancer serve
// one conversation's calls alternately, with static membership.
func TestTwoFrontsStatic(t *testing.T) {
	if inFreshProcess(t) {
		return
	}
	var addrs []string
	for range 2 {
		addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(freePort(t)))
	}
	twoFronts(t, func(i int) execSpec { return execSpec{listen: addrs[i]} }, "BV_EXECUTORS="+strings.Join(addrs, ","))
}

// TestTwoFrontsEtcd: the same with the etcd membership. Without an etcd
// binary it skips, unless REQUIRE_ETCD=1.
func TestTwoFrontsEtcd(t *testing.T) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		testenv.Need(t, testenv.Etcd, fmt.Errorf("no etcd binary (apt-get install etcd-server): %w", err))
	}
	if inFreshProcess(t) {
		return
	}
	endpoint, _ := startEtcd(t, bin)
	twoFronts(t, func(int) execSpec { return execSpec{membership: "etcd:" + endpoint, providerRaces: true} },
		"BV_MEMBERSHIP=etcd:"+endpoint)
}

// twoFronts is the scenario: two fronts that keep their conversations
// at shutdown, as fronts behind a balancer do, and executors with a
// scratch directory each (BV_SCRATCH: a file seen through both fronts
// proves one executor, although loopback executors share a
// filesystem). The second executor joins once the first conversations
// run: rendezvous hashing would now place about half of them there, so
// the fronts that did not place them must ask the executors.
func twoFronts(t *testing.T, spec func(i int) execSpec, frontEnv string) {
	mark := t.Name()
	dir := t.TempDir()
	ex := make([]*proc, 2)
	startExec := func(i int) {
		s := spec(i)
		s.name, s.mark, s.fenceAfter = fmt.Sprintf("exec-%d", i+1), mark, fenceAfter
		s.scratch = t.TempDir()
		ex[i] = startExecutor(t, s)
	}
	startExec(0)
	env := []string{frontEnv, "BV_WAIT=1", "BV_KEEP=1"}
	a := startFront(t, "A", env...)
	run := func(f *frontProc, conv, command string, mode engine.Mode) engine.Result {
		t.Helper()
		rep := f.do(frontRequest{Op: "run", Conv: conv, Dir: dir, Command: command, Mode: mode})
		return rep.Result
	}
	const conv = "shared"
	var early []string
	for i := range 8 {
		early = append(early, fmt.Sprintf("early-%d", i))
	}
	for _, c := range append([]string{conv}, early...) {
		if r := run(a, c, "echo $BV_NAME", ""); r.Output != "exec-1\n" {
			t.Fatalf("%s on a fleet of one: %s %q", c, r.Status, r.Output)
		}
	}
	startExec(1)
	b := startFront(t, "B", env...)
	for _, f := range []*frontProc{a, b} {
		if w := f.do(frontRequest{Op: "wait", N: 2}); w.Err != "" {
			t.Fatalf("front %s: %s", f.name, w.Err)
		}
	}
	rr := &roundRobin{fronts: []*frontProc{a, b}}
	for _, c := range early {
		if r := run(rr.pick(), c, "echo $BV_NAME", ""); r.Output != "exec-1\n" {
			t.Errorf("%s after exec-2 joined: %s %q, want it still on exec-1", c, r.Status, r.Output)
		}
	}

	// The balancer's turns, A then B: a background job started through
	// A is read and killed through B; a file written through A is read
	// through B; each call's result is what the other front answers for
	// the same call.
	bg := run(a, conv, "echo started; echo $$ > $BV_SCRATCH/bg.pid; sleep 60", engine.ModeBackground)
	if bg.Status != engine.StatusStarted || bg.JobID == "" {
		t.Fatalf("background job through A: %s %q", bg.Status, bg.Output)
	}
	var out frontReply
	testenv.Eventually(t, 10*time.Second, func() bool {
		out = b.do(frontRequest{Op: "output", Conv: conv, Job: bg.JobID})
		return out.Err != "" || out.Output.Data == "started\n"
	}, "output of %s through B: %+v", bg.JobID, testenv.Last(&out))
	if out.Err != "" || out.Output.Job.JobID != bg.JobID {
		t.Fatalf("output of %s through B: %+v", bg.JobID, out)
	}
	if w := run(a, conv, "echo from-A > $BV_SCRATCH/note; echo $BV_NAME", ""); w.Status != engine.StatusOK {
		t.Fatalf("write through A: %s %q", w.Status, w.Output)
	}
	if r := run(b, conv, "cat $BV_SCRATCH/note", ""); r.Status != engine.StatusOK || r.Output != "from-A\n" {
		t.Errorf("through B, the file written through A: %s %q", r.Status, r.Output)
	}
	for _, command := range []string{"echo $BV_NAME; pwd", "ls $BV_SCRATCH", "exit 3", "cat /nonexistent"} {
		ra, rb := run(a, conv, command, ""), run(b, conv, command, "")
		if comparable(ra) != comparable(rb) {
			t.Errorf("%q: through A %s, through B %s", command, comparable(ra), comparable(rb))
		}
	}
	jobsA := a.do(frontRequest{Op: "jobs", Conv: conv}).Jobs
	jobsB := b.do(frontRequest{Op: "jobs", Conv: conv}).Jobs
	if len(jobsA) != 1 || len(jobsB) != 1 || jobsA[0].JobID != bg.JobID || jobsB[0].JobID != bg.JobID || jobsA[0].PID != jobsB[0].PID {
		t.Errorf("jobs through A %+v, through B %+v; want %s in both", jobsA, jobsB, bg.JobID)
	}
	k := b.do(frontRequest{Op: "kill", Conv: conv, Job: bg.JobID})
	if k.Err != "" || k.Job.Status != engine.JobKilled {
		t.Errorf("kill of %s through B: %+v", bg.JobID, k)
	}
	if j := a.do(frontRequest{Op: "jobs", Conv: conv}).Jobs; len(j) != 1 || j[0].Status != engine.JobKilled {
		t.Errorf("jobs through A after the kill through B: %+v", j)
	}
	home := strings.TrimSpace(run(a, conv, "echo $BV_NAME", "").Output)

	// The first calls of new conversations, sent to both fronts at once,
	// each land on one executor, whichever front placed them.
	var wg sync.WaitGroup
	names := make([][]string, 12)
	for i := range names {
		names[i] = make([]string, 6)
		for j := range names[i] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := run(rr.pick(), fmt.Sprintf("new-%02d", i), "echo $BV_NAME", "")
				names[i][j] = strings.TrimSpace(r.Output)
			}()
		}
	}
	wg.Wait()
	spread := map[string]int{}
	for i, n := range names {
		spread[n[0]]++
		for _, other := range n[1:] {
			if other != n[0] || !strings.HasPrefix(other, "exec-") {
				t.Errorf("new-%02d ran on %q, through two fronts at once", i, n)
				break
			}
		}
	}
	t.Logf("12 new conversations through two fronts: %v", spread)

	// A front that crashes and restarts finds the conversation: its
	// killed job, its files, and a new job read through the other front.
	a.kill()
	a = startFront(t, "A2", env...)
	rr.fronts[0] = a
	if j := a.do(frontRequest{Op: "jobs", Conv: conv}).Jobs; len(j) != 1 || j[0].JobID != bg.JobID || j[0].Status != engine.JobKilled {
		t.Errorf("jobs through the restarted front: %+v", j)
	}
	if r := run(a, conv, "cat $BV_SCRATCH/note; echo $BV_NAME", ""); r.Output != "from-A\n"+home+"\n" {
		t.Errorf("through the restarted front: %s %q, want the note on %s", r.Status, r.Output, home)
	}
	bg2 := run(a, conv, "echo again; sleep 60", engine.ModeBackground)
	if bg2.Status != engine.StatusStarted || bg2.JobID == bg.JobID {
		t.Fatalf("second background job through the restarted front: %s %q %q", bg2.Status, bg2.JobID, bg2.Output)
	}

	// An end asked by a front that another front overtook is not done
	// (one front's idle bound must not end what another serves); the
	// front that used it last ends it, with its jobs.
	if j := b.do(frontRequest{Op: "jobs", Conv: conv}).Jobs; len(j) != 2 {
		t.Errorf("jobs through B: %+v", j)
	}
	if e := a.do(frontRequest{Op: "end", Conv: conv}); e.Err != "" {
		t.Errorf("end through A: %s", e.Err)
	}
	if j := a.do(frontRequest{Op: "jobs", Conv: conv}).Jobs; len(j) != 2 || j[1].Status != engine.JobRunning {
		t.Errorf("jobs through A after an end through A, which B overtook: %+v", j)
	}
	if e := a.do(frontRequest{Op: "end", Conv: conv}); e.Err != "" {
		t.Errorf("end through A: %s", e.Err)
	}
	// B still thinks it knows where the conversation runs: its executor
	// refuses the call (it no longer holds it), and B places it afresh.
	if r := run(b, conv, "echo $BV_NAME", ""); r.Status != engine.StatusOK {
		t.Errorf("a call through B after the end through A: %s %q", r.Status, r.Output)
	}
	for _, f := range []*frontProc{a, b} {
		if j := f.do(frontRequest{Op: "jobs", Conv: conv}).Jobs; len(j) != 0 {
			t.Errorf("jobs through %s after the end: %+v", f.name, j)
		}
	}
	if r := a.do(frontRequest{Op: "output", Conv: conv, Job: bg2.JobID}); !strings.Contains(r.Err, "no such job") {
		t.Errorf("the ended conversation's job through A: %+v", r)
	}

	// A conversation placed through A on exec-2, which B never saw:
	// once exec-2 is killed, B learns from exec-1's record that the
	// conversation's executor is gone, as A knows.
	var doomed string
	for i := 0; doomed == "" && i < 64; i++ {
		c := fmt.Sprintf("doomed-%d", i)
		if r := run(a, c, "echo $BV_NAME", ""); r.Output == "exec-2\n" {
			doomed = c
		}
	}
	if doomed == "" {
		t.Fatal("no conversation of 64 was placed on exec-2")
	}
	ex[1].signal(syscall.SIGKILL)
	<-ex[1].done
	for _, f := range []*frontProc{b, a} {
		var rep frontReply
		testenv.Eventually(t, 10*time.Second, func() bool {
			rep = f.do(frontRequest{Op: "run", Conv: doomed, Dir: dir, Command: "true"})
			return rep.Result.Status != engine.StatusLost
		}, "%s through %s after its executor was killed: %+v", doomed, f.name, testenv.Last(&rep))
		if !strings.Contains(rep.Err, "conversation's executor is gone") || !strings.Contains(rep.Result.Output, "exec-2") {
			t.Errorf("%s through %s after its executor was killed: %s %q", doomed, f.name, rep.Result.Status, rep.Result.Output)
		}
	}

	a.stop()
	b.stop()
	for _, p := range ex {
		p.stop()
	}
	waitNoLeftovers(t, mark)
}
