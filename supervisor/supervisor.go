// Package supervisor holds the supervisor actor: it spawns one command
// actor per command, tracks running commands and background jobs, routes
// cancellation and kills, stops (never restarts) failed command actors, and
// shuts down by ending every command before stopping itself.
//
// The supervisor keeps the records of ended background jobs so they can be
// listed and read after they end; it keeps at most MaxEnded of them,
// dropping the oldest together with its output file.
package supervisor

import (
	"os"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/bashvisor/bashvisor/actors"
)

// MaxEnded bounds the ended background jobs remembered.
const MaxEnded = 1000

// Spawn asks the supervisor to start a command actor.
type Spawn struct{ Command *actors.Command }

// List asks for every running command and every remembered background
// job.
type List struct{ Reply chan<- []actors.JobState }

// Kill ends a background job with the grace sequence; Reply (buffered)
// receives its final state, or OK=false when there is no such job.
type Kill struct {
	ID     string
	Reason actors.Reason
	Reply  chan<- KillReply
}

// KillReply answers a Kill.
type KillReply struct {
	State actors.JobState
	OK    bool
}

// Shutdown ends every command (background jobs too, unless LeaveJobs)
// and then stops the supervisor; Done is closed when it has stopped.
type Shutdown struct {
	LeaveJobs bool
	Done      chan struct{}
	// Final receives the job records as they were when the supervisor
	// stopped (set before Done is closed).
	Final []actors.JobState
}

type entry struct {
	pid   *actor.PID
	state actors.JobState
}

type supervisor struct {
	running  map[string]*entry // commands not yet reported final, by id
	ended    map[string]actors.JobState
	order    []string          // ended ids, oldest first
	children map[string]string // live child actor id -> command id
	killers  map[string][]chan<- KillReply
	shutdown *Shutdown
}

// Props returns the supervisor's props: its children are stopped, never
// restarted (a restart would lose the process, and re-running a command is
// not safe).
func Props() *actor.Props {
	stop := actor.NewOneForOneStrategy(0, time.Second, func(any) actor.Directive { return actor.StopDirective })
	return actor.PropsFromProducer(func() actor.Actor {
		return &supervisor{
			running:  map[string]*entry{},
			ended:    map[string]actors.JobState{},
			children: map[string]string{},
			killers:  map[string][]chan<- KillReply{},
		}
	}, actor.WithSupervisor(stop))
}

func (s *supervisor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *Spawn:
		s.spawn(ctx, m.Command)
	case *actors.JobUpdate:
		s.update(ctx, m.State)
	case *actors.Cancel:
		if e, ok := s.running[m.ID]; ok {
			ctx.Send(e.pid, m)
		}
	case *Kill:
		s.kill(ctx, m)
	case *List:
		m.Reply <- s.list()
	case *actor.Terminated:
		s.terminated(ctx, m.Who)
	case *Shutdown:
		s.beginShutdown(ctx, m)
	case *actor.Stopped:
		if s.shutdown != nil {
			s.shutdown.Final = s.list()
			close(s.shutdown.Done)
		}
	}
}

func (s *supervisor) spawn(ctx actor.Context, cmd *actors.Command) {
	pid := ctx.Spawn(actors.NewProps(cmd))
	s.running[cmd.ID] = &entry{pid: pid, state: actors.JobState{
		ID: cmd.ID, Command: cmd.Command, Display: cmd.Display, ConversationID: cmd.ConversationID,
		Background: cmd.Background, Running: true, Status: "running", OutputFile: cmd.OutputFile,
		Started: time.Now(),
	}}
	s.children[pid.Id] = cmd.ID
	if s.shutdown != nil {
		// The engine may already have started the process (actors.Launch):
		// the actor takes it over and ends it like every other command.
		ctx.Send(pid, &actors.Cancel{ID: cmd.ID, Reason: actors.ReasonShutdown})
	}
}

// update records a state change; a final state stops the command actor.
func (s *supervisor) update(ctx actor.Context, st actors.JobState) {
	e, ok := s.running[st.ID]
	if !ok {
		return
	}
	if st.Running {
		e.state = st
		return
	}
	delete(s.running, st.ID)
	if st.Background && st.Status != "error" {
		s.remember(st)
	}
	// Poison, not Stop: a user message, so a Cancel sent before this
	// point (a Kill crossing the final report) still reaches the actor,
	// which answers it with its final state.
	ctx.Poison(e.pid)
}

func (s *supervisor) remember(st actors.JobState) {
	s.ended[st.ID] = st
	s.order = append(s.order, st.ID)
	if len(s.order) > MaxEnded {
		// The forgotten job's output file can no longer be reached through
		// the engine: remove it so a long-running server does not fill the
		// disk.
		if f := s.ended[s.order[0]].OutputFile; f != "" {
			_ = os.Remove(f)
		}
		delete(s.ended, s.order[0])
		s.order = slices.Delete(s.order, 0, 1)
	}
}

func (s *supervisor) kill(ctx actor.Context, m *Kill) {
	if e, ok := s.running[m.ID]; ok && e.state.Background {
		// The reply is remembered too: if the actor fails before it
		// answers, terminated answers instead. Sends never block (the
		// channel has room for one answer; a second is dropped).
		reply := m.Reply
		s.killers[m.ID] = append(s.killers[m.ID], reply)
		ctx.Send(e.pid, &actors.Cancel{ID: m.ID, Reason: m.Reason, Reply: func(st actors.JobState) {
			answer(reply, KillReply{State: st, OK: true})
		}})
		return
	}
	if st, ok := s.ended[m.ID]; ok {
		m.Reply <- KillReply{State: st, OK: true}
		return
	}
	m.Reply <- KillReply{}
}

func (s *supervisor) terminated(ctx actor.Context, who *actor.PID) {
	id, ok := s.children[who.Id]
	if !ok {
		return
	}
	delete(s.children, who.Id)
	if e, ok := s.running[id]; ok { // stopped without a final report: the actor failed
		delete(s.running, id)
		if e.state.Background {
			st := e.state
			st.Running, st.Status, st.Reason, st.Ended = false, "killed", "command actor failed", time.Now()
			s.remember(st)
			for _, r := range s.killers[id] {
				answer(r, KillReply{State: st, OK: true})
			}
		}
	}
	delete(s.killers, id)
	s.maybeStop(ctx)
}

func (s *supervisor) beginShutdown(ctx actor.Context, m *Shutdown) {
	if s.shutdown != nil {
		close(m.Done) // a second Shutdown waits on the first's Done instead
		return
	}
	s.shutdown = m
	for id, e := range s.running {
		if e.state.Background && m.LeaveJobs {
			ctx.Send(e.pid, &actors.Detach{})
			continue
		}
		ctx.Send(e.pid, &actors.Cancel{ID: id, Reason: actors.ReasonShutdown})
	}
	s.maybeStop(ctx)
}

func (s *supervisor) maybeStop(ctx actor.Context) {
	if s.shutdown != nil && len(s.children) == 0 {
		ctx.Stop(ctx.Self())
	}
}

func (s *supervisor) list() []actors.JobState {
	out := make([]actors.JobState, 0, len(s.running)+len(s.ended))
	for _, e := range s.running {
		out = append(out, e.state)
	}
	for _, id := range s.order {
		out = append(out, s.ended[id])
	}
	return out
}

// answer sends r unless reply already holds an answer.
func answer(reply chan<- KillReply, r KillReply) {
	select {
	case reply <- r:
	default:
	}
}
