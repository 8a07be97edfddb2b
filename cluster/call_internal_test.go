package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/bashvisor/bashvisor/cluster/clusterpb"
	"github.com/bashvisor/bashvisor/engine"
)

// answeringExecutor is an executor's actor that answers a call as an
// executor does (Accepted, then its RunResult; a query its QueryReply),
// having first suspended
// the caller's mailbox (protoactor's SuspendMailbox, a system message: the
// caller still handles system messages, not user ones), so that both
// answers wait there; with stop, it then ends (its watchers get
// Terminated). answered is closed once all of that was sent.
type answeringExecutor struct {
	stop     bool
	answered chan struct{}
	caller   *actor.PID // set before answered is closed
}

func (x *answeringExecutor) Receive(ctx actor.Context) {
	var answers []any
	switch ctx.Message().(type) {
	case *clusterpb.RunCall:
		answers = []any{&clusterpb.Accepted{BackstopMs: 60_000},
			&clusterpb.RunResult{Result: &clusterpb.Result{Status: string(engine.StatusOK), Output: "done"}}}
	case *clusterpb.Query:
		answers = []any{&clusterpb.QueryReply{Text: "done"}}
	default:
		return
	}
	caller := ctx.Sender()
	x.caller = caller
	proc, _ := ctx.ActorSystem().ProcessRegistry.Get(caller)
	proc.SendSystemMessage(caller, &actor.SuspendMailbox{})
	for _, a := range answers {
		ctx.Respond(a)
	}
	if x.stop {
		ctx.Stop(ctx.Self())
	}
	close(x.answered)
}

// resume lets pid's mailbox hand on its user messages again.
func resume(sys *actor.ActorSystem, pid *actor.PID) {
	proc, _ := sys.ProcessRegistry.Get(pid)
	proc.SendSystemMessage(pid, &actor.ResumeMailbox{})
}

// posted reports on its channel each message of a type T posted to the
// mailbox it is the middleware of.
type posted[T any] struct{ ch chan struct{} }

func (p posted[T]) MailboxStarted()     {}
func (p posted[T]) MessageReceived(any) {}
func (p posted[T]) MailboxEmpty()       {}
func (p posted[T]) MessagePosted(m any) {
	if _, ok := m.(T); ok {
		select {
		case p.ch <- struct{}{}:
		default:
		}
	}
}

// TestCallActorAnswerBeforeTerminated: an executor answers a call and
// ends; its answers wait in the call actor's mailbox when its Terminated
// (a system message, which protoactor hands on before the user messages
// already queued) arrives. The call actor hands on the answers first,
// then the end — before, the end overtook them and the call was reported
// lost.
func TestCallActorAnswerBeforeTerminated(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	x := &answeringExecutor{stop: true, answered: make(chan struct{})}
	target := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return x }))
	ev := make(chan any, 16)
	terminated := posted[*actor.Terminated]{make(chan struct{}, 1)}
	call := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &callActor{target: target, first: &clusterpb.RunCall{}, ev: ev}
	}, actor.WithMailbox(actor.Unbounded(terminated))))
	defer func() { _ = sys.Root.StopFuture(call).Wait() }()
	wait(t, x.answered, "the executor's answers")
	wait(t, terminated.ch, "the executor's end at the call actor")
	resume(sys, call)
	var got []string
	for len(got) < 3 {
		select {
		case e := <-ev:
			got = append(got, fmt.Sprintf("%T", e))
		case <-time.After(30 * time.Second):
			t.Fatalf("after %v, nothing in 30 s", got)
		}
	}
	if want := "[*clusterpb.Accepted *clusterpb.RunResult *actor.Terminated]"; fmt.Sprint(got) != want {
		t.Errorf("the call actor handed on %v, want %s", got, want)
	}
}

// TestRunAnswerBeforeLost: an executor answers a call (or a query:
// bash_jobs, bash_output, bash_kill), and is marked lost (by the front's
// watcher of it, or its keepalives) while the answer still waits in the
// call actor's mailbox: the call returns the answer — before, it
// returned "lost" at once.
func TestRunAnswerBeforeLost(t *testing.T) {
	for _, query := range []bool{false, true} {
		sys := actor.NewActorSystem()
		x := &answeringExecutor{answered: make(chan struct{})}
		target := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return x }))
		c := &Client{o: ClientOptions{AcceptTimeout: time.Minute, QueryTimeout: time.Minute}, node: &node{sys: sys}, log: slog.New(slog.DiscardHandler)}
		st := &execState{id: "x", pid: target, lost: make(chan struct{})}
		st.nameV.Store("exec-x")
		done := make(chan string, 1)
		go func() {
			if query {
				r, err := c.query(context.Background(), st, &clusterpb.Query{Op: "jobs"})
				done <- fmt.Sprintf("%s %v", r.GetText(), err)
				return
			}
			res, _ := c.runOn(context.Background(), st, assignment{}, false, engine.ToolContext{ConversationID: "c"}, engine.Input{Command: "true"}, "call-1")
			done <- fmt.Sprintf("%s %s", res.Output, res.Status)
		}()
		wait(t, x.answered, "the executor's answers")
		st.lostAt, st.lostWhy = time.Now(), "no answer to keepalives"
		close(st.lost)
		var got string
		select {
		case got = <-done: // the bug: lost without looking at what came
		case <-time.After(time.Second):
			// The call waits for the answers in the call actor's
			// mailbox (which the executor suspended): let them through.
			resume(sys, x.caller)
			got = <-done
		}
		if want := map[bool]string{false: "done ok", true: "done <nil>"}[query]; got != want {
			t.Errorf("query %v: got %q, want %q", query, got, want)
		}
		c.actors.Wait()
		_ = sys.Root.StopFuture(target).Wait()
		sys.Shutdown()
	}
}

// wait waits (up to 30 s) for ch.
func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: not in 30 s", what)
	}
}
