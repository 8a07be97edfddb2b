package supervisor

import (
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// charge charges d of the engine's CPU time to conversation conv of
// principal who, as a job's change set or an accept does.
func charge(conv, who string, d time.Duration) func(*admissionSim) {
	return func(h *admissionSim) {
		h.s.system.Root.Send(h.s.pid, &engineCharge{conv: conv, pk: pkey{name: who}, cpu: d})
		testenv.Eventually(h.t, 10*time.Second, func() bool { return h.s.Stats().Busy > 0 }, "the charge counts")
	}
}

// The engine's CPU time spent on a principal's change sets counts
// against its share (MaxBusy 1 here): while charged, its next call
// waits though nothing runs, another principal's runs at once, and
// once the charge ran out (as long as the work took) the waiter runs.
func TestEngineChargeCountsAgainstShare(t *testing.T) {
	testenv.NeedsTool(t, "sleep")
	runSteps(t, config.Admission{MaxRunning: 8, MaxQueue: 8, MaxBusy: 1, QueueWait: time.Minute}, []step{
		{do: start("p1", "p:a"), calls: map[string]string{"p1": "run"}},
		{do: end("p1"), stats: &Stats{}},
		{do: charge("p:a", "p", 2*time.Second)},
		{do: start("p2", "p:a"), calls: map[string]string{"p2": "queued"}, stats: &Stats{Queued: 1}},
		{do: start("q1", "q:b"), calls: map[string]string{"q1": "run", "p2": "queued"}, stats: &Stats{Running: 1, Queued: 1}},
		// The charge runs out within the step's 10 s.
		{do: func(*admissionSim) {}, calls: map[string]string{"p2": "run"}, stats: &Stats{Running: 2}},
	})
}
