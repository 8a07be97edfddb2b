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
// principal's `echo` must stay within twice its latency alone and never be
// refused busy.

// sharesReport is what the phase measured.
type sharesReport struct {
	alone, loaded time.Duration // the victim's median echo
	busy          int           // the victim's calls refused busy
	err           error         // the phase could not run
}

// sharesSlack is added to twice the latency alone: medians of a few
// milliseconds on a loaded machine move by that much between two runs.
const sharesSlack = 2 * time.Millisecond

func (r sharesReport) ok() bool {
	return r.err == nil && r.busy == 0 && r.loaded <= 2*r.alone+sharesSlack
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
	echo := func() (time.Duration, error) {
		var took []time.Duration
		for range 21 {
			start := time.Now()
			res := e.Run(context.Background(), victim, engine.Input{Command: "echo hi"})
			took = append(took, time.Since(start))
			switch {
			case errors.Is(res.Err, engine.ErrBusy):
				r.busy++
			case res.Status != engine.StatusOK || res.Output != "hi\n":
				return 0, fmt.Errorf("the victim's echo: %s %q", res.Status, res.Output)
			}
		}
		slices.Sort(took)
		return took[len(took)/2], nil
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
	fmt.Fprintf(w, "fair shares:        another principal's echo %.1f ms alone, %.1f ms next to 12 commands and 32 jobs of one principal (%.2fx, at most 2x + %v); %d busy\n",
		float64(r.alone)/1e6, float64(r.loaded)/1e6, r.loaded.Seconds()/r.alone.Seconds(), sharesSlack, r.busy)
}
