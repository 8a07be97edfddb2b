package supervisor

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/bashvisor/bashvisor/actors"
	"github.com/bashvisor/bashvisor/proc"
	"github.com/bashvisor/bashvisor/truncate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newSystem(t *testing.T) (*actor.ActorSystem, *actor.PID) {
	t.Helper()
	system := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond),
	)
	t.Cleanup(system.Shutdown)
	return system, system.Root.Spawn(Props())
}

func command(t *testing.T, id, script string, background bool) (*actors.Command, chan actors.Event) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	events := make(chan actors.Event, 2)
	c := &actors.Command{
		ID: id, Command: script, Spec: proc.Spec{Path: bash, Args: []string{"bash", "-c", script}, Dir: dir, CgroupFD: -1},
		Background: background, Timeout: time.Minute, Grace: 200 * time.Millisecond, CleanupWait: time.Second,
		DrainWait: 100 * time.Millisecond, Truncate: truncate.DefaultConfig(), Events: events,
	}
	if background {
		c.OutputFile = filepath.Join(dir, id+".log")
	}
	return c, events
}

func list(system *actor.ActorSystem, sup *actor.PID) []actors.JobState {
	reply := make(chan []actors.JobState, 1)
	system.Root.Send(sup, &List{Reply: reply})
	return <-reply
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	return s[strings.LastIndexByte(s, ')')+2] != 'Z'
}

func TestSpawnListKillShutdown(t *testing.T) {
	system, sup := newSystem(t)
	fg, fgEvents := command(t, "cmd-1", "echo hi", false)
	bg, bgEvents := command(t, "job-1", "trap '' TERM; sleep 60", true)
	system.Root.Send(sup, &Spawn{Command: fg})
	system.Root.Send(sup, &Spawn{Command: bg})
	if _, ok := (<-fgEvents).(*actors.Started); !ok {
		t.Fatal("no Started")
	}
	if d, ok := (<-fgEvents).(*actors.Done); !ok || d.Outcome.Output.Text != "hi\n" {
		t.Fatalf("fg outcome %#v", d)
	}
	started := (<-bgEvents).(*actors.Started)
	states := list(system, sup)
	if len(states) != 1 || states[0].ID != "job-1" || !states[0].Running || states[0].Pid != started.Pid {
		t.Fatalf("list %+v", states)
	}
	reply := make(chan KillReply, 1)
	system.Root.Send(sup, &Kill{ID: "job-1", Reason: actors.ReasonKilled, Reply: reply})
	r := <-reply
	if !r.OK || r.State.Running || r.State.Status != "killed" || r.State.Reason != "killed by request" {
		t.Fatalf("kill reply %+v", r)
	}
	if alive(started.Pid) {
		t.Fatal("job survived its kill (it ignores SIGTERM: SIGKILL must follow the grace period)")
	}
	// An ended job is remembered and can be "killed" again harmlessly.
	system.Root.Send(sup, &Kill{ID: "job-1", Reply: reply})
	if r := <-reply; !r.OK || r.State.Status != "killed" {
		t.Fatalf("second kill %+v", r)
	}
	system.Root.Send(sup, &Kill{ID: "nope", Reply: reply})
	if r := <-reply; r.OK {
		t.Fatal("kill of an unknown job succeeded")
	}
	sd := &Shutdown{Done: make(chan struct{})}
	system.Root.Send(sup, sd)
	<-sd.Done
	if len(sd.Final) != 1 || sd.Final[0].Status != "killed" {
		t.Fatalf("final %+v", sd.Final)
	}
}

func TestShutdownEndsCommandsThenStops(t *testing.T) {
	system, sup := newSystem(t)
	fg, fgEvents := command(t, "cmd-1", "sleep 60", false)
	bg, bgEvents := command(t, "job-1", "sleep 60", true)
	system.Root.Send(sup, &Spawn{Command: fg})
	system.Root.Send(sup, &Spawn{Command: bg})
	fgPid := (<-fgEvents).(*actors.Started).Pid
	bgPid := (<-bgEvents).(*actors.Started).Pid
	sd := &Shutdown{Done: make(chan struct{})}
	system.Root.Send(sup, sd)
	select {
	case <-sd.Done:
	case <-time.After(10 * time.Second):
		t.Fatal("supervisor did not stop")
	}
	if d := (<-fgEvents).(*actors.Done); d.Outcome.Reason != actors.ReasonShutdown {
		t.Fatalf("fg outcome %+v", d.Outcome)
	}
	if alive(fgPid) || alive(bgPid) {
		t.Fatal("a process survived shutdown")
	}
}

func TestSpawnDuringShutdownIsEnded(t *testing.T) {
	system, sup := newSystem(t)
	bg, bgEvents := command(t, "job-1", "trap '' TERM; echo ready; sleep 60", true)
	system.Root.Send(sup, &Spawn{Command: bg})
	pid := (<-bgEvents).(*actors.Started).Pid
	// The job must ignore SIGTERM before shutdown begins, so that the
	// supervisor is still in its grace period when the late spawn arrives.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if b, _ := os.ReadFile(bg.OutputFile); strings.HasPrefix(string(b), "ready") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("job did not start")
		}
	}
	sd := &Shutdown{Done: make(chan struct{})}
	system.Root.Send(sup, sd)
	late, lateEvents := command(t, "cmd-2", "sleep 60", false)
	if err := actors.Launch(late); err != nil { // as the engine does, before sending
		t.Fatal(err)
	}
	system.Root.Send(sup, &Spawn{Command: late}) // arrives while the job is in its grace period
	var d *actors.Done
	for d == nil {
		d, _ = (<-lateEvents).(*actors.Done)
	}
	if d.Outcome.Reason != actors.ReasonShutdown {
		t.Fatalf("late spawn: %+v", d.Outcome)
	}
	<-sd.Done
	if alive(pid) {
		syscall.Kill(-pid, syscall.SIGKILL)
		t.Fatal("job survived shutdown")
	}
}

func TestShutdownLeavingJobs(t *testing.T) {
	system, sup := newSystem(t)
	bg, bgEvents := command(t, "job-1", "sleep 60", true)
	system.Root.Send(sup, &Spawn{Command: bg})
	pid := (<-bgEvents).(*actors.Started).Pid
	t.Cleanup(func() { syscall.Kill(-pid, syscall.SIGKILL) })
	sd := &Shutdown{LeaveJobs: true, Done: make(chan struct{})}
	system.Root.Send(sup, sd)
	<-sd.Done
	if !alive(pid) {
		t.Fatal("job was ended although LeaveJobs was set")
	}
	if len(sd.Final) != 1 || sd.Final[0].Status != "detached" {
		t.Fatalf("final %+v", sd.Final)
	}
}

func TestEndedJobsAreBounded(t *testing.T) {
	s := &supervisor{ended: map[string]actors.JobState{}}
	for i := range MaxEnded + 10 {
		s.remember(actors.JobState{ID: fmt.Sprint("job-", i), Background: true})
	}
	if len(s.ended) != MaxEnded || len(s.order) != MaxEnded || s.order[0] != "job-10" {
		t.Fatalf("kept %d/%d, oldest %s", len(s.ended), len(s.order), s.order[0])
	}
	if got := s.list(); len(got) != MaxEnded || got[0].ID != "job-10" {
		t.Fatalf("list %d", len(got))
	}
}
