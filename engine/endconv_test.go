package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// A conversation ended while its background job takes a while to die,
// then used again at once (a fleet front may do that: another front's
// call arrives right after an end): the ended job is not listed in the
// conversation that lives on, when it has ended either.
func TestEndedJobNotListedWhenConversationIsReused(t *testing.T) {
	e := newEngine(t, func(c *engine.Config) { c.Lifecycle.Grace = 3 * time.Second })
	tc := tc(t)
	r := e.Run(context.Background(), tc, engine.Input{Mode: engine.ModeBackground,
		Command: `trap 'sleep 0.7; exit 0' TERM; echo up; sleep 60 & wait`})
	if r.Status != engine.StatusStarted {
		t.Fatalf("%s %q", r.Status, r.Output)
	}
	waitFor(t, e, tc, r.JobID, "up")
	if err := e.EndConversation(context.Background(), tc.ConversationID); err != nil {
		t.Fatal(err)
	}
	if again := e.Run(context.Background(), tc, engine.Input{Command: "echo again"}); again.Status != engine.StatusOK {
		t.Fatalf("%s %q", again.Status, again.Output)
	}
	if jobs := e.Jobs(tc); len(jobs) != 0 {
		t.Fatalf("jobs while the ended one dies: %+v", jobs)
	}
	// The ended job dies (its TERM trap takes 0.7 s): still not listed.
	time.Sleep(1500 * time.Millisecond)
	testenv.Eventually(t, 5*time.Second, func() bool { return !alive(r.PID) }, "the ended job's shell still runs")
	if jobs := e.Jobs(tc); len(jobs) != 0 {
		t.Fatalf("jobs after the ended one died: %+v", jobs)
	}
}
