package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bashvisor/bashvisor/cmd/internal/cli"
	"github.com/bashvisor/bashvisor/config"
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
	// the admission case: parallel sleeps, the CPU fairness window
	admSleepers int
	admWindow   time.Duration

	mcpRounds     int
	mcpCalls      int
	mcpConcRounds int
	mcpVariants   string
	ts            bool
	tsDir         string

	cliRounds int
	cliBins   string

	idle  string // spacings of the idle case
	idleN int
	peers bool
	user  string // the idle case also as this user (bench_user.go)
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
	fs.IntVar(&o.admSleepers, "admission-sleepers", 100, "admission case: parallel `sleep 2` in one conversation")
	fs.DurationVar(&o.admWindow, "admission-window", 8*time.Second, "admission case: how long two principals compete for the CPU")
	fs.StringVar(&o.only, "only", "", "comma-separated cases to run: serial,conc,flood,timeout,restricted,limits,sleepers,admission,mcp,cli,idle (default all but idle)")
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
	fs.IntVar(&o.cliRounds, "cli-rounds", 20, "cli case: rounds of one process per command (bash -c true, bwrap, BIN version, BIN run [-sandbox …] -- true)")
	fs.StringVar(&o.cliBins, "cli-bins", "", "cli case: the bashvisor `binaries` to measure, comma-separated, side by side (default: this program, whose run is bashvisor's)")
	fs.StringVar(&o.idle, "idle", "", "idle case: `spacings` between commands, comma-separated (0: back to back); setting it runs the case (default with -only idle: 0,20ms,1s)")
	fs.IntVar(&o.idleN, "idle-n", 40, "idle case: samples per variant and spacing")
	fs.BoolVar(&o.peers, "peers", false, "idle case: also run bwrap, `codex sandbox` and srt where installed")
	fs.StringVar(&o.user, "user", "", "idle case: also run every profile as this unprivileged `user` (run as root), rotated with root's: a peer process of this program, which the user must be able to execute")
	fs.StringVar(&o.tsDir, "ts-dir", "", "mcp case: npm install directory for the TypeScript SDK, reused when present (default: a temporary one)")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected arguments: %q", fs.Args())
	}
	var err error
	if o.flood, err = cli.ParseSize(*flood); err != nil {
		return usageError(fs, stderr, "-flood: %v", err)
	}
	if o.child == "idle-user" {
		return idleUserChild(o, os.Stdin, stdout, stderr)
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

func (o benchOpts) want(name string) bool {
	return o.only == "" || slices.Contains(strings.Split(o.only, ","), name)
}

func benchConfig(o benchOpts) engine.Config {
	c := engine.DefaultConfig()
	c.Cgroups.Off = o.noCgroups
	c.Cgroups.Parent = o.cgroupParent
	c.Output.SpoolCap = o.spoolCap
	// The cases measure what the engine itself can do, side by side with
	// raw os/exec at the same concurrency: admission must not queue them.
	n := max(o.conc, o.sleepers, 64)
	c.Admission = config.Admission{MaxBusy: n, MaxRunning: n, MaxRunningPerConversation: n, MaxQueue: n, MaxJobs: n, MaxJobsPerConversation: n}
	return c
}

func runBench(o benchOpts, log io.Writer) ([]benchRow, error) {
	dir, err := os.MkdirTemp("", "bashvisor-bench-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	var rows []benchRow
	step := func(s string) { fmt.Fprintf(log, "bench: %s...\n", s) }
	// First, before this process makes an engine: an engine drops
	// capabilities from the bounding set of every program the process
	// starts from then on (proc.ProtectEngine), and the CLI processes
	// must start as a user's shell starts them.
	if o.want("cli") {
		step(fmt.Sprintf("one CLI process per command, %d rounds", o.cliRounds))
		r, err := benchCLI(o, dir)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r...)
	}
	var peer *userPeer // -user: started before this process has an engine
	if o.user != "" {
		if peer, err = startUserPeer(o, log); err != nil {
			return nil, err
		}
		defer peer.close()
	}
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
	if o.idle != "" || (o.only != "" && o.want("idle")) {
		if o.idle == "" {
			o.idle = "0,20ms,1s"
		}
		step(fmt.Sprintf("idle spacing %s, %d samples per variant", o.idle, o.idleN))
		r, err := benchIdle(o, e, dir)
		if peer != nil {
			r, err = benchIdleUser(o, e, dir, peer)
		}
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
	if o.want("admission") {
		step("admission: parallel sleeps, CPU shares, another principal's latency")
		r, err := benchAdmission(o, dir)
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
// state; a warm-up round is discarded. Besides the wall time it reports
// this process's CPU time per call (getrusage; the command's own is not
// in it), which a loaded machine distorts less than wall time.
func benchSerial(o benchOpts, e *engine.Engine, tc engine.ToolContext) ([]benchRow, error) {
	var raw, eng, engNoCg durations
	var cpuRaw, cpuEng, cpuNoCg time.Duration
	noCg, err := engine.New(func() engine.Config { c := benchConfig(o); c.Cgroups.Off = true; return c }())
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	defer noCg.Shutdown(context.Background())
	// A short idle gap after each sample keeps one variant's asynchronous
	// tail (the actor stopping after the call returned, os/exec's
	// goroutines exiting) out of the next variant's sample.
	gap := func() { time.Sleep(300 * time.Microsecond) }
	for i := -20; i < o.serial; i++ {
		c0, t0 := selfCPU(), time.Now()
		if err := rawRun(tc.WorkingDir, "true"); err != nil {
			return nil, fmt.Errorf("raw: %w", err)
		}
		d0, u0 := time.Since(t0), selfCPU()-c0
		gap()
		c1, t1 := selfCPU(), time.Now()
		if err := engRun(e, tc, "true"); err != nil {
			return nil, err
		}
		d1, u1 := time.Since(t1), selfCPU()-c1
		gap()
		c2, t2 := selfCPU(), time.Now()
		if err := engRun(noCg, tc, "true"); err != nil {
			return nil, err
		}
		d2, u2 := time.Since(t2), selfCPU()-c2
		gap()
		if i >= 0 {
			raw, eng, engNoCg = append(raw, d0), append(eng, d1), append(engNoCg, d2)
			cpuRaw, cpuEng, cpuNoCg = cpuRaw+u0, cpuEng+u1, cpuNoCg+u2
		}
	}
	n := time.Duration(max(o.serial, 1))
	cpuRaw, cpuEng, cpuNoCg = cpuRaw/n, cpuEng/n, cpuNoCg/n
	ov := float64(eng.mean()-raw.mean()) / float64(raw.mean()) * 100
	ovNo := float64(engNoCg.mean()-raw.mean()) / float64(raw.mean()) * 100
	rows := []benchRow{
		{name: fmt.Sprintf("serial `bash -c true`, mean of %d", o.serial), raw: ms(raw.mean()), eng: ms(eng.mean()),
			ratio: fmt.Sprintf("%+.1f%%", ov), target: "<= +3%", ok: pass(ov <= 3)},
		{name: "serial `bash -c true`, p50", raw: ms(raw.pct(50)), eng: ms(eng.pct(50)),
			ratio: fmt.Sprintf("%+.1f%%", float64(eng.pct(50)-raw.pct(50))/float64(raw.pct(50))*100)},
	}
	us := func(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d)/1e3) }
	rows = append(rows, benchRow{name: "serial, this process's CPU per call, mean", raw: us(cpuRaw), eng: us(cpuEng),
		ratio: fmt.Sprintf("%+.1f µs", float64(cpuEng-cpuRaw)/1e3)})
	if !o.noCgroups {
		rows = append(rows, benchRow{name: "serial, engine without cgroups, mean", raw: ms(raw.mean()), eng: ms(engNoCg.mean()),
			ratio: fmt.Sprintf("%+.1f%%", ovNo), target: "<= +3%", ok: pass(ovNo <= 3)},
			benchRow{name: "serial, engine without cgroups, CPU per call", raw: us(cpuRaw), eng: us(cpuNoCg),
				ratio: fmt.Sprintf("%+.1f µs", float64(cpuNoCg-cpuRaw)/1e3)})
	}
	return rows, nil
}

// selfCPU is the user and system CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
