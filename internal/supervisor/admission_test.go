package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/actors"
	"github.com/bashvisor/bashvisor/internal/jobs"
	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// The admission table drives the supervisor actor message by message, as
// Start does, with real processes: a step sends a start request (or ends a
// job, withdraws a waiter, ends a conversation) and then asserts what the
// actor decided and its counters. Because the actor handles its messages
// in order, a Stats request sent after a step returns only once the step
// was handled: what was admitted by then has its answer in its reply
// channel, and what was not is queued.

// admissionSim is one supervisor under test and the calls made to it, by
// name.
type admissionSim struct {
	t     *testing.T
	s     *Supervisor
	calls map[string]*simCall
}

type simCall struct {
	conv  string
	who   string // its principal
	bg    bool
	reply chan admitted
	a     *admitted // the answer, once there is one
	job   *Job
}

func newAdmissionSim(t *testing.T, lim config.Admission) *admissionSim {
	t.Helper()
	s, err := New(Config{
		Env: config.Env{Environ: []string{"PATH=" + os.Getenv("PATH")}}, OutputDir: t.TempDir(),
		Cgroups:   config.Cgroups{Off: true},
		Lifecycle: config.Lifecycle{Grace: 200 * time.Millisecond, CleanupWait: 2 * time.Second, DrainWait: 100 * time.Millisecond},
		Admission: lim,
		countOnly: true, // the steps count jobs; TestMeasuredLoad measures them
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx, false); err != nil {
			t.Error(err)
		}
	})
	return &admissionSim{t: t, s: s, calls: map[string]*simCall{}}
}

// collect takes the answers that arrived and launches the admitted jobs.
func (h *admissionSim) collect() {
	h.t.Helper()
	for name, c := range h.calls {
		if c.a != nil {
			continue
		}
		select {
		case a := <-c.reply:
			c.a = &a
			if a.err == nil {
				l, err := actors.Launch(a.spec, h.s.res)
				if err != nil {
					h.t.Fatalf("%s: launch: %v", name, err)
				}
				h.s.system.Root.Send(a.pid, l)
				c.job = &Job{ID: a.spec.ID, Conversation: a.spec.Conversation, done: a.done}
			}
		default:
		}
	}
}

// start sends a start request for a job that runs until it is ended. A
// conversation "P:C" is conversation C of principal P.
func (h *admissionSim) start(name, conv string, bg bool) {
	who, _, _ := strings.Cut(conv, ":")
	if !strings.Contains(conv, ":") {
		who = ""
	}
	c := &simCall{conv: conv, who: who, bg: bg, reply: make(chan admitted, 1)}
	h.calls[name] = c
	req := jobs.Request{Conversation: conv, Principal: who, Script: "exec sleep 60", Dir: h.t.TempDir(), Background: bg, Timeout: time.Minute}
	h.s.system.Root.Send(h.s.pid, &startRequest{req: req, reply: c.reply})
}

// end ends a running job and waits until its slot is free.
func (h *admissionSim) end(name string) {
	h.t.Helper()
	c := h.call(name)
	if c.job == nil {
		h.t.Fatalf("%s is not running", name)
	}
	if c.bg {
		if _, ok, err := h.s.Kill(context.Background(), c.conv, c.job.ID); !ok || err != nil {
			h.t.Fatalf("kill %s: %v %v", name, ok, err)
		}
		return
	}
	h.s.Cancel(c.conv, c.job.ID)
	select {
	case o := <-c.job.Done():
		if o.Reason != jobs.ReasonCancelled {
			h.t.Fatalf("%s ended %+v", name, o)
		}
	case <-time.After(20 * time.Second):
		h.t.Fatalf("%s did not end", name)
	}
}

// withdraw gives up a queued call, as a caller whose wait ended does; it
// reports whether the call was still waiting.
func (h *admissionSim) withdraw(name string) bool {
	ack := make(chan bool, 1)
	h.s.system.Root.Send(h.s.pid, &withdrawRequest{reply: h.call(name).reply, ack: ack})
	return <-ack
}

func (h *admissionSim) call(name string) *simCall {
	h.t.Helper()
	c, ok := h.calls[name]
	if !ok {
		h.t.Fatalf("no call %s", name)
	}
	return c
}

// state is what a call became: "run", "queued", "busy: ..." or another
// error.
func (c *simCall) state() string {
	switch {
	case c.a == nil:
		return "queued"
	case c.a.err == nil:
		return "run"
	case errors.Is(c.a.err, ErrBusy):
		return "busy"
	case errors.Is(c.a.err, ErrShutdown):
		return "shutdown"
	}
	return "error: " + c.a.err.Error()
}

// step is one action of a case and what must hold after it.
type step struct {
	do    func(h *admissionSim)
	calls map[string]string // call → state()
	stats *Stats            // Running, Jobs, Queued (nil: not checked)
	// says, when set, is a text the named busy call's error must contain:
	// its BusyError's terse form, which states the limit, its scope and the
	// counts (the engine words the sentence; engine's tests check it).
	says map[string]string
}

func start(name, conv string) func(*admissionSim) {
	return func(h *admissionSim) { h.start(name, conv, false) }
}

func startBG(name, conv string) func(*admissionSim) {
	return func(h *admissionSim) { h.start(name, conv, true) }
}

func end(name string) func(*admissionSim) { return func(h *admissionSim) { h.end(name) } }

func TestAdmissionTable(t *testing.T) {
	testenv.NeedsTool(t, "sleep")
	lim := config.Admission{MaxRunning: 2, MaxRunningPerConversation: 1, MaxQueue: 2, QueueWait: time.Minute,
		MaxJobs: 3, MaxJobsPerConversation: 2}
	cases := []struct {
		name  string
		steps []step
	}{
		{"engine-cap-then-fifo", []step{
			{do: start("a1", "A"), calls: map[string]string{"a1": "run"}, stats: &Stats{Running: 1}},
			{do: start("b1", "B"), calls: map[string]string{"b1": "run"}, stats: &Stats{Running: 2}},
			{do: start("c1", "C"), calls: map[string]string{"c1": "queued"}, stats: &Stats{Running: 2, Queued: 1}},
			{do: start("d1", "D"), calls: map[string]string{"d1": "queued"}, stats: &Stats{Running: 2, Queued: 2}},
			// The queue is full: the next call is refused at once, saying so.
			{do: start("e1", "E"), calls: map[string]string{"e1": "busy"}, stats: &Stats{Running: 2, Queued: 2},
				says: map[string]string{"e1": "busy: host queue 2/2 (2 running, 2 queued)"}},
			// A slot frees: the first waiter runs, the second still waits.
			{do: end("a1"), calls: map[string]string{"c1": "run", "d1": "queued"}, stats: &Stats{Running: 2, Queued: 1}},
			{do: end("b1"), calls: map[string]string{"d1": "run"}, stats: &Stats{Running: 2}},
		}},
		{"conversation-cap-skips-in-queue", []step{
			{do: start("a1", "A"), calls: map[string]string{"a1": "run"}, stats: &Stats{Running: 1}},
			// A's second call waits for A's slot although the engine has room.
			{do: start("a2", "A"), calls: map[string]string{"a2": "queued"}, stats: &Stats{Running: 1, Queued: 1}},
			// B arrives behind A's waiter, but runs at once: its
			// conversation and the engine have room, and the waiter ahead
			// is held by its own conversation's cap. (Before fair shares B
			// waited for the next dequeue.)
			{do: start("b1", "B"), calls: map[string]string{"b1": "run"}, stats: &Stats{Running: 2, Queued: 1}},
			// Ending a1 admits a2: its conversation has room again.
			{do: end("a1"), calls: map[string]string{"a2": "run", "b1": "run"}, stats: &Stats{Running: 2}},
		}},
		{"conversation-cap-busy-message", []step{
			{do: start("a1", "A"), calls: map[string]string{"a1": "run"}, stats: &Stats{Running: 1}},
			{do: start("a2", "A"), calls: map[string]string{"a2": "queued"}, stats: &Stats{Running: 1, Queued: 1}},
			{do: start("a3", "A"), calls: map[string]string{"a3": "queued"}, stats: &Stats{Running: 1, Queued: 2}},
			{do: start("a4", "A"), calls: map[string]string{"a4": "busy"}, stats: &Stats{Running: 1, Queued: 2},
				says: map[string]string{"a4": "busy: conversation running 1/1 (1 running, 2 queued)"}},
		}},
		{"withdraw-while-queued", []step{
			{do: start("a1", "A")},
			{do: start("b1", "B")},
			{do: start("c1", "C"), calls: map[string]string{"c1": "queued"}, stats: &Stats{Running: 2, Queued: 1}},
			{do: func(h *admissionSim) {
				if !h.withdraw("c1") {
					h.t.Fatal("c1 was not waiting")
				}
			}, calls: map[string]string{"c1": "queued"}, stats: &Stats{Running: 2}},
			// The slot that frees is not given to the caller that left.
			{do: end("a1"), calls: map[string]string{"c1": "queued"}, stats: &Stats{Running: 1}},
		}},
		{"withdraw-after-admission", []step{
			{do: start("a1", "A")},
			{do: start("b1", "B")},
			{do: start("c1", "C"), calls: map[string]string{"c1": "queued"}},
			// c1 is admitted before its caller's withdrawal arrives: the
			// withdrawal says so, and the admission waits in the reply
			// channel for the caller to free the slot (as Start's wait does).
			{do: func(h *admissionSim) {
				h.end("a1")
				testenv.Eventually(h.t, 10*time.Second, func() bool { return len(h.call("c1").reply) == 1 }, "c1 never admitted")
				if h.withdraw("c1") {
					h.t.Fatal("c1 was admitted, yet the withdrawal says it was waiting")
				}
				a := <-h.call("c1").reply
				if a.err != nil {
					h.t.Fatal(a.err)
				}
				h.s.system.Root.Send(a.pid, &actors.LaunchFailed{Err: errors.New("caller gave up")})
			}, stats: &Stats{Running: 1}},
		}},
		{"background-caps", []step{
			{do: startBG("j1", "A"), calls: map[string]string{"j1": "run"}, stats: &Stats{Jobs: 1}},
			{do: startBG("j2", "A"), calls: map[string]string{"j2": "run"}, stats: &Stats{Jobs: 2}},
			// Background jobs are refused at once, never queued.
			{do: startBG("j3", "A"), calls: map[string]string{"j3": "busy"}, stats: &Stats{Jobs: 2},
				says: map[string]string{"j3": "busy: conversation jobs 2/2"}},
			{do: startBG("k1", "B"), calls: map[string]string{"k1": "run"}, stats: &Stats{Jobs: 3}},
			{do: startBG("k2", "B"), calls: map[string]string{"k2": "busy"}, stats: &Stats{Jobs: 3},
				says: map[string]string{"k2": "busy: host jobs 3/3"}},
			// Background jobs take no foreground slot.
			{do: start("f1", "A"), calls: map[string]string{"f1": "run"}, stats: &Stats{Running: 1, Jobs: 3}},
			{do: end("j1"), stats: &Stats{Running: 1, Jobs: 2}},
			{do: startBG("k3", "B"), calls: map[string]string{"k3": "run"}, stats: &Stats{Running: 1, Jobs: 3}},
		}},
		{"end-conversation-refuses-its-waiters", []step{
			{do: start("a1", "A")},
			{do: start("b1", "B")},
			{do: start("a2", "A"), calls: map[string]string{"a2": "queued"}},
			{do: start("c1", "C"), calls: map[string]string{"c1": "queued"}, stats: &Stats{Running: 2, Queued: 2}},
			{do: func(h *admissionSim) {
				if _, err := h.s.EndConversation(context.Background(), "A"); err != nil {
					h.t.Fatal(err)
				}
				if o := <-h.call("a1").job.Done(); o.Reason != jobs.ReasonShutdown {
					h.t.Fatalf("a1 %+v", o)
				}
			}, calls: map[string]string{"a2": "shutdown", "c1": "run"}, stats: &Stats{Running: 2}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runSteps(t, lim, c.steps) })
	}
}

// runSteps runs a case's steps on a new supervisor.
func runSteps(t *testing.T, lim config.Admission, steps []step) {
	t.Helper()
	h := newAdmissionSim(t, lim)
	for i, s := range steps {
		s.do(h)
		// A job's slot frees when its final report reaches the
		// supervisor, after its caller heard the outcome: wait for
		// the expected state, which must then be exact.
		var got string
		testenv.Eventually(t, 10*time.Second, func() bool {
			h.collect()
			st := h.s.Stats()
			st = Stats{Running: st.Running, Jobs: st.Jobs, Queued: st.Queued}
			got = fmt.Sprintf("stats %+v", st)
			for name, want := range s.calls {
				got += fmt.Sprintf(", %s %s", name, h.call(name).state())
				if h.call(name).state() != want {
					return false
				}
			}
			return s.stats == nil || st == *s.stats
		}, "step %d: %s; want %v %v", i, testenv.Lazy(func() string { return got }), s.calls, s.stats)
		for name, text := range s.says {
			if err := h.call(name).a.err; !strings.Contains(err.Error(), text) {
				t.Fatalf("step %d: %s says %q, want %q", i, name, err, text)
			}
		}
	}
}

// host makes the supervisor see the host short of memory, or not, as the
// admission watch would tell it.
func host(memShort bool) func(*admissionSim) {
	return func(h *admissionSim) {
		st := hostState{memShort: memShort, pressure: 30, availMiB: 100, floorMiB: 200, taskMax: 1 << 20}
		h.s.system.Root.Send(h.s.pid, &loadSample{host: &st})
		testenv.Eventually(h.t, 10*time.Second, func() bool { return h.s.Stats().MemoryShort == memShort }, "memory short %v", memShort)
	}
}

// Shares between principals (a conversation "P:C" is conversation C of
// principal P; a plain one is its own principal). Without cgroups (as
// here) a foreground job counts as one busy CPU while it runs, a
// background one as none.
func TestPrincipalShares(t *testing.T) {
	testenv.NeedsTool(t, "sleep")
	for _, c := range []struct {
		name  string
		lim   config.Admission
		steps []step
	}{
		// A principal at its own caps waits, then is refused naming its
		// cap, while another is served.
		{"principal-caps", config.Admission{MaxRunning: 4, MaxRunningPerPrincipal: 2, MaxQueue: 8, MaxQueuePerPrincipal: 2, MaxBusy: 4,
			MaxJobs: 8, MaxJobsPerPrincipal: 2, MaxJobsPerConversation: 2, QueueWait: time.Minute}, []step{
			{do: start("p1", "p:a"), calls: map[string]string{"p1": "run"}},
			{do: start("p2", "p:b"), calls: map[string]string{"p2": "run"}, stats: &Stats{Running: 2}},
			{do: start("p3", "p:c"), calls: map[string]string{"p3": "queued"}},
			{do: start("p4", "p:c"), calls: map[string]string{"p4": "queued"}, stats: &Stats{Running: 2, Queued: 2}},
			{do: start("p5", "p:d"), calls: map[string]string{"p5": "busy"}, says: map[string]string{"p5": `busy: principal "p" queue 2/2 (2 running, 2 queued)`}},
			{do: start("q1", "q:a"), calls: map[string]string{"q1": "run"}, stats: &Stats{Running: 3, Queued: 2}},
			{do: startBG("pj1", "p:a"), calls: map[string]string{"pj1": "run"}},
			{do: startBG("pj2", "p:b"), calls: map[string]string{"pj2": "run"}},
			{do: startBG("pj3", "p:c"), calls: map[string]string{"pj3": "busy"}, says: map[string]string{"pj3": `busy: principal "p" jobs 2/2`}},
			{do: startBG("qj1", "q:a"), calls: map[string]string{"qj1": "run"}, stats: &Stats{Running: 3, Jobs: 3, Queued: 2}},
			// p's waiter runs when one of its own ends.
			{do: end("p1"), calls: map[string]string{"p3": "run", "p4": "queued"}, stats: &Stats{Running: 3, Jobs: 3, Queued: 1}},
		}},
		// When a slot frees, the waiter of the principal running the
		// least goes first, not the oldest.
		{"fair-order", config.Admission{MaxRunning: 4, MaxRunningPerPrincipal: 3, MaxRunningPerConversation: 3, MaxQueue: 8, MaxBusy: 8, QueueWait: time.Minute}, []step{
			{do: start("p1", "p:a")},
			{do: start("p2", "p:a")},
			{do: start("p3", "p:a")},
			{do: start("q1", "q:a"), calls: map[string]string{"p1": "run", "p2": "run", "p3": "run", "q1": "run"}, stats: &Stats{Running: 4}},
			{do: start("p4", "p:b"), calls: map[string]string{"p4": "queued"}},
			{do: start("r1", "r:a"), calls: map[string]string{"r1": "queued"}, stats: &Stats{Running: 4, Queued: 2}},
			{do: end("p1"), calls: map[string]string{"r1": "run", "p4": "queued"}, stats: &Stats{Running: 4, Queued: 1}},
			{do: end("q1"), calls: map[string]string{"p4": "run"}, stats: &Stats{Running: 4}},
		}},
		// With the CPUs in use (MaxBusy), a principal below its share
		// runs at once; one over it waits, and the waiter of the
		// principal using less goes first.
		{"guaranteed-share", config.Admission{MaxRunning: 8, MaxQueue: 8, MaxBusy: 2, QueueWait: time.Minute}, []step{
			{do: start("p1", "p:a")},
			{do: start("p2", "p:a"), calls: map[string]string{"p1": "run", "p2": "run"}},
			{do: start("p3", "p:a"), calls: map[string]string{"p3": "queued"}},
			{do: start("q1", "q:a"), calls: map[string]string{"q1": "run"}, stats: &Stats{Running: 3, Queued: 1}},
			{do: start("q2", "q:a"), calls: map[string]string{"q2": "queued"}, stats: &Stats{Running: 3, Queued: 2}},
			{do: end("p1"), calls: map[string]string{"p3": "queued", "q2": "queued"}, stats: &Stats{Running: 2, Queued: 2}},
			{do: end("q1"), calls: map[string]string{"q2": "run", "p3": "queued"}, stats: &Stats{Running: 2, Queued: 1}},
		}},
		// Memory short: a new background job is refused naming it; a
		// foreground call beyond its principal's share (4 of MaxBusy 8,
		// with q running) waits until memory is back, though the CPUs
		// have room; those within it run.
		{"memory-short", config.Admission{MaxRunning: 16, MaxQueue: 8, MaxBusy: 8, QueueWait: time.Minute}, []step{
			{do: host(true)},
			{do: startBG("j1", "p:a"), calls: map[string]string{"j1": "busy"}, says: map[string]string{"j1": "busy: host memory 100/200"}},
			{do: start("q1", "q:a"), calls: map[string]string{"q1": "run"}},
			{do: start("p1", "p:a")},
			{do: start("p2", "p:a")},
			{do: start("p3", "p:a")},
			{do: start("p4", "p:a"), calls: map[string]string{"p1": "run", "p2": "run", "p3": "run", "p4": "run"}},
			{do: start("p5", "p:a"), calls: map[string]string{"p5": "queued"}, stats: &Stats{Running: 5, Queued: 1}},
			{do: host(false), calls: map[string]string{"p5": "run"}, stats: &Stats{Running: 6}},
		}},
	} {
		t.Run(c.name, func(t *testing.T) { runSteps(t, c.lim, c.steps) })
	}
}

// A yield takes a background slot; over the conversation's job cap it is
// refused and the job ends as a timeout, saying why; under it the job goes
// on as the conversation's next background job and its foreground slot
// frees.
func TestYieldAdmission(t *testing.T) {
	lim := config.Admission{MaxRunning: 2, MaxRunningPerConversation: 2, MaxQueue: 2, QueueWait: time.Minute,
		MaxJobs: 4, MaxJobsPerConversation: 1}
	h := newAdmissionSim(t, lim)
	yieldingJob := func(conv string) *Job {
		t.Helper()
		j, err := h.s.Start(context.Background(), jobs.Request{Conversation: conv, Script: "echo before; exec sleep 60", Dir: t.TempDir(),
			Timeout: 300 * time.Millisecond, Yield: &jobs.Yield{Lifetime: time.Minute}})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	first := yieldingJob("A")
	o := <-first.Done()
	if o.Yielded == nil || o.Yielded.ID != "job-1" || !strings.Contains(o.Output.Text, "before") {
		t.Fatalf("first yield: %+v", o)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { st := h.s.Stats(); return st.Running == 0 && st.Jobs == 1 },
		"the yielded job still holds a foreground slot: %+v", h.s.Stats())
	second := yieldingJob("A")
	o = <-second.Done()
	var b *BusyError
	if o.Yielded != nil || o.Reason != jobs.ReasonTimeout || !errors.As(o.YieldRefused, &b) || b.Limit != LimitJobs || b.Scope != ScopeConversation || b.Count != 1 {
		t.Fatalf("second yield over the cap: %+v", o)
	}
	if st := h.s.Stats(); st.Jobs != 1 {
		t.Fatalf("a refused yield kept a background slot: %+v", st)
	}
	// The refused yield gave its job number back: the next one is job-2.
	bg, err := h.s.Start(context.Background(), jobs.Request{Conversation: "B", Script: "true", Dir: t.TempDir(), Background: true})
	if err != nil || bg.ID != "job-1" {
		t.Fatalf("B's first job: %v %v", bg, err)
	}
	if _, ok, err := h.s.Kill(context.Background(), "A", "job-1"); !ok || err != nil {
		t.Fatalf("kill the yielded job: %v %v", ok, err)
	}
	if got := fmt.Sprint(len(h.s.Jobs("A"))); got != "1" {
		t.Fatalf("A lists %s jobs", got)
	}
}

// The host's state as the admission watch reads it from /proc: nothing
// short on a host running the tests, and what it could read is sane.
func TestHostState(t *testing.T) {
	st := newHostReader(20).read()
	t.Logf("%+v", st)
	if st.availMiB <= 0 || st.floorMiB <= 0 || st.tasks <= 0 || st.taskMax <= st.tasks {
		t.Errorf("unreadable host state: %+v", st)
	}
	if st.pidsShort {
		t.Errorf("processes short: %+v", st)
	}
	if never := newHostReader(-1).read(); never.memShort && never.availMiB >= never.floorMiB {
		t.Errorf("memory pressure counted with MemoryPressure negative: %+v", never)
	}
}

// What the jobs use is measured, from their cgroups or, without, from
// their process trees: a CPU-bound job counts as busy (one CPU), a
// sleeping one as idle, and neither stays unmeasured.
func TestMeasuredLoad(t *testing.T) {
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprintf("cgroups-off=%v", off), func(t *testing.T) {
			if !off {
				m, err := proc.ProbeCgroups("")
				testenv.Need(t, testenv.Cgroups, err)
				m.Close()
			}
			s, err := New(Config{
				Env: config.Env{Environ: []string{"PATH=" + os.Getenv("PATH")}}, OutputDir: t.TempDir(), Cgroups: config.Cgroups{Off: off},
				Lifecycle: config.Lifecycle{Grace: 200 * time.Millisecond, CleanupWait: 2 * time.Second, DrainWait: 100 * time.Millisecond},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Shutdown(context.Background(), false)
			start := func(script string) *Job {
				j, err := s.Start(context.Background(), jobs.Request{Conversation: "c", Script: script, Dir: t.TempDir(), Timeout: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				return j
			}
			// The busy loop runs in a child of the shell, the sleep too.
			busy := start(`bash -c 'end=$(( ${EPOCHREALTIME/./} + 5000000 )); while (( ${EPOCHREALTIME/./} < end )); do :; done'; true`)
			idle := start("sleep 5; true")
			var st Stats
			testenv.Eventually(t, 4*time.Second, func() bool { st = s.Stats(); return st.Starting == 0 && st.Busy == 1 },
				"not measured: %+v", testenv.Last(&st))
			s.Cancel("c", busy.ID)
			s.Cancel("c", idle.ID)
			<-busy.Done()
			<-idle.Done()
		})
	}
}
