//go:build linux

package sandbox_test

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestStartDirectJoinsCgroupAtClone: StartDirect forks bash into its
// cgroup v2 (clone3 CLONE_INTO_CGROUP), so no command waits for a move
// by pid (no write to cgroup.procs), and the child still installs the
// seccomp filter and keeps Landlock's no_new_privs before bash runs.
// With a standard file that is not an *os.File the old path runs (the
// filter on the thread, a move by pid after the fork), which the counter
// sees.
func TestStartDirectJoinsCgroupAtClone(t *testing.T) {
	requireSandbox(t)
	if testCgroups == nil {
		testenv.Needf(t, testenv.Cgroups, false, "no cgroups for the test process")
	}
	direct = true
	defer func() { direct = false }()
	before := sandbox.ProcsWrites.Load()
	r := runIn(t, config.SandboxLimits{}, t.TempDir(), "cat /proc/self/cgroup; grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status; echo clone3:$(python3 -c 'import ctypes,os; l=ctypes.CDLL(None,use_errno=True); print(l.syscall(435,0,0), ctypes.get_errno())' 2>&1)")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.out)
	}
	if n := sandbox.ProcsWrites.Load() - before; n != 0 {
		t.Errorf("%d moves into the cgroup by pid, want 0", n)
	}
	if want := "/" + filepath.Base(r.cg.Dir()) + "\n"; !strings.Contains(r.out, want) {
		t.Errorf("not in its cgroup (%s) from the start:\n%s", r.cg.Dir(), r.out)
	}
	for _, want := range []string{"Seccomp:\t2", "NoNewPrivs:\t1"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("missing %q:\n%s", want, r.out)
		}
	}
	if testenv.HasTool(t, "python3") && !strings.Contains(r.out, "clone3:-1 38") { // ENOSYS from the filter
		t.Errorf("clone3 not denied by the filter:\n%s", r.out)
	}

	// A bytes.Buffer for stdout: moved by pid after the fork.
	sc, cg := prepare(t, config.SandboxLimits{}, "cat /proc/self/cgroup")
	var out bytes.Buffer
	cmd := exec.Command(sc.Path)
	cmd.Dir, cmd.Stdout, cmd.Stderr, cmd.SysProcAttr = t.TempDir(), &out, &out, sysProcAttr(cg)
	before = sandbox.ProcsWrites.Load()
	if err := sc.StartDirect(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if n := sandbox.ProcsWrites.Load() - before; n != 1 {
		t.Errorf("%d moves by pid with a buffer for stdout, want 1", n)
	}
	if want := "/" + filepath.Base(cg.Dir()) + "\n"; !strings.Contains(out.String(), want) {
		t.Errorf("not in its cgroup (%s):\n%s", cg.Dir(), out.String())
	}
}

// BenchmarkStartDirectCgroup compares, side by side, StartDirect forking
// bash into its cgroup v2 (clone3, the child installing the seccomp
// filter) with the move by pid after a plain fork (the filter on the
// thread), back to back and with an idle gap before each command (after
// a pause a move by pid waits for an RCU grace period on a host whose
// cgroup2 is not mounted with favordynmods). It reports each variant's
// median wall time from start to exit, and the moves by pid per command.
func BenchmarkStartDirectCgroup(b *testing.B) {
	requireSandbox(b)
	if testCgroups == nil {
		testenv.Needf(b, testenv.Cgroups, false, "no cgroups for the test process")
	}
	defer sandbox.MoveByPid.Store(false)
	for _, gap := range []time.Duration{0, 50 * time.Millisecond} {
		b.Run(fmt.Sprintf("gap=%v", gap), func(b *testing.B) {
			var walls [2][]time.Duration
			var moves [2]int64
			for b.Loop() {
				for v := range 2 {
					sandbox.MoveByPid.Store(v == 1)
					time.Sleep(gap)
					sc, cg := prepare(b, config.SandboxLimits{}, "true")
					cmd := exec.Command(sc.Path)
					cmd.Dir, cmd.SysProcAttr = b.TempDir(), sysProcAttr(cg)
					m0, t0 := sandbox.ProcsWrites.Load(), time.Now()
					if err := sc.StartDirect(cmd); err != nil {
						b.Fatal(err)
					}
					if err := cmd.Wait(); err != nil {
						b.Fatal(err)
					}
					walls[v] = append(walls[v], time.Since(t0))
					moves[v] += sandbox.ProcsWrites.Load() - m0
					_ = sc.Cleanup(false)
					endCgroup(cg)
				}
			}
			for v, name := range []string{"clone3", "move"} {
				slices.Sort(walls[v])
				b.ReportMetric(float64(walls[v][len(walls[v])/2])/1e6, name+"-ms")
				b.ReportMetric(float64(moves[v])/float64(len(walls[v])), name+"-moves/op")
			}
		})
	}
}
