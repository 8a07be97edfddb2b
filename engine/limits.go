package engine

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/supervisor"
)

// Limits are the resource limits of one command, in every mode: of all its
// processes together where the engine has a cgroup with the controller
// for it (a memory, pids controller on cgroup v2, or a cgroup v1
// hierarchy on a hybrid host; CPU time needs only the command's cgroup
// v2), otherwise of each process through rlimits, as each field says. In
// [Config.Limits] a zero field means the default and a negative one no
// limit; in [ToolContext.Limits] a zero field keeps the engine's.
//
// A restricted command keeps the sandbox's own limits too
// ([Config.Sandbox]: CPU time, address space, file size and open files
// per process, processes per command): where both bound the same thing,
// the stricter wins.
type Limits struct {
	// Memory bounds the memory of the command's processes together, in
	// bytes: anonymous memory, the page cache of files they read first or
	// wrote, and their kernel memory (swap counts too). At the limit the
	// kernel first reclaims page cache, then its OOM killer kills the
	// process that uses the most; the result says "[command failed: out
	// of memory (limit 4 GiB)]", with status "failed" and OOMKilled.
	// Default: half of the physical memory, at most 16 GiB
	// ([DefaultMemoryLimit]). Without a memory controller it is
	// RLIMIT_AS of each process instead: an allocation beyond it fails
	// (Python's MemoryError, malloc returning NULL), nothing is
	// OOM-killed, and programs that reserve more address space than they
	// use may fail below it.
	Memory int64
	// CPUTime bounds the CPU time (user and system) of the command's
	// processes together. The engine checks it while the command runs,
	// from 1 s down to 10 ms apart as the limit nears, and ends the
	// command like a timeout (SIGTERM, Config.Grace, SIGKILL): "[command
	// failed: CPU time limit exceeded (limit 10m)]", status "failed". It
	// applies to background jobs too (the result of bash_jobs then says
	// why the job was killed). Default: none. Without cgroups it is
	// RLIMIT_CPU of each process, rounded up to whole seconds (SIGXCPU,
	// SIGKILL 5 s of CPU time later).
	CPUTime time.Duration
	// Processes bounds the processes and threads alive at once (cgroup
	// pids.max): beyond it fork and thread creation fail with EAGAIN
	// ("Resource temporarily unavailable"). Default: 4096
	// ([DefaultProcesses]), which a parallel build's compilers and their
	// threads stay far below. Without a pids controller there is no such
	// limit. A restricted command's limit is the lower of this and
	// SandboxLimits.Processes (default 512).
	Processes int
}

// DefaultProcesses is the default of [Limits.Processes].
const DefaultProcesses = 4096

// DefaultMemoryLimit is the default of [Limits.Memory]: half of the
// physical memory, at most 16 GiB (4 GiB if the size cannot be read). It
// stops a runaway command long before the machine swaps or its OOM killer
// picks a victim, and leaves `go build`, `npm install`, `pytest` and
// `cargo build` of mid-size projects room to spare.
func DefaultMemoryLimit() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil || si.Totalram == 0 {
		return 4 << 30
	}
	return min(int64(si.Totalram)*int64(si.Unit)/2, 16<<30)
}

// withDefaults returns l with zero fields set to their defaults.
func (l Limits) withDefaults() Limits {
	if l.Memory == 0 {
		l.Memory = DefaultMemoryLimit()
	}
	if l.Processes == 0 {
		l.Processes = DefaultProcesses
	}
	return l
}

// over returns l with the non-zero fields of o.
func (l Limits) over(o Limits) Limits {
	if o.Memory != 0 {
		l.Memory = o.Memory
	}
	if o.CPUTime != 0 {
		l.CPUTime = o.CPUTime
	}
	if o.Processes != 0 {
		l.Processes = o.Processes
	}
	return l
}

// job is l as the supervisor takes it: negative means none, which is zero
// there.
func (l Limits) job() supervisor.Limits {
	return supervisor.Limits{Memory: max(l.Memory, 0), CPUTime: max(l.CPUTime, 0), Pids: max(l.Processes, 0)}
}

// callLimits are a call's limits for the supervisor: nil (the engine's)
// unless tc overrides some.
func (e *Engine) callLimits(tc ToolContext) *supervisor.Limits {
	if tc.Limits == nil {
		return nil
	}
	l := e.cfg.Limits.over(*tc.Limits).job()
	return &l
}

// usageFields are the resource report of a result or a job.
type usageFields struct {
	cpuMS, peak int64
	processes   int
	oomKilled   bool
}

// reportOf turns a job's usage into the report's fields: CPU time in
// milliseconds, rounded up so that a command that ran never reads 0.
func reportOf(u supervisor.Usage) usageFields {
	return usageFields{
		cpuMS:     int64((u.CPU + time.Millisecond - 1) / time.Millisecond),
		peak:      u.PeakMemory,
		processes: u.Processes,
		oomKilled: u.OOMKills > 0,
	}
}
