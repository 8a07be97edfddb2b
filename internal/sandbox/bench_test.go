//go:build linux

package sandbox_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/layer"
	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/sandbox"
)

// startWait runs path/args like the engine does (own session, stdin
// /dev/null, one pipe for stdout+stderr) and waits.
func startWait(tb testing.TB, path string, args, env []string) {
	cmd := exec.Command(path, args[1:]...)
	cmd.Args[0] = args[0]
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Run(); err != nil {
		tb.Fatal(err)
	}
}

func unrestricted(tb testing.TB, bash string, env []string) {
	startWait(tb, bash, []string{bash, "-c", "true"}, env)
}

// restricted includes everything the engine pays per command: Prepare
// (scratch dir, pids limit), the helper re-exec, namespaces, rlimits,
// capabilities, Landlock, seccomp, the exec of bash, and Cleanup (but not
// the command's cgroup, which the engine creates for every command).
func restricted(tb testing.TB, bash string, env []string) {
	restrictedMode(tb, sandbox.Options{Bash: bash, Command: "true"}, env, false)
}

func restrictedMode(tb testing.TB, opts sandbox.Options, env []string, direct bool) {
	sc, err := sandbox.Prepare(opts)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command("/nonexistent")
	cmd.Env = append(env[:len(env):len(env)], sc.Env...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	cmd.SysProcAttr = sysProcAttr(opts.Cgroup)
	if direct {
		err = sc.StartDirect(cmd)
	} else {
		err = sc.StartHelper(cmd)
	}
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		tb.Fatal(err)
	}
	if err := sc.Cleanup(endCgroup(opts.Cgroup)); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkUnrestricted is the baseline: plain `bash -c true`.
func BenchmarkUnrestricted(b *testing.B) {
	bash, env := bashPath(b), os.Environ()
	for b.Loop() {
		unrestricted(b, bash, env)
	}
}

// BenchmarkRestricted is `bash -c true` in restricted mode, re-executing
// the (test) binary as the helper.
func BenchmarkRestricted(b *testing.B) {
	requireSandbox(b)
	bash, env := bashPath(b), os.Environ()
	for b.Loop() {
		restricted(b, bash, env)
	}
}

// BenchmarkRestrictedDirect is BenchmarkRestricted with Command.StartDirect.
func BenchmarkRestrictedDirect(b *testing.B) {
	requireSandbox(b)
	bash, env := bashPath(b), os.Environ()
	for b.Loop() {
		restrictedMode(b, sandbox.Options{Bash: bash, Command: "true"}, env, true)
	}
}

// BenchmarkPrepareCleanup is the engine-side part alone.
func BenchmarkPrepareCleanup(b *testing.B) {
	requireSandbox(b)
	bash := bashPath(b)
	for b.Loop() {
		sc, err := sandbox.Prepare(sandbox.Options{Bash: bash, Command: "true"})
		if err != nil {
			b.Fatal(err)
		}
		if err := sc.Cleanup(true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOverhead alternates unrestricted and restricted runs side by
// side (so load from elsewhere hits both alike) and reports the medians
// and their difference, per helper: the re-executed test binary (cgo,
// dynamically linked), a CGO_ENABLED=0 build of ./cmd/bashvisor-sandbox,
// and StartDirect (no helper), each with the scratch dir under os.TempDir()
// and under /dev/shm (tmpfs). Note: with StartDirect the confinement work
// happens in this process, so overhead-cpu-ms (children only) understates
// it; overhead-ms (wall) is the figure to compare.
func BenchmarkOverhead(b *testing.B) {
	requireSandbox(b)
	bash, env := bashPath(b), os.Environ()
	static := filepath.Join(b.TempDir(), "bashvisor-sandbox")
	build := exec.Command("go", "build", "-o", static, "../../cmd/bashvisor-sandbox")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("cannot build the helper: %v\n%s", err, out)
	}
	type variant struct {
		name, path, scratch string
		procs               int // -1: no cgroup
		direct              bool
		profile             func(*sandbox.Options)
	}
	// The profiles: a cache directory (every mount read-only but it), a
	// workspace (the same plus the protected git paths of a repository),
	// network (a proxy listener in the namespace, not served).
	cache, ws := b.TempDir(), b.TempDir()
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		b.Fatalf("git init: %v\n%s", err, out)
	}
	roots, err := sandbox.WorkspaceRoots(ws)
	if err != nil {
		b.Fatal(err)
	}
	withCache := func(o *sandbox.Options) { o.CacheDir = cache }
	withWorkspace := func(o *sandbox.Options) { o.CacheDir, o.Roots = cache, roots }
	withNetwork := func(o *sandbox.Options) { o.CacheDir, o.Network = cache, true }
	// A conversation's world, as the engine makes it: the engine's state
	// directory hidden but the conversation's own output directory.
	state := b.TempDir()
	own := filepath.Join(state, "conversation-a")
	if err := os.MkdirAll(own, 0o700); err != nil {
		b.Fatal(err)
	}
	w, err := sandbox.NewWorld(sandbox.WorldOptions{Dir: filepath.Join(state, "cache", "a"), Hide: []string{state}, Show: []string{own}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { w.Close() })
	withWorld := func(o *sandbox.Options) { o.World = w }
	withWorldWorkspace := func(o *sandbox.Options) { o.World, o.Roots = w, roots }
	variants := []variant{
		{"self", "", "", 0, false, nil},
		{"self/no-cgroup", "", "", -1, false, nil},
		{"static-helper", static, "", 0, false, nil},
		{"direct", "", "", 0, true, nil},
		{"direct/cache-dir", "", "", 0, true, withCache},
		{"direct/workspace", "", "", 0, true, withWorkspace},
		{"direct/network", "", "", 0, true, withNetwork},
		{"direct/world", "", "", 0, true, withWorld},
		{"direct/world/workspace", "", "", 0, true, withWorldWorkspace},
		{"self/world", "", "", 0, false, withWorld},
	}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		variants = append(variants,
			variant{"self/shm-scratch", "", "/dev/shm", 0, false, nil},
			variant{"static-helper/shm-scratch", static, "/dev/shm", 0, false, nil},
			variant{"static-helper/shm-scratch/no-cgroup", static, "/dev/shm", -1, false, nil},
			variant{"direct/shm-scratch", "", "/dev/shm", 0, true, nil},
			variant{"direct/shm-scratch/no-cgroup", "", "/dev/shm", -1, true, nil})
	}
	// BASHVISOR_BENCH_HELPER=/path/to/demo measures a real engine binary
	// (whose main calls sandbox.Main) as the helper.
	if p := os.Getenv("BASHVISOR_BENCH_HELPER"); p != "" {
		variants = append(variants, variant{"env-helper", p, "", 0, false, nil}, variant{"env-helper/shm-scratch", p, "/dev/shm", 0, false, nil})
	}
	for _, h := range variants {
		b.Run(h.name, func(b *testing.B) {
			var plain, sbx []time.Duration
			var cpuPlain, cpuSbx time.Duration // children's user+sys time: insensitive to load elsewhere
			for b.Loop() {
				c0 := childCPU()
				t0 := time.Now()
				unrestricted(b, bash, env)
				t1 := time.Now()
				c1 := childCPU()
				opts := sandbox.Options{Bash: bash, Command: "true", Helper: h.path, ScratchRoot: h.scratch}
				if h.profile != nil {
					h.profile(&opts)
				}
				if h.procs >= 0 && testCgroups != nil {
					cg, err := testCgroups.New(fmt.Sprintf("b%d", cgroupSeq.Add(1)))
					if err != nil {
						b.Fatal(err)
					}
					opts.Cgroup = cg
				}
				restrictedMode(b, opts, env, h.direct)
				plain, sbx = append(plain, t1.Sub(t0)), append(sbx, time.Since(t1))
				cpuPlain += c1 - c0
				cpuSbx += childCPU() - c1
			}
			mp, ms := median(plain), median(sbx)
			b.ReportMetric(float64(mp.Microseconds())/1000, "unrestricted-ms")
			b.ReportMetric(float64(ms.Microseconds())/1000, "restricted-ms")
			b.ReportMetric(float64((ms-mp).Microseconds())/1000, "overhead-ms")
			n := float64(len(plain))
			b.ReportMetric(float64((cpuSbx-cpuPlain).Microseconds())/1000/n, "overhead-cpu-ms")
		})
	}
}

func childCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}

// BenchmarkLayerOverhead is the empty command (`true`) in the
// workspace-write profile of a repository, side by side: plain bash, the
// profile without a layer (Protected and Pinned bind mounts), and with a
// copy-on-write layer whose Dir is on a tmpfs (/dev/shm) or on the disk
// (the test's temp dir, the workspace's file system). With a layer an
// iteration pays everything the engine pays per command: layer.New, the
// command (its overlays made and attached in its mount namespace), Diff
// and Remove. It reports the medians (unrestricted-ms, workspace-ms,
// layer-ms), the layer's delta over the profile without it
// (layer-delta-ms) and their ratio, and the layer's own steps outside the
// command (new-ms, diff-remove-ms).
func BenchmarkLayerOverhead(b *testing.B) {
	requireSandbox(b)
	if !sandbox.Probe().Namespaces {
		b.Skip("no private namespaces")
	}
	bash, env := bashPath(b), os.Environ()
	ws, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		b.Fatalf("git init: %v\n%s", err, out)
	}
	roots, err := sandbox.WorkspaceRoots(ws)
	if err != nil {
		b.Fatal(err)
	}
	disk := b.TempDir()
	shm, err := os.MkdirTemp("/dev/shm", "bashvisor-bench-")
	if err != nil {
		b.Skipf("no tmpfs at /dev/shm: %v", err)
	}
	b.Cleanup(func() { os.RemoveAll(shm) })
	cgroup := func() *proc.Cgroup {
		if testCgroups == nil {
			return nil
		}
		cg, err := testCgroups.New(fmt.Sprintf("b%d", cgroupSeq.Add(1)))
		if err != nil {
			b.Fatal(err)
		}
		return cg
	}
	for _, v := range []struct {
		name, dir string
		direct    bool
	}{
		{"direct/tmpfs", shm, true}, {"direct/disk", disk, true},
		{"helper/tmpfs", shm, false}, {"helper/disk", disk, false},
	} {
		b.Run(v.name, func(b *testing.B) {
			var plain, noLayer, withLayer, newT, diffT []time.Duration
			for b.Loop() {
				t0 := time.Now()
				unrestricted(b, bash, env)
				t1 := time.Now()
				restrictedMode(b, sandbox.Options{Bash: bash, Command: "true", Roots: roots, Cgroup: cgroup()}, env, v.direct)
				t2 := time.Now()
				l, err := layer.New(layer.Options{Roots: roots.Writable, Dir: v.dir, UserXattr: sandbox.Probe().Rootless})
				if err != nil {
					b.Fatal(err)
				}
				spec := l.Spec()
				t3 := time.Now()
				restrictedMode(b, sandbox.Options{Bash: bash, Command: "true", Roots: roots, Layer: &spec, Cgroup: cgroup()}, env, v.direct)
				t4 := time.Now()
				s, err := l.Diff()
				if err != nil {
					b.Fatal(err)
				}
				if len(s.Changes) != 0 {
					b.Fatalf("true changed %v", s.Changes)
				}
				s.Close()
				if err := l.Remove(); err != nil {
					b.Fatal(err)
				}
				t5 := time.Now()
				plain, noLayer, withLayer = append(plain, t1.Sub(t0)), append(noLayer, t2.Sub(t1)), append(withLayer, t5.Sub(t2))
				newT, diffT = append(newT, t3.Sub(t2)), append(diffT, t5.Sub(t4))
			}
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			mp, mw, ml := median(plain), median(noLayer), median(withLayer)
			b.ReportMetric(ms(mp), "unrestricted-ms")
			b.ReportMetric(ms(mw), "workspace-ms")
			b.ReportMetric(ms(ml), "layer-ms")
			b.ReportMetric(ms(ml-mw), "layer-delta-ms")
			b.ReportMetric(float64(ml)/float64(mw), "layer/workspace")
			b.ReportMetric(ms(median(newT)), "new-ms")
			b.ReportMetric(ms(median(diffT)), "diff-remove-ms")
		})
	}
}

// BenchmarkHeldLayer is the empty command (`true`) in the
// workspace-write profile of a directory, in a world, over a new layer
// whose overlays are held (layer.Layer.Hold: the process that mounts
// them hands them to this one, over a socket from a rootless helper)
// and, alternated with it, over one that is not: the cost of making
// every command's layer joinable. It reports the medians (plain-ms,
// held-ms), the difference (held-delta-ms) and the ratio; layer.New
// and Remove are outside the timed part.
func BenchmarkHeldLayer(b *testing.B) {
	requireSandbox(b)
	if !sandbox.Probe().Namespaces {
		b.Skip("no private namespaces")
	}
	bash, env := bashPath(b), os.Environ()
	base, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	ws, state := filepath.Join(base, "ws"), filepath.Join(base, "state")
	for _, d := range []string{ws, state} {
		if err := os.Mkdir(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	w, err := sandbox.NewWorld(sandbox.WorldOptions{Dir: filepath.Join(base, "world"), Hide: []string{state}})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	roots := sandbox.Roots{Writable: []string{ws}}
	run := func(hold bool) time.Duration {
		l, err := layer.New(layer.Options{Roots: roots.Writable, Dir: state, UserXattr: sandbox.Probe().Rootless})
		if err != nil {
			b.Fatal(err)
		}
		if hold {
			l.Hold()
		}
		spec := l.Spec()
		t0 := time.Now()
		restrictedMode(b, sandbox.Options{Bash: bash, Command: "true", Roots: roots, Layer: &spec, World: w, Dir: ws}, env, false)
		d := time.Since(t0)
		if _, err := l.Share(); hold == errors.Is(err, layer.ErrNotShared) {
			b.Fatalf("held %v: Share: %v", hold, err)
		}
		if err := l.Remove(); err != nil {
			b.Fatal(err)
		}
		return d
	}
	var plain, held []time.Duration
	for b.Loop() {
		plain, held = append(plain, run(false)), append(held, run(true))
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	mp, mh := median(plain), median(held)
	b.ReportMetric(ms(mp), "plain-ms")
	b.ReportMetric(ms(mh), "held-ms")
	b.ReportMetric(ms(mh-mp), "held-delta-ms")
	b.ReportMetric(float64(mh)/float64(mp), "held/plain")
}
