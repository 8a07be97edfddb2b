package main

import (
	"bytes"
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
	baseG, baseFD, fds0 := runtime.NumGoroutine(), openFDs(), fdTargets()
	marker := fmt.Sprintf("%d-%d", os.Getpid(), o.seed)
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
	// Admission control is exercised, never refused: three quarters of the
	// concurrency runs at once (half in one conversation), the rest waits
	// in a queue long enough for all of it, and the job caps allow every
	// command to be a job. A busy result is therefore a slot the engine
	// failed to free: it is counted and fails the run.
	cfg.Admission = config.Admission{
		MaxRunning: max(1, o.c*3/4), MaxRunningPerConversation: max(1, o.c/2), MaxQueue: o.c, QueueWait: time.Minute,
		MaxJobs: o.n + o.c, MaxJobsPerConversation: o.n + o.c,
	}
	e, err := engine.New(cfg)
	if err != nil {
		return false, fmt.Errorf("engine: %w", err)
	}
	s := &stresser{o: o, e: e, marker: marker, counts: map[string]int{}}

	caps := map[string]bool{"cgroups": cgroupsOn(o)}
	probe := e.Run(context.Background(), engine.ToolContext{WorkingDir: root}, engine.Input{Command: "git add -A"})
	caps["blocking"] = probe.Status == engine.StatusBlocked
	var kinds []stressKind
	var skipped []string
	total := 0
	for _, k := range stressKinds() {
		if k.needs != "" && !caps[k.needs] {
			skipped = append(skipped, k.name+" (no "+k.needs+")")
			continue
		}
		kinds, total = append(kinds, k), total+k.weight
	}
	rng := rand.New(rand.NewPCG(o.seed, 0x5eed))
	plan := make([]int, o.n)
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
	fmt.Fprintf(stderr, "stress: %d commands at concurrency %d in %d conversations, seed %d, cgroups %v, blocking %v\n", o.n, o.c, o.tenants, o.seed, caps["cgroups"], caps["blocking"])

	start := time.Now()
	var prog *progress
	if !o.noProgress {
		prog = startProgress(o, stderr, start)
	}
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range o.c {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= o.n {
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
	elapsed := time.Since(start)
	prog.finish()

	// Before Shutdown, the only populated command cgroups may be those of
	// background jobs still running: any other holds an orphan the engine
	// missed (Shutdown would kill it silently).
	running := 0
	for _, j := range e.AllJobs() {
		if j.Status == engine.JobRunning {
			running++
		}
	}
	cgOrphans := populatedCgroups()
	if len(cgOrphans) > running {
		for _, c := range cgOrphans {
			s.fail(-1, "cgroups", fmt.Errorf("populated cgroup %s (%d jobs running)", c, running))
		}
	}

	s.checkTenants()
	if o.tenants > 1 {
		s.endTenant(s.tenant(0))
	}

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
	orphans := s.orphans()
	cgLeft := cgroupsLeft()
	leakedG := settle(func() int { return runtime.NumGoroutine() - baseG })
	leakedFD := settle(func() int { return openFDs() - baseFD })

	fmt.Fprintf(stdout, "stress: %d commands at concurrency %d in %d conversations in %.1fs (%.0f cmd/s), seed %d\n", o.n, o.c, o.tenants,
		elapsed.Seconds(), float64(o.n)/elapsed.Seconds(), o.seed)
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
	if len(skipped) > 0 {
		fmt.Fprintf(stdout, "skipped kinds: %s\n", strings.Join(skipped, ", "))
	}
	fmt.Fprintf(stdout, "admission: %d calls waited for a slot; %d isolation checks between conversations\n", s.queued.Load(), s.isolated.Load())
	fmt.Fprintf(stdout, "lost results:       %d\n", s.lost.Load())
	fmt.Fprintf(stdout, "busy results:       %d\n", s.busy.Load())
	fmt.Fprintf(stdout, "wrong results:      %d\n", len(s.failures))
	fmt.Fprintf(stdout, "orphan processes:   %d\n", len(orphans))
	fmt.Fprintf(stdout, "cgroups left:       %d\n", len(cgLeft))
	fmt.Fprintf(stdout, "leaked goroutines:  %d\n", leakedG)
	fmt.Fprintf(stdout, "leaked fds:         %d\n", leakedFD)
	for i, f := range s.failures {
		if i == 20 {
			fmt.Fprintf(stdout, "  ... and %d more\n", len(s.failures)-20)
			break
		}
		fmt.Fprintln(stdout, "  wrong:", f)
	}
	for _, o := range orphans {
		fmt.Fprintln(stdout, "  orphan:", o)
	}
	for _, c := range cgLeft {
		fmt.Fprintln(stdout, "  cgroup:", c)
	}
	if leakedFD > 0 {
		for fd, target := range fdTargets() {
			if fds0[fd] != target {
				fmt.Fprintf(stdout, "  fd %s -> %s\n", fd, target)
			}
		}
	}
	if leakedG > 0 {
		buf := make([]byte, 1<<20)
		fmt.Fprintf(stdout, "goroutines:\n%s\n", buf[:runtime.Stack(buf, true)])
	}
	ok := s.lost.Load() == 0 && s.busy.Load() == 0 && len(s.failures) == 0 && len(orphans) == 0 && len(cgLeft) == 0 && leakedG <= 0 && leakedFD <= 0
	if ok {
		fmt.Fprintln(stdout, "PASS: nothing lost, nothing leaked")
	} else {
		fmt.Fprintln(stdout, "FAIL")
	}
	return ok, nil
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

// gone checks that the processes whose pids the command wrote to
// dir/pid* are gone, allowing a moment for the kernel.
func (s *stresser) gone(dir string) error {
	deadline := time.Now().Add(3 * time.Second)
	for {
		var live []int
		for _, pid := range recordedPids(dir) {
			if s.ours(pid) {
				live = append(live, pid)
			}
		}
		if len(live) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes still alive: %v", live)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func recordedPids(dir string) []int {
	files, _ := filepath.Glob(filepath.Join(dir, "pid*"))
	var pids []int
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for w := range strings.FieldsSeq(string(b)) {
			if pid, err := strconv.Atoi(w); err == nil && pid > 1 {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// ours reports whether pid is a live (non-zombie) process of this run: it
// carries the run's marker in its environment, so a recycled pid is not
// mistaken for an orphan.
func (s *stresser) ours(pid int) bool {
	st, err := proc.ReadStat(pid)
	if err != nil || st.State == 'Z' || st.State == 'X' {
		return false
	}
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	return err == nil && bytes.Contains(env, []byte("BASHVISOR_STRESS="+s.marker+"\x00"))
}

// orphans lists every live process carrying the run's marker (by a scan of
// /proc, which also finds processes no command recorded) and every
// recorded pid still alive.
func (s *stresser) orphans() []string {
	deadline := time.Now().Add(3 * time.Second)
	for {
		var out []string
		seen := map[int]bool{}
		for _, dir := range s.pidFiles {
			for _, pid := range recordedPids(dir) {
				if !seen[pid] && s.ours(pid) {
					seen[pid] = true
					out = append(out, describePid(pid)+" (recorded in "+filepath.Base(dir)+")")
				}
			}
		}
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || seen[pid] || pid == os.Getpid() {
				continue
			}
			if s.ours(pid) {
				seen[pid] = true
				out = append(out, describePid(pid))
			}
		}
		if len(out) == 0 || time.Now().After(deadline) {
			return out
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func describePid(pid int) string {
	st, _ := proc.ReadStat(pid)
	return fmt.Sprintf("%s (pid %d, pgid %d, sid %d, ppid %d)", st.Comm, pid, st.Pgrp, st.Session, st.Ppid)
}

// cgroupsOn reports whether the engine runs commands in cgroups.
func cgroupsOn(o stressOpts) bool {
	if o.noCgroups {
		return false
	}
	m, err := proc.ProbeCgroups("")
	if err != nil {
		return false
	}
	return m.Close() == nil
}

// cgroupsLeft lists cgroup directories this process's engines left behind.
func cgroupsLeft() []string {
	m, err := proc.ProbeCgroups("")
	if err != nil {
		return nil
	}
	dirs := m.Dirs() // the cgroup v2 and v1 hierarchies the engines use
	_ = m.Close()
	var left []string
	for _, d := range dirs {
		l, _ := filepath.Glob(filepath.Join(filepath.Dir(d), "bashvisor-"+strconv.Itoa(os.Getpid())+"-*"))
		left = append(left, l...)
	}
	return left
}

// fdTargets maps this process's open fds to what they point at.
func fdTargets() map[string]string {
	ents, _ := os.ReadDir("/proc/self/fd")
	m := make(map[string]string, len(ents))
	for _, e := range ents {
		m[e.Name()], _ = os.Readlink("/proc/self/fd/" + e.Name())
	}
	return m
}

// populatedCgroups lists this process's command cgroups that still hold a
// process.
func populatedCgroups() []string {
	m, err := proc.ProbeCgroups("")
	if err != nil {
		return nil
	}
	parent := filepath.Dir(m.Dir())
	_ = m.Close()
	events, _ := filepath.Glob(filepath.Join(parent, "bashvisor-"+strconv.Itoa(os.Getpid())+"-*", "*", "cgroup.events"))
	var out []string
	for _, f := range events {
		if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte("populated 1")) {
			out = append(out, filepath.Dir(f))
		}
	}
	return out
}

// openFDs counts this process's open file descriptors.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents) - 1 // the directory being read
}

// isolation checks that command i's started job r is out of reach of
// every other conversation: the next tenant lists none of it and reaches
// only its own job by r's id (ids count per conversation, so it may have
// one), and a conversation without jobs gets "no such job" for it from
// Job, JobOutput and Kill.
func (s *stresser) isolation(i int, r engine.Result) error {
	own, other := s.tenant(i), s.tenant(i+1)
	if other != own {
		tc := engine.ToolContext{ConversationID: other}
		for _, j := range s.e.Jobs(tc) {
			if j.PID == r.PID || j.ConversationID != other {
				return fmt.Errorf("isolation: %s lists %s's job %s (pid %d) as %+v", other, own, r.JobID, r.PID, j)
			}
		}
		if j, err := s.e.Job(tc, r.JobID); err == nil && (j.PID == r.PID || j.ConversationID != other) {
			return fmt.Errorf("isolation: %s reaches %s's job %s: %+v", other, own, r.JobID, j)
		} else if err != nil && !errors.Is(err, engine.ErrNoSuchJob) {
			return fmt.Errorf("isolation: %s: %w", other, err)
		}
		if out, err := s.e.JobOutput(tc, r.JobID, 64, 0, 0); err == nil && (out.Job.PID == r.PID || out.Job.ConversationID != other) {
			return fmt.Errorf("isolation: %s reads %s's job %s: %+v", other, own, r.JobID, out.Job)
		}
	}
	tc := engine.ToolContext{ConversationID: outsider}
	if jobs := s.e.Jobs(tc); len(jobs) != 0 {
		return fmt.Errorf("isolation: a conversation without jobs lists %+v", jobs)
	}
	_, errJob := s.e.Job(tc, r.JobID)
	_, errOut := s.e.JobOutput(tc, r.JobID, 0, 0, 0)
	_, errKill := s.e.Kill(context.Background(), tc, r.JobID)
	for _, err := range []error{errJob, errOut, errKill} {
		if !errors.Is(err, engine.ErrNoSuchJob) {
			return fmt.Errorf("isolation: %s's job %s from another conversation: %v, want no such job", own, r.JobID, err)
		}
	}
	s.isolated.Add(1)
	return nil
}

// checkTenants checks, after the mix, that each conversation lists exactly
// its own jobs.
func (s *stresser) checkTenants() {
	byConv := map[string]int{}
	for _, j := range s.e.AllJobs() {
		byConv[j.ConversationID]++
	}
	total := 0
	for k := range s.o.tenants {
		conv := s.tenant(k)
		jobs := s.e.Jobs(engine.ToolContext{ConversationID: conv})
		for _, j := range jobs {
			if j.ConversationID != conv {
				s.fail(-1, "isolation", fmt.Errorf("%s lists %s's job %s", conv, j.ConversationID, j.JobID))
			}
		}
		if len(jobs) != byConv[conv] {
			s.fail(-1, "isolation", fmt.Errorf("%s lists %d jobs, the engine holds %d of it", conv, len(jobs), byConv[conv]))
		}
		total += byConv[conv]
	}
	if all := len(s.e.AllJobs()); total != all {
		s.fail(-1, "isolation", fmt.Errorf("%d jobs belong to no tenant", all-total))
	}
}

// endTenant ends conversation conv, as an MCP server does when a session
// closes: its running jobs (those left for shutdown) end, it lists nothing
// more, and the other conversations' running jobs are untouched.
func (s *stresser) endTenant(conv string) {
	var pids []int
	others := 0
	for _, j := range s.e.AllJobs() {
		switch {
		case j.Status != engine.JobRunning:
		case j.ConversationID == conv:
			pids = append(pids, j.PID)
		default:
			others++
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.e.EndConversation(ctx, conv); err != nil {
		s.fail(-1, "end-conversation", err)
		return
	}
	if jobs := s.e.Jobs(engine.ToolContext{ConversationID: conv}); len(jobs) != 0 {
		s.fail(-1, "end-conversation", fmt.Errorf("%s still lists %d jobs", conv, len(jobs)))
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for s.ours(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if s.ours(pid) {
			s.fail(-1, "end-conversation", fmt.Errorf("%s's job pid %d alive after the conversation ended", conv, pid))
		}
	}
	still := 0
	for _, j := range s.e.AllJobs() {
		if j.Status == engine.JobRunning {
			still++
		}
	}
	if still != others {
		s.fail(-1, "end-conversation", fmt.Errorf("ending %s left %d of the other conversations' %d running jobs running", conv, still, others))
	}
}

// The kinds of commands.

func (s *stresser) fast(i int, dir string) error {
	r := s.run(context.Background(), i, dir, "echo ok-"+strconv.Itoa(i), engine.ModeSlow)
	if err := expect(r, engine.StatusOK, 0); err != nil {
		return err
	}
	if r.Output != "ok-"+strconv.Itoa(i)+"\n" {
		return fmt.Errorf("output %q", r.Output)
	}
	return nil
}

func (s *stresser) failing(i int, dir string) error {
	code := 1 + i%100
	r := s.run(context.Background(), i, dir, fmt.Sprintf("echo bad >&2; exit %d", code), engine.ModeSlow)
	if err := expect(r, engine.StatusFailed, code); err != nil {
		return err
	}
	if want := fmt.Sprintf("[command failed: exit code %d]\nbad\n", code); r.Output != want {
		return fmt.Errorf("output %q", r.Output)
	}
	return nil
}

func (s *stresser) flood(i int, dir string) error {
	const size = 10 << 20
	r := s.run(context.Background(), i, dir, fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x", size), engine.ModeSlow)
	if r.FullOutputFile != "" {
		defer os.Remove(r.FullOutputFile)
	}
	if err := expect(r, engine.StatusOK, 0); err != nil {
		return err
	}
	if !r.Truncated || r.OutputBytes != size || !strings.HasPrefix(r.Output, "[output truncated in middle: got 10.0 MiB, max is 128 KiB]\n") {
		return fmt.Errorf("flood: truncated=%v bytes=%d %.80q", r.Truncated, r.OutputBytes, r.Output)
	}
	return nil
}

// timeout: the output written before the timeout is kept. On a loaded
// machine the short timeout may fire before the shell wrote anything; the
// pid file, written after the output, tells which case this is.
func (s *stresser) timeout(i int, dir string) error {
	r := s.run(context.Background(), i, dir, "echo partial; echo $$ > pid; sleep 30", "")
	if err := expect(r, engine.StatusTimedOut, -1); err != nil {
		return err
	}
	if len(recordedPids(dir)) > 0 && !strings.HasSuffix(r.Output, "partial\n") {
		return fmt.Errorf("partial output missing: %q", r.Output)
	}
	return s.gone(dir)
}

func (s *stresser) cancel(i int, dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(20+i%150)*time.Millisecond)
	defer cancel()
	r := s.run(ctx, i, dir, "sleep 30 & echo $! > pid; echo $$ > pid0; wait", engine.ModeSlow) // only the cancel ends it
	// A very early cancel may come before the shell wrote anything; it is
	// still a cancellation.
	if err := expect(r, engine.StatusCancelled, -1); err != nil {
		return err
	}
	if !strings.HasPrefix(r.Output, "[command cancelled]\n") {
		return fmt.Errorf("output %q", r.Output)
	}
	return s.gone(dir)
}

// waitJob waits for a background job of command i to end.
func (s *stresser) waitJob(i int, id string, within time.Duration) (engine.JobInfo, error) {
	deadline := time.Now().Add(within)
	for {
		j, err := s.e.Job(engine.ToolContext{ConversationID: s.tenant(i)}, id)
		if err != nil {
			return j, err
		}
		if j.Status != engine.JobRunning {
			return j, nil
		}
		if time.Now().After(deadline) {
			return j, fmt.Errorf("job %s still running after %v", id, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *stresser) bgComplete(i int, dir string) error {
	code := i % 2 * 7 // half complete, half fail with 7
	r := s.run(context.Background(), i, dir, fmt.Sprintf("echo $$ > pid; echo hi; sleep 0.1; exit %d", code), engine.ModeBackground)
	if err := expect(r, engine.StatusStarted, -1); err != nil {
		return err
	}
	if err := s.isolation(i, r); err != nil {
		return err
	}
	j, err := s.waitJob(i, r.JobID, 20*time.Second)
	if err != nil {
		return err
	}
	if j.PID != r.PID {
		return fmt.Errorf("job %s is pid %d, started as %d", r.JobID, j.PID, r.PID)
	}
	want, line := engine.JobCompleted, "[background process completed]"
	if code != 0 {
		want, line = engine.JobFailed, fmt.Sprintf("[background process failed: exit code %d]", code)
	}
	if j.Status != want {
		return fmt.Errorf("job %+v, want %s", j, want)
	}
	b, err := os.ReadFile(r.OutputFile)
	if err != nil {
		return fmt.Errorf("output file: %w", err)
	}
	if string(b) != "hi\n\n\n"+line {
		return fmt.Errorf("output file %q", b)
	}
	return s.gone(dir)
}

func (s *stresser) bgKill(i int, dir string) error {
	r := s.run(context.Background(), i, dir, "trap '' TERM; sleep 30 & echo $! > pid; echo $$ > pid0; wait", engine.ModeBackground)
	if err := expect(r, engine.StatusStarted, -1); err != nil {
		return err
	}
	time.Sleep(time.Duration(i%100) * time.Millisecond)
	if err := s.isolation(i, r); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j, err := s.e.Kill(ctx, engine.ToolContext{ConversationID: s.tenant(i)}, r.JobID)
	if err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	if j.Status != engine.JobKilled || j.Reason != "killed by request" || j.PID != r.PID || j.ConversationID != s.tenant(i) {
		return fmt.Errorf("killed job %+v", j)
	}
	return s.gone(dir)
}

// bgShutdown leaves a job running for Shutdown to end.
func (s *stresser) bgShutdown(i int, dir string) error {
	r := s.run(context.Background(), i, dir, "sleep 60 & echo $! > pid; echo $$ > pid0; wait", engine.ModeBackground)
	if err := expect(r, engine.StatusStarted, -1); err != nil {
		return err
	}
	return s.isolation(i, r)
}

// pipeHolder: a leftover holding the pipe is killed and named. The shell
// may exit before the child it forked has exec'd sleep, in which case the
// leftover is still named bash.
func (s *stresser) pipeHolder(i int, dir string) error {
	r := s.run(context.Background(), i, dir, "sleep 30 & echo $! > pid; echo done", engine.ModeSlow)
	if err := expect(r, engine.StatusOK, 0); err != nil {
		return err
	}
	const note = "done\n[killed processes left running after the shell exited: "
	if !strings.HasPrefix(r.Output, note+"sleep (pid ") && !strings.HasPrefix(r.Output, note+"bash (pid ") {
		return fmt.Errorf("output %q", r.Output)
	}
	return s.gone(dir)
}

// termIgnoring: a tree that ignores SIGTERM is ended by SIGKILL after the
// grace period (exit 137). Everything the shell starts after its first
// statement inherits the ignored SIGTERM, and it records pids only after
// that statement; when the short timeout fired even earlier (a loaded
// machine), SIGTERM alone ends the shell (exit 143).
func (s *stresser) termIgnoring(i int, dir string) error {
	r := s.run(context.Background(), i, dir,
		`trap '' TERM; (trap '' TERM; sleep 30 & echo $! >> pid; wait) & echo $! >> pid; sleep 30 & echo $! >> pid; echo $$ >> pid; wait`, "")
	code := 137
	if len(recordedPids(dir)) == 0 && r.ExitCode != nil && *r.ExitCode == 143 {
		code = 143
	}
	if err := expect(r, engine.StatusTimedOut, code); err != nil {
		return err
	}
	return s.gone(dir)
}

func (s *stresser) escapees(i int, dir string) error {
	cmd := `setsid sleep 30 >/dev/null 2>&1 & echo $! > pid-a; (setsid sh -c 'sleep 30 & echo $! > pid-b' >/dev/null 2>&1 &); ` +
		`while [ ! -s pid-b ]; do sleep 0.01; done; echo escaped`
	mode, want := engine.ModeSlow, engine.StatusOK
	if i%2 == 1 {
		cmd += "; sleep 30" // and end by the short timeout
		mode, want = engine.ModeDefault, engine.StatusTimedOut
	}
	r := s.run(context.Background(), i, dir, cmd, mode)
	if err := expect(r, want, -1); err != nil {
		return err
	}
	// "escaped" is printed once both pids are recorded. A loaded machine
	// may time out before that; the orphan scan still finds any escapee
	// (they carry the run's marker).
	if strings.Contains(r.Output, "escaped") && len(recordedPids(dir)) != 2 {
		return fmt.Errorf("escapee pids not recorded: %q", r.Output)
	}
	return s.gone(dir)
}

// blockedCommands must be blocked; each would be harmless in the command's
// empty temp dir even if it ran.
var blockedCommands = []string{"git add -A", "git push --force origin main", "rm -rf .git", "git -C . add ."}

func (s *stresser) blocked(i int, dir string) error {
	c := blockedCommands[i%len(blockedCommands)]
	r := s.run(context.Background(), i, dir, c, "")
	if err := expect(r, engine.StatusBlocked, -1); err != nil {
		return err
	}
	if !strings.HasPrefix(r.Output, "[command blocked: ") {
		return fmt.Errorf("output %q", r.Output)
	}
	return nil
}

// yieldedLine is the line that ends the result of a call that yielded
// after ms milliseconds as job id.
func yieldedLine(ms int64, id string) string {
	return "[command still running after " + (time.Duration(ms) * time.Millisecond).String() +
		": moved to background as " + id + "; read it with bash_output, stop it with bash_kill]"
}

// splitYield checks a yielded call's result and returns its output so far.
func splitYield(r engine.Result, ms int64) (string, error) {
	if err := expect(r, engine.StatusStarted, -1); err != nil {
		return "", err
	}
	soFar, ok := strings.CutSuffix(r.Output, yieldedLine(ms, r.JobID))
	if !ok || r.JobID == "" || r.PID <= 0 || r.OutputFile == "" || r.Truncated {
		return "", fmt.Errorf("yielded result %+v", r)
	}
	if r.DurationMS < ms {
		return "", fmt.Errorf("yielded after %d ms, yield_ms %d", r.DurationMS, ms)
	}
	return soFar, nil
}

// listed checks that the job a call yielded to is listed as soon as the
// call returned it (the supervisor knows the job by its new id before the
// caller has the result).
func (s *stresser) listed(i int, r engine.Result) error {
	if _, err := s.e.Job(engine.ToolContext{ConversationID: s.tenant(i)}, r.JobID); err != nil {
		return fmt.Errorf("yielded job %s, right after the call returned: %w", r.JobID, err)
	}
	return nil
}

// jobFile reads a job's output file and splits off its completion line,
// which must be the one given.
func jobFile(r engine.Result, line string) (string, error) {
	b, err := os.ReadFile(r.OutputFile)
	if err != nil {
		return "", fmt.Errorf("output file: %w", err)
	}
	if n := strings.Count(string(b), "[background process "); n != 1 {
		return "", fmt.Errorf("%d completion lines in %q", n, b)
	}
	out, ok := strings.CutSuffix(string(b), "\n\n"+line)
	if !ok {
		return "", fmt.Errorf("output file %q, want it to end with %q", b, line)
	}
	return out, nil
}

// yield: a command printing a stream of numbers outlives its yield_ms
// (it runs until the file go exists, which the check creates only after
// the call returned) and moves to the background; the result has the
// output so far, the job's file the rest, and together they are the
// numbers from 1 on, each once, then the end line. The job then
// completes, fails (exit 3) or is killed; a killed job's output is such a
// sequence cut short.
func (s *stresser) yield(i int, dir string) error {
	ms := int64(20 + i%200)
	// At most 10000 numbers (49 KB): the output so far stays under the
	// truncation limit however late the yield comes.
	cmd := `echo $$ > pid; n=0; while [ ! -e go ]; do if [ $n -lt 10000 ]; then seq $((n+1)) $((n+50)); n=$((n+50)); fi; sleep 0.01; done; echo end-$n`
	end := i % 3 // 0: completes, 1: fails, 2: killed
	if end == 1 {
		cmd += "; exit 3"
	}
	r := s.runInput(context.Background(), i, dir, engine.Input{Command: cmd, Mode: engine.ModeSlow, YieldMS: ms})
	soFar, err := splitYield(r, ms)
	if err != nil {
		return err
	}
	if err := s.listed(i, r); err != nil {
		return err
	}
	if err := s.isolation(i, r); err != nil {
		return err
	}
	tc := engine.ToolContext{ConversationID: s.tenant(i)}
	var j engine.JobInfo
	if end == 2 {
		time.Sleep(time.Duration(i%50) * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if j, err = s.e.Kill(ctx, tc, r.JobID); err != nil {
			return fmt.Errorf("kill: %w", err)
		}
	} else {
		if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
			return err
		}
		if j, err = s.waitJob(i, r.JobID, 20*time.Second); err != nil {
			return err
		}
	}
	if j.PID != r.PID || j.OutputFile != r.OutputFile {
		return fmt.Errorf("job %+v, started as pid %d with %s", j, r.PID, r.OutputFile)
	}
	want, line := engine.JobCompleted, "[background process completed]"
	switch end {
	case 1:
		want, line = engine.JobFailed, "[background process failed: exit code 3]"
	case 2:
		want, line = engine.JobKilled, "[background process killed: killed by request]"
	}
	if j.Status != want {
		return fmt.Errorf("job %+v, want %s", j, want)
	}
	rest, err := jobFile(r, line)
	if err != nil {
		return err
	}
	err = numbersThenEnd(soFar+rest, end != 2)
	if cut, ok := strings.CutSuffix(soFar, "\n"); err != nil && ok && numbersThenEnd(cut+rest, end != 2) == nil {
		// The output so far ended inside a line, to which the result
		// added the newline before its last line.
		err = nil
	}
	if err != nil {
		return fmt.Errorf("output so far …%q + file %.80q…: %w", soFar[max(0, len(soFar)-80):], rest, err)
	}
	return s.gone(dir)
}

// numbersThenEnd checks that out is the lines 1, 2, ..., n and then
// "end-n" (when complete), or a prefix of such lines, cut at a line's end
// (when not).
func numbersThenEnd(out string, complete bool) error {
	lines := strings.Split(out, "\n")
	if lines[len(lines)-1] != "" {
		return fmt.Errorf("no newline at the end")
	}
	lines = lines[:len(lines)-1]
	n := 0
	for k, l := range lines {
		if strings.HasPrefix(l, "end-") {
			if l != "end-"+strconv.Itoa(n) || k != len(lines)-1 {
				return fmt.Errorf("line %d %q after %d numbers", k+1, l, n)
			}
			return nil
		}
		if l != strconv.Itoa(n+1) {
			return fmt.Errorf("line %d is %q, want %d (nothing lost or repeated)", k+1, l, n+1)
		}
		n++
	}
	if complete {
		return fmt.Errorf("no end line after %d numbers", n)
	}
	return nil
}

// stdin: a job with stdin "pipe" (half of them a call that yielded first)
// echoes the lines written to it, in several writes that split lines,
// once each and in order, and ends after its input is closed. Writes from
// another conversation find no such job; writes after the end say it
// ended.
func (s *stresser) stdin(i int, dir string) error {
	const loop = `while read l; do echo "got:$l"; done; echo eof`
	in := engine.Input{Command: "echo $$ > pid; " + loop, Mode: engine.ModeBackground, Stdin: engine.StdinPipe}
	yielded := i%2 == 1
	ms := int64(20 + i%100)
	if yielded {
		// It waits for its input, so it cannot end before it yields.
		in = engine.Input{Command: "echo $$ > pid; echo ready; " + loop, Mode: engine.ModeSlow, Stdin: engine.StdinPipe, YieldMS: ms}
	}
	r := s.runInput(context.Background(), i, dir, in)
	var soFar string
	if yielded {
		var err error
		if soFar, err = splitYield(r, ms); err != nil {
			return err
		}
		if err := s.listed(i, r); err != nil {
			return err
		}
	} else if err := expect(r, engine.StatusStarted, -1); err != nil {
		return err
	}
	if err := s.isolation(i, r); err != nil {
		return err
	}
	tc := engine.ToolContext{ConversationID: s.tenant(i)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.e.Write(ctx, engine.ToolContext{ConversationID: outsider}, r.JobID, []byte("x\n"), false); !errors.Is(err, engine.ErrNoSuchJob) {
		return fmt.Errorf("write from another conversation: %v, want no such job", err)
	}
	// 1 to 40 lines, written in pieces of 1 to 23 bytes (a line split
	// across writes, several lines in one), the last with the close.
	var text, want strings.Builder
	if yielded {
		want.WriteString("ready\n")
	}
	for k := range 1 + i%40 {
		l := fmt.Sprintf("line-%d-%d", i, k)
		text.WriteString(l + "\n")
		want.WriteString("got:" + l + "\n")
	}
	want.WriteString("eof\n")
	data := text.String()
	piece := 1 + i%23
	for len(data) > 0 {
		n := min(piece, len(data))
		if err := s.e.Write(ctx, tc, r.JobID, []byte(data[:n]), n == len(data)); err != nil {
			return fmt.Errorf("write %q: %w", data[:n], err)
		}
		data = data[n:]
	}
	j, err := s.waitJob(i, r.JobID, 20*time.Second)
	if err != nil {
		return err
	}
	if j.Status != engine.JobCompleted {
		return fmt.Errorf("job %+v, want completed after its input closed", j)
	}
	rest, err := jobFile(r, "[background process completed]")
	if err != nil {
		return err
	}
	if soFar+rest != want.String() {
		return fmt.Errorf("output so far %q + file %q, want %q", soFar, rest, want.String())
	}
	if err := s.e.Write(ctx, tc, r.JobID, []byte("late\n"), false); !errors.Is(err, engine.ErrJobEnded) {
		return fmt.Errorf("write after the end: %v, want job ended", err)
	}
	return s.gone(dir)
}
