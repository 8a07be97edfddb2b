package cluster_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/cluster"
	"github.com/bashvisor/bashvisor/cluster/etcd"
	"github.com/bashvisor/bashvisor/engine"
	bvproc "github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// The fleet under faults: real executor, front and etcd processes on
// loopback, killed, stopped and cut off; commands that would write a
// marker file some seconds after they start, which must never appear
// once their executor or front is gone. Every process is ended by pid or
// process group at cleanup.

// lateCommand writes its shell's pid to NAME.pid, then sleeps for d and
// appends to NAME.marker: the marker appears only if the command outlives
// what should have ended it.
func lateCommand(dir, name string, d time.Duration) string {
	p := filepath.Join(dir, name)
	return fmt.Sprintf("echo $$ > %s.pid; sleep %.1f; echo late >> %s.marker", p, d.Seconds(), p)
}

// noMarker checks, once the command would have written it (at until, plus
// a margin), that marker NAME.marker in dir does not exist.
func noMarker(t *testing.T, dir, name string, until time.Time) {
	t.Helper()
	time.Sleep(time.Until(until.Add(time.Second)))
	if b, err := os.ReadFile(filepath.Join(dir, name+".marker")); err == nil {
		t.Errorf("%s outlived what should have ended it: its marker says %q", name, b)
	}
}

// frontMain is the test binary as a front of its own (BV_FRONT set), for
// the scenario that kills a front: it runs BV_COMMAND on the executor at
// BV_EXECUTORS in BV_DIR, then exits.
func frontMain() int {
	c, err := cluster.NewClient(cluster.ClientOptions{Membership: cluster.Static(os.Getenv("BV_EXECUTORS"))})
	if err != nil {
		fmt.Fprintln(os.Stderr, "front:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitExecutors(ctx, 1); err != nil {
		fmt.Fprintln(os.Stderr, "front:", err)
		return 1
	}
	r := c.Run(context.Background(), engine.ToolContext{WorkingDir: os.Getenv("BV_DIR"), ConversationID: "front"},
		engine.Input{Command: os.Getenv("BV_COMMAND"), Mode: engine.ModeSlow})
	fmt.Println("RESULT", r.Status)
	_ = c.Shutdown(ctx)
	return 0
}

// cgroup2Mount is where the cgroup v2 hierarchy is mounted.
func cgroup2Mount(t *testing.T) string {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) > 2 && fs[2] == "cgroup2" {
			return fs[1]
		}
	}
	t.Fatal("no cgroup2 mount")
	return ""
}

// TestExecutorKilled: SIGKILL of an executor ends its running call and
// its background job, in their process groups or with a cgroup, which
// also holds a setsid escapee: its calls answer lost at once and its
// commands die within a few seconds (the engine's watchdog), none of them
// writing its marker.
func TestExecutorKilled(t *testing.T) {
	for _, withCgroups := range []bool{false, true} {
		name := "groups"
		if withCgroups {
			name = "cgroups"
		}
		t.Run(name, func(t *testing.T) {
			if withCgroups {
				m, err := bvproc.ProbeCgroups("")
				if err != nil {
					testenv.Need(t, testenv.Cgroups, err)
				}
				_ = m.Close()
			}
			if inFreshProcess(t) {
				return
			}
			executorKilled(t, withCgroups)
		})
	}
}

func executorKilled(t *testing.T, withCgroups bool) {
	mark := t.Name()
	dir := t.TempDir()
	ex := startExecutor(t, execSpec{name: "exec-1", mark: mark, cgroups: withCgroups})
	c := newClient(t, cluster.ClientOptions{Membership: cluster.Static(ex.addr)})
	defer shutdown(t, c)
	waitReady(t, c, 1)
	tc := engine.ToolContext{WorkingDir: dir, ConversationID: "k"}
	const late = 4 * time.Second
	start := time.Now()
	// Without cgroups the engine tells its watchdog a command's group
	// right after the start returns: a command killed with its engine
	// before that instant would be missed (see proc.Watchdog). The
	// commands here let that instant pass (under load and the race
	// detector it can take a while) before they say they run.
	pre := ""
	if !withCgroups {
		pre = "sleep 0.5; "
	}
	bgCommand := pre + lateCommand(dir, "bg", late)
	names := []string{"fg", "bg"}
	if withCgroups {
		// An escapee: a session of its own, out of every process group
		// of the job; only the cgroup holds it.
		bgCommand = "setsid bash -c '" + lateCommand(dir, "esc", late) + "' & " + bgCommand
		names = append(names, "esc")
	}
	if r := c.Run(context.Background(), tc, engine.Input{Command: bgCommand, Mode: engine.ModeBackground}); r.Status != engine.StatusStarted {
		t.Fatalf("background job: %s %q", r.Status, r.Output)
	}
	fg := make(chan engine.Result, 1)
	go func() {
		fg <- c.Run(context.Background(), engine.ToolContext{WorkingDir: dir, ConversationID: "k2"},
			engine.Input{Command: pre + lateCommand(dir, "fg", late), Mode: engine.ModeSlow})
	}()
	pids := map[string]int{}
	for _, n := range names {
		pids[n] = waitPid(t, filepath.Join(dir, n+".pid"))
	}
	var cgDir string
	if withCgroups {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pids["fg"]))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if rel, ok := strings.CutPrefix(l, "0::"); ok && strings.Contains(rel, fmt.Sprintf("/bashvisor-%d-", ex.cmd.Process.Pid)) {
				cgDir = filepath.Dir(filepath.Join(cgroup2Mount(t), rel))
			}
		}
		if cgDir == "" {
			t.Fatalf("the command is not in a cgroup of the executor: %s", b)
		}
	}
	killAt := time.Now()
	ex.signal(syscall.SIGKILL)
	select {
	case r := <-fg:
		if r.Status != engine.StatusLost {
			t.Errorf("call on the killed executor: %s %q", r.Status, r.Output)
		}
		if d := time.Since(killAt); d > 2*time.Second {
			t.Errorf("lost answered %s after the kill, want within 2s", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call on the killed executor did not answer")
	}
	testenv.Eventually(t, 5*time.Second, func() bool { return len(leftovers(mark)) == 0 },
		"the killed executor's commands still run: %v", testenv.Lazy(func() string { return strings.Join(leftovers(mark), "; ") }))
	t.Logf("commands ended %s after the executor's SIGKILL", time.Since(killAt).Round(time.Millisecond))
	if cgDir != "" {
		testenv.Eventually(t, 5*time.Second, func() bool { _, err := os.Stat(cgDir); return errors.Is(err, os.ErrNotExist) },
			"the killed executor's cgroup %s is still there", cgDir)
	}
	for _, n := range names {
		noMarker(t, dir, n, start.Add(late))
	}
}

// TestFrontKilled: SIGKILL of a front ends its calls on the executor
// within 2 s (the executor watches each call's front), and the executor
// serves on.
func TestFrontKilled(t *testing.T) {
	if inFreshProcess(t) {
		return
	}
	mark := t.Name()
	dir := t.TempDir()
	ex := startExecutor(t, execSpec{name: "exec-1", mark: mark})
	const late = 4 * time.Second
	front := exec.Command(os.Args[0], "-test.run=^$")
	front.Env = append(os.Environ(), "BV_FRONT=1", "BV_EXECUTORS="+ex.addr, "BV_DIR="+dir, "BV_COMMAND="+lateCommand(dir, "fg", late))
	front.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	stderr := &safeBuffer{}
	front.Stderr = stderr
	if err := front.Start(); err != nil {
		t.Fatal(err)
	}
	frontGroup := testenv.GroupOf(t, front.Process.Pid) // never another group after the Wait below
	frontDone := make(chan struct{})
	go func() { _ = front.Wait(); close(frontDone) }()
	t.Cleanup(func() {
		frontGroup.Kill()
		<-frontDone
	})
	pgid := waitPid(t, filepath.Join(dir, "fg.pid"))
	start := time.Now() // about the command's start, for its marker
	killAt := time.Now()
	if err := front.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-frontDone
	// Cancelled within 2 s; its processes then get SIGTERM (they end at
	// once), or SIGKILL after the grace period (testConfig: 0.5 s).
	testenv.Eventually(t, 2500*time.Millisecond, func() bool { return len(groupMembers(pgid)) == 0 },
		"the dead front's command still runs: %v", testenv.Lazy(func() string { return strings.Join(groupMembers(pgid), "; ") }))
	t.Logf("the dead front's call ended %s after its SIGKILL", time.Since(killAt).Round(time.Millisecond))
	noMarker(t, dir, "fg", start.Add(late))
	if !strings.Contains(ex.stderr.String(), "cancelling a call its front no longer waits for") {
		t.Errorf("the executor did not say why it cancelled:\n%s", ex.stderr)
	}
	// The executor is not fenced: a new front runs on it.
	c := newClient(t, cluster.ClientOptions{Membership: cluster.Static(ex.addr)})
	defer shutdown(t, c)
	waitReady(t, c, 1)
	if r := c.Run(context.Background(), engine.ToolContext{WorkingDir: dir, ConversationID: "after"}, engine.Input{Command: "echo ok"}); r.Output != "ok\n" {
		t.Errorf("a call after the front's death: %s %q", r.Status, r.Output)
	}
}

// TestStopWithEtcdDown: with etcd killed, SIGTERM still ends an executor
// (its call and commands ended, exit 0) and the front stops, each within
// a bounded time: leaving the membership does not wait for etcd.
func TestStopWithEtcdDown(t *testing.T) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		testenv.Need(t, testenv.Etcd, fmt.Errorf("no etcd binary (apt-get install etcd-server): %w", err))
	}
	if inFreshProcess(t) {
		return
	}
	mark := t.Name()
	dir := t.TempDir()
	endpoint, killEtcd := startEtcd(t, bin)
	ex := startExecutor(t, execSpec{name: "exec-1", mark: mark, membership: "etcd:" + endpoint, providerRaces: true})
	c := newClient(t, cluster.ClientOptions{Membership: etcd.Membership("bvtest", endpoint)})
	waitReady(t, c, 1)
	const late = 6 * time.Second
	start := time.Now()
	fg := make(chan engine.Result, 1)
	go func() {
		fg <- c.Run(context.Background(), engine.ToolContext{WorkingDir: dir, ConversationID: "e"},
			engine.Input{Command: lateCommand(dir, "fg", late), Mode: engine.ModeSlow})
	}()
	pgid := waitPid(t, filepath.Join(dir, "fg.pid"))
	killEtcd()
	time.Sleep(500 * time.Millisecond) // the nodes' etcd clients see the connection go
	termAt := time.Now()
	ex.signal(syscall.SIGTERM)
	// The executor's stop: the engine's grace sequence (0.5 s), then at
	// most 2 s to leave the membership.
	select {
	case <-ex.done:
		if ex.err != nil {
			t.Errorf("executor exit after SIGTERM with etcd down: %v\n%s", ex.err, ex.stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the executor did not exit within 10s of SIGTERM with etcd down\n%s", ex.stderr)
	}
	t.Logf("executor exited %s after SIGTERM, etcd down", time.Since(termAt).Round(time.Millisecond))
	if live := groupMembers(pgid); len(live) > 0 {
		t.Errorf("the stopped executor's command still runs: %v", live)
	}
	select {
	case r := <-fg:
		if r.Status == engine.StatusOK {
			t.Errorf("the call on the stopped executor: %s %q", r.Status, r.Output)
		}
	case <-time.After(10 * time.Second):
		t.Error("the call on the stopped executor did not answer")
	}
	stopAt := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Shutdown(ctx); err != nil && !errors.Is(err, cluster.ErrExecutorLost) {
		t.Errorf("front shutdown: %v", err)
	}
	if d := time.Since(stopAt); d > 10*time.Second {
		t.Errorf("the front took %s to stop with etcd down", d)
	}
	t.Logf("front stopped in %s, etcd down", time.Since(stopAt).Round(time.Millisecond))
	waitFrontGone(t, c)
	noMarker(t, dir, "fg", start.Add(late))
}

// TestFrozenExecutor: the calls of an executor frozen by SIGSTOP answer
// lost within 3 s with the default bounds; after SIGCONT it fences
// itself (its commands killed) and exits 75.
func TestFrozenExecutor(t *testing.T) {
	if inFreshProcess(t) {
		return
	}
	mark := t.Name()
	dir := t.TempDir()
	ex := startExecutor(t, execSpec{name: "exec-1", mark: mark})
	c := newClient(t, cluster.ClientOptions{Membership: cluster.Static(ex.addr)}) // default LostAfter
	defer shutdown(t, c)
	waitReady(t, c, 1)
	const late = 8 * time.Second
	start := time.Now()
	fg := make(chan engine.Result, 1)
	go func() {
		fg <- c.Run(context.Background(), engine.ToolContext{WorkingDir: dir, ConversationID: "f"},
			engine.Input{Command: lateCommand(dir, "fg", late), Mode: engine.ModeSlow})
	}()
	waitPid(t, filepath.Join(dir, "fg.pid"))
	stopAt := time.Now()
	ex.signal(syscall.SIGSTOP)
	select {
	case r := <-fg:
		d := time.Since(stopAt)
		t.Logf("lost answered %s after SIGSTOP", d.Round(time.Millisecond))
		if r.Status != engine.StatusLost || !strings.Contains(r.Err.Error(), "no answer to keepalives") {
			t.Errorf("call on the frozen executor: %s %v %q", r.Status, r.Err, r.Output)
		}
		if d > 3*time.Second {
			t.Errorf("lost answered %s after SIGSTOP, want within 3s", d)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call on the frozen executor did not answer")
	}
	ex.signal(syscall.SIGCONT)
	select {
	case <-ex.done:
		if !strings.Contains(ex.stderr.String(), "FENCED") {
			t.Errorf("the frozen executor exited without fencing: %v\n%s", ex.err, ex.stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the frozen executor did not fence and exit after SIGCONT\n%s", ex.stderr)
	}
	waitNoLeftovers(t, mark)
	noMarker(t, dir, "fg", start.Add(late))
}
