//go:build linux

// Command vmtest runs bashvisor's cgroup, limits, accounting, kill and
// sandbox tests on a cgroup-v2-only Linux: a VM under qemu whose kernel is
// booted with cgroup_no_v1=all, so memory, pids and cpu exist only on the
// cgroup v2 (the host this project is developed on binds them to v1).
//
// On the host it builds the test binaries (go test -c -race), builds
// itself statically as the guest's init, packs that and the kernel
// modules the guest needs (9p, overlayfs, virtio) into an initramfs, and
// boots the kernel with qemu under software emulation (TCG, one thread per
// virtual CPU): the development machines have a /dev/kvm, but nested KVM
// there hangs the guest or fails on MSRs, so -accel kvm:tcg is opt-in. The guest mounts the host's root read-only over 9p under a
// tmpfs overlay (so bash, git and the binaries are there), mounts cgroup2
// as systemd does (nsdelegate, memory_recursiveprot), and gives the tests
// a delegated subtree: a cgroup with cpu, memory and pids enabled in its
// subtree_control and no process in it, the engine pointed at it through
// BASHVISOR_TEST_CGROUP_PARENT (which the tests pass to
// config.Cgroups.Parent and proc.ProbeCgroups, through internal/testenv), each test binary
// running in a leaf below it. After each binary the guest checks that
// nothing is left in the subtree. Results come back through a second,
// writable 9p share; the console shows progress, failures and skips.
//
// It exits 0 only when every test binary passed and left nothing behind;
// without qemu or a kernel it exits 3 (make vm-test turns that into a skip
// unless REQUIRE_CGROUP_V2_VM=1). The VM is bounded by -timeout; qemu is
// ended by its pid.
//
// Usage:
//
//	go run ./internal/vmtest -kernel DIR [-out DIR] [-timeout 12m] [-accel tcg] [-only NAMES] [-demo ARGS]
//
// DIR is an unpacked Debian linux-image package (boot/vmlinuz-* and
// lib/modules/*), as `make vm-deps` leaves it.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// plan is what the guest runs, written to the out share as plan.json.
type plan struct {
	Parent string   // the delegated cgroup, inside the VM
	Env    []string // every run's environment
	Runs   []run
}

type run struct {
	Name    string
	Dir     string // working directory (the package's source directory)
	Path    string // the binary
	Args    []string
	Timeout time.Duration
}

// result is one run's outcome, written by the guest to results.json.
type result struct {
	Name                    string
	Exit                    int
	Passed, Failed, Skipped int
	Seconds                 float64
	Leftovers               []string // cgroups left in the delegated subtree
	Err                     string   // the run could not start
}

// delegated is the cgroup the guest delegates to the tests.
const delegated = "/sys/fs/cgroup/bashvisor.service"

// suite lists the runs of test binaries: the tests of each package that
// exercise cgroups, limits, accounting, killing and the sandbox (the whole
// package where it is small). Software emulation runs a process start
// ~100x slower than the host, so the sandbox's filesystem and tool tests
// (go build inside the sandbox) and the tests whose commands must start
// within a few hundred milliseconds stay on the host.
var suite = []struct {
	pkg, name, run string
}{
	{"./internal/proc", "proc", ""},
	{"./internal/actors", "actors", ""},
	// The sandbox as the engine starts it (StartDirect, placed into the
	// cgroup v2 after the fork) and through its helper (clone3 into it).
	{"./internal/sandbox", "sandbox-direct", "^TestDirect$/^(Limits|ForkBombContained|CleanupKillsEscapees|ResourceLimitsOnlyOwn|NoNamespacesOrCgroupEscape|SignalsInsideWork|ScratchQuota)$"},
	{"./internal/sandbox", "sandbox-helper", "^(TestLimits|TestForkBombContained|TestCleanupKillsEscapees|TestNoNamespacesOrCgroupEscape|TestRemoveStale|TestStartDirectNeverConfinesTheMainThread)$"},
	// The engine's cgroup paths: escapees killed in every ending, kept
	// leftovers released, limits, OOM kills, accounting, recycling,
	// restricted jobs, and (ExampleEngine_Kill) an engine left at its
	// default parent, its own populated cgroup.
	{"./engine", "engine", "^(" + strings.Join([]string{
		"TestCgroupEscapees", "TestCgroupKeepLeftoversReleases", "TestKeepLeftovers", "TestKeptLeftoverHoldingPipeNote",
		"TestJobsLeftRunningStayIntact", "TestShutdownWithJobsRunning", "TestCancellation",
		"TestBackgroundKillAndLifetime", "TestBackgroundJobLivesWithItsGroup", "TestBackgroundJobReport",
		"TestMemoryBombStoppedAtLimit", "TestOOMKillThatTheShellSurvives", "TestCPUAccountingMatchesTheProcess",
		"TestPeakMemoryMatchesAllocation", "TestRecycledCgroupStartsFresh", "TestCPUTimeLimitIsJobWide",
		"TestRestrictedLimits", "TestRestrictedFilesystem",
		"TestFaultKilledFromOutside", "TestFaultZombieParents",
		"TestMetrics", "ExampleEngine_Kill",
	}, "|") + ")$"},
}

// rounds is how often a -demo run is repeated.
var rounds = 1

// exitUnavailable is the exit code for a host without qemu or a kernel.
const exitUnavailable = 3

func main() {
	if os.Getpid() == 1 {
		guestMain()
	}
	kernel := flag.String("kernel", "", "an unpacked Debian linux-image package (boot/vmlinuz-*, lib/modules/*)")
	out := flag.String("out", "", "work directory for binaries, logs and results (default: a new temporary directory)")
	timeout := flag.Duration("timeout", 15*time.Minute, "bound on the whole VM run")
	accel := flag.String("accel", "tcg,thread=multi", "qemu accelerators to try in order, separated by ':' (e.g. kvm:tcg)")
	mem := flag.String("mem", "3G", "guest memory")
	demo := flag.String("demo", "", "instead of the tests, run cmd/demo with these arguments (split at spaces) in the VM, e.g. `bench -only serial -cgroup-parent "+delegated+"`")
	only := flag.String("only", "", "run only these of the suite's runs (comma-separated names)")
	script := flag.String("exec", "", "instead of the tests, run this executable (a script) in the VM")
	flag.IntVar(&rounds, "rounds", 1, "with -demo: run it this many times, one after the other")
	flag.Parse()
	d := strings.Fields(*demo)
	if *script != "" {
		d = []string{"exec", *script}
	}
	code, err := host(*kernel, *out, *timeout, *accel, *mem, d, *only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vmtest:", err)
	}
	os.Exit(code)
}

func host(kernel, out string, timeout time.Duration, accel, mem string, demo []string, only string) (int, error) {
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return exitUnavailable, fmt.Errorf("no qemu (apt-get install qemu-system-x86; make vm-deps): %w", err)
	}
	vmlinuz, _ := filepath.Glob(filepath.Join(kernel, "boot", "vmlinuz-*"))
	modDirs, _ := filepath.Glob(filepath.Join(kernel, "lib", "modules", "*"))
	if kernel == "" || len(vmlinuz) != 1 || len(modDirs) != 1 {
		return exitUnavailable, fmt.Errorf("no kernel in -kernel %q (make vm-deps unpacks Debian's linux-image there)", kernel)
	}
	if out == "" {
		if out, err = os.MkdirTemp("", "vmtest-"); err != nil {
			return 1, err
		}
	}
	if out, err = filepath.Abs(out); err != nil {
		return 1, err
	}
	if err := os.MkdirAll(filepath.Join(out, "bin"), 0o755); err != nil {
		return 1, err
	}
	for _, f := range []string{"results.json", "plan.json"} {
		_ = os.Remove(filepath.Join(out, f))
	}
	repo, err := os.Getwd()
	if err != nil {
		return 1, err
	}
	p, err := buildPlan(repo, out, demo, only)
	if err != nil {
		return 1, err
	}
	data, _ := json.MarshalIndent(p, "", "  ")
	if err := os.WriteFile(filepath.Join(out, "plan.json"), data, 0o644); err != nil {
		return 1, err
	}
	initBin := filepath.Join(out, "bin", "init")
	if err := goCmd(repo, []string{"CGO_ENABLED=0"}, "build", "-o", initBin, "./internal/vmtest"); err != nil {
		return 1, err
	}
	mods, err := resolveModules(modDirs[0], guestModules)
	if err != nil {
		return 1, err
	}
	initrd := filepath.Join(out, "initramfs.cpio")
	if err := writeInitramfs(initrd, initBin, mods); err != nil {
		return 1, err
	}
	fmt.Printf("vmtest: initramfs %s: init and %d modules\n", initrd, len(mods))
	started := time.Now()
	if err := boot(qemu, vmlinuz[0], initrd, out, accel, mem, timeout); err != nil {
		return 1, err
	}
	fmt.Printf("vmtest: VM ran %.1fs\n", time.Since(started).Seconds())
	return report(out, p)
}

// buildPlan builds the binaries the guest runs.
func buildPlan(repo, out string, demo []string, only string) (plan, error) {
	p := plan{Parent: delegated, Env: []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/go/bin",
		"HOME=/root", "LANG=C.UTF-8", "TMPDIR=/tmp",
		"BASHVISOR_TEST_CGROUP_PARENT=" + delegated,
		"REQUIRE_CGROUPS=1", "REQUIRE_LANDLOCK=1", "REQUIRE_NAMESPACES=1", "REQUIRE_CGROUP_V2=1",
		"GORACE=halt_on_error=1",
	}}
	if len(demo) == 2 && demo[0] == "exec" {
		p.Runs = append(p.Runs, run{Name: "exec", Dir: repo, Path: demo[1], Timeout: 10 * time.Minute})
		return p, nil
	}
	if len(demo) > 0 {
		bin := filepath.Join(out, "bin", "demo")
		if err := goCmd(repo, nil, "build", "-o", bin, "./cmd/demo"); err != nil {
			return p, err
		}
		for i := range max(rounds, 1) {
			p.Runs = append(p.Runs, run{Name: fmt.Sprintf("demo-%d", i+1), Dir: repo, Path: bin, Args: demo, Timeout: 10 * time.Minute})
		}
		return p, nil
	}
	built := map[string]bool{}
	for _, s := range suite {
		if only != "" && !slices.Contains(strings.Split(only, ","), s.name) {
			continue
		}
		bin := filepath.Join(out, "bin", filepath.Base(s.pkg)+".test")
		if !built[bin] {
			if err := goCmd(repo, nil, "test", "-c", "-race", "-o", bin, s.pkg); err != nil {
				return p, err
			}
			built[bin] = true
		}
		args := []string{"-test.v", "-test.count=1", "-test.timeout=6m"}
		if s.run != "" {
			args = append(args, "-test.run="+s.run)
		}
		p.Runs = append(p.Runs, run{Name: s.name, Dir: filepath.Join(repo, s.pkg), Path: bin, Args: args, Timeout: 7 * time.Minute})
	}
	return p, nil
}

// goCmd runs the go command in dir, printing it.
func goCmd(dir string, env []string, args ...string) error {
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = "/usr/local/go/bin/go"
	}
	fmt.Printf("vmtest: %s go %s\n", strings.Join(env, " "), strings.Join(args, " "))
	cmd := exec.Command(gobin, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// boot runs the VM to its end, printing its console, and ends qemu (by
// its pid) when timeout passes first.
func boot(qemu, kernel, initrd, out, accel, mem string, timeout time.Duration) error {
	cmdline := strings.Join([]string{
		"console=ttyS0", "loglevel=3", "panic=-1", "cgroup_no_v1=all", "rdinit=/init",
		"mitigations=off", "8250.nr_uarts=1", "vmtest.out=" + out,
	}, " ")
	var accels []string
	for a := range strings.SplitSeq(accel, ":") {
		accels = append(accels, "-accel", a)
	}
	args := append(accels,
		"-M", "pc", "-cpu", "max", "-smp", "2", "-m", mem,
		"-nodefaults", "-no-reboot", "-display", "none", "-serial", "stdio",
		"-kernel", kernel, "-initrd", initrd, "-append", cmdline,
		"-device", "virtio-rng-pci",
		"-virtfs", "local,path=/,mount_tag="+tagRoot+",security_model=none,readonly=on,multidevs=remap",
		"-virtfs", "local,path="+out+",mount_tag="+tagOut+",security_model=none,multidevs=remap",
	)
	fmt.Printf("vmtest: %s %s\n", qemu, strings.Join(args, " "))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.Command(qemu, args...)
	cmd.Stdin = nil
	cmd.Stderr = os.Stderr
	console, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	fmt.Printf("vmtest: qemu pid %d, bounded by %v\n", cmd.Process.Pid, timeout)
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(console)
		for sc.Scan() {
			fmt.Printf("vm| %s\n", strings.TrimRight(sc.Text(), "\r"))
		}
	}()
	waited := make(chan error, 1)
	go func() { <-lines; waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			return fmt.Errorf("qemu: %w", err)
		}
		return nil
	case <-ctx.Done():
		fmt.Printf("vmtest: the VM ran past %v: killing qemu (pid %d)\n", timeout, cmd.Process.Pid)
		_ = cmd.Process.Kill()
		<-waited
		return fmt.Errorf("the VM did not finish within %v", timeout)
	}
}

// report reads the guest's results and prints the verdict.
func report(out string, p plan) (int, error) {
	data, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		return 1, fmt.Errorf("no results from the VM (its console above says why): %w", err)
	}
	var results []result
	if err := json.Unmarshal(data, &results); err != nil {
		return 1, err
	}
	var passed, failed, skipped int
	var bad []string
	for _, r := range results {
		passed, failed, skipped = passed+r.Passed, failed+r.Failed, skipped+r.Skipped
		switch {
		case r.Err != "":
			bad = append(bad, fmt.Sprintf("%s: %s", r.Name, r.Err))
		case r.Exit != 0:
			bad = append(bad, fmt.Sprintf("%s: exit %d (log: %s)", r.Name, r.Exit, filepath.Join(out, r.Name+".log")))
		case len(r.Leftovers) > 0:
			bad = append(bad, fmt.Sprintf("%s: left cgroups %v in %s", r.Name, r.Leftovers, p.Parent))
		}
	}
	if len(results) != len(p.Runs) {
		bad = append(bad, fmt.Sprintf("%d of %d runs reported", len(results), len(p.Runs)))
	}
	if len(bad) > 0 {
		failed = max(failed, 1)
	}
	for _, b := range bad {
		fmt.Println("vmtest: FAIL", b)
	}
	fmt.Printf("vm-test (cgroup v2 only): %d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if len(bad) > 0 {
		return 1, errors.New("the cgroup v2 VM run failed")
	}
	return 0, nil
}
