package proc_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestProbeRefusesThreadedParent: below a threaded cgroup no process can
// be started (its children are "domain invalid"), so ProbeCgroups says
// so, with ErrNoCgroups, instead of handing out cgroups every start into
// which fails; it leaves nothing behind.
func TestProbeRefusesThreadedParent(t *testing.T) {
	m := cgroups(t) // a cgroup v2 parent this test may write
	top := filepath.Join(filepath.Dir(m.Dir()), fmt.Sprintf("probe-threaded-%d", os.Getpid()))
	thr := filepath.Join(top, "t")
	if err := os.MkdirAll(thr, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = os.Remove(thr)
		_ = os.Remove(top)
	})
	if err := os.WriteFile(filepath.Join(thr, "cgroup.type"), []byte("threaded"), 0); err != nil {
		t.Fatalf("make a threaded cgroup: %v", err)
	}
	got, err := proc.ProbeCgroups(thr)
	if err == nil {
		got.Close()
		t.Fatalf("ProbeCgroups(%s) under a threaded cgroup succeeded", thr)
	}
	if !errors.Is(err, proc.ErrNoCgroups) || !strings.Contains(err.Error(), "domain") {
		t.Fatalf("err = %v, want ErrNoCgroups naming the cgroup type", err)
	}
	entries, _ := os.ReadDir(thr)
	for _, e := range entries {
		if e.IsDir() {
			t.Errorf("left behind: %s", filepath.Join(thr, e.Name()))
		}
	}
}

// TestProbeStartsNothing: the probe forks no process (the first command
// is the start's real test). Every child a process reaps adds its page
// faults to the process's RUSAGE_CHILDREN (an exec makes some); the
// earlier probe, which started and reaped `sleep`, failed this.
func TestProbeStartsNothing(t *testing.T) {
	before := reapedFaults(t)
	m := cgroups(t)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if after := reapedFaults(t); after != before {
		t.Fatalf("children reaped during the probe: their minor faults went from %d to %d", before, after)
	}
}

// reapedFaults is the minor page faults of this process's reaped children.
func reapedFaults(t *testing.T) int64 {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		t.Fatal(err)
	}
	return ru.Minflt
}

// BenchmarkProbeCgroups is an engine's cgroup set-up and tear-down:
// ProbeCgroups (its directory, the self-test, the v1 controllers of a
// hybrid host) and Close.
func BenchmarkProbeCgroups(b *testing.B) {
	cgroups(b).Close()
	for b.Loop() {
		m, err := proc.ProbeCgroups(testenv.CgroupParent())
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
