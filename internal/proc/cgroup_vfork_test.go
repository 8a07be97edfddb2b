package proc_test

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// The in-child join (cgroup_vfork.go): on amd64 and arm64 a command's
// child joins its v1 cgroups itself before it execs.

// needChildJoins fails or skips (REQUIRE_CGROUPS) unless cg has memory
// and pids in v1 hierarchies and starts join in the child here.
func needChildJoins(t *testing.T, cg *proc.Cgroup) {
	t.Helper()
	needV1(t, cg)
	if !proc.SetVforkStarts(true) {
		t.Skip("no in-child join on this architecture")
	}
}

// TestCgroupChildJoins: with the in-child join, a command whose first
// action reads /proc/self/cgroup finds itself in its memory and pids
// cgroups, in a new cgroup and in a recycled one; no thread of the engine
// is ever in them (no forker, no joining thread), a start creates no
// goroutine, pids.max is the limit itself, and the processes a command
// ran are counted exactly above Usage's floor of 2.
func TestCgroupChildJoins(t *testing.T) {
	m := limitedCgroups(t)
	fresh, err := m.New("fresh")
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Remove()
	needChildJoins(t, fresh)
	placedFirst(t, m, fresh)
	fresh.Remove()
	cg := recycled(t, m, "joins")
	defer cg.Remove()
	placedFirst(t, m, cg)
	for _, d := range cg.V1Dirs() {
		if got := ownThreads(t, d); len(got) != 0 {
			t.Errorf("engine threads %v in the recycled cgroup %s", got, d)
		}
	}
	created := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(created)
	before := created[0].Value.Uint64()
	const n = 20
	for range n {
		p, err := proc.Start(proc.Spec{Path: cgBash(t), Args: []string{"bash", "-c", "true"}, Dir: "/", Cgroup: cg, Output: os.Stderr})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	metrics.Read(created)
	if got := created[0].Value.Uint64() - before; got >= n/2 {
		t.Errorf("%d goroutines created for %d starts", got, n)
	}
	if u, _ := cg.Usage(); u.Processes != 2 {
		t.Errorf("usage %+v: want 2 processes (the floor)", u)
	}
	if out, ex := runIn(t, cg, "sleep 0.2 & sleep 0.2 & sleep 0.2 & wait"); !ex.Success() {
		t.Fatal(out)
	}
	if u, _ := cg.Usage(); u.Processes != 4 {
		t.Errorf("usage %+v: want 4 processes (the shell and three sleeps)", u)
	}
	cg.RecycleEmpty()
	m.WaitRenewals()
	if cg, err = m.New("joins-2"); err != nil {
		t.Fatal(err)
	}
	defer cg.Remove()
	const maxPids = 16
	if err := cg.SetLimits(proc.Limits{Memory: 64 << 20, Pids: maxPids}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(cg.PidsDir(), "pids.max")); strings.TrimSpace(string(b)) != strconv.Itoa(maxPids) {
		t.Errorf("pids.max %q: want the limit, %d", b, maxPids)
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	p, err := proc.Start(proc.Spec{Path: cgBash(t), Args: []string{"bash", "-c", `b(){ b | b & }; b; sleep 30`}, Dir: "/", Cgroup: cg, Output: null})
	if err != nil {
		t.Fatal(err)
	}
	peak := 0
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(cg.PidsDir(), "pids.current"))
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		peak = max(peak, n)
	}
	_ = cg.Kill()
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, func() bool { return !cg.Populated() }, "bomb still running")
	u, _ := cg.Usage()
	if peak > maxPids || u.Processes != maxPids {
		t.Errorf("bomb: pids.current peak %d, usage %+v: want the limit %d exactly", peak, u, maxPids)
	}
}

// zombies lists this process's children that have exited but were not
// reaped.
func zombies(t *testing.T) []int {
	t.Helper()
	var z []int
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			if st, _ := os.ReadFile("/proc/" + s + "/stat"); strings.Contains(string(st), ") Z ") {
				pid, _ := strconv.Atoi(s)
				z = append(z, pid)
			}
		}
	}
	return z
}

// TestCgroupChildJoinsFails: a start whose child cannot change to its
// directory or exec its program fails with os/exec's error (fork/exec
// PATH: the cause), leaves no zombie, and the cgroup stays usable.
func TestCgroupChildJoinsFails(t *testing.T) {
	m := limitedCgroups(t)
	cg := recycled(t, m, "fails")
	defer cg.Remove()
	needChildJoins(t, cg)
	before := zombies(t)
	for _, c := range []struct{ path, dir string }{
		{cgBash(t), "/no/such/dir-42"},
		{"/no/such/program-42", "/"},
	} {
		_, err := proc.Start(proc.Spec{Path: c.path, Args: []string{"x"}, Dir: c.dir, Cgroup: cg})
		var pe *os.PathError
		if !errors.Is(err, proc.ErrStart) || !errors.As(err, &pe) || pe.Op != "fork/exec" || pe.Path != c.path || !errors.Is(err, unix.ENOENT) {
			t.Errorf("start %s in %s: %v, want ErrStart and fork/exec %s: ENOENT", c.path, c.dir, err, c.path)
		}
	}
	if now := zombies(t); len(now) > len(before) {
		t.Errorf("zombies %v, before %v", now, before)
	}
	if out, ex := runIn(t, cg, "echo ok"); !ex.Success() || out != "ok\n" {
		t.Errorf("after the failures: %q %v", out, ex.Status)
	}
}

// TestCgroupChildJoinsSignals: the child keeps the signals the engine
// ignores ignored, except SIGINT and SIGQUIT (no env(1) in between: the command's program is
// bash itself); on a terminal, ^C interrupts the command.
func TestCgroupChildJoinsSignals(t *testing.T) {
	m := limitedCgroups(t)
	cg := recycled(t, m, "signals")
	defer cg.Remove()
	needChildJoins(t, cg)
	ignoreRaw(t, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGUSR2)
	out, ex := runIn(t, cg, "cat /proc/self/status; cat /proc/$$/status; true")
	if !ex.Success() {
		t.Fatal(out)
	}
	_, shell, _ := strings.Cut(out, "SigIgn")
	if ign := sigIgn(t, out); ign&intQuit != 0 || ign&(1<<(syscall.SIGUSR2-1)) == 0 {
		t.Errorf("cat's SigIgn %x: want SIGUSR2 and neither SIGINT nor SIGQUIT", ign)
	}
	if strings.Contains(shell, "Name:\tenv") || !strings.Contains(shell, "Name:\tbash") {
		t.Errorf("the command's program is not bash:\n%s", shell)
	}

	p, err := proc.Start(proc.Spec{Path: cgBash(t), Dir: "/", TTY: &proc.Winsize{Rows: 24, Cols: 80},
		Args: []string{"bash", "-c", "sleep 30"}, Cgroup: cg})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stdin.Close()
	done := make(chan struct{})
	go func() { defer close(done); io.Copy(io.Discard, p.Stdout) }()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(p.Pid) + "/comm"); string(comm) == "sleep\n" {
			break
		}
	}
	if _, err := p.Stdin.Write([]byte{3}); err != nil {
		t.Fatal(err)
	}
	exited := make(chan *proc.Exit, 1)
	go func() { st, _ := p.Wait(); exited <- st }()
	select {
	case st := <-exited:
		if st == nil || !st.Status.Signaled() || st.Status.Signal() != syscall.SIGINT {
			t.Errorf("^C: %+v", st)
		}
	case <-time.After(20 * time.Second):
		_ = p.SignalGroup(syscall.SIGKILL)
		<-exited
		t.Error("^C did not interrupt sleep")
	}
	p.Stdout.Close()
	<-done
}

// BenchmarkStartPlaced compares, call by call on one recycled cgroup of a
// hybrid host, a start whose child joins the v1 cgroups itself (vfork)
// with one forked by the cgroup's forker (two thread hand-offs), and
// raw os/exec without a cgroup: `true` started and waited for, the two
// placed variants in turns of order; the p50 of each is reported, and
// of the placed starts alone (proc.Start's return).
func BenchmarkStartPlaced(b *testing.B) {
	defer proc.SetVforkStarts(proc.SetVforkStarts(false)) // so the cgroup gets its forker
	m := cgroups(b)
	cg, err := m.New("bench")
	if err != nil {
		b.Fatal(err)
	}
	if len(cg.V1Dirs()) == 0 {
		b.Skip("no v1 cgroups here")
	}
	cg.RecycleEmpty()
	m.WaitRenewals()
	if cg, err = m.New("bench"); err != nil {
		b.Fatal(err)
	}
	defer cg.Recycle()
	tru, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true")
	}
	var startJoined, startForker []time.Duration
	run := func(join bool) time.Duration {
		proc.SetVforkStarts(join)
		t0 := time.Now()
		p, err := proc.Start(proc.Spec{Path: tru, Args: []string{"true"}, Dir: "/", Cgroup: cg, Output: os.Stderr})
		if err != nil {
			b.Fatal(err)
		}
		if join {
			startJoined = append(startJoined, time.Since(t0))
		} else {
			startForker = append(startForker, time.Since(t0))
		}
		if ex, err := p.Wait(); err != nil || !ex.Success() {
			b.Fatal(ex, err)
		}
		return time.Since(t0)
	}
	raw := func() time.Duration {
		t0 := time.Now()
		if err := exec.Command(tru).Run(); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	var joined, forker, plain []time.Duration
	for i := 0; b.Loop(); i++ {
		// Each order in turn, so that neither always follows the other.
		if i%2 == 0 {
			joined = append(joined, run(true))
			forker = append(forker, run(false))
		} else {
			forker = append(forker, run(false))
			joined = append(joined, run(true))
		}
		plain = append(plain, raw())
	}
	p50 := func(d []time.Duration) float64 { slices.Sort(d); return float64(d[len(d)/2].Microseconds()) }
	b.ReportMetric(p50(joined), "joined-p50-µs")
	b.ReportMetric(p50(forker), "forker-p50-µs")
	b.ReportMetric(p50(plain), "raw-p50-µs")
	b.ReportMetric(p50(startJoined), "joined-start-p50-µs")
	b.ReportMetric(p50(startForker), "forker-start-p50-µs")
}

// ignoreRaw sets sigs to SIG_IGN for this process with rt_sigaction(2)
// and restores their actions exactly when the test ends (os/signal's
// Reset does not undo its Ignore).
func ignoreRaw(t *testing.T, sigs ...syscall.Signal) {
	t.Helper()
	type sigaction struct{ handler, flags, restorer, mask uint64 }
	for _, sig := range sigs {
		var old sigaction
		ign := sigaction{handler: 1}
		if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&ign)), uintptr(unsafe.Pointer(&old)), 8, 0, 0); e != 0 {
			t.Fatal(e)
		}
		t.Cleanup(func() {
			unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&old)), 0, 8, 0, 0)
		})
	}
}

// BenchmarkStartVfork compares, call by call, proc.Start without a
// cgroup by the engine's vfork and by os/exec: `true` started and waited
// for, with its output pipe read to the end (p50 of each, and of the
// start alone).
func BenchmarkStartVfork(b *testing.B) {
	tru, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true")
	}
	defer proc.SetVforkStarts(proc.SetVforkStarts(true))
	if !proc.SetVforkStarts(true) {
		b.Skip("no vfork starts on this architecture")
	}
	var total, start [2][]time.Duration
	run := func(v int) {
		proc.SetVforkStarts(v == 1)
		t0 := time.Now()
		p, err := proc.Start(proc.Spec{Path: tru, Args: []string{"true"}, Dir: "/"})
		if err != nil {
			b.Fatal(err)
		}
		start[v] = append(start[v], time.Since(t0))
		_, _ = io.Copy(io.Discard, p.Stdout)
		if ex, err := p.Wait(); err != nil || !ex.Success() {
			b.Fatal(ex, err)
		}
		total[v] = append(total[v], time.Since(t0))
		p.Stdout.Close()
	}
	for i := 0; b.Loop(); i++ {
		run(i % 2)
		run(1 - i%2)
	}
	p50 := func(d []time.Duration) float64 { slices.Sort(d); return float64(d[len(d)/2].Microseconds()) }
	b.ReportMetric(p50(total[0]), "osexec-p50-µs")
	b.ReportMetric(p50(total[1]), "vfork-p50-µs")
	b.ReportMetric(p50(start[0]), "osexec-start-p50-µs")
	b.ReportMetric(p50(start[1]), "vfork-start-p50-µs")
}
