package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bashvisor/bashvisor/engine"
)

// The admission case: the engine with its default admission control
// (config.Admission) against raw os/exec running everything at once.

// benchAdmission measures parallel idle commands in one conversation, CPU
// fairness between two principals, and another principal's latency next
// to a heavy one.
func benchAdmission(o benchOpts, dir string) ([]benchRow, error) {
	cfg := engine.DefaultConfig() // the default admission, unlike benchConfig
	cfg.Cgroups.Off = o.noCgroups
	cfg.Timeout = 2 * time.Minute
	e, err := engine.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	defer e.Shutdown(context.Background())
	var rows []benchRow
	r, err := benchParallelSleeps(o, e, dir)
	if err != nil {
		return nil, err
	}
	rows = append(rows, r...)
	r, err = benchFairCPU(o, e, dir)
	if err != nil {
		return nil, err
	}
	rows = append(rows, r...)
	r, err = benchVictim(e, dir)
	if err != nil {
		return nil, err
	}
	return append(rows, r...), nil
}

// benchParallelSleeps: N parallel `sleep 2` in one conversation (an agent's
// parallel tool calls and sub-agents sharing a stdio conversation).
func benchParallelSleeps(o benchOpts, e *engine.Engine, dir string) ([]benchRow, error) {
	n := o.admSleepers
	parallel := func(f func() error) (time.Duration, error) {
		start := time.Now()
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { errs[i] = f() })
		}
		wg.Wait()
		return time.Since(start), errors.Join(errs...)
	}
	raw, err := parallel(func() error { return rawRun(dir, "sleep 2") })
	if err != nil {
		return nil, fmt.Errorf("raw sleeps: %w", err)
	}
	tc := engine.ToolContext{WorkingDir: dir, Principal: "local", ConversationID: "mcp"}
	var busy atomic.Int64
	eng, err := parallel(func() error {
		r := e.Run(context.Background(), tc, engine.Input{Command: "sleep 2"})
		if errors.Is(r.Err, engine.ErrBusy) {
			busy.Add(1)
			return nil
		}
		if r.Status != engine.StatusOK {
			return fmt.Errorf("%s %q", r.Status, r.Output)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("engine sleeps: %w", err)
	}
	return []benchRow{
		{name: fmt.Sprintf("%d parallel `sleep 2`, one conversation", n), raw: secs(raw), eng: secs(eng),
			ratio: fmt.Sprintf("%.2fx", eng.Seconds()/raw.Seconds()), target: "<= 4 s", ok: pass(eng <= 4*time.Second && busy.Load() == 0)},
		{name: "  refused busy", eng: fmt.Sprint(busy.Load()), target: "0", ok: pass(busy.Load() == 0)},
	}, nil
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// benchFairCPU: CPU-bound commands of two principals, 3/4 of them A's,
// for a window; the CPU time each principal's commands got. Raw os/exec
// runs them all at once, as the scheduler alone shares the CPU.
func benchFairCPU(o benchOpts, e *engine.Engine, dir string) ([]benchRow, error) {
	const nA, nB = 48, 16
	loop := busyLoopCmd(500 * time.Millisecond)
	window := o.admWindow
	run := func(start func(principal string, ctx context.Context) (time.Duration, error)) (a, b time.Duration, err error) {
		ctx, cancel := context.WithTimeout(context.Background(), window)
		defer cancel()
		var cpuA, cpuB atomic.Int64
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		for i := range nA + nB {
			p, cpu := "A", &cpuA
			if i >= nA {
				p, cpu = "B", &cpuB
			}
			wg.Go(func() {
				for ctx.Err() == nil {
					d, err := start(p, ctx)
					if err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						return
					}
					cpu.Add(int64(d))
				}
			})
		}
		wg.Wait()
		return time.Duration(cpuA.Load()), time.Duration(cpuB.Load()), errors.Join(errs...)
	}
	rawA, rawB, err := run(func(_ string, ctx context.Context) (time.Duration, error) {
		c := exec.Command("bash", "-c", loop)
		c.Dir = dir
		if err := c.Run(); err != nil {
			return 0, err
		}
		if ctx.Err() != nil {
			return 0, nil // ended after the window: not counted
		}
		u := c.ProcessState.SysUsage().(*syscall.Rusage)
		return time.Duration(u.Utime.Nano() + u.Stime.Nano()), nil
	})
	if err != nil {
		return nil, fmt.Errorf("raw CPU loops: %w", err)
	}
	engA, engB, err := run(func(p string, ctx context.Context) (time.Duration, error) {
		tc := engine.ToolContext{WorkingDir: dir, Principal: p, ConversationID: p + "/0"}
		r := e.Run(ctx, tc, engine.Input{Command: loop})
		switch {
		case r.Status == engine.StatusCancelled:
			return 0, nil
		case r.Status != engine.StatusOK:
			return 0, fmt.Errorf("%s %q", r.Status, r.Output)
		}
		return time.Duration(r.CPUMS) * time.Millisecond, nil
	})
	if err != nil {
		return nil, fmt.Errorf("engine CPU loops: %w", err)
	}
	share := func(a, b time.Duration) float64 { return float64(a) / float64(max(a+b, 1)) }
	s := share(engA, engB)
	return []benchRow{
		{name: fmt.Sprintf("CPU share of A, %d of A's and %d of B's busy loops, %s", nA, nB, window),
			raw: fmt.Sprintf("%.2f", share(rawA, rawB)), eng: fmt.Sprintf("%.2f", s), ratio: fmt.Sprintf("CPU %s / %s", secs(engA), secs(engB)),
			target: "0.40-0.60", ok: pass(s >= 0.4 && s <= 0.6)},
	}, nil
}

// busyLoopCmd keeps a CPU busy for d of wall time.
func busyLoopCmd(d time.Duration) string {
	return fmt.Sprintf(`end=$(( ${EPOCHREALTIME/./} + %d )); while (( ${EPOCHREALTIME/./} < end )); do :; done`, d.Microseconds())
}

// benchVictim: a principal's `echo` (median of 21) alone, and next to a
// principal holding 3 conversations × 4 `sleep` commands and 2 × 16
// background jobs (security review M3).
func benchVictim(e *engine.Engine, dir string) ([]benchRow, error) {
	victim := engine.ToolContext{WorkingDir: dir, Principal: "victim", ConversationID: "victim/mcp"}
	echo := func() (time.Duration, error) {
		var took []time.Duration
		for range 21 {
			start := time.Now()
			r := e.Run(context.Background(), victim, engine.Input{Command: "echo hi"})
			took = append(took, time.Since(start))
			if r.Status != engine.StatusOK {
				return 0, fmt.Errorf("victim's echo: %s %q", r.Status, r.Output)
			}
		}
		slices.Sort(took)
		return took[len(took)/2], nil
	}
	alone, err := echo()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	for c := range 3 {
		tc := engine.ToolContext{WorkingDir: dir, Principal: "heavy", ConversationID: fmt.Sprintf("heavy/fg%d", c)}
		for range 4 {
			wg.Go(func() { e.Run(ctx, tc, engine.Input{Command: "sleep 120"}) })
		}
	}
	for c := range 2 {
		tc := engine.ToolContext{WorkingDir: dir, Principal: "heavy", ConversationID: fmt.Sprintf("heavy/bg%d", c)}
		for range 16 {
			if r := e.Run(context.Background(), tc, engine.Input{Command: "sleep 120", Mode: engine.ModeBackground}); r.Status != engine.StatusStarted {
				return nil, fmt.Errorf("heavy's background job: %s %q", r.Status, r.Output)
			}
		}
		defer e.EndConversation(context.Background(), tc.ConversationID)
	}
	for deadline := time.Now().Add(time.Minute); e.Load().Running < 12; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("heavy's commands did not start: %+v", e.Load())
		}
	}
	loaded, err := echo()
	if err != nil {
		return nil, err
	}
	return []benchRow{
		{name: "another principal's `echo` next to 12 commands + 32 jobs", raw: ms(alone) + " alone", eng: ms(loaded),
			ratio: fmt.Sprintf("%.2fx", loaded.Seconds()/alone.Seconds()), target: "<= 2x", ok: pass(loaded <= 2*alone)},
	}, nil
}
