package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/truncate"
)

// benchOpts are the flags of `demo bench`.
type benchOpts struct {
	serial       int
	conc         int
	concN        int
	flood        int64
	timeouts     int
	sleepers     int
	only         string
	cpuprofile   string
	inproc       bool
	noCgroups    bool
	cgroupParent string
	spoolCap     int64
	child        string // internal: run one flood case and print JSON

	mcpRounds     int
	mcpCalls      int
	mcpConcRounds int
	mcpVariants   string
	ts            bool
	tsDir         string
}

// benchRow is one line of the report.
type benchRow struct {
	name, raw, eng, ratio, target string
	ok                            *bool
}

// cmdBench measures the engine against raw os/exec side by side.
func cmdBench(args []string, stdout, stderr io.Writer) int {
	var o benchOpts
	fs := newFlagSet("bench")
	fs.IntVar(&o.serial, "serial", 400, "serial runs of 'bash -c true' per variant")
	fs.IntVar(&o.conc, "c", 64, "concurrency of the throughput case")
	fs.IntVar(&o.concN, "conc-n", 3000, "commands per variant in the throughput case")
	flood := fs.String("flood", "1GiB", "output size of the throughput case (e.g. 1GiB, 256MiB)")
	fs.IntVar(&o.timeouts, "timeouts", 100, "timed-out commands measured")
	fs.IntVar(&o.sleepers, "sleepers", 1000, "concurrent sleep commands for the per-command memory case")
	fs.StringVar(&o.only, "only", "", "comma-separated cases to run: serial,conc,flood,timeout,restricted,limits,sleepers,mcp (default all)")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the run to this file")
	fs.BoolVar(&o.inproc, "inproc", false, "measure the flood cases in this process (peak RSS then mixes)")
	fs.BoolVar(&o.noCgroups, "no-cgroups", false, "run the engine without per-command cgroups")
	fs.StringVar(&o.cgroupParent, "cgroup-parent", "", "the cgroup v2 directory for the engine's per-command cgroups (default: its own cgroup)")
	fs.Int64Var(&o.spoolCap, "spool-cap", 0, "the engine's SpoolCap (0: default 64 MiB, negative: no spool file)")
	fs.StringVar(&o.child, "child", "", "internal: run one flood case (engine|raw) and print JSON")
	fs.IntVar(&o.mcpRounds, "mcp-rounds", 10, "mcp case: serial rounds (each: raw spawns, then every client, rotated)")
	fs.IntVar(&o.mcpCalls, "mcp-calls", 50, "mcp case: serial calls per round and side")
	fs.IntVar(&o.mcpConcRounds, "mcp-conc-rounds", 3, "mcp case: throughput rounds of -conc-n calls at -c in flight")
	fs.StringVar(&o.mcpVariants, "mcp-variants", "", "mcp case: more servers for the Go client, separated by ';', each `ENV=V ... [bin=PATH]` (e.g. 'GOGC=100 GOMAXPROCS=2')")
	fs.BoolVar(&o.ts, "ts", true, "mcp case: also measure the official TypeScript SDK client (node; npm installs it, else it is skipped)")
	fs.StringVar(&o.tsDir, "ts-dir", "", "mcp case: npm install directory for the TypeScript SDK, reused when present (default: a temporary one)")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected arguments: %q", fs.Args())
	}
	var err error
	if o.flood, err = parseSize(*flood); err != nil {
		return usageError(fs, stderr, "-flood: %v", err)
	}
	if o.child != "" {
		return benchChild(o, stdout, stderr)
	}
	if o.want("mcp") && (o.mcpRounds < 1 || o.mcpCalls < 1 || o.mcpConcRounds < 1 || o.conc < 1 || o.concN < 1) {
		return usageError(fs, stderr, "-mcp-rounds, -mcp-calls, -mcp-conc-rounds, -c and -conc-n must be at least 1")
	}
	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return exitSystem
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return exitSystem
		}
		defer pprof.StopCPUProfile()
	}
	rows, err := runBench(o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return exitSystem
	}
	printBench(stdout, o, rows)
	return 0
}

// parseSize parses 1GiB, 256MiB, 10KiB or a byte count.
func parseSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = v, u.m
			break
		}
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return int64(n * float64(mult)), nil
}

func (o benchOpts) want(name string) bool {
	return o.only == "" || slices.Contains(strings.Split(o.only, ","), name)
}

func benchConfig(o benchOpts) engine.Config {
	c := engine.DefaultConfig()
	c.NoCgroups = o.noCgroups
	c.CgroupParent = o.cgroupParent
	c.SpoolCap = o.spoolCap
	// The cases measure what the engine itself can do, side by side with
	// raw os/exec at the same concurrency: admission must not queue them.
	n := max(o.conc, o.sleepers, 64)
	c.Admission = engine.Admission{MaxRunning: n, MaxRunningPerConversation: n, MaxQueue: n, MaxJobs: n, MaxJobsPerConversation: n}
	return c
}

func runBench(o benchOpts, log io.Writer) ([]benchRow, error) {
	dir, err := os.MkdirTemp("", "bashvisor-bench-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	e, err := engine.New(benchConfig(o))
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = e.Shutdown(ctx)
	}()
	tc := engine.ToolContext{WorkingDir: dir, ConversationID: "bench"}
	var rows []benchRow
	step := func(s string) { fmt.Fprintf(log, "bench: %s...\n", s) }

	if o.want("serial") {
		step("serial bash -c true")
		r, err := benchSerial(o, e, tc)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r...)
	}
	if o.want("conc") {
		step(fmt.Sprintf("throughput at concurrency %d", o.conc))
		r, err := benchConcurrent(o, e, tc)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r...)
	}
	if o.want("flood") {
		step(fmt.Sprintf("%s of output", truncate.Humanize(o.flood)))
		r, err := benchFlood(o, e, tc)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r...)
	}
	if o.want("timeout") {
		step("timeout-to-return latency")
		r, err := benchTimeout(o, dir)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r...)
	}
	if o.want("restricted") {
		step("restricted overhead")
		rows = append(rows, benchRestricted(o, e, tc)...)
	}
	if o.want("limits") {
		step("resource limits and accounting")
		r, err := benchLimits(o, e, tc)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r...)
	}
	if o.want("mcp") {
		step(fmt.Sprintf("MCP stdio: %dx%d serial calls, %dx%d at c=%d", o.mcpRounds, o.mcpCalls, o.mcpConcRounds, o.concN, o.conc))
		r, err := benchMCP(o, dir, log)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r...)
	}
	if o.want("sleepers") {
		step(fmt.Sprintf("%d concurrent sleep commands", o.sleepers))
		r, err := benchSleepers(o, dir)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r...)
	}
	return rows, nil
}

// rawRun runs `bash -c cmd` through os/exec with its output captured.
func rawRun(dir, cmd string) error {
	c := exec.Command("bash", "-c", cmd)
	c.Dir = dir
	var b bytes.Buffer
	c.Stdout, c.Stderr = &b, &b
	return c.Run()
}

func engRun(e *engine.Engine, tc engine.ToolContext, cmd string) error {
	r := e.Run(context.Background(), tc, engine.Input{Command: cmd})
	if r.Status != engine.StatusOK {
		return fmt.Errorf("engine: %s: %s", r.Status, r.Output)
	}
	return nil
}

type durations []time.Duration

func (d durations) mean() time.Duration {
	var s time.Duration
	for _, x := range d {
		s += x
	}
	return s / time.Duration(max(1, len(d)))
}

func (d durations) pct(p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/1e6) }

func pass(b bool) *bool { return &b }

// benchSerial alternates raw and engine runs so both see the same machine
// state; a warm-up round is discarded.
func benchSerial(o benchOpts, e *engine.Engine, tc engine.ToolContext) ([]benchRow, error) {
	var raw, eng, engNoCg durations
	noCg, err := engine.New(func() engine.Config { c := benchConfig(o); c.NoCgroups = true; return c }())
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	defer noCg.Shutdown(context.Background())
	// A short idle gap after each sample keeps one variant's asynchronous
	// tail (the actor stopping after the call returned, os/exec's
	// goroutines exiting) out of the next variant's sample.
	gap := func() { time.Sleep(300 * time.Microsecond) }
	for i := -20; i < o.serial; i++ {
		t0 := time.Now()
		if err := rawRun(tc.WorkingDir, "true"); err != nil {
			return nil, fmt.Errorf("raw: %w", err)
		}
		d0 := time.Since(t0)
		gap()
		t1 := time.Now()
		if err := engRun(e, tc, "true"); err != nil {
			return nil, err
		}
		d1 := time.Since(t1)
		gap()
		t2 := time.Now()
		if err := engRun(noCg, tc, "true"); err != nil {
			return nil, err
		}
		d2 := time.Since(t2)
		gap()
		if i >= 0 {
			raw, eng, engNoCg = append(raw, d0), append(eng, d1), append(engNoCg, d2)
		}
	}
	ov := float64(eng.mean()-raw.mean()) / float64(raw.mean()) * 100
	ovNo := float64(engNoCg.mean()-raw.mean()) / float64(raw.mean()) * 100
	rows := []benchRow{
		{name: fmt.Sprintf("serial `bash -c true`, mean of %d", o.serial), raw: ms(raw.mean()), eng: ms(eng.mean()),
			ratio: fmt.Sprintf("%+.1f%%", ov), target: "<= +3%", ok: pass(ov <= 3)},
		{name: "serial `bash -c true`, p50", raw: ms(raw.pct(50)), eng: ms(eng.pct(50)),
			ratio: fmt.Sprintf("%+.1f%%", float64(eng.pct(50)-raw.pct(50))/float64(raw.pct(50))*100)},
	}
	if !o.noCgroups {
		rows = append(rows, benchRow{name: "serial, engine without cgroups, mean", raw: ms(raw.mean()), eng: ms(engNoCg.mean()),
			ratio: fmt.Sprintf("%+.1f%%", ovNo), target: "<= +3%", ok: pass(ovNo <= 3)})
	}
	return rows, nil
}

// benchConcurrent runs concN commands with conc in flight, raw then engine,
// twice, and keeps each variant's better round.
func benchConcurrent(o benchOpts, e *engine.Engine, tc engine.ToolContext) ([]benchRow, error) {
	round := func(f func() error) (float64, error) { return concRound(o.conc, o.concN, f) }
	var rawBest, engBest float64
	for range 2 {
		r, err := round(func() error { return rawRun(tc.WorkingDir, "true") })
		if err != nil {
			return nil, fmt.Errorf("raw: %w", err)
		}
		g, err := round(func() error { return engRun(e, tc, "true") })
		if err != nil {
			return nil, err
		}
		rawBest, engBest = max(rawBest, r), max(engBest, g)
	}
	ratio := engBest / rawBest * 100
	return []benchRow{{
		name: fmt.Sprintf("throughput at c=%d, %d cmds", o.conc, o.concN),
		raw:  fmt.Sprintf("%.0f /s", rawBest), eng: fmt.Sprintf("%.0f /s", engBest),
		ratio: fmt.Sprintf("%.1f%%", ratio), target: ">= 95%", ok: pass(ratio >= 95),
	}}, nil
}

// concRound runs f n times with c calls in flight and returns the calls
// per second.
func concRound(c, n int, f func() error) (float64, error) {
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range c {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := f(); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds(), firstErr
}

// floodResult is what a flood case reports.
type floodResult struct {
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	HWMKiB  int64   `json:"hwm_kib"`
	Err     string  `json:"err,omitempty"`
}

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
	allow, _ := engine.ParseAllowlist([]string{"127.0.0.1:9"})
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
// cgroup v1 hierarchies (a thread joining and leaving them) on a hybrid
// host.
func benchLimits(o benchOpts, e *engine.Engine, tc engine.ToolContext) ([]benchRow, error) {
	if o.noCgroups {
		return []benchRow{{name: "accounting per command (usage + reset)", eng: "n/a: -no-cgroups"}}, nil
	}
	cfg := benchConfig(o)
	cfg.Limits = engine.Limits{Memory: -1, CPUTime: -1, Processes: -1}
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
	// Placement: a thread that is not the main thread joins a command's
	// v1 cgroups and leaves them (what every command's fork is wrapped in).
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
		rows = append(rows, benchRow{name: "cgroup v1 placement per command (join + leave), p50", eng: us(ds.pct(50)),
			ratio: "mean " + us(ds.mean())})
	}
	return rows, nil
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

func printBench(w io.Writer, o benchOpts, rows []benchRow) {
	cg := "on"
	if o.noCgroups {
		cg = "off"
	} else if m, err := proc.ProbeCgroups(""); err != nil {
		cg = "unavailable"
	} else {
		_ = m.Close()
	}
	fmt.Fprintf(w, "bashvisor bench: %s/%s, %d CPUs, %s, per-command cgroups %s\n\n", runtime.GOOS, runtime.GOARCH,
		runtime.NumCPU(), runtime.Version(), cg)
	const f = "%-52s %-16s %-24s %-26s %-11s %s\n"
	fmt.Fprintf(w, f, "case", "raw os/exec", "engine / MCP", "ratio", "target", "")
	failed := 0
	for _, r := range rows {
		verdict := ""
		if r.ok != nil {
			verdict = "ok"
			if !*r.ok {
				verdict, failed = "MISSED", failed+1
			}
		}
		fmt.Fprintf(w, f, r.name, dash(r.raw), dash(r.eng), dash(r.ratio), dash(r.target), verdict)
	}
	if failed > 0 {
		fmt.Fprintf(w, "\n%d target(s) missed\n", failed)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
