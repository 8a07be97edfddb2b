package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/engine"
)

// The fair-shares phase of `demo stress`: on an engine with the default
// admission control, a heavy principal holds 3 conversations × 4 long
// commands and 2 × 16 background jobs (security review M3); another
// principal's `echo` must never be refused busy, and must stay within
// twice what it cost alone, in latency and in the engine's CPU.
//
// A loaded machine moves a median of a few milliseconds by several times
// between two phases a second apart, so neither measure is a bare
// median: the latency compared is the fastest of the echoes (what the
// engine makes the victim wait for when the machine lets it run; a
// victim queued or slowed by the heavy principal is slow every time),
// and the CPU is what the kernel accounted to this process (the engine,
// with its bookkeeping of the heavy principal's commands) during each
// echo, which load inflates far less than wall time (the median: a
// garbage collection lands in one echo or another).

// sharesReport is what the phase measured.
type sharesReport struct {
	alone, loaded sharesSample
	busy          int   // the victim's calls refused busy
	err           error // the phase could not run
}

// sharesSample is one phase's measure of the victim's echo: its
// fastest latency, and the median CPU this process used during one.
type sharesSample struct {
	echo, cpu time.Duration
}

// The slack added to twice the alone figures: a few echoes' fastest
// moves by a millisecond or two between two runs on a loaded machine,
// their CPU by a fraction of one.
const (
	sharesSlack    = 2 * time.Millisecond
	sharesCPUSlack = time.Millisecond
)

func (r sharesReport) ok() bool {
	return r.err == nil && r.busy == 0 && r.loaded.echo <= 2*r.alone.echo+sharesSlack &&
		r.loaded.cpu <= 2*r.alone.cpu+sharesCPUSlack
}

// fairShares runs the phase; every process it starts carries the run's
// marker, so the checks after the run see any it left.
func (s *stresser) fairShares(o stressOpts, dir, marker string) sharesReport {
	cfg := engine.DefaultConfig()
	cfg.Cgroups.Off = o.noCgroups
	cfg.Timeout = 2 * time.Minute
	cfg.Lifecycle.Grace = 200 * time.Millisecond
	cfg.Env.Environ = append(os.Environ(), "BASHVISOR_STRESS="+marker)
	cfg.OutputDir = filepath.Join(dir, "engine-out")
	cfg.Admission = config.Admission{} // the defaults
	e, err := engine.New(cfg)
	if err != nil {
		return sharesReport{err: fmt.Errorf("engine: %w", err)}
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.Shutdown(ctx); err != nil {
			s.fail(-1, "fair-shares", err)
		}
	}()
	var r sharesReport
	victim := engine.ToolContext{WorkingDir: dir, Principal: "victim", ConversationID: "victim/mcp"}
	echo := func() (sharesSample, error) {
		var took, cpu []time.Duration
		for range 21 {
			c0, start := selfCPU(), time.Now()
			res := e.Run(context.Background(), victim, engine.Input{Command: "echo hi"})
			took, cpu = append(took, time.Since(start)), append(cpu, selfCPU()-c0)
			switch {
			case errors.Is(res.Err, engine.ErrBusy):
				r.busy++
			case res.Status != engine.StatusOK || res.Output != "hi\n":
				return sharesSample{}, fmt.Errorf("the victim's echo: %s %q", res.Status, res.Output)
			}
		}
		slices.Sort(cpu)
		return sharesSample{echo: slices.Min(took), cpu: cpu[len(cpu)/2]}, nil
	}
	if r.alone, r.err = echo(); r.err != nil {
		return r
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
			if res := e.Run(context.Background(), tc, engine.Input{Command: "sleep 120", Mode: engine.ModeBackground}); res.Status != engine.StatusStarted {
				r.err = fmt.Errorf("the heavy principal's background job: %s %q", res.Status, res.Output)
				return r
			}
		}
	}
	// Running or waiting: admission decides when each starts.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if l := e.Load(); l.Running+l.Queued == 12 && l.Jobs == 32 {
			break
		}
		if time.Now().After(deadline) {
			r.err = fmt.Errorf("the heavy principal's commands did not start: %+v", e.Load())
			return r
		}
	}
	// The work of starting them (and the garbage it left) is not the
	// victim's: let it finish.
	time.Sleep(200 * time.Millisecond)
	if r.loaded, r.err = echo(); r.err != nil {
		return r
	}
	if res := e.Run(context.Background(), victim, engine.Input{Command: "sleep 120", Mode: engine.ModeBackground}); errors.Is(res.Err, engine.ErrBusy) {
		r.busy++
	} else if res.Status != engine.StatusStarted {
		r.err = fmt.Errorf("the victim's background job: %s %q", res.Status, res.Output)
	}
	return r
}

// print writes the phase's line.
func (r sharesReport) print(w io.Writer) {
	if r.err != nil {
		fmt.Fprintf(w, "fair shares:        could not run: %v\n", r.err)
		return
	}
	a, l := r.alone, r.loaded
	fmt.Fprintf(w, "fair shares:        another principal's echo %.2f ms alone (fastest of 21; median engine CPU %.2f ms), %.2f ms next to 12 commands and 32 jobs of one principal (CPU %.2f ms): %.2fx (at most 2x + %v), CPU %.2fx (at most 2x + %v); %d busy\n",
		ms1(a.echo), ms1(a.cpu), ms1(l.echo), ms1(l.cpu), l.echo.Seconds()/max(a.echo.Seconds(), 1e-9), sharesSlack,
		l.cpu.Seconds()/max(a.cpu.Seconds(), 1e-9), sharesCPUSlack, r.busy)
}

func ms1(d time.Duration) float64 { return float64(d) / 1e6 }
