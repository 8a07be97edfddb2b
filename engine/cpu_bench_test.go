package engine_test

import (
	"context"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/engine"
)

// BenchmarkEngineCPU measures the engine's own CPU (user and system time
// of this process: the engine's goroutines and threads, the overlays'
// setup and the namespaces' teardown on the engine's threads included;
// the commands' processes are children, not counted) per `true`
// unrestricted, read-only and workspace-write (in a git repository),
// in one engine and conversation, and workspace-write in a second
// engine whose OutputDir, and so its layers' upper and work
// directories, is on a tmpfs (/dev/shm; there a change is copied into
// the workspace, not renamed). Each op runs a block of 10 commands
// of each profile in turn and then idles settle, so that each block's
// background tail (layers reset and premounted after the result) is
// charged to it; the medians of the blocks' per-command CPU are
// reported, each profile's less the unrestricted one's, and the CPU the
// idle engine burns per second (measured over the settles: the
// unrestricted figure includes settle's share of it).
func BenchmarkEngineCPU(b *testing.B) {
	needNamespaces(b)
	e := newEngine(b)
	shm := shmDir(b)
	onTmpfs := newEngine(b, func(c *engine.Config) { c.OutputDir = shm })
	dir := repo(b)
	ctx := context.Background()
	const block, settle = 10, 100 * time.Millisecond
	profiles := []struct {
		name string
		e    *engine.Engine
		tc   engine.ToolContext
	}{
		{"unrestricted", e, engine.ToolContext{WorkingDir: dir, ConversationID: "ws", Env: gitEnv}},
		{"read-only", e, engine.ToolContext{WorkingDir: dir, ConversationID: "ws", Env: gitEnv, Sandbox: engine.Sandbox{Profile: engine.ReadOnly}}},
		{"workspace-write", e, workspaceWrite(dir)},
		{"workspace-write-tmpfs", onTmpfs, workspaceWrite(dir)},
	}
	run := func(e *engine.Engine, tc engine.ToolContext) {
		if r := e.Run(ctx, tc, engine.Input{Command: "true"}); r.Status != engine.StatusOK {
			b.Fatalf("%s %q", r.Status, r.Output)
		}
	}
	for _, p := range profiles { // worlds, spare layers and caches first
		for range 3 {
			run(p.e, p.tc)
		}
	}
	time.Sleep(settle)
	per := make([][]float64, len(profiles))
	var idle []float64
	for b.Loop() {
		for i, p := range profiles {
			c0 := selfCPU()
			for range block {
				run(p.e, p.tc)
			}
			c1 := selfCPU()
			time.Sleep(settle)
			c2 := selfCPU()
			per[i] = append(per[i], float64((c2-c0).Microseconds())/1000/block)
			idle = append(idle, float64((c2-c1).Microseconds())/1000/settle.Seconds())
		}
	}
	med := func(d []float64) float64 {
		slices.Sort(d)
		return d[len(d)/2]
	}
	u := med(per[0])
	for i, p := range profiles {
		m := med(per[i])
		b.ReportMetric(m, p.name+"-cpu-ms")
		if i > 0 {
			b.ReportMetric(m-u, p.name+"-over-unrestricted-cpu-ms")
		}
	}
	b.ReportMetric(med(idle), "idle-settle-cpu-ms/s")
	b.ReportMetric(0, "ns/op")
}

// shmDir returns a new directory on the tmpfs at /dev/shm, removed at
// the end of the benchmark; it fails the benchmark where there is none.
func shmDir(b *testing.B) string {
	var st unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		b.Fatalf("no tmpfs at /dev/shm: %v", err)
	}
	d, err := os.MkdirTemp("/dev/shm", "engine-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

// selfCPU is this process's user and system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
