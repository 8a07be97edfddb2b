package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	pacluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
	"github.com/bashvisor/bashvisor/cluster/etcd"

	"github.com/bashvisor/bashvisor/cluster"
	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// fleet says how a scenario's executors find each other and the front.
type fleet struct {
	spec   func(i int) execSpec      // executor i of 4 (the 4th joins later)
	front  func() cluster.Membership // the front's membership
	static bool                      // a static address list (no topology)
}

// TestFleetStatic runs the fleet scenario with a static address list:
// liveness from Watch and keepalives only.
func TestFleetStatic(t *testing.T) {
	if inFreshProcess(t) {
		return
	}
	var addrs []string
	for range 4 {
		addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(freePort(t)))
	}
	runFleet(t, fleet{
		static: true,
		spec:   func(i int) execSpec { return execSpec{listen: addrs[i]} },
		front:  func() cluster.Membership { return cluster.Static(addrs...) },
	})
}

// TestFleetAutomanaged runs it with protoactor's automanaged provider on
// loopback: every node polls the health endpoints of a host list given in
// advance (the 4th executor's included).
func TestFleetAutomanaged(t *testing.T) {
	if inFreshProcess(t) {
		return
	}
	// The membership names every executor's ports before any starts; each
	// stays reserved (listened on) until its executor starts, or the
	// many connections made meanwhile may get one as their local port
	// (exec-4, started half a minute later, once found its address in use).
	var addrs, health []string
	var healthPorts []int
	var reserved [4][]net.Listener
	for i := range 4 {
		a, la := reservePort(t)
		hp, lh := reservePort(t)
		reserved[i] = []net.Listener{la, lh}
		addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(a))
		healthPorts = append(healthPorts, hp)
		health = append(health, "127.0.0.1:"+strconv.Itoa(hp))
	}
	hosts := strings.Join(health, ",")
	runFleet(t, fleet{
		spec: func(i int) execSpec {
			for _, ln := range reserved[i] {
				ln.Close()
			}
			return execSpec{listen: addrs[i], membership: "automanaged:" + hosts, healthPort: healthPorts[i], providerRaces: true}
		},
		front: func() cluster.Membership {
			return cluster.Provider("bvtest", func() (pacluster.ClusterProvider, error) {
				return automanaged.NewWithConfig(300*time.Millisecond, 0, health...), nil
			})
		},
	})
}

// TestFleetEtcd runs it with the etcd provider against an etcd server the
// test starts on loopback. Without an etcd binary it skips, unless
// REQUIRE_ETCD=1 (CI), where it fails.
func TestFleetEtcd(t *testing.T) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		testenv.Need(t, testenv.Etcd, fmt.Errorf("no etcd binary (apt-get install etcd-server): %w", err))
	}
	if inFreshProcess(t) {
		return
	}
	endpoint, _ := startEtcd(t, bin)
	var addrs []string
	for range 4 {
		addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(freePort(t)))
	}
	runFleet(t, fleet{
		spec: func(i int) execSpec {
			return execSpec{listen: addrs[i], membership: "etcd:" + endpoint, providerRaces: true}
		},
		front: func() cluster.Membership {
			return etcd.Membership("bvtest", endpoint)
		},
	})
}

// startEtcd starts an etcd server on loopback in a temporary directory and
// returns its client endpoint and a function that SIGKILLs it; it is
// stopped at cleanup.
func startEtcd(t *testing.T, bin string) (string, func()) {
	t.Helper()
	client, peer := freePort(t), freePort(t)
	cu, pu := fmt.Sprintf("http://127.0.0.1:%d", client), fmt.Sprintf("http://127.0.0.1:%d", peer)
	cmd := exec.Command(bin, "--name", "bvtest", "--data-dir", filepath.Join(t.TempDir(), "etcd"),
		"--listen-client-urls", cu, "--advertise-client-urls", cu,
		"--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu, "--initial-cluster", "bvtest="+pu,
		"--log-level", "error")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	stderr := &safeBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := testenv.GroupOf(t, cmd.Process.Pid) // never another group after the Wait below
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = g.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			g.Kill()
			<-done
		}
	})
	// Readiness over HTTP, not gRPC: a gRPC client here would race with
	// the front's Remote.Start, which rewrites grpc's global logger.
	var err error
	testenv.Eventually(t, 30*time.Second, func() bool {
		var resp *http.Response
		if resp, err = http.Get(cu + "/health"); err != nil {
			return false // another process starting up
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"true"`)
	}, "etcd not healthy: %v\n%s", testenv.Last(&err), stderr)
	http.DefaultClient.CloseIdleConnections()
	return cu, func() {
		g.Kill()
		<-done
	}
}

// The fleet's failure detection bounds: generous for a loaded 2-core
// machine running every process under the race detector, where a 2 s
// stall of a healthy process happens.
const (
	lostAfter  = 5 * time.Second
	fenceAfter = "4s"
)

type callOutcome struct {
	conv string
	res  engine.Result
	at   time.Time
}

// runFleet is the multi-node scenario: spread, node loss by SIGKILL, a
// join that moves nothing, a frozen executor that fences itself, no leaks.
func runFleet(t *testing.T, f fleet) {
	mark := t.Name()
	markers, dir := t.TempDir(), t.TempDir()
	fds := fdCount(t)
	ex := make([]*proc, 4)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := f.spec(i)
			s.name, s.mark, s.fenceAfter = fmt.Sprintf("exec-%d", i+1), mark, fenceAfter
			ex[i] = startExecutor(t, s)
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	byID := func(id string) *proc {
		for _, p := range ex {
			if p != nil && p.id == id {
				return p
			}
		}
		return nil
	}
	c := newClient(t, cluster.ClientOptions{Membership: f.front(), LostAfter: lostAfter})
	frontStopped := false
	defer func() {
		if !frontStopped {
			shutdown(t, c)
		}
	}()
	waitReady(t, c, 3)
	run := func(ctx context.Context, conv, command string, mode engine.Mode) engine.Result {
		return c.Run(ctx, engine.ToolContext{WorkingDir: dir, ConversationID: conv}, engine.Input{Command: command, Mode: mode})
	}
	where := func(conv string) *proc {
		return byID(cluster.Where(c, conv))
	}

	// 1. Spread: 60 new conversations at once land about 20/20/20
	// (rendezvous hashing: binomially, each gets fewer than 8 once in
	// about 2,000 runs), and each runs where the front says.
	convs := make([]string, 60)
	var mu sync.Mutex
	count := map[string]int{}
	for i := range convs {
		convs[i] = fmt.Sprintf("conv-%02d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := run(context.Background(), convs[i], "echo $BV_NAME", "")
			mu.Lock()
			defer mu.Unlock()
			count[strings.TrimSpace(r.Output)]++
			if p := where(convs[i]); r.Status != engine.StatusOK || p == nil || strings.TrimSpace(r.Output) != p.name {
				t.Errorf("%s: %s %q, placed on %v", convs[i], r.Status, r.Output, p)
			}
		}()
	}
	wg.Wait()
	for i := range 3 {
		if n := count[ex[i].name]; n < 8 {
			t.Errorf("spread %v: %s has %d of 60 conversations, want about 20 (at least 8)", count, ex[i].name, n)
		}
	}
	t.Logf("spread: %v", count)

	// 2. SIGKILL of one executor during 30 `sleep 3` calls on it.
	victim := ex[0]
	var victimConvs, otherConvs []string
	for _, conv := range convs {
		if where(conv) == victim {
			victimConvs = append(victimConvs, conv)
		} else {
			otherConvs = append(otherConvs, conv)
		}
	}
	bg := run(context.Background(), victimConvs[0], "sleep 30", engine.ModeBackground)
	if bg.Status != engine.StatusStarted {
		t.Fatalf("background job: %s %q", bg.Status, bg.Output)
	}
	outcomes := make(chan callOutcome, 50)
	for i := range 30 {
		conv := victimConvs[i%len(victimConvs)]
		go func() {
			m := filepath.Join(markers, fmt.Sprintf("kill-%02d", i))
			r := run(context.Background(), conv, fmt.Sprintf("echo start >> %s; sleep 3; echo end >> %s", m, m), engine.ModeSlow)
			outcomes <- callOutcome{conv, r, time.Now()}
		}()
	}
	for i := range 20 {
		conv := otherConvs[i%len(otherConvs)]
		go func() {
			outcomes <- callOutcome{conv, run(context.Background(), conv, "sleep 3; echo fine", engine.ModeSlow), time.Now()}
		}()
	}
	waitFiles(t, markers, "kill-", 30)
	// Without cgroups (testConfig) the executor hands each command's
	// process group to its watchdog right after the fork (proc.Watchdog:
	// a command whose engine dies in between is missed). Once, in a CI
	// run at load 8-10 under the race detector, 3 of 60 commands ran on
	// past the kill; that window is the likeliest cause (not reproduced
	// since, with 6 busy loops beside the test either). Kill once every
	// start has settled.
	time.Sleep(500 * time.Millisecond)
	killAt := time.Now()
	victim.signal(syscall.SIGKILL)
	lost, fine := 0, 0
	for range 50 {
		o := <-outcomes
		switch where(o.conv) {
		case victim:
			if o.res.Status != engine.StatusLost || !errors.Is(o.res.Err, cluster.ErrExecutorLost) ||
				!strings.HasPrefix(o.res.Output, "[command lost: executor exec-1 stopped answering ") {
				t.Errorf("call on the killed executor: %s %q", o.res.Status, o.res.Output)
			}
			if d := o.at.Sub(killAt); d > 2*time.Second {
				t.Errorf("lost answered %s after the kill, want within 2s", d)
			}
			lost++
		default:
			if o.res.Status != engine.StatusOK || o.res.Output != "fine\n" {
				t.Errorf("call on a live executor: %s %q", o.res.Status, o.res.Output)
			}
			fine++
		}
	}
	t.Logf("kill: %d lost, %d ok", lost, fine)
	if r := run(context.Background(), victimConvs[0], "true", ""); r.Status != engine.StatusError ||
		!errors.Is(r.Err, cluster.ErrConversationLost) || !strings.Contains(r.Output, "its working directory was on that machine") {
		t.Errorf("next call of a lost conversation: %s %q", r.Status, r.Output)
	}
	if jobs := c.Jobs(engine.ToolContext{ConversationID: victimConvs[0]}); len(jobs) != 1 || jobs[0].Status != engine.JobLost || jobs[0].JobID != bg.JobID {
		t.Errorf("background job on the killed executor: %+v", jobs)
	}
	// The killed executor's watchdog ended its commands, the background
	// job's group included.
	testenv.Eventually(t, 10*time.Second, func() bool { return len(groupMembers(bg.PID)) == 0 },
		"the killed executor's background job still runs: %v", testenv.Lazy(func() string { return strings.Join(groupMembers(bg.PID), "; ") }))

	// 3. A fourth executor joins: nothing moves; new conversations go there.
	// It joins once the front's membership has dropped the killed one:
	// protoactor updates its block list then without a lock while a new
	// connection reads it (a data race in protoactor-go's remote.BlockList,
	// which -race reports when the two meet).
	waitLeftTopology(t, c, f, victim.id)
	before := map[string]string{}
	for _, conv := range otherConvs {
		before[conv] = cluster.Where(c, conv)
	}
	s := f.spec(3)
	s.name, s.mark, s.fenceAfter = "exec-4", mark, fenceAfter
	ex[3] = startExecutor(t, s)
	waitReady(t, c, 3) // exec-2, exec-3 and the new one
	for _, conv := range otherConvs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := run(context.Background(), conv, "echo $BV_NAME", "")
			if now := cluster.Where(c, conv); now != before[conv] || strings.TrimSpace(r.Output) != byID(before[conv]).name {
				t.Errorf("%s moved after the join: now %s, ran on %q", conv, now, r.Output)
			}
		}()
	}
	wg.Wait()
	// New conversations spread over the three, the new one included
	// (none of 30 there: once in 200,000 runs).
	onNew := 0
	for i := range 30 {
		conv := fmt.Sprintf("new-%02d", i)
		r := run(context.Background(), conv, "echo $BV_NAME", "")
		if p := where(conv); p == nil || strings.TrimSpace(r.Output) != p.name {
			t.Errorf("%s: %s %q, placed on %v", conv, r.Status, r.Output, p)
		}
		if strings.TrimSpace(r.Output) == "exec-4" {
			onNew++
		}
	}
	if onNew == 0 {
		t.Error("no new conversation after the join ran on the new executor exec-4")
	}

	// 4. SIGSTOP of an executor for longer than the membership timeout:
	// its calls answer lost; after SIGCONT it fences (its commands and
	// jobs are killed) and exits: it serves nothing under its old id.
	frozen := ex[1]
	var frozenConvs []string
	for _, conv := range otherConvs {
		if where(conv) == frozen {
			frozenConvs = append(frozenConvs, conv)
		}
	}
	fbg := run(context.Background(), frozenConvs[0], "echo $$ > "+filepath.Join(markers, "stop-bg")+"; sleep 60", engine.ModeBackground)
	if fbg.Status != engine.StatusStarted {
		t.Fatalf("background job: %s %q", fbg.Status, fbg.Output)
	}
	for i := range 5 {
		conv := frozenConvs[i%len(frozenConvs)]
		go func() {
			m := filepath.Join(markers, fmt.Sprintf("stop-%d", i))
			r := run(context.Background(), conv, fmt.Sprintf("echo $$ > %s.pid; echo start >> %s; sleep 10; echo end >> %s", m, m, m), engine.ModeSlow)
			outcomes <- callOutcome{conv, r, time.Now()}
		}()
	}
	waitFiles(t, markers, "stop-", 1+5*2)
	stopAt := time.Now()
	frozen.signal(syscall.SIGSTOP)
	for range 5 {
		o := <-outcomes
		if o.res.Status != engine.StatusLost {
			t.Errorf("call on the frozen executor: %s %q", o.res.Status, o.res.Output)
		}
		if d := o.at.Sub(stopAt); d > lostAfter+5*time.Second {
			t.Errorf("lost answered %s after SIGSTOP, want within %s (membership timeout %s)", d, lostAfter+5*time.Second, lostAfter)
		}
	}
	t.Logf("freeze detected after %s", time.Since(stopAt).Round(10*time.Millisecond))
	waitLeftTopology(t, c, f, frozen.id) // see step 3: it reconnects after SIGCONT
	frozen.signal(syscall.SIGCONT)
	select {
	case <-frozen.done:
		if !strings.Contains(frozen.stderr.String(), "FENCED") {
			t.Errorf("the frozen executor exited without fencing: %v\n%s", frozen.err, frozen.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the frozen executor did not fence and exit after SIGCONT\n%s", frozen.stderr)
	}
	for _, name := range append([]string{"stop-bg"}, "stop-0.pid", "stop-1.pid", "stop-2.pid", "stop-3.pid", "stop-4.pid") {
		b, err := os.ReadFile(filepath.Join(markers, name))
		if err != nil {
			continue // a call queued behind another never started
		}
		pgid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if live := groupMembers(pgid); len(live) > 0 {
			t.Errorf("fenced executor left %s's processes running: %v", name, live)
		}
	}
	if r := run(context.Background(), frozenConvs[0], "true", ""); !errors.Is(r.Err, cluster.ErrConversationLost) {
		t.Errorf("next call of a conversation on the fenced executor: %s %q", r.Status, r.Output)
	}

	// No command ran twice, and none of the killed or fenced ones ran on.
	// A killed executor's commands die with it (its watchdog): the
	// shell may even be killed between creating its marker and writing
	// to it, but none reaches its end 3 s later.
	for i := range 30 {
		b, _ := os.ReadFile(filepath.Join(markers, fmt.Sprintf("kill-%02d", i)))
		if n := strings.Count(string(b), "start"); n > 1 || strings.Contains(string(b), "end") {
			t.Errorf("kill-%02d: %q (ran twice, or ran on after its executor was killed)", i, b)
		}
	}
	for i := range 5 {
		b, _ := os.ReadFile(filepath.Join(markers, fmt.Sprintf("stop-%d", i)))
		if strings.Count(string(b), "start") > 1 || strings.Contains(string(b), "end") {
			t.Errorf("stop-%d: %q (ran twice, or ran on after fencing)", i, b)
		}
	}

	// 5. No leaks: the front's goroutines and descriptors, the executors'
	// processes and their commands'.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Shutdown(ctx); err != nil {
		t.Errorf("front shutdown: %v", err)
	}
	frontStopped = true
	for _, p := range ex {
		p.stop()
	}
	waitFrontGone(t, c)
	waitNoLeftovers(t, mark)
	if n := fdCount(t); n > fds {
		t.Errorf("front leaked descriptors: %d open, %d before", n, fds)
	}
}

// waitFiles waits until dir holds at least n files named prefix*.
func waitFiles(t *testing.T, dir, prefix string, n int) {
	t.Helper()
	var got int
	testenv.Eventually(t, 30*time.Second, func() bool {
		m, _ := filepath.Glob(filepath.Join(dir, prefix+"*")) // written by commands on other processes
		got = len(m)
		return got >= n
	}, "%d of %d %s* markers", testenv.Last(&got), n, prefix)
}

// waitLeftTopology waits until a provider fleet's front has processed a
// topology without member id (a static fleet has no topology).
func waitLeftTopology(t *testing.T, c *cluster.Client, f fleet, id string) {
	t.Helper()
	if f.static {
		return
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return !cluster.InTopology(c, id) },
		"member %s still in the front's topology", id)
}
