package proc_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// cgroups probes cgroup support. It is the one place this package's tests
// give up for lack of cgroups: it skips the test, or fails it when
// REQUIRE_CGROUPS=1 (CI).
func cgroups(t testing.TB) *proc.Cgroups {
	t.Helper()
	m, err := proc.ProbeCgroups(testenv.CgroupParent())
	testenv.Need(t, testenv.Cgroups, err)
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(m.Dir()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind: %v", m.Dir(), err)
		}
	})
	return m
}

func cgAlive(pid int) bool {
	st, err := proc.ReadStat(pid)
	return err == nil && st.State != 'Z'
}

func cgWaitGone(t *testing.T, pid int, within time.Duration) {
	t.Helper()
	testenv.Eventually(t, within, func() bool { return !cgAlive(pid) }, "pid %d still alive", pid)
}

func cgBash(t testing.TB) string {
	for _, p := range []string{"/bin/bash", "/usr/bin/bash"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("no bash")
	return ""
}

// TestCgroupKillsEscapees starts a shell into a cgroup that leaves a setsid
// escapee and a double-forked daemon behind: both are members of the
// cgroup, cgroup.kill ends them, and the cgroup is removed.
func TestCgroupKillsEscapees(t *testing.T) {
	m := cgroups(t)
	cg, err := m.New("escapees")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p, err := proc.Start(proc.Spec{
		Path: cgBash(t), Args: []string{"bash", "-c", `setsid sleep 300 >/dev/null 2>&1 & echo $! > a; (setsid sh -c 'sleep 300 & echo $! > b' >/dev/null 2>&1 &); while [ ! -s b ]; do sleep 0.01; done`},
		Dir: dir, Cgroup: cg,
	})
	cg.CloseFD()
	if err != nil {
		t.Fatal(err)
	}
	p.Stdout.Close()
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range []string{"a", "b"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		pids = append(pids, pid)
	}
	// The first escapee calls setsid(2) on its own time: on a loaded
	// machine it may not have yet when the shell exits (make test at load
	// ~20 saw it still in the group).
	for deadline := time.Now().Add(10 * time.Second); proc.GroupAlive(p.Pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("escapees should have left the process group")
		}
	}
	members := cg.Members()
	for _, pid := range pids {
		if !cgAlive(pid) {
			t.Fatalf("pid %d not running", pid)
		}
		found := false
		for _, m := range members {
			found = found || m.Pid == pid
		}
		if !found {
			t.Fatalf("pid %d not among the cgroup's members %v", pid, members)
		}
	}
	if !cg.Populated() {
		t.Fatal("cgroup not populated")
	}
	start := time.Now()
	if err := cg.Kill(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		cgWaitGone(t, pid, 2*time.Second)
	}
	t.Logf("cgroup.kill ended %d escapees in %v", len(pids), time.Since(start))
	cg.Remove()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cg.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("cgroup dir left: %v", err)
	}
}

// TestCgroupSignalSkipsGroup: Signal reaches members outside the given
// group only.
func TestCgroupSignalAndRelease(t *testing.T) {
	m := cgroups(t)
	cg, err := m.New("sig")
	if err != nil {
		t.Fatal(err)
	}
	p, err := proc.Start(proc.Spec{Path: cgBash(t), Args: []string{"bash", "-c", `trap 'exit 3' TERM; setsid sleep 300 & while :; do sleep 0.05; done`}, Dir: "/", Cgroup: cg})
	cg.CloseFD()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stdout.Close()
	var esc int
	testenv.Eventually(t, 5*time.Second, func() bool {
		for _, mem := range cg.Members() {
			if mem.Comm == "sleep" {
				if st, _ := proc.ReadStat(mem.Pid); st.Session == mem.Pid {
					esc = mem.Pid
				}
			}
		}
		return esc != 0
	}, "escapee not found")
	cg.Signal(syscall.SIGTERM, p.Pid)
	cgWaitGone(t, esc, 2*time.Second)
	if !cgAlive(p.Pid) {
		t.Fatal("the skipped group was signalled")
	}
	// Release moves the shell out; the cgroup (and its cgroups in v1
	// hierarchies) can then be removed while it runs.
	v1 := cg.V1Dirs()
	if err := cg.Release(); err != nil {
		t.Fatal(err)
	}
	cg.Remove()
	for _, d := range append(v1, cg.Dir()) {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("cgroup dir %s left: %v", d, err)
		}
	}
	if !cgAlive(p.Pid) {
		t.Fatal("released process died")
	}
	_ = p.SignalGroup(syscall.SIGKILL)
	p.Wait()
}

// TestCgroupRemoveKillsStragglers: removing a populated cgroup kills its
// processes and removes it in the background; Close waits for that.
func TestCgroupRemoveKillsStragglers(t *testing.T) {
	m := cgroups(t)
	cg, err := m.New("busy")
	if err != nil {
		t.Fatal(err)
	}
	p, err := proc.Start(proc.Spec{Path: cgBash(t), Args: []string{"bash", "-c", "sleep 300"}, Dir: "/", Cgroup: cg, Output: os.Stderr})
	cg.CloseFD()
	if err != nil {
		t.Fatal(err)
	}
	cg.Remove()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	p.Wait()
	if _, err := os.Stat(cg.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("cgroup dir left: %v", err)
	}
}

// BenchmarkCgroupLifecycle measures the per-command cost: mkdir, open,
// close and rmdir of a command cgroup.
func BenchmarkCgroupLifecycle(b *testing.B) {
	m := cgroups(b)
	i := 0
	for b.Loop() {
		i++
		cg, err := m.New("b" + strconv.Itoa(i))
		if err != nil {
			b.Fatal(err)
		}
		cg.CloseFD()
		cg.Remove()
	}
}

// BenchmarkCgroupMembers measures the leftover check on an empty cgroup.
func BenchmarkCgroupMembers(b *testing.B) {
	m := cgroups(b)
	cg, err := m.New("members")
	if err != nil {
		b.Fatal(err)
	}
	defer cg.Remove()
	for b.Loop() {
		if len(cg.Members()) != 0 {
			b.Fatal("members")
		}
	}
}

// TestCgroupRecycle: an empty cgroup is reused by the next New; a
// populated one is removed instead; Close removes the idle ones.
func TestCgroupRecycle(t *testing.T) {
	m := cgroups(t)
	a, err := m.New("a")
	if err != nil {
		t.Fatal(err)
	}
	a.Recycle()
	b, err := m.New("b")
	if err != nil {
		t.Fatal(err)
	}
	if b.Dir() != a.Dir() {
		t.Fatalf("not reused: %s, then %s", a.Dir(), b.Dir())
	}
	p, err := proc.Start(proc.Spec{Path: cgBash(t), Args: []string{"bash", "-c", "sleep 300"}, Dir: "/", Cgroup: b, Output: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	b.Recycle() // populated: killed and removed, not kept
	p.Wait()
	c, err := m.New("c")
	if err != nil {
		t.Fatal(err)
	}
	if c.Dir() == b.Dir() {
		t.Fatal("a populated cgroup was recycled")
	}
	c.Recycle()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{a.Dir(), c.Dir()} {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s left after Close: %v", d, err)
		}
	}
}

// BenchmarkCgroupRecycled measures New and Recycle of a pooled cgroup.
func BenchmarkCgroupRecycled(b *testing.B) {
	m := cgroups(b)
	for b.Loop() {
		cg, err := m.New("r")
		if err != nil {
			b.Fatal(err)
		}
		cg.Recycle()
	}
}

// TestCgroupStaleRemoved: empty cgroups of an engine process that no
// longer exists are removed by the next probe.
func TestCgroupStaleRemoved(t *testing.T) {
	m := cgroups(t)
	parent := filepath.Dir(m.Dir())
	// A pid that is not running: a child that has exited and been reaped.
	p, err := proc.Start(proc.Spec{Path: cgBash(t), Args: []string{"bash", "-c", "true"}, Dir: "/", Output: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	p.Wait()
	stale := filepath.Join(parent, "bashvisor-"+strconv.Itoa(p.Pid)+"-1")
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(stale, "cmd-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	m2, err := proc.ProbeCgroups(testenv.CgroupParent())
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		os.Remove(filepath.Join(stale, "cmd-1"))
		os.Remove(stale)
		t.Fatalf("stale cgroup dir left: %v", err)
	}
}

// TestCgroupPopulatedParent: a parent that holds a process (the engine's
// own cgroup, by default) is never given controllers for its children: on
// cgroup v2 enabling pids there would be accepted but make it a thread
// root, and no command could then start into a cgroup below it. Commands
// start, and ControllersNote says why the limits are missing.
func TestCgroupPopulatedParent(t *testing.T) {
	base := filepath.Dir(cgroups(t).Dir())
	parent := filepath.Join(base, "populated-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(parent)
	fd, err := syscall.Open(parent, syscall.O_DIRECTORY|syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command("sleep", "60")
	sleeper.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	err = sleeper.Start()
	syscall.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	m, err := proc.ProbeCgroups(parent)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	}()
	if sub, _ := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control")); len(strings.TrimSpace(string(sub))) > 0 {
		t.Errorf("controllers enabled in a cgroup that holds a process: %q", sub)
	}
	for i := range 2 {
		cg, err := m.New("cmd-" + strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		p, err := proc.Start(proc.Spec{Path: cgBash(t), Args: []string{"bash", "-c", "true"}, Dir: "/", Cgroup: cg, Output: os.Stderr})
		if err != nil {
			cg.Remove()
			t.Fatalf("command %d: %v", i, err)
		}
		p.Wait()
		cg.Remove()
	}
	memory, pids := m.MemoryLimit(), m.PidsLimit()
	t.Logf("memory %v, pids %v, note %q", memory, pids, m.ControllersNote())
	if (!memory || !pids) != (m.ControllersNote() != "") {
		t.Errorf("memory %v, pids %v, but note %q", memory, pids, m.ControllersNote())
	}
	if ctl, _ := os.ReadFile(filepath.Join(parent, "cgroup.controllers")); strings.Contains(string(ctl), "pids") &&
		!strings.Contains(m.ControllersNote(), "holds processes") {
		t.Errorf("pids offered to %s but not enabled, and the note does not say why: %q", parent, m.ControllersNote())
	}
}
