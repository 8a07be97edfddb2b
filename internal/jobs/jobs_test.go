package jobs_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/bashvisor/bashvisor/internal/jobs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestOutcomeStatus(t *testing.T) {
	cases := []struct {
		o    jobs.Outcome
		want jobs.Status
	}{
		{jobs.Outcome{Exited: true}, jobs.Completed},
		{jobs.Outcome{Exited: true, ExitCode: 3}, jobs.Failed},
		{jobs.Outcome{Exited: true, ExitCode: 137, Signal: "SIGKILL"}, jobs.Killed},
		{jobs.Outcome{Exited: true, ExitCode: 143, Signal: "SIGTERM", Reason: jobs.ReasonKilled}, jobs.Killed},
		{jobs.Outcome{Exited: true, ExitCode: 0, Reason: jobs.ReasonShutdown}, jobs.Killed},
		{jobs.Outcome{Reason: jobs.ReasonLifetime}, jobs.Killed},
		{jobs.Outcome{Err: jobs.ErrActorFailed, Reason: jobs.ReasonFailed}, jobs.Killed},
	}
	for _, c := range cases {
		if got := c.o.Status(); got != c.want {
			t.Errorf("%+v: %s, want %s", c.o, got, c.want)
		}
	}
}
