package proc_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// Placement into the cgroup v1 hierarchies of a hybrid host: a command's
// first instruction already runs in its memory and pids cgroups, forked by
// the cgroup's resident forker once the cgroup has been recycled.

// recycled returns a cgroup of m that has run a command and been
// recycled, so it has a forker where the host keeps memory or pids in v1
// hierarchies.
func recycled(t *testing.T, m *proc.Cgroups, name string) *proc.Cgroup {
	t.Helper()
	cg, err := m.New(name)
	if err != nil {
		t.Fatal(err)
	}
	if out, ex := runIn(t, cg, "true"); !ex.Success() {
		t.Fatal(out)
	}
	cg.RecycleEmpty()
	m.WaitRenewals()
	again, err := m.New(name + "-again")
	if err != nil {
		t.Fatal(err)
	}
	if again.Dir() != cg.Dir() {
		t.Fatalf("not recycled: %s, then %s", cg.Dir(), again.Dir())
	}
	return again
}

// forkerOnly has starts use a forker or a joining thread, as on
// architectures without the in-child join, until the test ends; it must
// come before the cgroup is recycled (a cgroup gets its forker then).
func forkerOnly(t *testing.T) {
	t.Helper()
	old := proc.SetVforkStarts(false)
	t.Cleanup(func() { proc.SetVforkStarts(old) })
}

// needV1 skips unless cg has cgroups in the v1 memory and pids
// hierarchies (a hybrid host), or fails under REQUIRE_CGROUPS=1 where
// neither controller is available at all.
func needV1(t *testing.T, cg *proc.Cgroup) {
	t.Helper()
	if len(cg.V1Dirs()) < 2 {
		t.Skip("memory and pids are not both in cgroup v1 hierarchies here (not a hybrid host)")
	}
}

// ownThreads lists the threads of this process in the v1 cgroup dir
// (its tasks file).
func ownThreads(t *testing.T, dir string) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "tasks"))
	if err != nil {
		t.Fatal(err)
	}
	var own []int
	for f := range bytes.FieldsSeq(b) {
		tid, _ := strconv.Atoi(string(f))
		if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(tid)); err == nil {
			own = append(own, tid)
		}
	}
	return own
}

// catSelfCgroup starts cat on /proc/self/cgroup in cg: the first thing
// the command does is read where it runs.
func catSelfCgroup(t *testing.T, cg *proc.Cgroup) string {
	t.Helper()
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Skip("no cat")
	}
	p, err := proc.Start(proc.Spec{Path: cat, Args: []string{"cat", "/proc/self/cgroup"}, Dir: "/", Cgroup: cg})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	_, _ = out.ReadFrom(p.Stdout)
	p.Stdout.Close()
	if ex, err := p.Wait(); err != nil || !ex.Success() {
		t.Fatalf("cat: %v %v", ex, err)
	}
	return out.String()
}

// placedFirst checks that a command whose first action reads
// /proc/self/cgroup finds itself in c's cgroup v2 and in its memory and
// pids cgroups.
func placedFirst(t *testing.T, m *proc.Cgroups, c *proc.Cgroup) {
	t.Helper()
	out := catSelfCgroup(t, c)
	want := "/" + filepath.Base(m.Dir()) + "/" + filepath.Base(c.Dir())
	for _, h := range []string{"::", ":memory:", ":pids:"} {
		if !slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool {
			return strings.Contains(l, h) && strings.HasSuffix(l, want)
		}) {
			t.Fatalf("%s: the command's first read of /proc/self/cgroup has no %s line ending in %s:\n%s", c.Dir(), h, want, out)
		}
	}
}

// TestCgroupFirstInstructionPlaced: a command whose first action reads
// /proc/self/cgroup finds itself in its memory and pids cgroups, in a new
// cgroup (a thread joins for the fork) and in a recycled one (its forker
// forks it); between commands exactly one thread of the engine, the same
// one, stays in the recycled cgroup's v1 cgroups, and starting a command
// there creates no goroutine (no thread joins and leaves).
func TestCgroupFirstInstructionPlaced(t *testing.T) {
	forkerOnly(t)
	m := limitedCgroups(t)
	fresh, err := m.New("fresh")
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Remove()
	needV1(t, fresh)
	cg := recycled(t, m, "first")
	defer cg.Remove()
	for _, c := range []*proc.Cgroup{fresh, cg} {
		placedFirst(t, m, c)
	}
	if n := ownThreads(t, fresh.V1Dirs()[0]); len(n) != 0 {
		t.Errorf("engine threads %v left in a new cgroup after its command", n)
	}
	fresh.Remove() // one command running at a time below: cg's forker forks
	created := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	forker := map[string][]int{}
	for _, d := range cg.V1Dirs() {
		forker[d] = ownThreads(t, d)
		if len(forker[d]) != 1 {
			t.Fatalf("want the forker alone of the engine's threads in %s, found %v", d, forker[d])
		}
	}
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
	// A thread that joins for the fork is a goroutine of its own: n of
	// them at least.
	if got := created[0].Value.Uint64() - before; got >= n/2 {
		t.Errorf("%d goroutines created for %d starts in a cgroup with a forker", got, n)
	}
	for _, d := range cg.V1Dirs() {
		if got := ownThreads(t, d); !slices.Equal(got, forker[d]) {
			t.Errorf("engine threads in %s: %v, before the commands %v", d, got, forker[d])
		}
	}
	u, err := cg.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if u.Processes != 2 {
		t.Errorf("usage %+v: want 2 processes (the shell, and the forker left out)", u)
	}
}

// TestCgroupForkerContainsAtOnce: in a recycled cgroup (its forker forks
// the command), a fork bomb and a memory hog that start at once are held
// at the cgroup's limits: the bomb never has more than the pids limit of
// processes (pids.max counts the forker on top), the hog is OOM-killed
// near the memory limit, and the engine can still fork.
func TestCgroupForkerContainsAtOnce(t *testing.T) {
	forkerOnly(t)
	m := limitedCgroups(t)
	py := python(t)
	cg := recycled(t, m, "bomb")
	defer cg.Remove()
	needV1(t, cg)
	const maxPids = 16
	if err := cg.SetLimits(proc.Limits{Memory: 64 << 20, Pids: maxPids}); err != nil {
		t.Fatal(err)
	}
	pidsMax, _ := os.ReadFile(filepath.Join(cg.PidsDir(), "pids.max"))
	if strings.TrimSpace(string(pidsMax)) != strconv.Itoa(maxPids+1) {
		t.Errorf("pids.max %q: want the limit plus the forker, %d", pidsMax, maxPids+1)
	}
	// The hog is the command's first program (bash execs it).
	out, ex := runIn(t, cg, py+` -c 'b = bytearray(256 << 20); b[::4096] = b"x" * len(b[::4096])'`)
	u, err := cg.Usage()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("hog: status %v, usage %+v, output %q", ex.Status, u, out)
	if !ex.Status.Signaled() || ex.Status.Signal() != unix.SIGKILL || u.OOMKills != 1 || u.PeakMemory > 66<<20 {
		t.Errorf("hog: want one OOM kill (SIGKILL) at the 64 MiB limit: status %v, usage %+v", ex.Status, u)
	}
	cg.RecycleEmpty()
	m.WaitRenewals()
	cg, err = m.New("bomb-2")
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Remove()
	if err := cg.SetLimits(proc.Limits{Memory: 64 << 20, Pids: maxPids}); err != nil {
		t.Fatal(err)
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
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(cg.PidsDir(), "pids.current"))
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		peak = max(peak, n)
	}
	if err := exec.Command("true").Run(); err != nil {
		t.Errorf("the engine cannot fork beside the bomb: %v", err)
	}
	_ = cg.Kill()
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, func() bool { return !cg.Populated() }, "bomb still running")
	u, _ = cg.Usage()
	t.Logf("bomb: pids.current peak %d, usage %+v", peak, u)
	if peak > maxPids+1 || u.Processes > maxPids {
		t.Errorf("bomb: pids.current peak %d (limit %d plus the forker), processes %d", peak, maxPids, u.Processes)
	}
	if u.Processes < maxPids/2 {
		t.Errorf("bomb reached only %d processes: did it run?", u.Processes)
	}
}

// TestCgroupForkerRenewAndRelease: a recycled cgroup whose command ran
// more processes at once renews its v1 pids cgroup, and its forker moves
// into the new one; releasing a cgroup with a forker sends the forker
// home and moves the command's processes out without moving the engine.
func TestCgroupForkerRenewAndRelease(t *testing.T) {
	forkerOnly(t)
	m := limitedCgroups(t)
	cg := recycled(t, m, "renew")
	needV1(t, cg)
	oldPids := cg.PidsDir()
	before := ownThreads(t, oldPids)
	if out, ex := runIn(t, cg, "sleep 0.2 & sleep 0.2 & wait"); !ex.Success() {
		t.Fatal(out)
	}
	u, _ := cg.Usage()
	if u.Processes != 3 {
		t.Errorf("usage %+v: want 3 processes (the shell and two sleeps)", u)
	}
	cg.RecycleEmpty()
	m.WaitRenewals()
	cg, err := m.New("renew-2")
	if err != nil {
		t.Fatal(err)
	}
	if got := ownThreads(t, cg.PidsDir()); len(got) != 1 || !slices.Equal(got, before) {
		t.Errorf("forker in the renewed pids cgroup: %v, want %v", got, before)
	}
	if out, ex := runIn(t, cg, "true"); !ex.Success() {
		t.Fatal(out)
	}
	if u, _ := cg.Usage(); u.Processes != 2 {
		t.Errorf("after renewal, usage %+v: want 2 processes", u)
	}
	// Release: a process kept running moves out; the engine stays where
	// it was.
	p, err := proc.Start(proc.Spec{Path: cgBash(t), Args: []string{"bash", "-c", "exec sleep 300"}, Dir: "/", Cgroup: cg, Output: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = p.SignalGroup(syscall.SIGKILL)
		p.Wait()
	}()
	engineCgroup, _ := os.ReadFile("/proc/self/cgroup")
	v1 := cg.V1Dirs()
	if err := cg.Release(); err != nil {
		t.Fatal(err)
	}
	cg.Remove()
	for _, d := range append(v1, cg.Dir()) {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("cgroup dir %s left: %v", d, err)
		}
	}
	if now, _ := os.ReadFile("/proc/self/cgroup"); !bytes.Equal(now, engineCgroup) {
		t.Errorf("the engine moved: %s, was %s", now, engineCgroup)
	}
	tasks, _ := filepath.Glob("/proc/self/task/*/cgroup")
	for _, f := range tasks {
		if b, _ := os.ReadFile(f); strings.Contains(string(b), filepath.Base(cg.Dir())) {
			t.Errorf("engine thread %s left in the released cgroup:\n%s", f, b)
		}
	}
	if !cgAlive(p.Pid) {
		t.Error("released process died")
	}
}

// TestCgroupBusyEngineJoins: while more of the manager's commands run than
// GOMAXPROCS, a start into a cgroup with a forker has a thread join and
// leave instead (no thread hand-off), and the command is placed all the
// same; once they end, the forker forks again.
func TestCgroupBusyEngineJoins(t *testing.T) {
	forkerOnly(t)
	m := limitedCgroups(t)
	cg := recycled(t, m, "busy")
	defer cg.Remove()
	needV1(t, cg)
	created := func(starts int) uint64 {
		s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
		metrics.Read(s)
		before := s[0].Value.Uint64()
		for range starts {
			placedFirst(t, m, cg)
		}
		metrics.Read(s)
		return s[0].Value.Uint64() - before
	}
	var others []*proc.Cgroup
	for i := range runtime.GOMAXPROCS(0) {
		o, err := m.New("other-" + strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		others = append(others, o)
	}
	const n = 10
	if got := created(n); got < n {
		t.Errorf("%d goroutines for %d starts while the engine is busy: want a joining thread each", got, n)
	}
	for _, o := range others {
		o.Remove()
	}
	if got := created(n); got >= n/2 {
		t.Errorf("%d goroutines for %d starts once the engine is idle again: want the forker", got, n)
	}
}
