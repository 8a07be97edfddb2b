//go:build linux

package sandbox

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// cpuNow is this process's CPU time (user and system, every thread).
func cpuNow(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkOneCommandWorld is what a one-command engine (`bashvisor run
// -sandbox …`) pays for network namespaces and its world, as root: the
// probe's namespace (made, then left idle in the pool), then the world
// made and closed. "probe's" is what the engine does (the world takes
// the idle namespace); "own" is what it did before a895e69 (the world
// unshares one more). Side by side in one run: -count alternates them.
// cpu-ns/op is this process's CPU; the kernel's teardown of a network
// namespace runs in its own workers and is not in it.
func BenchmarkOneCommandWorld(b *testing.B) {
	caps := Probe()
	if !caps.Namespaces || caps.Rootless {
		b.Skip("the world's namespaces come from the pool only as root")
	}
	for _, own := range []bool{false, true} {
		name := "probe's"
		if own {
			name = "own"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			cpu := cpuNow(b)
			for i := 0; i < b.N; i++ {
				probed, err := getNetns()
				if err != nil {
					b.Fatal(err)
				}
				putNetns(probed)
				if own { // out of the pool again: the world makes its own
					probed, _ = getNetns()
				}
				w, err := NewWorld(WorldOptions{Dir: filepath.Join(dir, strconv.Itoa(i))})
				if err != nil {
					b.Fatal(err)
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
				if own {
					probed.Close()
				}
			}
			b.ReportMetric(float64(cpuNow(b)-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
