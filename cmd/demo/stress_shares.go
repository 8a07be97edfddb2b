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
// between two phases a second apart, so neither measure is taken bare:
// every echo follows a raw `bash -c 'echo hi'` through os/exec, and the
// latency compared is the echo's in units of that raw spawn at the same
// moment; the CPU is what the kernel accounted to this process (the
// engine, with its bookkeeping of the heavy principal's commands) during
// the echoes, which load inflates far less than wall time. A victim
// queued behind the heavy principal, or an engine whose work grows with
// another principal's idle commands, still fails.

// sharesReport is what the phase measured.
type sharesReport struct {
	alone, loaded sharesSample
	busy          int   // the victim's calls refused busy
	err           error // the phase could not run
}

// sharesSample is one phase's measure of the victim's echo: medians of
// its latency and of a raw spawn's just before each, and the engine's
// CPU per echo.
type sharesSample struct {
	echo, raw, cpu time.Duration
}

// ratio is the echo's latency in raw spawns.
func (s sharesSample) ratio() float64 { return s.echo.Seconds() / max(s.raw.Seconds(), 1e-6) }

// The slack added to twice the alone figures: a ratio of medians moves by
// a few tenths between two runs, the CPU of a few echoes by a fraction of
// a millisecond.
const (
	sharesRatioSlack = 0.5
	sharesCPUSlack   = time.Millisecond
)

func (r sharesReport) ok() bool {
	return r.err == nil && r.busy == 0 && r.loaded.ratio() <= 2*r.alone.ratio()+sharesRatioSlack &&
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
		var took, raw []time.Duration
		var cpu time.Duration
		for range 21 {
			start := time.Now()
			if err := rawRun(dir, "echo hi"); err != nil {
				return sharesSample{}, fmt.Errorf("raw echo: %w", err)
			}
			raw = append(raw, time.Since(start))
			c0, start := selfCPU(), time.Now()
			res := e.Run(context.Background(), victim, engine.Input{Command: "echo hi"})
			took, cpu = append(took, time.Since(start)), cpu+selfCPU()-c0
			switch {
			case errors.Is(res.Err, engine.ErrBusy):
				r.busy++
			case res.Status != engine.StatusOK || res.Output != "hi\n":
				return sharesSample{}, fmt.Errorf("the victim's echo: %s %q", res.Status, res.Output)
			}
		}
		slices.Sort(took)
		slices.Sort(raw)
		return sharesSample{echo: took[len(took)/2], raw: raw[len(raw)/2], cpu: cpu / 21}, nil
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
	fmt.Fprintf(w, "fair shares:        another principal's echo %.1f ms alone (%.2f raw spawns, %.2f ms engine CPU), %.1f ms next to 12 commands and 32 jobs of one principal (%.2f raw spawns, %.2f ms CPU): %.2fx in raw spawns (at most 2x + %.1f), %.2fx CPU (at most 2x + %v); %d busy\n",
		ms1(a.echo), a.ratio(), ms1(a.cpu), ms1(l.echo), l.ratio(), ms1(l.cpu), l.ratio()/a.ratio(), sharesRatioSlack,
		l.cpu.Seconds()/max(a.cpu.Seconds(), 1e-9), sharesCPUSlack, r.busy)
}

func ms1(d time.Duration) float64 { return float64(d) / 1e6 }
