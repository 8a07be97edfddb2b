package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/bashvisor/bashvisor/internal/supervisor"
)

// Forward connects to port on the loopback network of conversation
// conversationID's sandbox (the network its sandboxed commands share),
// as a command of the conversation connecting to localhost:port would,
// and returns the connection: what a host address forwarding to a server
// the conversation runs is made of (mcpserver's bash_forward tool and
// its /forward/ path). Each call makes one connection; the
// conversation's server sees it come from 127.0.0.1. Two conversations
// that both listen on a port each get their own server.
//
// It fails matching ErrBadInput for a port outside 1 to 65535 or a
// conversation without a sandboxed network (none of its commands ran in
// the sandbox yet, or it ended), ErrRestrictedMode where the engine cannot
// enter the conversation's network (not Linux), and syscall.ECONNREFUSED
// when nothing listens on the port. As root the connection is made from
// a thread of the engine in the conversation's network namespace; an
// engine that is not root asks a helper process it starts there, once
// per conversation, to connect and hand the socket over.
func (e *Engine) Forward(ctx context.Context, conversationID string, port int) (net.Conn, error) {
	if port <= 0 || port > 65535 {
		return nil, fmt.Errorf("%w: port %d: want 1 to 65535", ErrBadInput, port)
	}
	c, err := e.sup.Dial(ctx, conversationID, port)
	switch {
	case err == nil:
		return c, nil
	case errors.Is(err, supervisor.ErrNoWorld):
		return nil, fmt.Errorf("%w: conversation %q: %w", ErrBadInput, conversationID, err)
	case errors.Is(err, supervisor.ErrUnavailable):
		return nil, public(err)
	}
	return nil, fmt.Errorf("forward to port %d of conversation %q: %w", port, conversationID, err)
}

// maxListeningNote bounds the ports the listening note names.
const maxListeningNote = 8

// listening puts the ports the conversation's sandboxed network listens
// on into res.Listening and its note ("[listening: 3000 (job-2), 5173
// (pid 812)]", at most maxListeningNote ports named), for a command that
// ran in the sandbox.
func (e *Engine) listening(tc ToolContext, res *Result) {
	if !tc.Sandbox.On() {
		return
	}
	ls := e.sup.Listening(tc.ConversationID)
	if len(ls) == 0 {
		return
	}
	res.Listening = make([]struct {
		Port int    `json:"port"`
		PID  int    `json:"pid"`
		Job  string `json:"job,omitempty"`
	}, len(ls))
	var b strings.Builder
	b.WriteString("[listening: ")
	for i, l := range ls {
		r := &res.Listening[i]
		r.Port, r.PID, r.Job = l.Port, l.Pid, l.Job
		if i >= maxListeningNote {
			continue
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(l.Port))
		if l.Job != "" {
			b.WriteString(" (" + l.Job + ")")
		} else {
			b.WriteString(" (pid " + strconv.Itoa(l.Pid) + ")")
		}
	}
	if n := len(ls) - maxListeningNote; n > 0 {
		fmt.Fprintf(&b, " and %d more", n)
	}
	b.WriteString("]")
	res.Output = appendNote(res.Output, b.String())
}
