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

	"github.com/bashvisor/bashvisor/internal/testenv"
)

// BenchmarkRootlessGap measures a read-only command in a rootless world
// (Prepare, StartHelper, Wait, Cleanup: the helper path every rootless
// command takes) back to back and one second after the previous one,
// for each helper variant side by side (rotated within each round), and
// reports each variant's median total per spacing (ms), of StartHelper
// with Wait and of Cleanup, and the median CPU time of the command's
// process (the helper, then bash). Run it as a user
// other than root, with -benchtime=Nx (each round sleeps a second).
func BenchmarkRootlessGap(b *testing.B) {
	c := Probe()
	testenv.Needf(b, testenv.Namespaces, c.Namespaces && c.Rootless, "needs rootless namespaces: %s", c)
	w, err := newWorld(WorldOptions{Dir: filepath.Join(b.TempDir(), "world"), Helper: selfPath()}, true)
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
	dir := b.TempDir()
	variants := []string{"before", "procs1"}
	gaps := []time.Duration{0, time.Second}
	res := map[string][]time.Duration{}
	cpu := map[string][]time.Duration{}
	steps := map[string][]time.Duration{}
	var kids time.Duration               // the last command's CPU (helper and bash: one process)
	var startWait, cleanup time.Duration // the last command's StartHelper+Wait, and Cleanup
	run := func(v int) time.Duration {
		helperProcs1 = variants[v] == "procs1"
		t0 := time.Now()
		sc, err := Prepare(Options{Bash: bash, Command: "true", World: w, Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(sc.Path)
		cmd.Dir, cmd.Stdin, cmd.Stdout, cmd.Stderr = dir, devnull, devnull, devnull
		cmd.Env = os.Environ()
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		t1 := time.Now()
		if err := sc.StartHelper(cmd); err != nil {
			b.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		_ = sc.Cleanup(true)
		d := time.Since(t0)
		startWait, cleanup = t2.Sub(t1), time.Since(t2)
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		kids = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		return d
	}
	round := 0
	for b.Loop() {
		round++
		for k := range variants {
			v := (k + round) % len(variants)
			for _, gap := range gaps {
				if gap == 0 {
					run(v)
				}
				time.Sleep(gap)
				d := run(v)
				key := fmt.Sprintf("%s-gap%v", variants[v], gap)
				res[key] = append(res[key], d)
				cpu[key] = append(cpu[key], kids)
				steps[key+"-startwait"] = append(steps[key+"-startwait"], startWait)
				steps[key+"-cleanup"] = append(steps[key+"-cleanup"], cleanup)
			}
		}
	}
	helperProcs1 = true
	for key, v := range res {
		slices.Sort(v)
		b.ReportMetric(float64(v[len(v)/2])/1e6, key+"-ms")
		c := cpu[key]
		slices.Sort(c)
		b.ReportMetric(float64(c[len(c)/2])/1e6, key+"-cpu-ms")
	}
	for key, v := range steps {
		slices.Sort(v)
		b.ReportMetric(float64(v[len(v)/2])/1e6, key+"-ms")
	}
}
