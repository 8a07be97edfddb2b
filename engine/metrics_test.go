package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/bashvisor/bashvisor/engine"
)

// TestMetrics: the collector counts calls by status, observes durations,
// queue waits and bytes, and reads the load gauges when scraped.
func TestMetrics(t *testing.T) {
	e := newEngine(t)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(e.Metrics()); err != nil {
		t.Fatal(err)
	}
	tc := engine.ToolContext{WorkingDir: t.TempDir()}
	e.Run(context.Background(), tc, engine.Input{Command: "echo hello"})
	e.Run(context.Background(), tc, engine.Input{Command: "exit 3"})
	e.Run(context.Background(), tc, engine.Input{Command: "git push --force"})
	r := e.Run(context.Background(), tc, engine.Input{Command: "sleep 60", Mode: engine.ModeBackground})
	want := `
# HELP bashvisor_commands_total Tool calls answered, by result status (ok, failed, timed_out, cancelled, blocked, denied, needs_approval, error, started).
# TYPE bashvisor_commands_total counter
bashvisor_commands_total{status="blocked"} 1
bashvisor_commands_total{status="failed"} 1
bashvisor_commands_total{status="ok"} 1
bashvisor_commands_total{status="started"} 1
# HELP bashvisor_jobs_running Background jobs running now.
# TYPE bashvisor_jobs_running gauge
bashvisor_jobs_running 1
# HELP bashvisor_output_bytes_total Bytes of output foreground commands produced.
# TYPE bashvisor_output_bytes_total counter
bashvisor_output_bytes_total 6
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"bashvisor_commands_total", "bashvisor_jobs_running", "bashvisor_output_bytes_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(e.Metrics(), "bashvisor_command_duration_seconds"); n != 2 {
		t.Errorf("duration histograms: %d series, want default and background", n)
	}
	if _, err := e.Kill(context.Background(), tc, r.JobID); err != nil {
		t.Fatal(err)
	}
	after := `
# HELP bashvisor_jobs_running Background jobs running now.
# TYPE bashvisor_jobs_running gauge
bashvisor_jobs_running 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(after), "bashvisor_jobs_running"); err != nil {
		t.Error(err)
	}
}
