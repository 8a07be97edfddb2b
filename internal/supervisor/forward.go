package supervisor

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/bashvisor/bashvisor/internal/sandbox"
)

// ErrNoWorld: the conversation has no world (no sandboxed command ran in
// it yet, or it ended).
var ErrNoWorld = errors.New("the conversation has no sandboxed network: none of its commands ran in the sandbox yet, or it ended")

// openWorld returns conversation conv's world without making one.
func (s *Supervisor) openWorld(conv string) (*sandbox.World, error) {
	w := s.workspace(conv)
	if w == nil {
		return nil, ErrNoWorld
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.world == nil {
		return nil, ErrNoWorld
	}
	return w.world, nil
}

// Dial connects to port on conversation conv's loopback network (see
// sandbox.World.Dial). It fails, matching ErrNoWorld, when conv has no
// world, and ErrUnavailable where the sandbox cannot connect (not Linux).
func (s *Supervisor) Dial(ctx context.Context, conv string, port int) (net.Conn, error) {
	w, err := s.openWorld(conv)
	if err != nil {
		return nil, err
	}
	c, err := w.Dial(ctx, port)
	if errors.Is(err, sandbox.ErrUnavailable) {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return c, err
}

// Listener is a TCP socket listening in a conversation's world.
type Listener struct {
	Port, Pid int
	// Job is the background job whose process group holds it ("" for
	// none: a foreground command's, or a process that left its group).
	Job string
}

// Listening lists the TCP sockets listening in conversation conv's
// world (see sandbox.World.Listening), looked up only when a job of the
// conversation is still running (nothing else can hold one): nil
// otherwise, at the cost of one look at its jobs.
func (s *Supervisor) Listening(conv string) []Listener {
	var hint []int
	job := map[int]string{}
	for _, st := range s.Jobs(conv) {
		if st.Running() {
			hint = append(hint, st.Pid)
			if st.Background {
				job[st.Pid] = st.ID
			}
		}
	}
	if len(hint) == 0 {
		return nil
	}
	w, err := s.openWorld(conv)
	if err != nil {
		return nil
	}
	socks, _ := w.Listening(hint)
	out := make([]Listener, len(socks))
	for i, so := range socks {
		out[i] = Listener{Port: so.Port, Pid: so.Pid, Job: job[so.Pgid]}
	}
	return out
}
