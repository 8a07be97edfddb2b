//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// BenchmarkStartDirectGap measures a read-only command in a
// conversation's world the way the engine starts it (Prepare, a cgroup
// of its own, StartDirect, Wait, Cleanup and the cgroup's removal), back
// to back and one second after the previous command, side by side, and
// reports each step's median (ms) per spacing: whether the idle-gap cost
// the engine shows (issue 31, item 2) lies in this package's start path.
// Run it with -benchtime=Nx (each round sleeps a second).
func BenchmarkStartDirectGap(b *testing.B) {
	c := Probe()
	testenv.Needf(b, testenv.Namespaces, c.Namespaces && !c.Rootless, "needs root's namespaces: %s", c)
	cgs, err := proc.ProbeCgroups(testenv.CgroupParent())
	if err != nil {
		testenv.Needf(b, testenv.Cgroups, false, "no cgroups: %v", err)
	}
	defer cgs.Close()
	w, err := newWorld(WorldOptions{Dir: filepath.Join(b.TempDir(), "world")}, false)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	bash := testenv.NeedsTool(b, "bash")[0]
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		b.Fatal(err)
	}
	defer devnull.Close()
	steps := []string{"prepare", "cgroup", "start", "wait", "cleanup"}
	gaps := []time.Duration{0, time.Second}
	res := make([][][]time.Duration, len(gaps)) // [gap][step][sample]
	for g := range res {
		res[g] = make([][]time.Duration, len(steps))
	}
	n := 0
	run := func(g int, record bool) {
		dir := b.TempDir()
		t := []time.Time{time.Now()}
		sc, err := Prepare(Options{Bash: bash, Command: "true", World: w, Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		t = append(t, time.Now())
		n++
		cg, err := cgs.New(fmt.Sprintf("gap%d", n))
		if err != nil {
			b.Fatal(err)
		}
		t = append(t, time.Now())
		cmd := exec.Command(sc.Path)
		cmd.Dir, cmd.Stdin, cmd.Stdout, cmd.Stderr = dir, devnull, devnull, devnull
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, UseCgroupFD: true, CgroupFD: cg.FD()}
		if err := sc.StartDirect(cmd); err != nil {
			b.Fatal(err)
		}
		t = append(t, time.Now())
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
		t = append(t, time.Now())
		_ = sc.Cleanup(!cg.Populated())
		_ = cg.Kill()
		cg.Remove()
		t = append(t, time.Now())
		for s := range steps {
			if !record {
				break
			}
			res[g][s] = append(res[g][s], t[s+1].Sub(t[s]))
		}
	}
	for b.Loop() {
		for g, gap := range gaps {
			if gap == 0 {
				run(g, false) // the one right before
			}
			time.Sleep(gap)
			run(g, true)
		}
	}
	for g, gap := range gaps {
		for s, name := range steps {
			v := slices.Clone(res[g][s])
			slices.Sort(v)
			b.ReportMetric(float64(v[len(v)/2])/1e6, fmt.Sprintf("%s-gap%v-ms", name, gap))
		}
	}
}
