package cluster_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	pacluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
	"github.com/bashvisor/bashvisor/cluster/etcd"
	"github.com/bashvisor/bashvisor/internal/testenv"
	"go.uber.org/goleak"

	"github.com/bashvisor/bashvisor/cluster"
	"github.com/bashvisor/bashvisor/engine"
)

// The test binary doubles as an executor: started with BV_EXECUTOR set,
// it serves an engine (configured like testConfig) and prints
// "READY ID ADDRESS" on stdout.
func TestMain(m *testing.M) {
	if os.Getenv("BV_EXECUTOR") != "" {
		os.Exit(executorMain())
	}
	if os.Getenv("BV_FRONT") == "serve" {
		os.Exit(frontServe())
	}
	if os.Getenv("BV_FRONT") != "" {
		os.Exit(frontMain())
	}
	code := m.Run()
	if code == 0 {
		// After a front stops, protoactor remote may still finish one
		// connection attempt to an executor that is going away: it sleeps
		// 2 s after a failed attempt (remote/endpoint_writer.go), then
		// closes the connection. Such goroutines get 10 s to end; a real
		// leak stays.
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := goleak.Find()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				fmt.Fprintln(os.Stderr, "goleak:", err)
				code = 1
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	os.Exit(code)
}

// inFreshProcess runs the calling test in a new process of the test
// binary and reports true to the caller in the parent, which then returns:
// protoactor's Remote.Start writes grpc's global logger, which the
// goroutines of a previous front in the same process read, so each front
// gets a process of its own (still under -race, and with its own leak
// check in TestMain).
func inFreshProcess(t *testing.T) bool {
	t.Helper()
	if os.Getenv("BV_INNER") == t.Name() {
		return false
	}
	// Each level of a subtest's name anchored: "^A$/^b$" (an unanchored
	// "b$" would also run a sibling named "ab").
	args := []string{"-test.run=^" + strings.ReplaceAll(regexp.QuoteMeta(t.Name()), "/", "$/^") + "$", "-test.count=1", "-test.timeout=5m"}
	if testing.Verbose() {
		args = append(args, "-test.v")
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "BV_INNER="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "\nPASS\n") && !strings.HasPrefix(string(out), "PASS\n") {
		t.Errorf("%s in a fresh process: %v\n%s", t.Name(), err, out)
	} else if testing.Verbose() {
		t.Logf("%s", out)
	}
	return true
}

// testConfig is the engine configuration of the executors and of the
// local engine the results are compared with.
func testConfig() engine.Config {
	c := engine.DefaultConfig()
	c.Timeout = 2 * time.Second
	c.SlowTimeout = 60 * time.Second
	c.Lifecycle.Grace = 500 * time.Millisecond
	c.ProgressInterval = 100 * time.Millisecond
	c.Admission.MaxRunning, c.Admission.MaxRunningPerConversation = 64, 8
	// The process group is the unit here (the engine's watchdog ends the
	// groups of an executor the tests SIGKILL); the scenarios of
	// faults_test.go also run with cgroups (execSpec.cgroups).
	c.Cgroups.Off = true
	// An engine drops CAP_SYS_ADMIN from the bounding set of its whole
	// process (proc.ProtectEngine); kept here, so that the fresh test
	// processes and executors this process starts after a test made a
	// local engine can still make the sandbox's namespaces (undo_test.go).
	c.Env.KeepCapabilities = true
	return c
}

func executorMain() int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	fenceAfter, _ := time.ParseDuration(os.Getenv("BV_FENCE_AFTER"))
	o := cluster.ExecutorOptions{
		Listen: os.Getenv("BV_LISTEN"), AdvertisedHost: os.Getenv("BV_ADVERTISED"), Name: os.Getenv("BV_NAME"), Token: os.Getenv("BV_TOKEN"),
		FenceAfter: fenceAfter, Logger: log,
	}
	switch kind, arg, _ := strings.Cut(os.Getenv("BV_MEMBERSHIP"), ":"); kind {
	case "automanaged":
		port, _ := strconv.Atoi(os.Getenv("BV_HEALTH_PORT"))
		o.Membership = cluster.Provider("bvtest", func() (pacluster.ClusterProvider, error) {
			return automanaged.NewWithConfig(300*time.Millisecond, port, strings.Split(arg, ",")...), nil
		})
	case "etcd":
		o.Membership = etcd.Membership("bvtest", strings.Split(arg, ",")...)
	}
	cfg := testConfig()
	if os.Getenv("BV_CGROUPS") != "" {
		cfg.Cgroups.Off = false
	}
	if n, err := strconv.Atoi(os.Getenv("BV_OUTPUT_MAX")); err == nil {
		cfg.Output.Max = n
	}
	x, err := cluster.NewExecutor(cfg, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "executor:", err)
		return 1
	}
	fmt.Printf("READY %s %s\n", x.ID(), x.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	fenced := x.FenceDone()
	for {
		select {
		case <-sig:
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := x.Stop(ctx); err != nil {
				fmt.Fprintln(os.Stderr, "executor stop:", err)
				return 1
			}
			return 0
		case <-fenced:
			fmt.Fprintln(os.Stderr, "FENCED", x.FenceReason())
			if os.Getenv("BV_LINGER") == "" {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				_ = x.Stop(ctx)
				return 75
			}
			fenced = nil // keep refusing until SIGTERM
		}
	}
}

// proc is an executor subprocess.
type proc struct {
	t      testing.TB
	cmd    *exec.Cmd
	id     string
	addr   string
	name   string
	done   chan struct{}
	err    error
	stderr *safeBuffer
	group  *testenv.Group // its process group, never another one after Wait reaped it
}

type execSpec struct {
	name, listen, membership, token, fenceAfter string
	advertised                                  string // ExecutorOptions.AdvertisedHost
	healthPort                                  int
	linger                                      bool
	cgroups                                     bool   // per-command cgroups (testConfig has none)
	providerRaces                               bool   // protoactor's cluster member code races (see startExecutor)
	mark                                        string // BV_MARK in its environment (and its commands')
	scratch                                     string // BV_SCRATCH in its environment: a directory of its own
	outputMax                                   int    // its engine's Config.Output.Max, when positive
}

// startExecutor starts an executor subprocess in a session of its own and
// waits for READY. It is ended (SIGTERM, then SIGKILL of its group) at
// cleanup.
func startExecutor(t testing.TB, s execSpec) *proc {
	t.Helper()
	if s.listen == "" {
		s.listen = "127.0.0.1:0"
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "BV_EXECUTOR=1", "BV_LISTEN="+s.listen, "BV_ADVERTISED="+s.advertised, "BV_NAME="+s.name,
		"BV_MEMBERSHIP="+s.membership, "BV_TOKEN="+s.token, "BV_FENCE_AFTER="+s.fenceAfter,
		"BV_HEALTH_PORT="+strconv.Itoa(s.healthPort), "BV_MARK="+s.mark, "BV_SCRATCH="+s.scratch, "NO_PROXY=*", "HTTP_PROXY=", "http_proxy=")
	if s.linger {
		cmd.Env = append(cmd.Env, "BV_LINGER=1")
	}
	if s.cgroups {
		cmd.Env = append(cmd.Env, "BV_CGROUPS=1")
	}
	if s.outputMax > 0 {
		cmd.Env = append(cmd.Env, "BV_OUTPUT_MAX="+strconv.Itoa(s.outputMax))
	}
	if s.providerRaces {
		// protoactor's cluster member code races with itself (BlockList,
		// gossip, member list); those reports must not fail the run, the
		// ones in our code do (see ownRaces).
		cmd.Env = append(cmd.Env, "GORACE=exitcode=0")
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, name: s.name, done: make(chan struct{}), stderr: &safeBuffer{}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.group = testenv.GroupOf(t, cmd.Process.Pid) // before t.Cleanup(p.stop), which uses it
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(p.stop)
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "READY ") {
				ready <- sc.Text()
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case line := <-ready:
		f := strings.Fields(line)
		p.id, p.addr = f[1], f[2]
	case <-p.done:
		t.Fatalf("executor %s exited before READY: %v\n%s", s.name, p.err, p.stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("executor %s not ready after 30s\n%s", s.name, p.stderr)
	}
	return p
}

// stop ends the executor: SIGTERM (a clean stop that ends its jobs), then
// SIGKILL of its process group after 25 s. A clean stop must exit 0.
func (p *proc) stop() {
	defer p.group.Close() // not counted by fdCount
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // by its pidfd: Wait may have reaped it
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.err != nil {
			p.t.Errorf("executor %s did not stop cleanly: %v\n%s", p.name, p.err, p.stderr)
		}
		if r := ownRaces(p.stderr.String()); r != "" {
			p.t.Errorf("executor %s: data race in bashvisor code:\n%s", p.name, r)
		}
	case <-time.After(25 * time.Second):
		p.group.Kill()
		<-p.done
		p.t.Errorf("executor %s did not stop within 25s of SIGTERM\n%s", p.name, p.stderr)
	}
}

func (p *proc) signal(sig syscall.Signal) {
	if err := p.cmd.Process.Signal(sig); err != nil { // by its pidfd: never another process
		p.t.Fatalf("kill %d %v: %v", p.cmd.Process.Pid, sig, err)
	}
}

// ownRaces returns the race reports in stderr where one of the racing
// accesses is made by bashvisor's code itself (the top frame of a write
// or read stack), not by protoactor called from it.
func ownRaces(stderr string) string {
	var out []string
	for _, r := range strings.Split(stderr, "WARNING: DATA RACE")[1:] {
		lines := strings.Split(r, "\n")
		for i, l := range lines {
			if (strings.Contains(l, "Write at ") || strings.Contains(l, "Read at ") || strings.Contains(l, "write at ") ||
				strings.Contains(l, "read at ")) && i+1 < len(lines) &&
				strings.Contains(lines[i+1], "github.com/bashvisor/bashvisor/") {
				out = append(out, r)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// safeBuffer collects a subprocess's stderr for failure messages.
type safeBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// freePort returns a TCP port free on 127.0.0.1 right now.
// reservePort returns a free port of 127.0.0.1 and a listener on it that
// keeps it from being taken (as a connection's local port too) until it
// is closed; the test closes it at the latest.
func reservePort(t testing.TB) (int, net.Listener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().(*net.TCPAddr).Port, ln
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// leftovers lists processes whose environment carries BV_MARK=mark.
func leftovers(mark string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(b), "\x00") {
			if kv == "BV_MARK="+mark {
				cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
				out = append(out, e.Name()+" "+strings.ReplaceAll(string(cmdline), "\x00", " "))
			}
		}
	}
	return out
}

// waitNoLeftovers waits up to 10 s for every process marked mark to be
// gone.
func waitNoLeftovers(t testing.TB, mark string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l := leftovers(mark)
		if len(l) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("processes left behind: %q", l)
			return
		}
		time.Sleep(50 * time.Millisecond) // polling /proc: there is no event for "a process elsewhere exited"
	}
}

// fdCount counts the test process's open descriptors.
func fdCount(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func newClient(t testing.TB, o cluster.ClientOptions) *cluster.Client {
	t.Helper()
	if o.Logger == nil {
		level := slog.LevelWarn
		if os.Getenv("BV_PA_DEBUG") != "" {
			level = slog.LevelDebug
		}
		o.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: level}))
	}
	before := goleak.IgnoreCurrent()
	c, err := cluster.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	frontGoroutines.Store(c, before)
	return c
}

// frontGoroutines holds, per front, the goroutines that ran before it.
var frontGoroutines sync.Map

// shutdown stops a front and waits until every goroutine it started has
// ended: none may leak, and the next front's Remote.Start writes grpc's
// global logger, which a goroutine of this one could still read.
func shutdown(t testing.TB, c *cluster.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Shutdown(ctx); err != nil && !errors.Is(err, cluster.ErrExecutorLost) {
		t.Errorf("client shutdown: %v", err)
	}
	waitFrontGone(t, c)
}

// waitFrontGone waits until the goroutines started since the front was
// made have ended (processes started meanwhile must be stopped first).
func waitFrontGone(t testing.TB, c *cluster.Client) {
	t.Helper()
	before, ok := frontGoroutines.LoadAndDelete(c)
	if !ok {
		return
	}
	// Generous: under load (-race, 2 cores, load 8+) protoactor's
	// endpoint writers were seen still closing their grpc connections 10 s
	// after Shutdown; they end on their own.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := goleak.Find(before.(goleak.Option))
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("goroutines of the front still running 30s after Shutdown: %v", err)
			return
		}
		time.Sleep(50 * time.Millisecond) // goroutines end on their own; there is nothing to wait on
	}
}

func waitReady(t testing.TB, c *cluster.Client, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitExecutors(ctx, n); err != nil {
		t.Fatal(err)
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}
