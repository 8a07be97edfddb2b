//go:build linux

package layer_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/gitpolicy"
	"github.com/bashvisor/bashvisor/internal/layer"
	"github.com/bashvisor/bashvisor/internal/layer/layertest"
)

// onThread runs f on a locked OS thread that ends afterwards (what f
// does to the thread, such as entering a mount namespace, dies with it).
func onThread(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- f()
	}()
	return <-errc
}

// startTrue runs `bash -c true` in dir the way the engine starts a
// command (own session, output discarded) and waits.
func startTrue(bash, dir string) error {
	cmd := exec.Command(bash, "-c", "true")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd.Run()
}

// BenchmarkEmptyCommand measures, side by side, a command that changes
// nothing: unrestricted; in a private mount namespace entered from a
// throwaway thread (what the sandbox does today); and the same with the
// layer: New, mounting the overlay, Diff of the empty upper layer and
// Remove. Layer minus namespace is the layer's cost per command. The
// premade variants make and premount the layer before the command and
// remove it after, as the engine's pool does: their path-ms is what is
// left on the command's path (Stale, attaching, Diff).
func BenchmarkEmptyCommand(b *testing.B) {
	if layertest.Unprivileged() {
		b.Skip("the thread path needs root; an unprivileged command mounts in its helper process")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		b.Fatal(err)
	}
	w := newWorld(b)
	w.write(b, map[string]string{"a": "a", "d/b": "b"})
	inNamespace := func(mount func() error) error {
		return onThread(func() error {
			if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
				return err
			}
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
				return err
			}
			if err := mount(); err != nil {
				return err
			}
			return startTrue(bash, w.ws)
		})
	}
	b.Run("unrestricted", func(b *testing.B) {
		for b.Loop() {
			if err := startTrue(bash, w.ws); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("namespace", func(b *testing.B) {
		for b.Loop() {
			if err := inNamespace(func() error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, where := range []string{"tmpfs", "disk"} {
		b.Run("namespace+layer-on-"+where, func(b *testing.B) {
			emptyWithLayer(b, w, layerDir(b, w, where), inNamespace, false)
		})
	}
	// What is left on the command's path when the layer is made and
	// premounted ahead of time and removed afterwards (the engine's pool).
	for _, where := range []string{"tmpfs", "disk"} {
		b.Run("namespace+premade-layer-on-"+where, func(b *testing.B) {
			emptyWithLayer(b, w, layerDir(b, w, where), inNamespace, true)
		})
	}
}

// layerDir returns where the layer's upper directories go: a tmpfs
// (/dev/shm; what the engine should use) or the workspace's disk.
func layerDir(tb testing.TB, w *world, where string) string {
	if where == "disk" {
		return w.state
	}
	if where == "disk-topdir" { // as package transact marks its Dir
		d, err := os.MkdirTemp(w.state, "top-")
		if err != nil {
			tb.Fatal(err)
		}
		if out, err := exec.Command("chattr", "+T", d).CombinedOutput(); err != nil {
			tb.Fatalf("chattr +T (a disk that keeps the flag: ext4): %v %s", err, out)
		}
		return d
	}
	var st unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		tb.Fatalf("no tmpfs at /dev/shm: %v", err)
	}
	d, err := os.MkdirTemp("/dev/shm", "layer-bench-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

func emptyWithLayer(b *testing.B, w *world, dir string, inNamespace func(func() error) error, premade bool) {
	var path []time.Duration // what is on the command's path
	for b.Loop() {
		t0 := time.Now()
		l, err := layer.New(layer.Options{Roots: []string{w.ws}, Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		if premade {
			if err := l.Premount(); err != nil {
				b.Fatal(err)
			}
			t0 = time.Now()
			if l.Stale() {
				b.Fatal("stale")
			}
		}
		if err := inNamespace(l.Spec().Mount); err != nil {
			b.Fatal(err)
		}
		s, err := l.Diff()
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Changes) != 0 {
			b.Fatalf("changes: %v", s.Changes)
		}
		s.Close()
		t1 := time.Now()
		if err := l.Remove(); err != nil {
			b.Fatal(err)
		}
		if !premade {
			t1 = time.Now()
		}
		path = append(path, t1.Sub(t0))
	}
	slices.Sort(path)
	b.ReportMetric(float64(path[len(path)/2].Microseconds())/1000, "path-ms")
}

// thousand writes 1,000 files in 10 directories.
func thousand(tb testing.TB, w *world) {
	files := map[string]string{}
	for i := range 1000 {
		files[fmt.Sprintf("src/d%d/f%03d.go", i%10, i)] = fmt.Sprintf("package p // %d\n", i)
	}
	w.write(tb, files)
}

// changed runs script over a new layer (not timed) and returns its set.
func changed(b *testing.B, w *world, dir, script string, want int) *layer.Layer {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	l, err := layer.New(layer.Options{Roots: []string{w.ws}, Dir: dir, UserXattr: layertest.Unprivileged()})
	if err != nil {
		b.Fatal(err)
	}
	if out, err := layertest.Run(b, l.Spec(), w.ws, w.env, script); err != nil {
		b.Fatalf("%v\n%s", err, out)
	}
	s, err := l.Diff()
	if err != nil {
		b.Fatal(err)
	}
	if n := len(layer.Listed(s.Changes)); n != want {
		b.Fatalf("%d changes, want %d", n, want)
	}
	s.Close()
	return l
}

// BenchmarkApply1000 is what the engine does after a command that
// changed 1,000 files: the change set from the upper layer (Diff), the
// git policy, applying it with the replaced files kept for undo, and
// the report line (the command itself is not timed).
func BenchmarkApply1000(b *testing.B) {
	for _, tc := range []struct{ name, script string }{
		{"modified", "for f in src/d*/*.go; do echo '// x' >> $f; done"},
		{"added", "for i in $(seq 1000); do echo $i > src/d$((i%10))/n$i.go; done"},
		{"new tree", "mkdir -p gen && for i in $(seq 1000); do mkdir -p gen/d$((i%10)) && echo $i > gen/d$((i%10))/n$i.go; done"},
	} {
		for _, where := range []string{"tmpfs", "disk"} {
			b.Run(tc.name+"/layer-on-"+where, func(b *testing.B) { apply1000(b, where, tc.name, tc.script) })
		}
	}
}

func apply1000(b *testing.B, where, name, script string) {
	w := newWorld(b)
	thousand(b, w)
	dir := layerDir(b, w, where)
	st, err := layer.NewStore(filepath.Join(w.state, "undo"), layer.StoreLimits{Steps: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Remove()
	for i := 0; i < b.N; i++ {
		l := changed(b, w, dir, script, 1000)
		s, err := l.Diff()
		if err != nil {
			b.Fatal(err)
		}
		refused := gitpolicy.Check(s, l.Roots(), s.Changes)
		res, err := s.Apply(context.Background(), gitpolicy.Paths(refused), st, name)
		if err != nil || len(res.Failed) > 0 || len(refused) > 0 {
			b.Fatal(err, res.Failed, refused)
		}
		if layer.Summary(res.Applied, w.ws, 0) == "" {
			b.Fatal("no summary")
		}
		s.Close()
		b.StopTimer()
		// Back to 1,000 unchanged files for the next round.
		if _, err := st.Undo(context.Background(), 1); err != nil {
			b.Fatal(err)
		}
		if err := l.Remove(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkUndo1000 undoes a command that modified 1,000 files (the
// command and its apply are not timed).
func BenchmarkUndo1000(b *testing.B) {
	w := newWorld(b)
	thousand(b, w)
	st, err := layer.NewStore(filepath.Join(w.state, "undo"), layer.StoreLimits{Steps: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Remove()
	for i := 0; i < b.N; i++ {
		l := changed(b, w, w.state, "for f in src/d*/*.go; do echo '// x' >> $f; done", 1000)
		b.StopTimer()
		s, err := l.Diff()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Apply(context.Background(), nil, st, ""); err != nil {
			b.Fatal(err)
		}
		s.Close()
		_ = l.Remove()
		b.StartTimer()
		undone, err := st.Undo(context.Background(), 1)
		if err != nil || len(undone) != 1000 {
			b.Fatal(err, len(undone))
		}
	}
	if err := os.RemoveAll(w.state); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRaw1000 is the floor of applying 1,000 modified files on
// this file system, for comparison in the same run: link each real file
// into a store directory and rename a new file over it (what Apply does
// per file, without the change set, the policy or the report), then
// the same back (what Undo does).
func BenchmarkRaw1000(b *testing.B) {
	w := newWorld(b)
	thousand(b, w)
	src := filepath.Join(w.state, "new")
	store := filepath.Join(w.state, "store")
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for _, d := range []string{src, store} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		for i := range 1000 {
			if err := os.WriteFile(fmt.Sprintf("%s/%d", src, i), []byte("x"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		for i := range 1000 {
			real := fmt.Sprintf("%s/src/d%d/f%03d.go", w.ws, i%10, i)
			if err := os.Link(real, fmt.Sprintf("%s/%d", store, i)); err != nil {
				b.Fatal(err)
			}
			if err := os.Rename(fmt.Sprintf("%s/%d", src, i), real); err != nil {
				b.Fatal(err)
			}
		}
		for i := range 1000 {
			real := fmt.Sprintf("%s/src/d%d/f%03d.go", w.ws, i%10, i)
			if err := os.Rename(fmt.Sprintf("%s/%d", store, i), real); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkDeepTree is what the engine does after a command that made a
// new tree of a given depth (Diff, the git policy, Apply, the report;
// the command is not timed): 900 levels (refused as deeper than
// MaxDepth: the review's 25.7 s) and MaxDepth levels (applied), beside
// "raw", the same command run unrestricted in the workspace (bash, mkdir
// -p and echo), which the engine's work adds to.
func BenchmarkDeepTree(b *testing.B) {
	for _, depth := range []int{900, layer.MaxDepth} {
		b.Run(fmt.Sprintf("%d/layer", depth), func(b *testing.B) {
			w := newWorld(b)
			for i := 0; i < b.N; i++ {
				l := changed(b, w, w.state, deepScript(depth), 1)
				s, err := l.Diff()
				if err != nil {
					b.Fatal(err)
				}
				refused := gitpolicy.Check(s, l.Roots(), s.Changes)
				res, err := s.Apply(context.Background(), gitpolicy.Paths(refused), nil, "")
				if err != nil || len(res.Failed) > 0 || len(refused) > 0 {
					b.Fatal(err, res.Failed, refused)
				}
				_ = layer.Summary(res.Applied, w.ws, 0)
				s.Close()
				b.StopTimer()
				if err := os.RemoveAll(filepath.Join(w.ws, "d")); err != nil {
					b.Fatal(err)
				}
				if err := l.Remove(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
		b.Run(fmt.Sprintf("%d/raw", depth), func(b *testing.B) {
			w := newWorld(b)
			for i := 0; i < b.N; i++ {
				if out, err := execCommand(w, deepScript(depth)).CombinedOutput(); err != nil {
					b.Fatal(err, string(out))
				}
				b.StopTimer()
				if err := os.RemoveAll(filepath.Join(w.ws, "d")); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkJudge1000 is the engine's judging of a command that modified
// 1,000 files: the change set from the upper layer (Diff) and the git
// policy, without applying it; beside "raw", the same command run
// unrestricted in the workspace (what the judging adds to).
func BenchmarkJudge1000(b *testing.B) {
	const script = "for f in src/d*/*.go; do echo '// x' >> $f; done"
	b.Run("layer", func(b *testing.B) {
		w := newWorld(b)
		thousand(b, w)
		l := changed(b, w, w.state, script, 1000)
		for i := 0; i < b.N; i++ {
			s, err := l.Diff()
			if err != nil {
				b.Fatal(err)
			}
			if refused := gitpolicy.Check(s, l.Roots(), s.Changes); len(s.Changes) != 1000 || len(refused) > 0 {
				b.Fatal(len(s.Changes), refused)
			}
			s.Close()
		}
		b.StopTimer()
		_ = l.Remove()
	})
	b.Run("raw", func(b *testing.B) {
		w := newWorld(b)
		thousand(b, w)
		for i := 0; i < b.N; i++ {
			if out, err := execCommand(w, script).CombinedOutput(); err != nil {
				b.Fatal(err, string(out))
			}
		}
	})
}

// BenchmarkPremountReset measures what a reused layer costs per command
// besides the command: Premount (overlayfs makes its superblock: its
// work directory, volatile marks and checks of the file system) and
// Reset (the overlay unmounted, the marks removed), with Dir on the
// workspace's disk (in the test's temporary directory; and in a
// directory marked chattr +T there, as package transact marks its Dir,
// so that the layer gets a block group of its own) and on a tmpfs, back
// to back and 100 ms apart (as agents' commands come: caches cold). It
// reports the CPU of this process per cycle (the kernel's work is done
// on its threads).
func BenchmarkPremountReset(b *testing.B) {
	if layertest.Unprivileged() {
		b.Skip("Premount needs root; an unprivileged layer is mounted in the sandbox's helper")
	}
	w := newWorld(b)
	w.write(b, map[string]string{"a": "a"})
	for _, where := range []string{"disk", "disk-topdir", "tmpfs"} {
		for _, gap := range []time.Duration{0, 100 * time.Millisecond} {
			b.Run(fmt.Sprintf("%s/gap=%v", where, gap), func(b *testing.B) {
				l, err := layer.New(layer.Options{Roots: []string{w.ws}, Dir: layerDir(b, w, where)})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Remove()
				var cpu time.Duration
				for b.Loop() {
					time.Sleep(gap)
					c0 := processCPU()
					if err := l.Premount(); err != nil {
						b.Fatal(err)
					}
					if err := l.Reset(); err != nil {
						b.Fatal(err)
					}
					cpu += processCPU() - c0
				}
				b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
			})
		}
	}
}

// processCPU is this process's user and system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
