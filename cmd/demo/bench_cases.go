package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/truncate"
)

// benchFlood measures each flood case in a child process of its own so
// that the peak RSS (VmHWM) of one does not hide the other's.
func benchFlood(o benchOpts, e *engine.Engine, tc engine.ToolContext) ([]benchRow, error) {
	run := func(kind string) (floodResult, error) {
		if o.inproc {
			return floodCase(kind, o, e, tc), nil
		}
		exe, err := os.Executable()
		if err != nil {
			return floodResult{}, fmt.Errorf("executable: %w", err)
		}
		args := []string{"bench", "-child", kind, "-flood", strconv.FormatInt(o.flood, 10)}
		if o.noCgroups {
			args = append(args, "-no-cgroups")
		}
		if o.spoolCap != 0 {
			args = append(args, "-spool-cap", strconv.FormatInt(o.spoolCap, 10))
		}
		c := exec.Command(exe, args...)
		c.Dir = tc.WorkingDir
		c.Stderr = os.Stderr
		out, err := c.Output()
		if err != nil {
			return floodResult{}, fmt.Errorf("flood child %s: %w", kind, err)
		}
		var r floodResult
		if err := json.Unmarshal(out, &r); err != nil {
			return floodResult{}, fmt.Errorf("flood child %s: %w (%q)", kind, err, out)
		}
		if r.Err != "" {
			return r, fmt.Errorf("flood child %s: %s", kind, r.Err)
		}
		return r, nil
	}
	var raw, eng floodResult
	for i := range 3 { // keep the best of three rounds
		r, err := run("raw")
		if err != nil {
			return nil, err
		}
		g, err := run("engine")
		if err != nil {
			return nil, err
		}
		if i == 0 || r.Seconds < raw.Seconds {
			raw = r
		}
		if i == 0 || g.Seconds < eng.Seconds {
			eng = g
		}
	}
	rate := func(r floodResult) float64 { return float64(r.Bytes) / r.Seconds / 1e6 }
	ratio := rate(eng) / rate(raw) * 100
	hwm := "child VmHWM"
	if o.inproc {
		hwm = "VmHWM (in-process, mixed)"
	}
	return []benchRow{
		{name: fmt.Sprintf("%s output throughput", truncate.Humanize(o.flood)), raw: fmt.Sprintf("%.0f MB/s", rate(raw)),
			eng: fmt.Sprintf("%.0f MB/s", rate(eng)), ratio: fmt.Sprintf("%.1f%%", ratio), target: ">= 90%", ok: pass(ratio >= 90)},
		{name: fmt.Sprintf("%s output peak RSS (%s)", truncate.Humanize(o.flood), hwm), raw: fmt.Sprintf("%.1f MiB", float64(raw.HWMKiB)/1024),
			eng: fmt.Sprintf("%.1f MiB", float64(eng.HWMKiB)/1024), target: "<= 32 MiB", ok: pass(eng.HWMKiB <= 32<<10)},
	}, nil
}

// benchChild runs one flood case in this (child) process.
func benchChild(o benchOpts, stdout, stderr io.Writer) int {
	var r floodResult
	switch o.child {
	case "raw":
		r = floodCase("raw", o, nil, engine.ToolContext{})
	case "engine":
		dir, err := os.MkdirTemp("", "bashvisor-bench-")
		if err != nil {
			r.Err = err.Error()
			break
		}
		defer os.RemoveAll(dir)
		e, err := engine.New(benchConfig(o))
		if err != nil {
			r.Err = err.Error()
			break
		}
		r = floodCase("engine", o, e, engine.ToolContext{WorkingDir: dir})
		_ = e.Shutdown(context.Background())
	default:
		fmt.Fprintln(stderr, "bench: unknown child case", o.child)
		return exitUsage
	}
	_ = json.NewEncoder(stdout).Encode(r)
	return 0
}

func floodCase(kind string, o benchOpts, e *engine.Engine, tc engine.ToolContext) floodResult {
	if o.flood > 16<<20 { // warm up (fresh process: heap, buffers, page cache)
		w := o
		w.flood = 8 << 20
		floodCase(kind, w, e, tc)
	}
	cmd := fmt.Sprintf("head -c %d /dev/zero", o.flood)
	var r floodResult
	start := time.Now()
	switch kind {
	case "raw":
		c := exec.Command("bash", "-c", cmd)
		c.Stdout, c.Stderr = io.Discard, io.Discard
		if err := c.Run(); err != nil {
			r.Err = err.Error()
		}
		r.Bytes = o.flood
	default:
		res := e.Run(context.Background(), tc, engine.Input{Command: cmd, Mode: engine.ModeSlow})
		if res.Status != engine.StatusOK {
			r.Err = string(res.Status) + ": " + res.Output
		}
		r.Bytes = res.OutputBytes
		if res.FullOutputFile != "" {
			os.Remove(res.FullOutputFile)
		}
	}
	r.Seconds = time.Since(start).Seconds()
	r.HWMKiB = statusKiB("VmHWM")
	return r
}

// statusKiB reads a "Name: N kB" field of /proc/self/status.
func statusKiB(name string) int64 { return procStatusKiB("self", name) }

// benchTimeout measures how long past the deadline a timed-out command's
// call returns, 10 at a time.
func benchTimeout(o benchOpts, dir string) ([]benchRow, error) {
	cfg := benchConfig(o)
	cfg.Timeout = 200 * time.Millisecond
	e, err := engine.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	defer e.Shutdown(context.Background())
	tc := engine.ToolContext{WorkingDir: dir}
	var mu sync.Mutex
	var late durations
	var bad atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 10)
	for range o.timeouts {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			start := time.Now()
			r := e.Run(context.Background(), tc, engine.Input{Command: "sleep 30"})
			d := time.Since(start) - cfg.Timeout
			if r.Status != engine.StatusTimedOut {
				bad.Add(1)
			}
			mu.Lock()
			late = append(late, d)
			mu.Unlock()
		})
	}
	wg.Wait()
	if bad.Load() > 0 {
		return nil, fmt.Errorf("timeout case: %d commands did not time out", bad.Load())
	}
	return []benchRow{
		{name: fmt.Sprintf("timeout to return past deadline, p50 (n=%d)", o.timeouts), eng: ms(late.pct(50))},
		{name: "timeout to return past deadline, p99", eng: ms(late.pct(99)), target: "<= 50 ms", ok: pass(late.pct(99) <= 50*time.Millisecond)},
		{name: "timeout to return past deadline, max", eng: ms(late.pct(100))},
	}, nil
}

// benchRestricted compares each sandbox profile's `true` with
// unrestricted `true`, interleaved, when the engine offers restricted
// mode: read-only, read-only with network (the egress proxy is started
// and stopped per command), and workspace-write in a git repository
// (its roots found, hooks and config protected, per command).
func benchRestricted(o benchOpts, e *engine.Engine, tc engine.ToolContext) []benchRow {
	allow := []string{"127.0.0.1:9"}
	repo, err := os.MkdirTemp("", "bashvisor-bench-repo-")
	if err == nil {
		defer os.RemoveAll(repo)
		if out, gerr := exec.Command("git", "init", "-q", repo).CombinedOutput(); gerr != nil {
			err = fmt.Errorf("git init: %v: %s", gerr, out)
		}
	}
	cases := []struct {
		name string
		tc   engine.ToolContext
		err  error
	}{
		{"read-only", withSandbox(tc, engine.Sandbox{Profile: engine.ReadOnly}), nil},
		{"read-only + network", withSandbox(tc, engine.Sandbox{Profile: engine.ReadOnly, Network: allow}), nil},
		{"workspace-write (git repo)", withSandbox(engine.ToolContext{WorkingDir: repo, ConversationID: tc.ConversationID},
			engine.Sandbox{Profile: engine.WorkspaceWrite}), err},
	}
	var rows []benchRow
	for _, c := range cases {
		name := "sandbox " + c.name + " `true` vs unrestricted"
		if c.err == nil {
			if r := e.Run(context.Background(), c.tc, engine.Input{Command: "true"}); r.Status != engine.StatusOK {
				c.err = errors.New(firstLine(r.Output))
			}
		}
		if c.err != nil {
			rows = append(rows, benchRow{name: name, raw: "n/a", eng: "n/a", ratio: "n/a: " + c.err.Error(), target: "<= +1.5 ms"})
			continue
		}
		n := max(50, o.serial/2)
		var plain, restr durations
		for i := -10; i < n; i++ {
			t0 := time.Now()
			_ = engRun(e, tc, "true")
			t1 := time.Now()
			e.Run(context.Background(), c.tc, engine.Input{Command: "true"})
			t2 := time.Now()
			if i >= 0 {
				plain, restr = append(plain, t1.Sub(t0)), append(restr, t2.Sub(t1))
			}
		}
		d := restr.mean() - plain.mean()
		rows = append(rows, benchRow{name: fmt.Sprintf("%s, mean of %d", name, n), raw: ms(plain.mean()) + " (unrestr.)",
			eng: ms(restr.mean()), ratio: fmt.Sprintf("%+.3f ms", float64(d)/1e6), target: "<= +1.5 ms", ok: pass(d <= 1500*time.Microsecond)})
	}
	return rows
}

func withSandbox(tc engine.ToolContext, s engine.Sandbox) engine.ToolContext {
	tc.Sandbox = s
	return tc
}

// benchLimits measures what resource limits and the resource report cost
// per command: the engine with its default limits against one with every
// limit off (both account), then, on package proc directly, the
// accounting (reading a finished command's usage and resetting its
// cgroup's counters for the next) and the placement of a command into
// cgroup v1 hierarchies on a hybrid host (see benchPlacement).
func benchLimits(o benchOpts, e *engine.Engine, tc engine.ToolContext) ([]benchRow, error) {
	if o.noCgroups {
		return []benchRow{{name: "accounting per command (usage + reset)", eng: "n/a: -no-cgroups"}}, nil
	}
	cfg := benchConfig(o)
	cfg.Limits = config.Limits{Memory: -1, CPUTime: -1, Processes: -1}
	off, err := engine.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	defer off.Shutdown(context.Background())
	n := max(50, o.serial/2)
	var on, none durations
	for i := -10; i < n; i++ {
		t0 := time.Now()
		if err := engRun(off, tc, "true"); err != nil {
			return nil, err
		}
		t1 := time.Now()
		if err := engRun(e, tc, "true"); err != nil {
			return nil, err
		}
		t2 := time.Now()
		if i >= 0 {
			none, on = append(none, t1.Sub(t0)), append(on, t2.Sub(t1))
		}
	}
	d := on.mean() - none.mean()
	rows := []benchRow{{name: fmt.Sprintf("limits on vs off, serial `true`, mean of %d", n), raw: ms(none.mean()) + " (off)",
		eng: ms(on.mean()), ratio: fmt.Sprintf("%+.3f ms", float64(d)/1e6)}}

	m, err := proc.ProbeCgroups("")
	if err != nil {
		return append(rows, benchRow{name: "accounting per command (usage + reset)", eng: "n/a: " + err.Error()}), nil
	}
	defer m.Close()
	bash, err := exec.LookPath("bash")
	if err != nil {
		return nil, err
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	defer null.Close()
	var acct durations
	v1 := false
	for i := -10; i < n; i++ {
		cg, err := m.New("bench-" + strconv.Itoa(i+10))
		if err != nil {
			return nil, err
		}
		v1 = len(cg.V1Dirs()) > 0
		memory, pids := cg.Controllers()
		var l proc.Limits
		if memory {
			l.Memory = 1 << 30
		}
		if pids {
			l.Pids = 4096
		}
		if err := cg.SetLimits(l); err != nil {
			return nil, err
		}
		p, err := proc.Start(proc.Spec{Path: bash, Args: []string{"bash", "-c", "true"}, Dir: "/", Cgroup: cg, Output: null})
		if err != nil {
			return nil, err
		}
		if _, err := p.Wait(); err != nil {
			return nil, err
		}
		t0 := time.Now()
		if _, err := cg.Usage(); err != nil {
			return nil, err
		}
		cg.RecycleEmpty()
		if i >= 0 {
			acct = append(acct, time.Since(t0))
		}
	}
	us := func(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d)/1e3) }
	rows = append(rows, benchRow{name: fmt.Sprintf("accounting per command (usage + reset), p50 of %d", n), eng: us(acct.pct(50)),
		ratio: "mean " + us(acct.mean()), target: "<= 20 µs", ok: pass(acct.pct(50) <= 20*time.Microsecond)})
	if !v1 {
		return rows, nil
	}
	// Placement alone: a thread that is not the main thread joins a
	// command's v1 cgroups and leaves them (what a fork into a cgroup that
	// has no forker yet is wrapped in).
	place := make(chan durations, 1)
	go func() {
		runtime.LockOSThread() // ends with the goroutine: it may be the main thread
		var ds durations
		cg, err := m.New("bench-place")
		if err != nil {
			place <- nil
			return
		}
		defer cg.Remove()
		for i := -10; i < n; i++ {
			t0 := time.Now()
			if cg.JoinThread() != nil || m.LeaveThread() != nil {
				place <- nil
				return
			}
			if i >= 0 {
				ds = append(ds, time.Since(t0))
			}
		}
		place <- ds
	}()
	if ds := <-place; ds != nil {
		rows = append(rows, benchRow{name: "cgroup v1 placement alone (a thread joins + leaves), p50", eng: us(ds.pct(50)),
			ratio: "mean " + us(ds.mean())})
	}
	r, err := benchPlacement(n, null)
	if err != nil {
		return nil, err
	}
	return append(rows, r...), nil
}

// benchPlacement starts /bin/true side by side with no cgroup, into a
// recycled cgroup (on amd64 and arm64 its child joins the v1 cgroups
// itself; elsewhere its resident forker forks it) and into a new cgroup
// each time (a thread joins its v1 cgroups for the fork and leaves), and
// reports what each cgroup start adds to the start without one, in wall
// time (p50) and in this process's CPU time (mean): the placement in situ.
func benchPlacement(n int, null *os.File) ([]benchRow, error) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		return nil, err
	}
	// Two managers: new cgroups must not come from the recycled ones.
	m, err := proc.ProbeCgroups("")
	if err != nil {
		return nil, err
	}
	defer m.Close()
	mNew, err := proc.ProbeCgroups("")
	if err != nil {
		return nil, err
	}
	defer mNew.Close()
	start := func(cg *proc.Cgroup) (time.Duration, time.Duration, error) {
		c0, t0 := selfCPU(), time.Now()
		p, err := proc.Start(proc.Spec{Path: truePath, Args: []string{"true"}, Dir: "/", Cgroup: cg, Output: null})
		if err != nil {
			return 0, 0, err
		}
		_, err = p.Wait()
		return time.Since(t0), selfCPU() - c0, err
	}
	pooled, err := m.New("bench-pooled")
	if err != nil {
		return nil, err
	}
	pooled.RecycleEmpty() // recycled once (a forker where the child does not join itself)
	var wall [3]durations
	var cpu [3]time.Duration
	for i := -10; i < n; i++ {
		if pooled, err = m.New("bench-pooled"); err != nil {
			return nil, err
		}
		fresh, err := mNew.New("bench-new-" + strconv.Itoa(i+10))
		if err != nil {
			return nil, err
		}
		for k, cg := range []*proc.Cgroup{nil, pooled, fresh} {
			w, c, err := start(cg)
			if err != nil {
				return nil, err
			}
			if i >= 0 {
				wall[k], cpu[k] = append(wall[k], w), cpu[k]+c
			}
			time.Sleep(300 * time.Microsecond)
		}
		fresh.Remove()
		pooled.RecycleEmpty()
	}
	us := func(d time.Duration) string { return fmt.Sprintf("%+.1f µs", float64(d)/1e3) }
	row := func(name string, k int) benchRow {
		return benchRow{name: name, raw: fmt.Sprintf("%.3f ms (no cgroup)", float64(wall[0].pct(50))/1e6),
			eng:   fmt.Sprintf("%.3f ms", float64(wall[k].pct(50))/1e6),
			ratio: us(wall[k].pct(50)-wall[0].pct(50)) + ", CPU " + us((cpu[k]-cpu[0])/time.Duration(n))}
	}
	return []benchRow{
		row(fmt.Sprintf("start `true` into a recycled cgroup (its child joins the v1 cgroups), p50 of %d", n), 1),
		row("start `true` into a new cgroup (a thread joins + leaves), p50", 2),
	}, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}

// benchSleepers runs n `sleep` commands at once and measures the engine's
// goroutines and memory per running command.
func benchSleepers(o benchOpts, dir string) ([]benchRow, error) {
	cfg := benchConfig(o)
	cfg.Timeout = 2 * time.Minute
	e, err := engine.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	defer e.Shutdown(context.Background())
	sdir := filepath.Join(dir, "sleepers")
	if err := os.Mkdir(sdir, 0o700); err != nil {
		return nil, fmt.Errorf("sleepers dir: %w", err)
	}
	tc := engine.ToolContext{WorkingDir: sdir}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The callers are the embedding program's goroutines: start them first,
	// parked, and take the baseline with them.
	gate := make(chan struct{})
	var wg sync.WaitGroup
	var bad atomic.Int64
	for i := range o.sleepers {
		wg.Go(func() {
			<-gate
			r := e.Run(ctx, tc, engine.Input{Command: fmt.Sprintf("echo > s%d; exec sleep 120", i)})
			if r.Status != engine.StatusCancelled {
				bad.Add(1)
			}
		})
	}
	time.Sleep(100 * time.Millisecond)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	g0, rss0 := runtime.NumGoroutine(), statusKiB("VmRSS")
	start := time.Now()
	close(gate)
	for {
		ents, _ := os.ReadDir(sdir)
		if len(ents) >= o.sleepers {
			break
		}
		if time.Since(start) > time.Minute {
			return nil, fmt.Errorf("sleepers: only %d of %d started", len(ents), o.sleepers)
		}
		time.Sleep(20 * time.Millisecond)
	}
	startAll := time.Since(start)
	time.Sleep(200 * time.Millisecond)
	runtime.GC()
	runtime.ReadMemStats(&after)
	g1, rss1 := runtime.NumGoroutine(), statusKiB("VmRSS")
	cancel()
	wg.Wait()
	if bad.Load() > 0 {
		return nil, fmt.Errorf("sleepers: %d did not end cancelled", bad.Load())
	}
	n := float64(o.sleepers)
	heap := float64(int64(after.HeapInuse)-int64(before.HeapInuse)) / n / 1024
	stack := float64(int64(after.StackInuse)-int64(before.StackInuse)) / n / 1024
	rss := float64(rss1-rss0) / n
	return []benchRow{
		{name: fmt.Sprintf("%d concurrent sleeps: goroutines per command", o.sleepers), eng: fmt.Sprintf("%.2f", float64(g1-g0)/n),
			ratio: "(excl. the caller's)"},
		{name: "  heap / stacks per command", eng: fmt.Sprintf("%.1f / %.1f KiB", heap, stack)},
		{name: "  engine RSS growth per command", eng: fmt.Sprintf("%.1f KiB", rss)},
		{name: "  time to start all", eng: fmt.Sprintf("%.2f s", startAll.Seconds())},
	}, nil
}
