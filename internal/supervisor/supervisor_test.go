package supervisor

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/actors"
	"github.com/bashvisor/bashvisor/internal/jobs"
	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newSupervisor starts a supervisor with short timings; it is shut down at
// the end of the test.
func newSupervisor(t *testing.T) *Supervisor {
	t.Helper()
	s, err := New(Config{
		Env: config.Env{Environ: []string{"PATH=" + os.Getenv("PATH")}}, OutputDir: t.TempDir(), Cgroups: config.Cgroups{Off: true},
		Lifecycle: config.Lifecycle{Grace: 300 * time.Millisecond, CleanupWait: 2 * time.Second, DrainWait: 100 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx, false); err != nil {
			t.Error(err)
		}
	})
	return s
}

func alive(pid int) bool {
	st, err := proc.ReadStat(pid)
	return err == nil && st.State != 'Z' && st.State != 'X'
}

func waitOutput(t *testing.T, file, prefix string) {
	t.Helper()
	testenv.Eventually(t, 5*time.Second, func() bool {
		b, _ := os.ReadFile(file)
		return strings.HasPrefix(string(b), prefix)
	}, "%s never started with %q", file, prefix)
}

func TestStartListKillShutdown(t *testing.T) {
	s := newSupervisor(t)
	fg, err := s.Start(context.Background(), jobs.Request{Script: "echo hi", Dir: t.TempDir(), Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if o := <-fg.Done(); o.Output.Text != "hi\n" || fg.ID != "cmd-1" {
		t.Fatalf("fg %s outcome %+v", fg.ID, o)
	}
	bg, err := s.Start(context.Background(), jobs.Request{Script: "trap '' TERM; echo ready; sleep 60", Dir: t.TempDir(), Background: true})
	if err != nil {
		t.Fatal(err)
	}
	waitOutput(t, bg.OutputFile, "ready")
	states := s.Jobs("")
	if len(states) != 1 || states[0].ID != "job-1" || !states[0].Running() || states[0].Pid != bg.Pid {
		t.Fatalf("list %+v", states)
	}
	st, ok, err := s.Kill(context.Background(), "", "job-1")
	if err != nil || !ok || st.Running() || st.Status != jobs.Killed || st.Reason != jobs.ReasonKilled {
		t.Fatalf("kill %+v %v %v", st, ok, err)
	}
	if alive(bg.Pid) {
		t.Fatal("job survived its kill (it ignores SIGTERM: SIGKILL must follow the grace period)")
	}
	// An ended job is remembered and can be "killed" again harmlessly.
	if st, ok, err := s.Kill(context.Background(), "", "job-1"); err != nil || !ok || st.Status != jobs.Killed {
		t.Fatalf("second kill %+v %v %v", st, ok, err)
	}
	if _, ok, err := s.Kill(context.Background(), "", "nope"); err != nil || ok {
		t.Fatal("kill of an unknown job succeeded")
	}
	if err := s.Shutdown(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if final := s.Jobs(""); len(final) != 1 || final[0].Status != jobs.Killed {
		t.Fatalf("final %+v", final)
	}
	if _, err := s.Start(context.Background(), jobs.Request{Script: "true", Dir: t.TempDir()}); err != ErrShutdown {
		t.Fatalf("start after shutdown: %v", err)
	}
}

func TestShutdownEndsJobsThenStops(t *testing.T) {
	s := newSupervisor(t)
	fg, err := s.Start(context.Background(), jobs.Request{Script: "sleep 60", Dir: t.TempDir(), Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	bg, err := s.Start(context.Background(), jobs.Request{Script: "sleep 60", Dir: t.TempDir(), Background: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx, false); err != nil {
		t.Fatal("supervisor did not stop:", err)
	}
	if o := <-fg.Done(); o.Reason != jobs.ReasonShutdown {
		t.Fatalf("fg outcome %+v", o)
	}
	if alive(fg.Pid) || alive(bg.Pid) {
		t.Fatal("a process survived shutdown")
	}
}

// TestStartCrossingShutdownIsEnded: a job admitted just before shutdown
// began, whose process arrives during it, is ended like the others.
func TestStartCrossingShutdownIsEnded(t *testing.T) {
	s := newSupervisor(t)
	reply := make(chan admitted, 1)
	s.system.Root.Send(s.pid, &startRequest{req: jobs.Request{Script: "sleep 60", Dir: t.TempDir(), Timeout: time.Minute}, reply: reply})
	a := <-reply
	// Shutdown begins (the job, still starting, is told to end) before its
	// process arrives.
	s.closed.Store(true)
	s.system.Root.Send(s.pid, &shutdownRequest{})
	l, err := actors.Launch(a.spec, s.res) // as Start does, after admission
	if err != nil {
		t.Fatal(err)
	}
	g := testenv.GroupOf(t, l.Pid()) // not reaped before the job gets l
	s.system.Root.Send(a.pid, l)
	if o := <-a.done; o.Reason != jobs.ReasonShutdown {
		t.Fatalf("late job: %+v", o)
	}
	if err := s.Shutdown(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if alive(l.Pid()) {
		g.Kill()
		t.Fatal("job survived shutdown")
	}
}

func TestShutdownLeavingJobs(t *testing.T) {
	s := newSupervisor(t)
	bg, err := s.Start(context.Background(), jobs.Request{Script: "sleep 60", Dir: t.TempDir(), Background: true})
	if err != nil {
		t.Fatal(err)
	}
	testenv.KillGroupAtCleanup(t, bg.Pid)
	if err := s.Shutdown(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if !alive(bg.Pid) {
		t.Fatal("job was ended although leaveJobs was set")
	}
	if final := s.Jobs(""); len(final) != 1 || final[0].Status != jobs.Detached {
		t.Fatalf("final %+v", final)
	}
}

func TestEndedJobsAreBounded(t *testing.T) {
	sv := &supervisor{ended: map[key]jobs.State{}}
	for i := range MaxEnded + 10 {
		sv.remember(jobs.State{ID: fmt.Sprint("job-", i), Background: true, Started: time.Unix(int64(i), 0)})
	}
	if len(sv.ended) != MaxEnded || len(sv.order) != MaxEnded || sv.order[0].id != "job-10" {
		t.Fatalf("kept %d/%d, oldest %s", len(sv.ended), len(sv.order), sv.order[0])
	}
	if got := sv.list("", true); len(got) != MaxEnded || got[0].ID != "job-10" {
		t.Fatalf("list %d", len(got))
	}
}
