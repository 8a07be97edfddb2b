package actors

import (
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/bashvisor/bashvisor/proc"
	"github.com/bashvisor/bashvisor/truncate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// boom makes the test middleware panic inside the command actor.
type boom struct{}

func panicOnBoom(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
		if _, ok := env.Message.(boom); ok {
			panic("boom")
		}
		next(c, env)
	}
}

// parent is a minimal supervisor: stop, never restart; it records
// Terminated.
type parent struct {
	child      *actor.Props
	terminated chan *actor.PID
	childPID   chan *actor.PID
}

func (p *parent) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		p.childPID <- ctx.Spawn(p.child)
	case *actor.Terminated:
		p.terminated <- m.Who
	case *JobUpdate:
		if !m.State.Running {
			ctx.Stop(ctx.Children()[0])
		}
	}
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return s[i+2] != 'Z'
}

func TestPanicStopsActorAndKillsGroup(t *testing.T) {
	system := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond),
	)
	defer system.Shutdown()
	dir := t.TempDir()
	bash, _ := exec.LookPath("bash")
	events := make(chan Event, 2)
	cmd := &Command{
		ID: "c1", Spec: proc.Spec{Path: bash, Args: []string{"bash", "-c", "sleep 60 & echo $! > pid; echo running; wait"}, Dir: dir, CgroupFD: -1},
		Timeout: time.Minute, Grace: time.Second, CleanupWait: time.Second, DrainWait: 100 * time.Millisecond,
		Truncate: truncate.DefaultConfig(), Events: events,
	}
	props := actor.PropsFromProducer(func() actor.Actor { return &commandActor{cmd: cmd} }, actor.WithReceiverMiddleware(panicOnBoom))
	stop := actor.NewOneForOneStrategy(0, time.Second, func(any) actor.Directive { return actor.StopDirective })
	p := &parent{child: props, terminated: make(chan *actor.PID, 1), childPID: make(chan *actor.PID, 1)}
	parentPID := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return p }, actor.WithSupervisor(stop)))
	defer func() { _ = system.Root.StopFuture(parentPID).Wait() }()
	child := <-p.childPID
	started := (<-events).(*Started)
	for !exists(filepath.Join(dir, "pid")) {
		time.Sleep(5 * time.Millisecond)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "pid"))
	sleepPid, _ := strconv.Atoi(strings.TrimSpace(string(b)))

	system.Root.Send(child, boom{})
	select {
	case ev := <-events:
		d, ok := ev.(*Done)
		if !ok || !errors.Is(d.Outcome.Err, ErrActorFailed) {
			t.Fatalf("event %#v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no Done after the actor failed")
	}
	select {
	case who := <-p.terminated:
		if who.Id != child.Id {
			t.Fatalf("terminated %v", who)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("actor not stopped")
	}
	deadline := time.Now().Add(3 * time.Second)
	for alive(started.Pid) || alive(sleepPid) {
		if time.Now().After(deadline) {
			t.Fatalf("group survived the actor: shell %v sleep %v", alive(started.Pid), alive(sleepPid))
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case ev := <-events:
		t.Fatalf("actor was restarted: %#v", ev)
	case <-time.After(100 * time.Millisecond):
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func TestCompletionLines(t *testing.T) {
	cases := []struct {
		o      Outcome
		line   string
		status string
	}{
		{Outcome{Exited: true}, "[background process completed]", "completed"},
		{Outcome{Exited: true, ExitCode: 3}, "[background process failed: exit code 3]", "failed"},
		{Outcome{Exited: true, ExitCode: 137, Signal: "SIGKILL"}, "[background process killed: SIGKILL]", "killed"},
		{Outcome{Exited: true, ExitCode: 143, Signal: "SIGTERM", Reason: ReasonKilled}, "[background process killed: killed by request]", "killed"},
		{Outcome{Reason: ReasonShutdown}, "[background process killed: engine shutdown]", "killed"},
		{Outcome{Reason: ReasonLifetime}, "[background process killed: lifetime limit exceeded]", "killed"},
	}
	for _, c := range cases {
		if line, status := completionLine(c.o); line != c.line || status != c.status {
			t.Errorf("%+v: %q %q", c.o, line, status)
		}
	}
}
