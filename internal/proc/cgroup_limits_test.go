package proc_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// python returns a python3 interpreter or skips the test.
func python(t testing.TB) string {
	t.Helper()
	p := testenv.NeedsTool(t, "python3")[0]
	// pyenv's shims are scripts that need its environment: ask the
	// interpreter for itself.
	out, err := exec.Command(p, "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Skip("python3 does not run:", err)
	}
	return strings.TrimSpace(string(out))
}

// runIn runs bash -c script in cg and returns its output and exit.
func runIn(t *testing.T, cg *proc.Cgroup, script string) (string, *proc.Exit) {
	t.Helper()
	p, err := proc.Start(proc.Spec{Path: cgBash(t), Args: []string{"bash", "-c", script}, Dir: "/", Cgroup: cg})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = out.ReadFrom(p.Stdout); close(done) }()
	ex, err := p.Wait()
	<-done
	p.Stdout.Close()
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), ex
}

// shellOnly is Usage.Processes of a command that never ran more than its
// shell: 2 where the pids limit is in a v1 hierarchy (the engine thread
// that forked it counts too).
func shellOnly(cg *proc.Cgroup) int {
	if cg.PidsDir() != "" {
		return 2
	}
	return 1
}

func limitedCgroups(t *testing.T) *proc.Cgroups {
	t.Helper()
	m := cgroups(t)
	testenv.Needf(t, testenv.Cgroups, m.MemoryLimit() && m.PidsLimit(),
		"no memory or pids controller for the engine's cgroups (memory %v, pids %v)", m.MemoryLimit(), m.PidsLimit())
	return m
}

// TestCgroupPlacement: a process started into a Cgroup is in its cgroup
// v2 and in its cgroups of the v1 hierarchies, and no thread of this
// process stays in them.
func TestCgroupPlacement(t *testing.T) {
	m := limitedCgroups(t)
	cg, err := m.New("placed")
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Remove()
	out, ex := runIn(t, cg, "cat /proc/self/cgroup; cat /proc/$$/cgroup")
	if !ex.Success() {
		t.Fatal(out)
	}
	// Each line of /proc/PID/cgroup is ID:CONTROLLERS:PATH; the path ends
	// in the engine's directory and the command's name everywhere: in the
	// cgroup v2, and in the v1 memory and pids hierarchies where this host
	// has them (a cgroup-v2-only host has none).
	want := "/" + filepath.Base(m.Dir()) + "/placed"
	hierarchies := []string{"::"}
	memV2, pidsV2 := m.OnV2()
	if !memV2 {
		hierarchies = append(hierarchies, ":memory:")
	}
	if !pidsV2 {
		hierarchies = append(hierarchies, ":pids:")
	}
	for _, h := range hierarchies {
		n := 0
		for line := range strings.SplitSeq(out, "\n") {
			if strings.Contains(line, h) && strings.HasSuffix(line, want) {
				n++
			}
		}
		if n != 2 {
			t.Errorf("shell and child should both be in %s%s (found %d):\n%s", h, want, n, out)
		}
	}
	tasks, _ := filepath.Glob("/proc/self/task/*/cgroup")
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		if strings.Contains(string(b), filepath.Base(cg.Dir())) {
			t.Errorf("engine thread %s left in the command's cgroup:\n%s", f, b)
		}
	}
	u, err := cg.Usage()
	if err != nil {
		t.Fatal(err)
	}
	// The shell and cat, and on a busy machine the engine thread that
	// forked the shell, if it had not left yet when cat started.
	if u.Processes < 2 || u.Processes > 3 || u.CPU <= 0 || u.PeakMemory <= 0 {
		t.Errorf("usage %+v: want 2 processes (the shell and cat), some CPU and memory", u)
	}
}

// TestCgroupCPUAccounting: the cgroup's CPU time of a shell that spins
// about 0.5 s matches what wait4 reports for it within 10%.
func TestCgroupCPUAccounting(t *testing.T) {
	m := cgroups(t)
	cg, err := m.New("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Remove()
	_, ex := runIn(t, cg, `end=$((SECONDS+1)); i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done`)
	u, err := cg.Usage()
	if err != nil {
		t.Fatal(err)
	}
	ru := time.Duration(ex.Rusage.Utime.Nano() + ex.Rusage.Stime.Nano())
	t.Logf("cgroup %v, rusage %v", u.CPU, ru)
	if ru < 100*time.Millisecond {
		t.Fatalf("the loop used only %v", ru)
	}
	if d := u.CPU - ru; d < -ru/10 || d > ru/10 {
		t.Errorf("cgroup CPU %v, rusage %v: more than 10%% apart", u.CPU, ru)
	}
}

// TestCgroupMemoryLimitAndRecycle: over its memory limit a process is
// OOM-killed and counted; the recycled cgroup then starts the next command
// with fresh counters and the new limits.
func TestCgroupMemoryLimitAndRecycle(t *testing.T) {
	m := limitedCgroups(t)
	py := python(t)
	cg, err := m.New("mem")
	if err != nil {
		t.Fatal(err)
	}
	if err := cg.SetLimits(proc.Limits{Memory: 64 << 20, Pids: 16}); err != nil {
		t.Fatal(err)
	}
	out, ex := runIn(t, cg, py+` -c 'b = bytearray(256 << 20); b[::4096] = b"x" * len(b[::4096])'`)
	u, err := cg.Usage()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("status %v, usage %+v, output %q", ex.Status, u, out)
	if !ex.Status.Signaled() || ex.Status.Signal() != unix.SIGKILL || u.OOMKills != 1 {
		t.Fatalf("want one OOM kill (SIGKILL): status %v, usage %+v", ex.Status, u)
	}
	if u.PeakMemory < 48<<20 || u.PeakMemory > 66<<20 {
		t.Errorf("peak %d, want close to the 64 MiB limit", u.PeakMemory)
	}
	if u.CPU <= 0 {
		t.Errorf("no CPU time: %+v", u)
	}
	cg.RecycleEmpty()
	next, err := m.New("next")
	if err != nil {
		t.Fatal(err)
	}
	defer next.Remove()
	m.WaitRenewals()
	// On a cgroup v2 whose memory.peak cannot be reset (before Linux
	// 6.12) a cgroup that peaked at 64 MiB is not recycled.
	if memV2, _ := m.OnV2(); memV2 && !kernelAtLeast(6, 12) {
		if next.Dir() == cg.Dir() {
			t.Fatalf("recycled %s with a peak of %d that cannot be reset", cg.Dir(), u.PeakMemory)
		}
	} else if next.Dir() != cg.Dir() {
		t.Fatalf("not recycled: %s, then %s", cg.Dir(), next.Dir())
	} else if l := next.Limits(); l != (proc.Limits{Memory: 64 << 20, Pids: 16}) {
		t.Errorf("recycled limits %+v", l)
	}
	if err := next.SetLimits(proc.Limits{}); err != nil {
		t.Fatal(err)
	}
	// No limit now: a 100 MiB allocation passes.
	out, ex = runIn(t, next, py+` -c 'b = bytearray(100 << 20); b[::4096] = b"x" * len(b[::4096])'`)
	if !ex.Success() {
		t.Fatalf("limit still applied: %v %s", ex.Status, out)
	}
	u, err = next.Usage()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("next usage %+v", u)
	if u.OOMKills != 0 || u.PeakMemory < 100<<20 || u.PeakMemory > 130<<20 || u.Processes != shellOnly(next) {
		t.Errorf("usage of the second command %+v: want no OOM kill, a peak of about 100 MiB, %d processes", u, shellOnly(next))
	}
}

// TestCgroupFreshCounters: a cgroup recycled after a command that used
// much CPU, memory and processes starts the next one at zero.
func TestCgroupFreshCounters(t *testing.T) {
	m := limitedCgroups(t)
	py := python(t)
	cg, err := m.New("big")
	if err != nil {
		t.Fatal(err)
	}
	dir := cg.Dir()
	_, ex := runIn(t, cg, py+` -c 'b = bytearray(150 << 20); b[::4096] = b"x" * len(b[::4096]); sum(range(3000000))' | cat; sleep 0.01 & sleep 0.01 & wait`)
	if !ex.Success() {
		t.Fatal(ex.Status)
	}
	big, _ := cg.Usage()
	cg.RecycleEmpty()
	m.WaitRenewals()
	cg, err = m.New("tiny")
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Remove()
	// On the cgroup v2 a pids.peak above 1 cannot be undone: the cgroup
	// is not recycled, and the next command gets a new one.
	if _, pidsV2 := m.OnV2(); pidsV2 {
		if cg.Dir() == dir {
			t.Fatalf("recycled %s after %d processes", dir, big.Processes)
		}
	} else if cg.Dir() != dir {
		t.Fatalf("not recycled")
	}
	_, ex = runIn(t, cg, "true")
	if !ex.Success() {
		t.Fatal(ex.Status)
	}
	tiny, err := cg.Usage()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("big %+v, then tiny %+v", big, tiny)
	if big.PeakMemory < 150<<20 || big.Processes < 3 {
		t.Fatalf("big command: %+v", big)
	}
	if tiny.PeakMemory > 8<<20 || tiny.Processes != shellOnly(cg) || tiny.CPU > big.CPU/4 || tiny.OOMKills != 0 {
		t.Errorf("the recycled cgroup carried counters over: %+v", tiny)
	}
}

// TestCgroupPidsLimit: pids.max holds processes and threads at once.
func TestCgroupPidsLimit(t *testing.T) {
	m := limitedCgroups(t)
	cg, err := m.New("pids")
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Remove()
	if err := cg.SetLimits(proc.Limits{Pids: 5}); err != nil {
		t.Fatal(err)
	}
	py := python(t)
	out, _ := runIn(t, cg, py+` -c '
import threading
ev = threading.Event()
n = 0
try:
    for i in range(8):
        threading.Thread(target=ev.wait).start()
        n += 1
except RuntimeError as e:
    print("started", n, "threads:", e)
ev.set()'`)
	u, _ := cg.Usage()
	t.Logf("usage %+v, output %q", u, out)
	// The shell execs python: python's main thread and 4 more.
	if u.Processes != 5 || !strings.Contains(out, "started 4 threads") {
		t.Errorf("want 5 tasks at most and thread creation failing: %+v %q", u, out)
	}
}

// BenchmarkCgroupAccounting measures what accounting adds to a command
// that ran in a recycled cgroup: reading its usage, then resetting the
// cgroup for the next one.
func BenchmarkCgroupAccounting(b *testing.B) {
	m := cgroups(b)
	cg, err := m.New("acct")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { cg.Remove() }()
	for b.Loop() {
		if _, err := cg.Usage(); err != nil {
			b.Fatal(err)
		}
		cg.RecycleEmpty()
		if cg, err = m.New("acct" + strconv.Itoa(b.N)); err != nil {
			b.Fatal(err)
		}
	}
}

// kernelAtLeast reports whether the running kernel is at least major.minor.
func kernelAtLeast(major, minor int) bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	var maj, min int
	fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &maj, &min)
	return maj > major || maj == major && min >= minor
}
