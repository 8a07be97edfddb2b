package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/supervisor"
)

// The sentence the model reads for each admission refusal: what is full,
// whose, the counts, and what to do. The refusal still matches ErrBusy.
func TestBusyText(t *testing.T) {
	for _, c := range []struct {
		b    supervisor.BusyError
		want string
	}{
		{supervisor.BusyError{Limit: supervisor.LimitRunning, Scope: supervisor.ScopeConversation, Count: 4, Max: 4, Running: 8, Queued: 3},
			"busy: this conversation already runs 4 commands at once, the most it may, and 3 calls are waiting; try again later"},
		{supervisor.BusyError{Limit: supervisor.LimitRunning, Scope: supervisor.ScopePrincipal, Principal: "alice", Count: 192, Max: 192, Running: 200, Queued: 768},
			`busy: principal "alice" already runs 192 commands at once in its conversations, the most one principal may, and 768 calls are waiting; try again later`},
		{supervisor.BusyError{Limit: supervisor.LimitQueue, Scope: supervisor.ScopeHost, Count: 1024, Max: 1024, Running: 256, Queued: 1024},
			"busy: 256 commands are running on this host and 1024 more are waiting, the most that may wait; try again later"},
		{supervisor.BusyError{Limit: supervisor.LimitQueue, Scope: supervisor.ScopePrincipal, Principal: "alice", Count: 768, Max: 768},
			`busy: principal "alice" already has 768 calls waiting to run, the most one principal may; wait for some of them to finish`},
		{supervisor.BusyError{Limit: supervisor.LimitJobs, Scope: supervisor.ScopeConversation, Count: 16, Max: 16},
			"busy: this conversation already has 16 background jobs running, the most it may; stop one (bash_kill) or wait for one to end"},
		{supervisor.BusyError{Limit: supervisor.LimitJobs, Scope: supervisor.ScopePrincipal, Principal: "alice", Count: 48, Max: 48},
			`busy: principal "alice" already has 48 background jobs running in its conversations, the most one principal may; stop one (bash_kill) or wait for one to end`},
		{supervisor.BusyError{Limit: supervisor.LimitJobs, Scope: supervisor.ScopePrincipal, Count: 3, Max: 3},
			`busy: this conversation already has 3 background jobs running, the most it may; stop one (bash_kill) or wait for one to end`},
		{supervisor.BusyError{Limit: supervisor.LimitJobs, Scope: supervisor.ScopeHost, Count: 64, Max: 64},
			"busy: 64 background jobs are running on this host, the most it allows; try again later"},
		{supervisor.BusyError{Limit: supervisor.LimitMemory, Scope: supervisor.ScopeHost, Count: 120, Max: 250, Pressure: 34.5},
			"busy: the host is short of memory (120 MiB available, tasks waiting for memory 34% of the time); try again later"},
		{supervisor.BusyError{Limit: supervisor.LimitProcesses, Scope: supervisor.ScopeHost, Count: 29500, Max: 29491},
			"busy: the host is short of processes (29500 tasks, of at most 29491); try again later"},
		{supervisor.BusyError{Limit: supervisor.LimitCPU, Scope: supervisor.ScopeHost, Count: 9, Max: 8, Running: 40, Queued: 12, Waited: 30 * time.Second},
			"busy: waited 30s to run (40 commands running, 12 waiting), held by: the host's CPUs are in use (the busy commands want 9 CPUs' worth; it runs 8 at once); try again later"},
		{supervisor.BusyError{Limit: supervisor.LimitRunning, Scope: supervisor.ScopeConversation, Count: 1, Max: 1, Running: 1, Queued: 1, Waited: 300 * time.Millisecond},
			"busy: waited 300ms to run (1 commands running, 1 waiting), held by: this conversation already runs 1 commands at once, the most it may; try again later"},
	} {
		err := public(&c.b)
		if err.Error() != c.want || !errors.Is(err, ErrBusy) {
			t.Errorf("%+v:\n got %q\nwant %q", c.b, err, c.want)
		}
	}
}
