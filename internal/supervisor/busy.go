package supervisor

import (
	"fmt"
	"strings"
	"time"
)

// Limit names what admission control ran out of (see config.Admission).
type Limit string

// The limits a BusyError names.
const (
	// LimitRunning: foreground commands running at once (a count cap).
	LimitRunning Limit = "running"
	// LimitQueue: calls waiting (a count cap).
	LimitQueue Limit = "queue"
	// LimitJobs: background jobs running at once (a count cap).
	LimitJobs Limit = "jobs"
	// LimitCPU: the busy commands want all of Admission.MaxBusy; only
	// ever what held a call that waited QueueWait.
	LimitCPU Limit = "cpu"
	// LimitMemory: memory is short on the host.
	LimitMemory Limit = "memory"
	// LimitProcesses: processes (pids, threads) are short on the host.
	LimitProcesses Limit = "processes"
)

// Scope says whose limit it is.
type Scope string

// The scopes of a limit.
const (
	ScopeConversation Scope = "conversation"
	ScopePrincipal    Scope = "principal"
	ScopeHost         Scope = "host"
)

// BusyError is a refusal by admission control: which limit of whom was
// reached, and the counts then. It matches ErrBusy (errors.Is). Its Error
// is terse and technical; the engine words the sentence the model reads.
type BusyError struct {
	// Limit is what ran out, Scope whose it is: the call's conversation,
	// its principal, or the host.
	Limit Limit
	Scope Scope
	// Principal names the call's principal (jobs.Request.Principal; "" for
	// a call without one, whose conversation is its own principal).
	Principal string
	// Count and Max are the limit's count in its scope and its bound:
	// commands running or waiting, background jobs, or for LimitCPU the
	// CPUs wanted by busy commands and Admission.MaxBusy. For
	// LimitMemory they are the MiB of memory available and the least that
	// is not short, for LimitProcesses the host's tasks and 90% of its
	// limit.
	Count, Max int
	// Pressure, for LimitMemory, is the host's memory pressure (PSI some
	// avg10, percent of the time; negative: unknown).
	Pressure float64
	// Running and Queued are the engine's foreground commands running and
	// calls waiting when the call was refused.
	Running, Queued int
	// Waited, when positive, is how long the call waited (QueueWait) before
	// it was refused; Limit and Scope then say what held it last.
	Waited time.Duration
}

// Error reports the refusal in one line, without the advice the engine
// adds: "busy: conversation running 4/4 (8 running, 3 queued)".
func (e *BusyError) Error() string {
	var b strings.Builder
	b.WriteString("busy: ")
	if e.Waited > 0 {
		fmt.Fprintf(&b, "waited %s, held by ", e.Waited)
	}
	b.WriteString(string(e.Scope))
	if e.Scope == ScopePrincipal && e.Principal != "" {
		fmt.Fprintf(&b, " %q", e.Principal)
	}
	fmt.Fprintf(&b, " %s %d/%d (%d running, %d queued)", e.Limit, e.Count, e.Max, e.Running, e.Queued)
	return b.String()
}

// Is makes a BusyError match ErrBusy.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }
