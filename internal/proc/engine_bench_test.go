package proc_test

import (
	"bytes"
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/proc"
)

// BenchmarkEngineSerialVfork runs `bash -c true` through one engine with
// per-command cgroups, call by call with the engine's vfork starts (on a
// hybrid host the child joins the v1 cgroups) and without (os/exec, from
// the recycled cgroup's forker), beside raw os/exec with capture (demo
// bench's serial case): each variant's p50 over raw's, in percent.
func BenchmarkEngineSerialVfork(b *testing.B) {
	defer proc.SetKeepForkers(proc.SetKeepForkers(true))
	c := engine.DefaultConfig()
	n := 64
	c.Admission = config.Admission{MaxBusy: n, MaxRunning: n, MaxRunningPerConversation: n, MaxQueue: n, MaxJobs: n, MaxJobsPerConversation: n}
	e, err := engine.New(c)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	if !proc.SetVforkStarts(true) {
		b.Skip("no vfork starts on this architecture")
	}
	dir := b.TempDir()
	tc := engine.ToolContext{WorkingDir: dir, ConversationID: "bench"}
	defer proc.SetVforkStarts(proc.SetVforkStarts(true))
	eng := func(v bool) time.Duration {
		proc.SetVforkStarts(v)
		t0 := time.Now()
		r := e.Run(context.Background(), tc, engine.Input{Command: "true"})
		if r.Status != engine.StatusOK {
			b.Fatal(r.Output)
		}
		return time.Since(t0)
	}
	raw := func() time.Duration {
		t0 := time.Now()
		c := exec.Command("bash", "-c", "true")
		c.Dir = dir
		var buf bytes.Buffer
		c.Stdout, c.Stderr = &buf, &buf
		if err := c.Run(); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	gap := func() { time.Sleep(300 * time.Microsecond) }
	var r, on, off []time.Duration
	for i := -20; b.Loop(); i++ {
		d0 := raw()
		gap()
		var d1, d2 time.Duration
		if i%2 == 0 {
			d1 = eng(true)
			gap()
			d2 = eng(false)
		} else {
			d2 = eng(false)
			gap()
			d1 = eng(true)
		}
		gap()
		if i >= 0 {
			r, on, off = append(r, d0), append(on, d1), append(off, d2)
		}
	}
	p50 := func(d []time.Duration) float64 { slices.Sort(d); return float64(d[len(d)/2].Microseconds()) }
	rr := p50(r)
	b.ReportMetric(rr, "raw-p50-µs")
	b.ReportMetric((p50(on)/rr-1)*100, "vfork-%")
	b.ReportMetric((p50(off)/rr-1)*100, "forker-%")
}
