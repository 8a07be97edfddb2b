package supervisor

import (
	"bytes"
	"errors"
	"math"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/proc"
)

// What the running jobs use, and what the host is short of, for admission
// (see config.Admission): the watch goroutine reads each job's cgroup
// (CPU time and CPU pressure stall; without cgroups, its process tree's
// CPU time and run delay) and the host's memory and process counts, and
// tells the supervisor actor what changed.

// Sampling periods: a job is first read baselineAfter after it started
// (its baseline, so that its start-up, which any command has, does not
// count), then sampleEvery later (its first classification), then every
// reclassifyEvery; the host every hostEvery.
const (
	baselineAfter   = 100 * time.Millisecond
	sampleEvery     = 50 * time.Millisecond
	reclassifyEvery = 500 * time.Millisecond
	hostEvery       = 250 * time.Millisecond
	idleEvery       = time.Second // the period when no job is tracked
)

// busyDemand is the CPUs' worth a job must want (its CPU time plus the time
// it waited for a CPU, per unit of time) to count as busy; without
// pressure stall information, busyCPU is the CPU time alone.
const (
	busyDemand = 0.5
	busyCPU    = 0.1
)

// loadSample is what the watch goroutine tells the supervisor actor: jobs
// classified for the first time or whose CPU use changed, and the host's
// state when it changed.
type loadSample struct {
	jobs []jobLoad
	host *hostState // nil: unchanged
}

// jobLoad is a job's CPU use: units is 0 for an idle job, else the CPUs it
// wants (at least 1), or unmeasurable.
type jobLoad struct {
	k     key
	units int
}

// unmeasurable is the units of a job whose use cannot be read (a /proc
// that hides its processes): a foreground job then counts as one busy CPU
// while it runs, a background one for nothing.
const unmeasurable = -1

// tracker holds the cgroups of the running jobs, by job.
type tracker struct {
	mu   sync.Mutex
	jobs map[key]*tracked
	// idle: the watch sleeps idleEvery (it tracked no job when it last
	// looked); wake wakes it when a job is added meanwhile. While it
	// tracks jobs it wakes every sampleEvery anyway, sooner than a new
	// job's baseline is due, so adding one wakes nothing: a command of a
	// few milliseconds costs the watch no wake-up of its own.
	idle bool
	wake chan struct{}
}

type tracked struct {
	cg         *proc.Cgroup // nil: the process tree of pid
	pid        int
	cpu, stall time.Duration // counters at the last read
	at, next   time.Time     // last read, next one due
	based      bool          // the baseline was read
	classified bool
	units      int
}

func newTracker() *tracker {
	return &tracker{jobs: map[key]*tracked{}, wake: make(chan struct{}, 1)}
}

// add starts tracking job k: its cgroup, or without one the process tree
// of its shell, pid.
func (t *tracker) add(k key, cg *proc.Cgroup, pid int) {
	t.mu.Lock()
	t.jobs[k] = &tracked{cg: cg, pid: pid, next: time.Now().Add(baselineAfter)}
	idle := t.idle
	t.idle = false
	t.mu.Unlock()
	if idle {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
}

// remove stops tracking job k (it ended).
func (t *tracker) remove(k key) {
	t.mu.Lock()
	delete(t.jobs, k)
	t.mu.Unlock()
}

// rekey follows a job that went on in the background under a new id.
func (t *tracker) rekey(old, k key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if j, ok := t.jobs[old]; ok {
		delete(t.jobs, old)
		t.jobs[k] = j
	}
}

// sleep returns how long the watch sleeps now: idleEvery when it tracks
// no job (add then wakes it), sampleEvery otherwise.
func (t *tracker) sleep() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.idle = len(t.jobs) == 0; t.idle {
		return idleEvery
	}
	return sampleEvery
}

// sample reads the jobs that are due and returns those classified for the
// first time or whose use changed.
func (t *tracker) sample(now time.Time) []jobLoad {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []jobLoad
	for k, j := range t.jobs {
		if now.Before(j.next) {
			continue
		}
		cpu, stall, psi, err := j.read()
		switch {
		case errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH):
			continue // ending: its cgroup or process is going away
		case err != nil:
			out = append(out, jobLoad{k: k, units: unmeasurable})
			delete(t.jobs, k)
			continue
		}
		if !j.based {
			j.based, j.cpu, j.stall, j.at, j.next = true, cpu, stall, now, now.Add(sampleEvery)
			continue
		}
		dt := now.Sub(j.at)
		if dt < sampleEvery/2 {
			continue
		}
		used, waited := float64(cpu-j.cpu)/float64(dt), float64(stall-j.stall)/float64(dt)
		units := 0
		if demand := used + waited; demand >= busyDemand || (!psi && used >= busyCPU) {
			units = max(1, int(math.Round(demand)))
		}
		if !j.classified || units != j.units {
			out = append(out, jobLoad{k: k, units: units})
		}
		j.classified, j.units = true, units
		j.cpu, j.stall, j.at, j.next = cpu, stall, now, now.Add(reclassifyEvery)
	}
	return out
}

// read reads the job's counters (see proc.Cgroup.CPUDemand).
func (j *tracked) read() (cpu, stall time.Duration, psi bool, err error) {
	if j.cg != nil {
		return j.cg.CPUDemand()
	}
	return proc.TreeDemand(j.pid)
}

// hostState is what the host is short of.
type hostState struct {
	memShort  bool
	pressure  float64 // memory pressure, PSI some avg10 (percent; -1: unknown)
	availMiB  int     // memory available
	floorMiB  int     // the least available memory that is not short
	pidsShort bool
	tasks     int // tasks (threads) on the host
	taskMax   int // 90% of the host's limit on them
}

// hostReader reads the host's state.
type hostReader struct {
	maxPressure float64 // Admission.MemoryPressure (negative: not watched)
	taskMax     int
}

func newHostReader(maxPressure float64) *hostReader {
	h := &hostReader{maxPressure: maxPressure, taskMax: math.MaxInt}
	for _, f := range []string{"/proc/sys/kernel/pid_max", "/proc/sys/kernel/threads-max"} {
		if b, err := os.ReadFile(f); err == nil {
			if n, err := strconv.Atoi(string(bytes.TrimSpace(b))); err == nil && n > 0 {
				h.taskMax = min(h.taskMax, n)
			}
		}
	}
	return h
}

// read returns the host's state now. What cannot be read is not short.
func (h *hostReader) read() hostState {
	st := hostState{pressure: -1, taskMax: h.taskMax}
	if b, err := os.ReadFile("/proc/pressure/memory"); err == nil {
		if p, err := proc.PressureAvg10(b); err == nil {
			st.pressure = p
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		total, avail := meminfo(b, "MemTotal:"), meminfo(b, "MemAvailable:")
		if total > 0 && avail >= 0 {
			st.availMiB, st.floorMiB = avail>>10, total>>10/32
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		// "0.50 0.40 0.30 2/345 6789": the fourth field is running/total.
		if f := bytes.Fields(b); len(f) >= 4 {
			if _, total, ok := bytes.Cut(f[3], []byte("/")); ok {
				st.tasks, _ = strconv.Atoi(string(total))
			}
		}
	}
	st.memShort = (h.maxPressure >= 0 && st.pressure >= h.maxPressure) || st.availMiB < st.floorMiB
	st.taskMax = h.taskMax / 10 * 9
	st.pidsShort = st.tasks >= st.taskMax
	return st
}

// meminfo returns a /proc/meminfo value in KiB, or -1.
func meminfo(b []byte, name string) int {
	i := bytes.Index(b, []byte(name))
	if i < 0 {
		return -1
	}
	f := bytes.Fields(b[i+len(name):])
	if len(f) == 0 {
		return -1
	}
	n, err := strconv.Atoi(string(f[0]))
	if err != nil {
		return -1
	}
	return n
}

// watch samples the jobs and the host until stop is closed, and sends the
// supervisor actor what changed since it knew the host as last.
func (s *Supervisor) watch(stop <-chan struct{}, host *hostReader, last hostState) {
	hostAt := time.Now()
	t := time.NewTimer(sampleEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-s.track.wake:
		case <-t.C:
		}
		now := time.Now()
		m := &loadSample{jobs: s.track.sample(now)}
		if now.Sub(hostAt) >= hostEvery {
			hostAt = now
			st := host.read()
			if st.memShort != last.memShort || st.pidsShort != last.pidsShort {
				m.host = &st
			}
			last = st
		}
		if len(m.jobs) > 0 || m.host != nil {
			s.system.Root.Send(s.pid, m)
		}
		next := s.track.sleep()
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(next)
	}
}
