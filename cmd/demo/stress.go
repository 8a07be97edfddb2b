package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/proc"
)

// stressKind is one kind of command in the mix.
type stressKind struct {
	name   string
	weight int
	// needs is "cgroups" or "blocking" when the kind only makes sense with
	// that engine capability.
	needs string
	run   func(s *stresser, i int, dir string) error
}

// stressOpts are the flags of `demo stress`.
type stressOpts struct {
	n, c          int
	seed          uint64
	noProgress    bool
	progressEvery time.Duration
	noCgroups     bool
	timeout       time.Duration
	tenants       int
}

// stresser runs the mix against one engine and checks every result.
type stresser struct {
	o      stressOpts
	e      *engine.Engine
	marker string // BASHVISOR_STRESS value: every process of the run carries it

	mu       sync.Mutex
	failures []string
	counts   map[string]int
	lost     atomic.Int64
	busy     atomic.Int64 // calls refused with ErrBusy
	queued   atomic.Int64 // calls that waited for a slot
	isolated atomic.Int64 // isolation checks passed
	pidFiles []string     // directories whose pid files were recorded
}

// outsider is a conversation that never runs anything: every job id is
// "no such job" to it.
const outsider = "stress-outsider"

// tenant returns the conversation command i runs in.
func (s *stresser) tenant(i int) string { return "tenant-" + strconv.Itoa(i%s.o.tenants) }

// cmdStress runs N mixed commands at concurrency C and checks that nothing
// was lost or leaked. It exits 0 only when all checks are 0.
func cmdStress(args []string, stdout, stderr io.Writer) int {
	var o stressOpts
	fs := newFlagSet("stress")
	fs.IntVar(&o.n, "n", 2000, "number of commands")
	fs.IntVar(&o.c, "c", 32, "commands in flight")
	fs.Uint64Var(&o.seed, "seed", 0, "random seed of the mix (0: time based)")
	fs.BoolVar(&o.noProgress, "no-progress", false, "no progress report")
	fs.DurationVar(&o.progressEvery, "progress-every", 5*time.Second, "period of the progress line when stderr is not a terminal (on a terminal: a progress bar)")
	fs.BoolVar(&o.noCgroups, "no-cgroups", false, "run the engine without per-command cgroups (escapees are then skipped)")
	fs.DurationVar(&o.timeout, "timeout", 500*time.Millisecond, "the engine's default-mode timeout, used only by the kinds meant to time out")
	fs.IntVar(&o.tenants, "tenants", 4, "conversations running at once (command i runs in tenant i mod N); each checks it never sees another's jobs")
	executors := fs.String("executors", "", "instead of the mix, run -n calls of -fleet-command through these executors (`host:port,…`; \"local\": a local engine, to compare)")
	fleetCmd := fs.String("fleet-command", "echo ok", "the command of -executors")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if *executors != "" {
		ok, err := fleetStress(*executors, o.n, o.c, *fleetCmd, "", stdout, stderr)
		if err != nil {
			fmt.Fprintln(stderr, "stress:", err)
			return exitSystem
		}
		if !ok {
			return 1
		}
		return 0
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected arguments: %q", fs.Args())
	}
	if o.n <= 0 || o.c <= 0 {
		return usageError(fs, stderr, "-n and -c must be positive")
	}
	if o.tenants <= 0 {
		return usageError(fs, stderr, "-tenants must be positive")
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	ok, err := runStress(o, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "stress:", err)
		return exitSystem
	}
	if !ok {
		return 1
	}
	return 0
}

func stressKinds() []stressKind {
	return []stressKind{
		{name: "fast", weight: 20, run: (*stresser).fast},
		{name: "failing", weight: 10, run: (*stresser).failing},
		{name: "flood-10MB", weight: 4, run: (*stresser).flood},
		{name: "timeout", weight: 5, run: (*stresser).timeout},
		{name: "cancel", weight: 6, run: (*stresser).cancel},
		{name: "bg-complete", weight: 5, run: (*stresser).bgComplete},
		{name: "bg-kill", weight: 5, run: (*stresser).bgKill},
		{name: "bg-at-shutdown", weight: 1, run: (*stresser).bgShutdown},
		{name: "pipe-holder", weight: 8, run: (*stresser).pipeHolder},
		{name: "term-ignoring-tree", weight: 4, run: (*stresser).termIgnoring},
		{name: "escapees", weight: 6, needs: "cgroups", run: (*stresser).escapees},
		{name: "blocked", weight: 5, needs: "blocking", run: (*stresser).blocked},
		{name: "yield", weight: 6, run: (*stresser).yield},
		{name: "stdin", weight: 6, run: (*stresser).stdin},
	}
}

func runStress(o stressOpts, stdout, stderr io.Writer) (bool, error) {
	root, err := os.MkdirTemp("", "bashvisor-stress-")
	if err != nil {
		return false, fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(root)
	// Warm up: the engine opens a few process-wide files once (the shared
	// /dev/null); they belong in the baseline. So does the cgroup probe's
	// write-only /dev/null, opened by the checks after the run (cgroups
	// left) even with -no-cgroups.
	if w, err := engine.New(engine.Config{Cgroups: config.Cgroups{Off: o.noCgroups}}); err == nil {
		w.Run(context.Background(), engine.ToolContext{WorkingDir: root}, engine.Input{Command: "true"})
		_ = w.Shutdown(context.Background())
	}
	if m, err := proc.ProbeCgroups(""); err == nil {
		_ = m.Close()
	}
	runtime.GC()
	var r stressReport
	r.baseG, r.baseFD, r.fds0 = runtime.NumGoroutine(), openFDs(), fdTargets()
	marker := fmt.Sprintf("%d-%d", os.Getpid(), o.seed)
	e, err := engine.New(stressConfig(o, root, marker))
	if err != nil {
		return false, fmt.Errorf("engine: %w", err)
	}
	s := &stresser{o: o, e: e, marker: marker, counts: map[string]int{}}

	caps := map[string]bool{"cgroups": cgroupsOn(o)}
	probe := e.Run(context.Background(), engine.ToolContext{WorkingDir: root}, engine.Input{Command: "git add -A"})
	caps["blocking"] = probe.Status == engine.StatusBlocked
	kinds, plan, skipped := planStress(o, caps)
	r.skipped = skipped
	fmt.Fprintf(stderr, "stress: %d commands at concurrency %d in %d conversations, seed %d, cgroups %v, blocking %v\n", o.n, o.c, o.tenants, o.seed, caps["cgroups"], caps["blocking"])

	start := time.Now()
	var prog *progress
	if !o.noProgress {
		prog = startProgress(o, stderr, start)
	}
	s.drive(root, kinds, plan, prog)
	r.elapsed = time.Since(start)
	prog.finish()

	s.checkCgroupOrphans()
	s.checkTenants()
	if o.tenants > 1 {
		s.endTenant(s.tenant(0))
	}
	sharesDir := filepath.Join(root, "shares")
	if err := os.Mkdir(sharesDir, 0o700); err != nil {
		return false, fmt.Errorf("fair shares: %w", err)
	}
	r.shares = s.fairShares(o, sharesDir, marker)

	// Shutdown ends the jobs left running; then nothing of the run may be
	// left: no process carrying the marker, no recorded pid alive, no
	// cgroup, no goroutine or fd beyond the baseline.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.Shutdown(ctx); err != nil {
		s.fail(-1, "shutdown", err)
	}
	for _, j := range e.AllJobs() {
		if j.Status == engine.JobRunning {
			s.fail(-1, "shutdown", fmt.Errorf("job %s of %s still running after shutdown", j.JobID, j.ConversationID))
		}
	}
	r.orphans = s.orphans()
	r.cgLeft = cgroupsLeft()
	r.leakedG = settle(func() int { return runtime.NumGoroutine() - r.baseG })
	r.leakedFD = settle(func() int { return openFDs() - r.baseFD })
	return r.print(stdout, s), nil
}

// stressConfig is the engine's configuration for a stress run.
func stressConfig(o stressOpts, root, marker string) engine.Config {
	cfg := engine.DefaultConfig()
	// Kinds meant to time out run in default mode, with the short timeout;
	// every other kind runs in slow mode, whose generous timeout a loaded
	// machine never reaches (a result that still times out is wrong, not
	// lost: the watch's bound is 2 minutes).
	cfg.Timeout = o.timeout
	cfg.SlowTimeout = time.Minute
	cfg.Lifecycle.Grace = 200 * time.Millisecond
	cfg.Lifecycle.CleanupWait = 5 * time.Second
	cfg.Lifecycle.DrainWait = 100 * time.Millisecond
	cfg.BackgroundLifetime = 20 * time.Second
	cfg.Cgroups.Off = o.noCgroups
	cfg.Env.Environ = append(os.Environ(), "BASHVISOR_STRESS="+marker)
	cfg.OutputDir = filepath.Join(root, "engine-out")
	// Admission control is exercised, never refused: at most three quarters
	// of the concurrency runs at once (half in one conversation), fewer
	// while the busy commands want the CPUs (the default MaxBusy), the rest
	// waits in a queue long enough for all of it, and the job caps allow
	// every command to be a job. A busy result is therefore a slot the
	// engine failed to free: it is counted and fails the run. (The
	// fair-shares phase after the mix uses the default admission.)
	cfg.Admission = config.Admission{
		MaxRunning: max(1, o.c*3/4), MaxRunningPerConversation: max(1, o.c/2), MaxQueue: o.c, QueueWait: time.Minute,
		MaxJobs: o.n + o.c, MaxJobsPerConversation: o.n + o.c,
	}
	return cfg
}

// planStress draws the kind of each command by weight, among the kinds
// the host can run (caps), and names those it cannot.
func planStress(o stressOpts, caps map[string]bool) (kinds []stressKind, plan []int, skipped []string) {
	total := 0
	for _, k := range stressKinds() {
		if k.needs != "" && !caps[k.needs] {
			skipped = append(skipped, k.name+" (no "+k.needs+")")
			continue
		}
		kinds, total = append(kinds, k), total+k.weight
	}
	rng := rand.New(rand.NewPCG(o.seed, 0x5eed))
	plan = make([]int, o.n)
	for i := range plan {
		w := rng.IntN(total)
		for j, k := range kinds {
			if w < k.weight {
				plan[i] = j
				break
			}
			w -= k.weight
		}
	}
	return kinds, plan, skipped
}

// drive runs the plan at concurrency o.c, each command in a directory of
// its own under root.
func (s *stresser) drive(root string, kinds []stressKind, plan []int, prog *progress) {
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range s.o.c {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= s.o.n {
					return
				}
				k := kinds[plan[i]]
				dir := filepath.Join(root, "c"+strconv.Itoa(i))
				if err := os.Mkdir(dir, 0o700); err != nil {
					s.fail(i, k.name, err)
					continue
				}
				s.watch(i, k, dir)
				prog.add()
			}
		})
	}
	wg.Wait()
}

// stressReport is what a stress run found besides the stresser's counts.
type stressReport struct {
	elapsed           time.Duration
	skipped           []string
	baseG, baseFD     int
	fds0              map[string]string
	orphans, cgLeft   []string
	leakedG, leakedFD int
	shares            sharesReport
}

// print writes the report and reports whether the run passed.
func (r *stressReport) print(stdout io.Writer, s *stresser) bool {
	o := s.o
	fmt.Fprintf(stdout, "stress: %d commands at concurrency %d in %d conversations in %.1fs (%.0f cmd/s), seed %d\n", o.n, o.c, o.tenants,
		r.elapsed.Seconds(), float64(o.n)/r.elapsed.Seconds(), o.seed)
	names := make([]string, 0, len(s.counts))
	for n := range s.counts {
		names = append(names, n)
	}
	slices.Sort(names)
	var mix []string
	for _, n := range names {
		mix = append(mix, fmt.Sprintf("%s %d", n, s.counts[n]))
	}
	fmt.Fprintf(stdout, "mix: %s\n", strings.Join(mix, ", "))
	if len(r.skipped) > 0 {
		fmt.Fprintf(stdout, "skipped kinds: %s\n", strings.Join(r.skipped, ", "))
	}
	fmt.Fprintf(stdout, "admission: %d calls waited for a slot; %d isolation checks between conversations\n", s.queued.Load(), s.isolated.Load())
	fmt.Fprintf(stdout, "lost results:       %d\n", s.lost.Load())
	fmt.Fprintf(stdout, "busy results:       %d\n", s.busy.Load())
	fmt.Fprintf(stdout, "wrong results:      %d\n", len(s.failures))
	fmt.Fprintf(stdout, "orphan processes:   %d\n", len(r.orphans))
	fmt.Fprintf(stdout, "cgroups left:       %d\n", len(r.cgLeft))
	fmt.Fprintf(stdout, "leaked goroutines:  %d\n", r.leakedG)
	fmt.Fprintf(stdout, "leaked fds:         %d\n", r.leakedFD)
	r.shares.print(stdout)
	for i, f := range s.failures {
		if i == 20 {
			fmt.Fprintf(stdout, "  ... and %d more\n", len(s.failures)-20)
			break
		}
		fmt.Fprintln(stdout, "  wrong:", f)
	}
	for _, o := range r.orphans {
		fmt.Fprintln(stdout, "  orphan:", o)
	}
	for _, c := range r.cgLeft {
		fmt.Fprintln(stdout, "  cgroup:", c)
	}
	if r.leakedFD > 0 {
		for fd, target := range fdTargets() {
			if r.fds0[fd] != target {
				fmt.Fprintf(stdout, "  fd %s -> %s\n", fd, target)
			}
		}
	}
	if r.leakedG > 0 {
		buf := make([]byte, 1<<20)
		fmt.Fprintf(stdout, "goroutines:\n%s\n", buf[:runtime.Stack(buf, true)])
	}
	ok := s.lost.Load() == 0 && s.busy.Load() == 0 && len(s.failures) == 0 && len(r.orphans) == 0 && len(r.cgLeft) == 0 && r.leakedG <= 0 && r.leakedFD <= 0 &&
		r.shares.ok()
	if ok {
		fmt.Fprintln(stdout, "PASS: nothing lost, nothing leaked")
	} else {
		fmt.Fprintln(stdout, "FAIL")
	}
	return ok
}

// progress reports how far a run is on stderr: an animated bar on a
// terminal; otherwise (a log, a pipe, a file) a plain line every
// progressEvery, so that CI logs get lines, not carriage-return frames.
// Its methods do nothing on a nil *progress.
type progress struct {
	w    io.Writer
	bar  *progressbar.ProgressBar
	done atomic.Int64
	stop chan struct{}
	wg   sync.WaitGroup
}

func startProgress(o stressOpts, stderr io.Writer, start time.Time) *progress {
	p := &progress{w: stderr}
	if isTerminal(stderr) {
		p.bar = progressbar.NewOptions(o.n, progressbar.OptionSetWriter(stderr), progressbar.OptionSetDescription("stress"),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("cmd"),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionSetWidth(30),
			progressbar.OptionSetElapsedTime(true), progressbar.OptionSetPredictTime(true))
		return p
	}
	p.stop = make(chan struct{})
	p.wg.Go(func() {
		t := time.NewTicker(o.progressEvery)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				fmt.Fprintf(stderr, "stress: %d/%d commands done after %.0fs\n", p.done.Load(), o.n, time.Since(start).Seconds())
			}
		}
	})
	return p
}

func (p *progress) add() {
	if p == nil {
		return
	}
	p.done.Add(1)
	if p.bar != nil {
		_ = p.bar.Add(1)
	}
}

// finish ends the bar's line or stops the periodic lines.
func (p *progress) finish() {
	switch {
	case p == nil:
	case p.bar != nil:
		_ = p.bar.Finish()
		fmt.Fprintln(p.w)
	default:
		close(p.stop)
		p.wg.Wait()
	}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// settle polls f for up to 5 s until it reports no leak, and returns its
// last value (goroutines and fds may take a moment to wind down).
func settle(f func() int) int {
	v := f()
	for deadline := time.Now().Add(5 * time.Second); v > 0 && time.Now().Before(deadline); v = f() {
		time.Sleep(20 * time.Millisecond)
	}
	return v
}

// watch runs one command and counts it as lost when its call does not
// return within a bound far beyond any of the engine's own.
func (s *stresser) watch(i int, k stressKind, dir string) {
	done := make(chan error, 1)
	go func() { done <- k.run(s, i, dir) }()
	select {
	case err := <-done:
		if err != nil {
			s.fail(i, k.name, err)
		}
	case <-time.After(2 * time.Minute):
		s.lost.Add(1)
		s.fail(i, k.name, errors.New("no result within 2 minutes"))
	}
	s.mu.Lock()
	s.counts[k.name]++
	s.pidFiles = append(s.pidFiles, dir)
	s.mu.Unlock()
}

func (s *stresser) fail(i int, kind string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, fmt.Sprintf("#%d %s: %v", i, kind, err))
}

// run runs command i in its tenant's conversation.
func (s *stresser) run(ctx context.Context, i int, dir, command string, mode engine.Mode) engine.Result {
	return s.runInput(ctx, i, dir, engine.Input{Command: command, Mode: mode})
}

// runInput runs call i in its tenant's conversation.
func (s *stresser) runInput(ctx context.Context, i int, dir string, in engine.Input) engine.Result {
	r := s.e.Run(ctx, engine.ToolContext{WorkingDir: dir, ConversationID: s.tenant(i)}, in)
	if errors.Is(r.Err, engine.ErrBusy) {
		s.busy.Add(1)
	}
	if r.QueuedMS > 0 {
		s.queued.Add(1)
	}
	return r
}

// expect checks a result's status (and exit code when code >= 0).
func expect(r engine.Result, status engine.Status, code int) error {
	if r.Status != status {
		return fmt.Errorf("status %s, want %s: %.200q", r.Status, status, r.Output)
	}
	if code >= 0 && (r.ExitCode == nil || *r.ExitCode != code) {
		return fmt.Errorf("exit code %v, want %d: %.200q", r.ExitCode, code, r.Output)
	}
	return nil
}
