package engine

import (
	"cmp"
	"time"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/jobs"
)

// callLimits are a call's limits for its job: the engine's with the
// non-zero fields of tc's override, a negative field (no limit) as zero.
func (e *Engine) callLimits(tc ToolContext) config.Limits {
	l := e.cfg.Limits
	if o := tc.Limits; o != nil {
		l.Memory = cmp.Or(o.Memory, l.Memory)
		l.CPUTime = cmp.Or(o.CPUTime, l.CPUTime)
		l.Processes = cmp.Or(o.Processes, l.Processes)
	}
	return config.Limits{Memory: max(l.Memory, 0), CPUTime: max(l.CPUTime, 0), Processes: max(l.Processes, 0)}
}

// usageFields are the resource report of a result or a job.
type usageFields struct {
	cpuMS, peak int64
	processes   int
	oomKilled   bool
}

// reportOf turns a job's usage into the report's fields: CPU time in
// milliseconds, rounded up so that a command that ran never reads 0.
func reportOf(u jobs.Usage) usageFields {
	return usageFields{
		cpuMS:     int64((u.CPU + time.Millisecond - 1) / time.Millisecond),
		peak:      u.PeakMemory,
		processes: u.Processes,
		oomKilled: u.OOMKills > 0,
	}
}
