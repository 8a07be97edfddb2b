package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/jobs"
	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
	"github.com/bashvisor/bashvisor/internal/truncate"
)

func TestMain(m *testing.M) {
	sandbox.Main()
	goleak.VerifyTestMain(m)
}

// parent is a minimal supervisor: it spawns jobs (so they have a parent),
// stops them on their final report, never restarts them, and records what
// it hears.
type parent struct {
	reports    chan jobs.State
	terminated chan *actor.PID
	children   map[string]*actor.PID // by job id
	keep       bool                  // do not stop jobs on their final report
}

type spawn struct {
	id    string
	props *actor.Props
	reply chan *actor.PID
}

func (p *parent) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *spawn:
		pid := ctx.Spawn(m.props)
		p.children[m.id] = pid
		m.reply <- pid
	case *Report:
		if m.Finish != nil {
			m.Finish() // as the supervisor does
		}
		p.reports <- m.State
		if !m.State.Running() && !p.keep {
			ctx.Poison(p.children[m.State.ID])
		}
	case *actor.Terminated:
		p.terminated <- m.Who
	}
}

// harness runs jobs under a parent, with real processes.
type harness struct {
	t      *testing.T
	system *actor.ActorSystem
	parent *parent
	pid    *actor.PID
	res    *Resources

	mu     sync.Mutex
	phases map[string][]phase
}

func newHarness(t *testing.T, cgroups bool, mod func(*Resources)) *harness {
	t.Helper()
	bash := testenv.NeedsTool(t, "bash")[0]
	h := &harness{t: t, parent: &parent{reports: make(chan jobs.State, 16), terminated: make(chan *actor.PID, 16), children: map[string]*actor.PID{}},
		phases: map[string][]phase{}}
	h.system = actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond),
	)
	h.res = &Resources{
		Bash: bash, Env: proc.NewEnv(config.Env{Environ: []string{"PATH=" + os.Getenv("PATH")}}),
		Truncate:  truncate.DefaultConfig(),
		Lifecycle: config.Lifecycle{Grace: 300 * time.Millisecond, CleanupWait: 2 * time.Second, DrainWait: 100 * time.Millisecond},
		trace: func(id string, p phase) {
			h.mu.Lock()
			h.phases[id] = append(h.phases[id], p)
			h.mu.Unlock()
		},
	}
	if cgroups {
		cg, err := proc.ProbeCgroups(testenv.CgroupParent())
		testenv.Need(t, testenv.Cgroups, err)
		h.res.Cgroups = cg
	}
	if mod != nil {
		mod(h.res)
	}
	stop := actor.NewOneForOneStrategy(0, time.Second, func(any) actor.Directive { return actor.StopDirective })
	h.pid = h.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return h.parent }, actor.WithSupervisor(stop)))
	t.Cleanup(func() {
		_ = h.system.Root.StopFuture(h.pid).Wait()
		h.system.Shutdown()
		if h.res.Cgroups != nil {
			if err := h.res.Cgroups.Close(); err != nil {
				t.Error(err)
			}
		}
	})
	return h
}

var jobSeq int

// start spawns the actor of a job running script and launches it (unless
// hold, when the test sends Launched itself), returning the actor, the
// launched process and the outcome channel.
func (h *harness) start(script string, mod func(*Spec), mw ...actor.ReceiverMiddleware) (*Spec, *actor.PID, chan jobs.Outcome) {
	h.t.Helper()
	jobSeq++
	done := make(chan jobs.Outcome, 1)
	spec := &Spec{ID: "cmd-" + strconv.Itoa(jobSeq), Request: jobs.Request{Script: script, Command: script, Dir: h.t.TempDir(), Timeout: time.Minute}, Done: done}
	if mod != nil {
		mod(spec)
	}
	props := NewProps(spec, h.res)
	if len(mw) > 0 {
		props = actor.PropsFromProducer(func() actor.Actor { return &job{spec: spec, res: h.res} },
			actor.WithDispatcher(actor.NewSynchronizedDispatcher(300)), actor.WithReceiverMiddleware(mw...))
	}
	reply := make(chan *actor.PID, 1)
	h.system.Root.Send(h.pid, &spawn{id: spec.ID, props: props, reply: reply})
	return spec, <-reply, done
}

func (h *harness) launch(spec *Spec, pid *actor.PID) *Launched {
	h.t.Helper()
	l, err := Launch(spec, h.res)
	if err != nil {
		h.t.Fatal(err)
	}
	h.system.Root.Send(pid, l)
	return l
}

func (h *harness) outcome(done chan jobs.Outcome) jobs.Outcome {
	h.t.Helper()
	select {
	case o := <-done:
		return o
	case <-time.After(15 * time.Second):
		h.t.Fatal("no outcome")
		return jobs.Outcome{}
	}
}

// final waits for the job's final report.
func (h *harness) final(id string) jobs.State {
	h.t.Helper()
	for {
		select {
		case st := <-h.parent.reports:
			if st.ID == id && !st.Running() {
				return st
			}
		case <-time.After(15 * time.Second):
			h.t.Fatalf("no final report of %s", id)
		}
	}
}

func (h *harness) trace(id string) []phase {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.phases[id])
}

func alive(pid int) bool {
	st, err := proc.ReadStat(pid)
	return err == nil && st.State != 'Z' && st.State != 'X'
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, func() bool { return !alive(pid) }, "pid %d still alive", pid)
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	var pid int
	testenv.Eventually(t, 10*time.Second, func() bool {
		b, err := os.ReadFile(path)
		var perr error
		pid, perr = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && perr == nil && pid > 0
	}, "no pid in %s", path)
	return pid
}

// TestTransitions drives the job actor through each transition of its
// state machine with real processes, and checks the phases it went
// through and the outcome it reported.
func TestTransitions(t *testing.T) {
	cases := []struct {
		name    string
		cgroups bool
		res     func(*Resources)
		script  string
		spec    func(*Spec)
		// drive runs between spawning and the outcome; nil: launch.
		drive  func(h *harness, spec *Spec, pid *actor.PID)
		phases []phase
		check  func(t *testing.T, h *harness, spec *Spec, o jobs.Outcome, st jobs.State)
	}{
		{
			name: "exits-0", script: "echo hi",
			phases: []phase{running, draining, cleaning, done},
			check: func(t *testing.T, h *harness, spec *Spec, o jobs.Outcome, st jobs.State) {
				if !o.Exited || o.ExitCode != 0 || o.Output.Text != "hi\n" || o.Reason != jobs.ReasonNone || st.Status != jobs.Completed {
					t.Errorf("outcome %+v state %+v", o, st)
				}
			},
		},
		{
			name: "exits-3", script: "exit 3",
			phases: []phase{running, draining, cleaning, done},
			check: func(t *testing.T, h *harness, spec *Spec, o jobs.Outcome, st jobs.State) {
				if o.ExitCode != 3 || st.Status != jobs.Failed || *st.ExitCode != 3 {
					t.Errorf("outcome %+v state %+v", o, st)
				}
			},
		},
		{
			name: "cancelled-while-starting", script: "sleep 60",
			drive: func(h *harness, spec *Spec, pid *actor.PID) {
				h.system.Root.Send(pid, &Cancel{Reason: jobs.ReasonCancelled})
				h.launch(spec, pid)
			},
			phases: []phase{running, ending, cleaning, done},
			check: func(t *testing.T, h *harness, spec *Spec, o jobs.Outcome, st jobs.State) {
				if o.Reason != jobs.ReasonCancelled || o.Signal != "SIGTERM" || st.Status != jobs.Killed {
					t.Errorf("outcome %+v state %+v", o, st)
				}
			},
		},
		{
			name: "launch-failed", script: "true",
			drive: func(h *harness, spec *Spec, pid *actor.PID) {
				h.system.Root.Send(pid, &LaunchFailed{Err: proc.ErrStart})
			},
			phases: []phase{done},
			check: func(t *testing.T, h *harness, spec *Spec, o jobs.Outcome, st jobs.State) {
				if !errors.Is(o.Err, proc.ErrStart) || st.Status != jobs.Errored || !errors.Is(st.Err, proc.ErrStart) {
					t.Errorf("outcome %+v state %+v", o, st)
				}
			},
		},
		{
			// The timeout leaves bash time to start and print on a loaded
			// machine (or under emulation: the cgroup v2 VM).
			name: "timeout", script: "echo started; sleep 60",
			spec:   func(s *Spec) { s.Timeout = 2 * time.Second },
			phases: []phase{running, ending, cleaning, done},
			check: func(t *testing.T, h *harness, spec *Spec, o jobs.Outcome, st jobs.State) {
				if o.Reason != jobs.ReasonTimeout || o.Output.Text != "started\n" || st.Status != jobs.Killed {
					t.Errorf("outcome %+v state %+v", o, st)
				}
			},
		},
		{
			name: "sigterm-ignored-gets-sigkill", script: "trap '' TERM; echo ready; while :; do sleep 0.05; done",
			drive: func(h *harness, spec *Spec, pid *actor.PID) {
				l := h.launch(spec, pid)
				for !strings.Contains(l.out.LastLine(0), "ready") {
					time.Sleep(5 * time.Millisecond)
				}
				h.system.Root.Send(pid, &Cancel{Reason: jobs.ReasonCancelled})
			},
			phases: []phase{running, ending, cleaning, done},
			check: func(t *testing.T, h *harness, spec *Spec, o jobs.Outcome, st jobs.State) {
				if o.Reason != jobs.ReasonCancelled || o.Signal != "SIGKILL" || o.ExitCode != 137 {
					t.Errorf("outcome %+v", o)
				}
			},
		},
		{
			name: "leftovers-ended", script: "sleep 60 & echo done",
			phases: []phase{running, draining, ending, cleaning, done},
			check: func(t *testing.T, h *harness, spec *Spec, o jobs.Outcome, st jobs.State) {
				if o.Reason != jobs.ReasonNone || o.ExitCode != 0 || len(o.Leftovers) != 1 || o.Leftovers[0].Comm != "sleep" || o.LeftRunning {
					t.Errorf("outcome %+v", o)
				}
				waitGone(t, o.Leftovers[0].Pid)
			},
		},
		{
			// A leftover that floods the pipe the shell wrote to: the
			// shell's exit is seen although the pipe never runs dry
			// (its reader never waits for output, see startWaiter).
			// The shell exits once yes has written 1 MB (its wchar):
			// in the emulated VM at load 16 a bare `yes &` had written
			// nothing by the time it was ended.
			name: "leftover-floods", script: `yes & p=$!; w=0; until [ "$w" -gt 1000000 ]; do while read -r k v; do [ "$k" = wchar: ] && w=$v; done < /proc/$p/io; done; exit 0`,
			phases: []phase{running, draining, ending, cleaning, done},
			check: func(t *testing.T, h *harness, spec *Spec, o jobs.Outcome, st jobs.State) {
				if !o.Exited || o.ExitCode != 0 || len(o.Leftovers) != 1 || o.Leftovers[0].Comm != "yes" || !o.Output.Truncated {
					t.Errorf("outcome %+v", o)
				}
				if len(o.Leftovers) == 1 {
					waitGone(t, o.Leftovers[0].Pid)
				}
			},
		},
		{
			name: "leftovers-kept", cgroups: true, res: func(r *Resources) { r.Lifecycle.KeepLeftovers = true },
			script: "sleep 60 >/dev/null 2>&1 & echo $! > pid",
			phases: []phase{running, draining, cleaning, done},
			check: func(t *testing.T, h *harness, spec *Spec, o jobs.Outcome, st jobs.State) {
				pid := readPid(t, filepath.Join(spec.Dir, "pid"))
				if p, err := os.FindProcess(pid); err == nil { // kept running; a pidfd: never another process
					defer p.Kill()
				}
				if !o.LeftRunning || len(o.Leftovers) != 1 || !alive(pid) {
					t.Errorf("outcome %+v alive %v", o, alive(pid))
				}
			},
		},
		{
			// The shell waits until the escapee runs sleep (setsid(1) has
			// left the group by then): in the emulated VM at load 25 the
			// shell exited first and found setsid still in its group.
			name: "pipe-held-by-escapee", script: "setsid sleep 2 & p=$!; echo $p > pid; until read -r c < /proc/$p/comm && [ \"$c\" = sleep ]; do sleep 0.01; done; echo done",
			phases: []phase{running, draining, cleaning, done},
			check: func(t *testing.T, h *harness, spec *Spec, o jobs.Outcome, st jobs.State) {
				if !o.PipeHeld || o.Output.Text != "done\n" {
					t.Errorf("outcome %+v", o)
				}
				if p, err := os.FindProcess(readPid(t, filepath.Join(spec.Dir, "pid"))); err == nil { // a pidfd: never another process
					_ = p.Kill()
				}
			},
		},
		{
			name: "escapee-ended-through-cgroup", cgroups: true, script: "setsid sleep 60 & echo $! > pid; echo done",
			phases: []phase{running, draining, ending, cleaning, done},
			check: func(t *testing.T, h *harness, spec *Spec, o jobs.Outcome, st jobs.State) {
				if o.PipeHeld || len(o.Leftovers) != 1 {
					t.Errorf("outcome %+v", o)
				}
				waitGone(t, readPid(t, filepath.Join(spec.Dir, "pid")))
			},
		},
		{
			name: "background-lives-with-its-group", script: "sleep 0.5 & echo x",
			spec: func(s *Spec) {
				s.Background, s.Done = true, nil
				s.OutputFile = filepath.Join(s.Dir, "out.log")
				s.Completion = func(o jobs.Outcome) string { return fmt.Sprintf("[end %s %d]", o.Status(), o.ExitCode) }
			},
			phases: []phase{running, draining, cleaning, done},
			check: func(t *testing.T, h *harness, spec *Spec, o jobs.Outcome, st jobs.State) {
				if st.Status != jobs.Completed || st.Ended.Sub(st.Started) < 400*time.Millisecond {
					t.Errorf("state %+v (ended before its group?)", st)
				}
				if b, _ := os.ReadFile(spec.OutputFile); string(b) != "x\n\n\n[end completed 0]" {
					t.Errorf("output file %q", b)
				}
			},
		},
		{
			name: "background-lifetime", script: "sleep 60",
			spec: func(s *Spec) {
				s.Background, s.Done, s.Timeout = true, nil, 300*time.Millisecond
				s.OutputFile = filepath.Join(s.Dir, "out.log")
			},
			phases: []phase{running, ending, cleaning, done},
			check: func(t *testing.T, h *harness, spec *Spec, o jobs.Outcome, st jobs.State) {
				if st.Status != jobs.Killed || st.Reason != jobs.ReasonLifetime {
					t.Errorf("state %+v", st)
				}
			},
		},
		{
			name: "background-detached", script: "sleep 60",
			spec: func(s *Spec) {
				s.Background, s.Done = true, nil
				s.OutputFile = filepath.Join(s.Dir, "out.log")
			},
			drive: func(h *harness, spec *Spec, pid *actor.PID) {
				h.launch(spec, pid)
				h.system.Root.Send(pid, &Detach{})
			},
			phases: []phase{running, done},
			check: func(t *testing.T, h *harness, spec *Spec, o jobs.Outcome, st jobs.State) {
				defer testenv.GroupOf(t, st.Pid).Kill() // detached: it runs
				if st.Status != jobs.Detached || !alive(st.Pid) {
					t.Errorf("state %+v alive %v", st, alive(st.Pid))
				}
			},
		},
		{
			name: "restricted", script: `echo x > "$TMPDIR/f" && cat "$TMPDIR/f"; touch /etc/bashvisor-actors-test`,
			spec:   func(s *Spec) { s.Sandbox = &jobs.Profile{} },
			phases: []phase{running, draining, cleaning, done},
			check: func(t *testing.T, h *harness, spec *Spec, o jobs.Outcome, st jobs.State) {
				if !strings.HasPrefix(o.Output.Text, "x\n") || o.ExitCode == 0 {
					t.Errorf("outcome %+v", o)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "restricted" {
				testenv.Needf(t, testenv.Landlock, sandbox.Probe().Available(), "restricted mode unavailable")
			}
			h := newHarness(t, c.cgroups, c.res)
			spec, pid, done := h.start(c.script, c.spec)
			if c.drive != nil {
				c.drive(h, spec, pid)
			} else {
				h.launch(spec, pid)
			}
			var o jobs.Outcome
			if !spec.Background {
				o = h.outcome(done)
			}
			st := h.final(spec.ID)
			if got := h.trace(spec.ID); !slices.Equal(got, c.phases) {
				t.Errorf("phases %v, want %v", got, c.phases)
			}
			c.check(t, h, spec, o, st)
		})
	}
}

// TestCancelAfterDone: a Cancel that crosses the final report is answered
// with the final state.
func TestCancelAfterDone(t *testing.T) {
	h := newHarness(t, false, nil)
	h.parent.keep = true // the actor stays until the test stops it
	spec, pid, done := h.start("exit 4", nil)
	h.launch(spec, pid)
	h.outcome(done)
	h.final(spec.ID)
	reply := make(chan jobs.State, 1)
	h.system.Root.Send(pid, &Cancel{Reason: jobs.ReasonKilled, Reply: reply})
	select {
	case st := <-reply:
		if st.ID != spec.ID || st.Status != jobs.Failed || *st.ExitCode != 4 {
			t.Fatalf("state %+v", st)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer")
	}
	_ = h.system.Root.StopFuture(pid).Wait()
}

// boom makes the test middleware panic inside the job's actor.
type boom struct{}

func panicOnBoom(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
		if _, ok := env.Message.(boom); ok {
			panic("boom")
		}
		next(c, env)
	}
}

// TestPanicStopsActorAndKillsGroup: a panicking job actor is stopped, never
// restarted; it kills its whole group at once and answers its caller with
// ErrActorFailed.
func TestPanicStopsActorAndKillsGroup(t *testing.T) {
	h := newHarness(t, false, nil)
	spec, pid, done := h.start("sleep 60 & echo $! > pid; echo running; wait", nil, panicOnBoom)
	l := h.launch(spec, pid)
	sleepPid := readPid(t, filepath.Join(spec.Dir, "pid"))
	h.system.Root.Send(pid, boom{})
	if o := h.outcome(done); !errors.Is(o.Err, jobs.ErrActorFailed) || o.Reason != jobs.ReasonFailed {
		t.Fatalf("outcome %+v", o)
	}
	select {
	case who := <-h.parent.terminated:
		if who.Id != pid.Id {
			t.Fatalf("terminated %v", who)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("actor not stopped")
	}
	waitGone(t, l.Pid())
	waitGone(t, sleepPid)
}

// A close that finds the job's stdin already closed by the job's end
// (closeStdin, when the process exits right after it read its input) is
// what was asked for, not an error: the input was delivered. Before the
// fix, writeLoop answered "close |1: file already closed".
func TestWriteCloseAfterJobClosedStdin(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	q := make(chan writeReq, 2)
	done := make(chan struct{})
	go func() { writeLoop(w, q, false); close(done) }()
	reply := make(chan error, 1)
	q <- writeReq{data: []byte("v\n"), reply: reply}
	if err := <-reply; err != nil {
		t.Fatal(err)
	}
	w.Close() // what closeStdin does when the job ends
	q <- writeReq{close: true, reply: reply}
	if err := <-reply; err != nil {
		t.Errorf("close after the job closed stdin: %v", err)
	}
	close(q)
	<-done
	buf := make([]byte, 8)
	if n, _ := r.Read(buf); string(buf[:n]) != "v\n" {
		t.Errorf("delivered %q", buf[:n])
	}
}

// A sandboxed job without a cgroup whose actor panics lets go of what
// its Freezer holds (the command's mount namespace, which keeps the
// command's mounts alive), as when it ends normally.
func TestPanicReleasesTheFreezer(t *testing.T) {
	testenv.Needf(t, testenv.Landlock, sandbox.Probe().Available(), "restricted mode unavailable")
	testenv.Needf(t, testenv.Namespaces, sandbox.Probe().Namespaces, "no namespaces for the sandbox")
	h := newHarness(t, false, nil)
	spec, pid, done := h.start("sleep 60", func(s *Spec) { s.Sandbox = &jobs.Profile{} }, panicOnBoom)
	l := h.launch(spec, pid)
	if l.fz == nil {
		t.Fatal("a sandboxed job without a cgroup has no Freezer")
	}
	var ns uint64
	testenv.Eventually(t, 10*time.Second, func() bool {
		if len(l.fz.Members()) == 0 {
			return false
		}
		var err error
		ns, err = proc.MountNamespace(l.Pid())
		return err == nil
	}, "the command's namespace was not found")
	h.system.Root.Send(pid, boom{})
	if o := h.outcome(done); !errors.Is(o.Err, jobs.ErrActorFailed) {
		t.Fatalf("outcome %+v", o)
	}
	waitGone(t, l.Pid())
	want := "mnt:[" + strconv.FormatUint(ns, 10) + "]"
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if link, _ := os.Readlink("/proc/self/fd/" + fd.Name()); link == want {
			t.Fatalf("descriptor %s still holds the ended command's namespace %s", fd.Name(), want)
		}
	}
}

// TestLaunchFailureLeavesNothing: a Launch that fails after it set up
// the job's cgroup and output file (here the fork: the working
// directory is gone) releases both, in its one deferred cleanup.
func TestLaunchFailureLeavesNothing(t *testing.T) {
	h := newHarness(t, true, nil)
	out := filepath.Join(t.TempDir(), "job-1.log")
	spec := &Spec{ID: "job-launch-fails", OutputFile: out,
		Request: jobs.Request{Script: "true", Command: "true", Dir: filepath.Join(t.TempDir(), "gone"), Background: true}}
	l, err := Launch(spec, h.res)
	if err == nil {
		t.Fatalf("launched %d in a missing directory", l.Pid())
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the output file is left behind: %v", err)
	}
	cg := filepath.Join(h.res.Cgroups.Dir(), spec.ID)
	testenv.Eventually(t, 5*time.Second, func() bool {
		_, err := os.Stat(cg)
		return os.IsNotExist(err)
	}, "the job's cgroup %s is left behind", cg)
}
