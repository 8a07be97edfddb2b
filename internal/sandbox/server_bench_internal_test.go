//go:build linux

package sandbox

import (
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/testenv"
)

// BenchmarkRootlessWorld is what a rootless world's command server costs
// its world: a rootless world made and closed with its server and
// without, alternating within each round, side by side; it reports each
// one's median (ms). Run it as a user other than root (as root it makes
// rootless worlds too).
func BenchmarkRootlessWorld(b *testing.B) {
	c := Probe()
	testenv.Needf(b, testenv.Namespaces, c.Namespaces, "no private namespaces: %s", c)
	defer useServer.Store(true)
	dir := b.TempDir()
	res := map[bool][]time.Duration{}
	i := 0
	for b.Loop() {
		for k := range 2 {
			with := (i+k)%2 == 0
			useServer.Store(with)
			t0 := time.Now()
			w, err := newWorld(WorldOptions{Dir: filepath.Join(dir, strconv.Itoa(i)+"-"+strconv.Itoa(k)), Helper: selfPath()}, true)
			if err != nil {
				b.Fatal(err)
			}
			if (w.w.server != nil) != with {
				b.Fatalf("server %v, want %v", w.w.server != nil, with)
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			res[with] = append(res[with], time.Since(t0))
		}
		i++
	}
	for with, v := range res {
		slices.Sort(v)
		name := "without-server-ms"
		if with {
			name = "with-server-ms"
		}
		b.ReportMetric(float64(v[len(v)/2])/1e6, name)
	}
}

// BenchmarkRootlessWorldFirstCommands is what starting a rootless world's
// server on its second command (serveSecond) costs a world's first
// commands against starting it with the world (serveNow): per round, a
// world of each made, three `true` run in it by StartHelper and the world
// closed, alternating; it reports the medians (ms) of the world's making,
// of each command and of the close.
func BenchmarkRootlessWorldFirstCommands(b *testing.B) {
	c := Probe()
	testenv.Needf(b, testenv.Namespaces, c.Namespaces, "no private namespaces: %s", c)
	testenv.NeedsTool(b, "bash")
	dir := b.TempDir()
	names := map[serverStart]string{serveNow: "now", serveSecond: "second"}
	res := map[string][]time.Duration{}
	i := 0
	for b.Loop() {
		for k := range 2 {
			at := []serverStart{serveNow, serveSecond}[(i+k)%2]
			t0 := time.Now()
			w, err := makeWorld(WorldOptions{Dir: filepath.Join(dir, strconv.Itoa(i)+"-"+strconv.Itoa(k)), Helper: selfPath()}, true, at)
			if err != nil {
				b.Fatal(err)
			}
			res[names[at]+"-make-ms"] = append(res[names[at]+"-make-ms"], time.Since(t0))
			for n := range 3 {
				t1 := time.Now()
				if out, err := runInWorldDir(nil, w, dir, "true"); err != nil { // nil: it reports to no test
					b.Fatal(out, err)
				}
				key := names[at] + "-cmd" + strconv.Itoa(n+1) + "-ms"
				res[key] = append(res[key], time.Since(t1))
			}
			t2 := time.Now()
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			res[names[at]+"-close-ms"] = append(res[names[at]+"-close-ms"], time.Since(t2))
		}
		i++
	}
	for name, v := range res {
		slices.Sort(v)
		b.ReportMetric(float64(v[len(v)/2])/1e6, name)
	}
}
