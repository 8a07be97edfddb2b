package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
)

// Admission by pressure and fair shares (config.Admission), with real
// processes and the default admission settings, measured from the
// commands' cgroups and, without cgroups, from their process trees.

// eachMeasure runs f with per-command cgroups (skipped without them, or
// failed under REQUIRE_CGROUPS=1) and without.
func eachMeasure(t *testing.T, f func(t *testing.T, off bool)) {
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprintf("cgroups-off=%v", off), func(t *testing.T) {
			if !off {
				cgroupBase(t)
			}
			f(t, off)
		})
	}
}

// TestParallelSleepsRunAtOnce: 100 parallel `sleep 2` in one conversation
// want no CPU, so none waits for long and none is refused (the count
// model ran 4 at once per conversation on 2 CPUs: 50 s, and refused most).
// The target is 4 s; the bound here is generous for a loaded machine, and
// `demo bench -admission` reports the figure.
func TestParallelSleepsRunAtOnce(t *testing.T) { eachMeasure(t, parallelSleeps) }

func parallelSleeps(t *testing.T, off bool) {
	e := newEngine(t, func(c *engine.Config) { c.Cgroups.Off = off })
	tc := engine.ToolContext{WorkingDir: t.TempDir(), ConversationID: "local/mcp", Principal: "local"}
	const n = 100
	results := make([]engine.Result, n)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i] = e.Run(context.Background(), tc, engine.Input{Command: "sleep 2"}) })
	}
	wg.Wait()
	took := time.Since(start)
	var queued []int64
	for i, r := range results {
		if r.Status != engine.StatusOK {
			t.Fatalf("call %d: %s %q", i, r.Status, r.Output)
		}
		queued = append(queued, r.QueuedMS)
	}
	slices.Sort(queued)
	t.Logf("100 parallel sleep 2: %.2fs; queued p50 %d ms, max %d ms", took.Seconds(), queued[n/2], queued[n-1])
	if took > 8*time.Second || queued[n-1] > 4000 {
		t.Errorf("100 parallel sleep 2 took %v, the last waited %d ms to start", took, queued[n-1])
	}
}

// busyLoop keeps a CPU busy for d of wall time.
func busyLoop(d time.Duration) string {
	return fmt.Sprintf(`end=$(( ${EPOCHREALTIME/./} + %d )); while (( ${EPOCHREALTIME/./} < end )); do :; done`, d.Microseconds())
}

// TestCPUSharedFairlyBetweenPrincipals: 64 CPU-bound commands in flight,
// 48 of principal A (in three conversations) and 16 of principal B, share
// the CPU fairly between A and B, where the scheduler alone (every command
// running at once) would give A three quarters: A's share of the CPU time
// their commands got (from the results' cpu_ms) is nearer half than three
// quarters: 35 % to 65 % (with admission's fairness switched off it reads
// 75 %). Quiet, the share is 0.48-0.52; at load 16 to 33 on 2 cores it was
// 0.48-0.58, and 0.63 in both modes in CI at load 8-14 with other packages'
// tests competing for the CPU (the bound was 40-60 %, then 37.5-62.5 %).
// At load 24-36 with another package's tests beside it, it read 0.64-0.69:
// the 200 ms commands ended before they were measured, and each principal's
// slow start let it run its start budget of unmeasured ones (A 32, B 16 at
// most: 40 running where 8 were due, shared by count). Since the slow start
// stops at twice the principal's share while another one competes, it reads
// 0.50 there (16 running). The log line says what admission let run.
func TestCPUSharedFairlyBetweenPrincipals(t *testing.T) { eachMeasure(t, fairCPU) }

func fairCPU(t *testing.T, off bool) {
	e := newEngine(t, func(c *engine.Config) { c.Timeout, c.Cgroups.Off = time.Minute, off })
	dir := t.TempDir()
	const window = 10 * time.Second
	var cpuA, cpuB, busyN atomic.Int64
	var wg sync.WaitGroup
	// Only the time both compete counts: calls still waiting or running
	// when the window closes are cancelled (once B's stop, A would have
	// the CPU to itself, rightly), and the CPU time the cancelled ones had
	// counts too: on a loaded machine only a score of calls may end in the
	// window, and leaving out the ones in flight would skew the shares by
	// whole calls. Short calls (200 ms) make the measure finer.
	ctx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	worker := func(tc engine.ToolContext, cpu *atomic.Int64) {
		for ctx.Err() == nil {
			r := e.Run(ctx, tc, engine.Input{Command: busyLoop(200 * time.Millisecond)})
			switch {
			case errors.Is(r.Err, engine.ErrBusy):
				busyN.Add(1)
			case r.Status == engine.StatusCancelled:
				cpu.Add(r.CPUMS)
				return
			case r.Status != engine.StatusOK:
				t.Errorf("%s: %s %q", tc.ConversationID, r.Status, r.Output)
				return
			}
			cpu.Add(r.CPUMS)
		}
	}
	for i := range 48 {
		tc := engine.ToolContext{WorkingDir: dir, Principal: "A", ConversationID: fmt.Sprintf("A/%d", i%3)}
		wg.Go(func() { worker(tc, &cpuA) })
	}
	for range 16 {
		tc := engine.ToolContext{WorkingDir: dir, Principal: "B", ConversationID: "B/0"}
		wg.Go(func() { worker(tc, &cpuB) })
	}
	// What admission let run, sampled (said with the shares).
	var samples, running, maxRunning, busyCPUs int
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for ctx.Err() == nil {
			l := e.Load()
			samples, running, busyCPUs = samples+1, running+l.Running, busyCPUs+l.BusyCPUs
			maxRunning = max(maxRunning, l.Running)
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	wg.Wait()
	<-sampled
	a, b := cpuA.Load(), cpuB.Load()
	share := float64(a) / float64(a+b)
	t.Logf("CPU time: A (48 in flight) %d ms, B (16 in flight) %d ms: A's share %.2f; %d busy; running %.1f on average (at most %d), measured busy %.1f CPUs",
		a, b, share, busyN.Load(), float64(running)/float64(max(1, samples)), maxRunning, float64(busyCPUs)/float64(max(1, samples)))
	if busyN.Load() > 0 {
		t.Errorf("%d calls were refused as busy", busyN.Load())
	}
	if a+b == 0 || share < 0.35 || share > 0.65 {
		t.Errorf("A got %.1f%% of the CPU time, want 35%% to 65%% (well short of the scheduler's 75%%)", 100*share)
	}
}

// TestHeavyPrincipalDoesNotStarveAnother: a principal holding 3
// conversations × 4 long commands and 2 × 16 background jobs (security
// review M3, which measured the victim's `echo` at 18 s and then busy)
// neither makes another principal's `echo` wait (at most twice its
// unloaded latency, medians of 9, plus 50 ms for a loaded machine) nor
// makes it busy.
func TestHeavyPrincipalDoesNotStarveAnother(t *testing.T) { eachMeasure(t, heavyPrincipal) }

func heavyPrincipal(t *testing.T, off bool) {
	e := newEngine(t, func(c *engine.Config) { c.Timeout, c.Cgroups.Off = time.Minute, off })
	dir := t.TempDir()
	victim := engine.ToolContext{WorkingDir: dir, Principal: "victim", ConversationID: "victim/mcp"}
	echo := func() time.Duration {
		t.Helper()
		var took []time.Duration
		for range 9 {
			start := time.Now()
			r := e.Run(context.Background(), victim, engine.Input{Command: "echo hi"})
			took = append(took, time.Since(start))
			if r.Status != engine.StatusOK || r.Output != "hi\n" {
				t.Fatalf("victim's echo: %s %q", r.Status, r.Output)
			}
		}
		slices.Sort(took)
		return took[len(took)/2]
	}
	unloaded := echo()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	for c := range 3 {
		tc := engine.ToolContext{WorkingDir: dir, Principal: "heavy", ConversationID: fmt.Sprintf("heavy/fg%d", c)}
		for range 4 {
			wg.Go(func() { e.Run(ctx, tc, engine.Input{Command: "sleep 60"}) })
		}
	}
	for c := range 2 {
		tc := engine.ToolContext{WorkingDir: dir, Principal: "heavy", ConversationID: fmt.Sprintf("heavy/bg%d", c)}
		for i := range 16 {
			if r := e.Run(context.Background(), tc, engine.Input{Command: "sleep 60", Mode: engine.ModeBackground}); r.Status != engine.StatusStarted {
				t.Fatalf("heavy's background job %d: %s %q", i, r.Status, r.Output)
			}
		}
	}
	waitLoad(t, e, engine.Load{Running: 12, Jobs: 32})
	loaded := echo()
	if r := e.Run(context.Background(), victim, engine.Input{Command: "sleep 60", Mode: engine.ModeBackground}); r.Status != engine.StatusStarted {
		t.Errorf("the victim's background job: %s %q", r.Status, r.Output)
	}
	t.Logf("victim's echo: %v unloaded, %v with the heavy principal's 12 commands and 32 jobs", unloaded, loaded)
	if loaded > 2*unloaded+50*time.Millisecond {
		t.Errorf("the victim's echo took %v loaded, %v unloaded", loaded, unloaded)
	}
}
