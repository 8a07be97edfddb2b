//go:build linux

package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/testenv"
)

// BenchmarkRootlessGap measures a read-only command in a rootless world
// (Prepare, StartHelper, Wait, Cleanup: the path every rootless command
// takes) back to back and one second after the previous one, for each
// start side by side (rotated within each round): "helper", the helper
// program forked into the world (startInWorld, GOMAXPROCS=1: see
// helperProcs1), "helper-procsN", the same with the command's own
// GOMAXPROCS, and "server", the world's command server
// (server_linux.go); as root also
// "root", StartDirect in a root world (the engine's path as root). It
// reports each variant's median total per spacing (ms), of StartHelper
// with Wait and of Cleanup, the median CPU time of the command's process
// (the helper, then bash; bash alone when served) and, for "server", the
// server's own CPU per command (its utime+stime over the run, in clock
// ticks, divided by its commands: 0.11 ms resolution at -benchtime=30x). Run it as a user other than root
// (and as root for the "root" row), with -benchtime=Nx (each round
// sleeps a second).
func BenchmarkRootlessGap(b *testing.B) {
	c := Probe()
	testenv.Needf(b, testenv.Namespaces, c.Namespaces, "no private namespaces: %s", c) // a rootless world is made so as root too
	w, err := newWorld(WorldOptions{Dir: filepath.Join(b.TempDir(), "world"), Helper: selfPath()}, true)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	if w.w.server == nil {
		b.Fatal("the rootless world has no command server")
	}
	worlds := map[string]*World{"helper": w, "helper-procsN": w, "server": w}
	variants := []string{"helper", "helper-procsN", "server"}
	if os.Geteuid() == 0 {
		rw, err := newWorld(WorldOptions{Dir: filepath.Join(b.TempDir(), "root-world")}, false)
		if err != nil {
			b.Fatal(err)
		}
		defer rw.Close()
		worlds["root"] = rw
		variants = append(variants, "root")
	}
	defer func() { useServer.Store(true); helperProcs1 = true }()
	bash := testenv.NeedsTool(b, "bash")[0]
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		b.Fatal(err)
	}
	defer devnull.Close()
	dir := b.TempDir()
	gaps := []time.Duration{0, time.Second}
	res := map[string][]time.Duration{}
	cpu := map[string][]time.Duration{}
	steps := map[string][]time.Duration{}
	var kids time.Duration               // the last command's CPU (helper and bash: one process)
	var startWait, cleanup time.Duration // the last command's StartHelper+Wait, and Cleanup
	run := func(v int) time.Duration {
		useServer.Store(strings.HasPrefix(variants[v], "server"))
		helperProcs1 = variants[v] != "helper-procsN"
		t0 := time.Now()
		sc, err := Prepare(Options{Bash: bash, Command: "true", World: worlds[variants[v]], Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(sc.Path)
		cmd.Dir, cmd.Stdin, cmd.Stdout, cmd.Stderr = dir, devnull, devnull, devnull
		cmd.Env = os.Environ()
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		t1 := time.Now()
		start := sc.StartHelper
		if variants[v] == "root" {
			start = sc.StartDirect
		}
		if err := start(cmd); err != nil {
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
	ticks0 := serverTicks(b, w.w.server.pid)
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
	if n := len(res["server-gap0s"]) + len(res["server-gap1s"]); n > 0 {
		n = n * 3 / 2 // and the unrecorded command before each back-to-back one
		b.ReportMetric(float64(serverTicks(b, w.w.server.pid)-ticks0)*1e3/float64(clockTicks)/float64(n), "server-own-cpu-ms/cmd")
	}
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

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times.
const clockTicks = 100

// serverTicks returns the utime+stime of the process pid (its threads,
// ended ones included) in clock ticks.
func serverTicks(b *testing.B, pid int) int64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	u, err1 := strconv.ParseInt(f[11], 10, 64) // fields 14 and 15, counted from the state (field 3)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("%s: %v %v", data, err1, err2)
	}
	return u + s
}
