//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The guest: this program as the VM's pid 1, from the initramfs.

// Mount tags of the two 9p shares (see the qemu command line in main.go).
const (
	tagRoot = "hostroot"
	tagOut  = "out"
)

// guestMain sets up the guest and runs the plan; it never returns (it
// powers the VM off, which ends qemu).
func guestMain() {
	say("guest up, kernel %s", kernelRelease())
	if err := guest(); err != nil {
		say("FATAL: %v", err)
	}
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART) // -no-reboot: qemu exits
	select {}
}

// say prints a line to the console (the serial port the host reads).
func say(format string, args ...any) {
	fmt.Fprintf(os.Stdout, "vmtest: "+format+"\n", args...)
}

func kernelRelease() string {
	var u unix.Utsname
	_ = unix.Uname(&u)
	return unix.ByteSliceToString(u.Release[:])
}

func mount(src, target, fstype string, flags uintptr, data string) error {
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(src, target, fstype, flags, data); err != nil {
		return fmt.Errorf("mount %s on %s (%s, %q): %w", src, target, fstype, data, err)
	}
	return nil
}

func guest() error {
	for _, m := range []struct{ src, target, fstype string }{
		{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"devtmpfs", "/dev", "devtmpfs"},
	} {
		if err := mount(m.src, m.target, m.fstype, 0, ""); err != nil {
			return err
		}
	}
	if err := loadModules(); err != nil {
		return err
	}
	outDir, err := switchRoot()
	if err != nil {
		return err
	}
	if err := loopbackUp(); err != nil {
		return err
	}
	_ = unix.Sethostname([]byte("bashvisor-v2"))
	data, err := os.ReadFile(filepath.Join(outDir, "plan.json"))
	if err != nil {
		return err
	}
	var p plan
	if err := json.Unmarshal(data, &p); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if err := delegate(p.Parent); err != nil {
		return err
	}
	var results []result
	for _, r := range p.Runs {
		if err := reveal(r.Dir); err != nil {
			results = append(results, result{Name: r.Name, Err: err.Error(), Exit: -1})
			say("%s: %v", r.Name, err)
			continue
		}
		res := runOne(p, r, outDir)
		results = append(results, res)
	}
	data, _ = json.MarshalIndent(results, "", "  ")
	if err := os.WriteFile(filepath.Join(outDir, "results.json"), data, 0o644); err != nil {
		return err
	}
	say("done")
	return nil
}

// loadModules loads the initramfs's modules in the order listed.
func loadModules() error {
	order, err := os.ReadFile("/modules/order")
	if err != nil {
		return err
	}
	for name := range strings.FieldsSeq(string(order)) {
		f, err := os.Open("/modules/" + name)
		if err != nil {
			return err
		}
		err = unix.FinitModule(int(f.Fd()), "", 0)
		f.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("load module %s: %w", name, err)
		}
	}
	return nil
}

// switchRoot mounts the host's root read-only under a tmpfs overlay,
// makes it the root and mounts the writable out share at the path it has
// on the host. It returns that path.
func switchRoot() (string, error) {
	const opts = "trans=virtio,version=9p2000.L,msize=512000"
	if err := mount(tagRoot, "/host", "9p", unix.MS_RDONLY, opts+",cache=loose"); err != nil {
		return "", err
	}
	if err := mount("tmpfs", "/rw", "tmpfs", 0, "mode=755"); err != nil {
		return "", err
	}
	for _, d := range []string{"/rw/upper", "/rw/work"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return "", err
		}
	}
	if err := mount("overlay", "/newroot", "overlay", 0, "lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work"); err != nil {
		return "", err
	}
	outDir, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return "", err
	}
	out := ""
	for f := range strings.FieldsSeq(string(outDir)) {
		if v, ok := strings.CutPrefix(f, "vmtest.out="); ok {
			out = v
		}
	}
	if out == "" {
		return "", errors.New("no vmtest.out= on the kernel command line")
	}
	if err := unix.Mount("/dev", "/newroot/dev", "", unix.MS_MOVE, ""); err != nil {
		return "", fmt.Errorf("move /dev: %w", err)
	}
	_ = unix.Unmount("/proc", unix.MNT_DETACH)
	_ = unix.Unmount("/sys", unix.MNT_DETACH)
	if err := os.Chdir("/newroot"); err != nil {
		return "", err
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return "", fmt.Errorf("move the new root: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return "", err
	}
	if err := os.Chdir("/"); err != nil {
		return "", err
	}
	for _, m := range []struct {
		src, target, fstype string
		flags               uintptr
		data                string
	}{
		{"proc", "/proc", "proc", 0, ""},
		{"sysfs", "/sys", "sysfs", 0, ""},
		{"cgroup2", "/sys/fs/cgroup", "cgroup2", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, "nsdelegate,memory_recursiveprot"},
		{"devpts", "/dev/pts", "devpts", unix.MS_NOSUID | unix.MS_NOEXEC, "gid=5,mode=620,ptmxmode=666"},
		{"tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777"},
		{"tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777"},
		{"tmpfs", "/run", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=755"},
	} {
		if m.fstype == "tmpfs" {
			// Keep a way to the host's directory the tmpfs hides: a
			// clone under /tmp must still be seen (reveal).
			if fd, err := unix.Open(m.target, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
				hidden[m.target] = fd
			}
		}
		if err := mount(m.src, m.target, m.fstype, m.flags, m.data); err != nil {
			return "", err
		}
	}
	// What udev or a container runtime adds to /dev: the sandbox feeds
	// bash its start-up script through /dev/fd/3.
	for name, target := range map[string]string{"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		_ = os.Remove("/dev/" + name)
		if err := os.Symlink(target, "/dev/"+name); err != nil {
			return "", err
		}
	}
	// Last: the out share may be below one of those (/tmp), and so may
	// the tree it is in (.vm/run of a clone under /tmp).
	if err := reveal(out); err != nil {
		return "", err
	}
	if err := mount(tagOut, out, "9p", 0, opts+",cache=none"); err != nil {
		return "", err
	}
	return out, nil
}

// hidden holds, for each directory the guest mounts a fresh tmpfs on
// (/tmp, /run, /dev/shm), a descriptor of the host's directory beneath it.
var hidden = map[string]int{}

// maskedTop reports whether dir lies below one of the masks, and the
// mask and the directory right below it that holds dir (/tmp/clone for
// /tmp/clone/internal/proc).
func maskedTop(dir string, masks []string) (mask, top string, ok bool) {
	dir = filepath.Clean(dir)
	for _, m := range masks {
		rest, found := strings.CutPrefix(dir, m+"/")
		if !found || rest == "" {
			continue
		}
		first, _, _ := strings.Cut(rest, "/")
		return m, filepath.Join(m, first), true
	}
	return "", "", false
}

// reveal makes dir, a directory of the host, visible in the guest: if a
// tmpfs the guest mounted hides it (a clone under /tmp), the host's
// directory right below that tmpfs is bind-mounted back over it (through
// the overlay root, so it stays writable). A directory the guest cannot
// see is named as such, not left to fail as an exec.
func reveal(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	masks := make([]string, 0, len(hidden))
	for m := range hidden {
		masks = append(masks, m)
	}
	mask, top, ok := maskedTop(dir, masks)
	if ok {
		src := fmt.Sprintf("/proc/self/fd/%d/%s", hidden[mask], strings.TrimPrefix(top, mask+"/"))
		if _, err := os.Stat(src); err == nil {
			if err := os.MkdirAll(top, 0o755); err != nil {
				return err
			}
			if err := unix.Mount(src, top, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				return fmt.Errorf("reveal the host's %s under the guest's %s: %w", top, mask, err)
			}
			say("revealed the host's %s (the guest has its own %s)", top, mask)
		}
	}
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("directory %s does not exist in the guest (it sees the host's root, with its own /tmp, /run and /dev/shm): %w", dir, err)
	}
	return nil
}

// loopbackUp brings lo up (the egress proxy and the tests listen on it).
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo up: %w", err)
	}
	return nil
}

// delegate gives the tests a delegated subtree the way systemd gives one
// to a unit with Delegate=yes and DelegateSubgroup=, or a container
// entrypoint makes one: parent is a cgroup whose subtree_control enables
// cpu, memory and pids, and which holds no process itself (cgroup v2's
// no-internal-process rule); the test processes run in a leaf below it
// (see runOne) and the engine is pointed at parent.
func delegate(parent string) error {
	const root = "/sys/fs/cgroup"
	data, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
	if err != nil {
		return err
	}
	say("cgroup2 controllers: %s", strings.TrimSpace(string(data)))
	if v1, _ := os.ReadFile("/proc/cgroups"); len(v1) > 0 {
		// cgroup_no_v1=all: every controller's hierarchy column is 0.
		for line := range strings.SplitSeq(string(v1), "\n") {
			f := strings.Fields(line)
			if len(f) == 4 && f[1] != "0" && !strings.HasPrefix(f[0], "#") {
				return fmt.Errorf("controller %s is bound to a cgroup v1 hierarchy (%s)", f[0], line)
			}
		}
	}
	for _, dir := range []string{root, parent} {
		if dir != root {
			if err := os.Mkdir(dir, 0o755); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+cpu +memory +pids"), 0); err != nil {
			return fmt.Errorf("%s: enable controllers: %w", dir, err)
		}
	}
	sub, _ := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
	say("delegated %s (subtree_control: %s)", parent, strings.TrimSpace(string(sub)))
	return nil
}

// runOne runs one test binary in a leaf cgroup below the delegated
// parent, with its output in outDir/NAME.log and on the console (only
// failures, skips and the totals), then checks that it left no cgroup
// behind.
func runOne(p plan, r run, outDir string) result {
	res := result{Name: r.Name}
	start := time.Now()
	leaf := filepath.Join(p.Parent, "runner-"+r.Name)
	fail := func(err error) result {
		res.Err = err.Error()
		say("%s: %v", r.Name, err)
		return res
	}
	if err := os.Mkdir(leaf, 0o755); err != nil {
		return fail(err)
	}
	cgfd, err := unix.Open(leaf, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(err)
	}
	logf, err := os.Create(filepath.Join(outDir, r.Name+".log"))
	if err != nil {
		return fail(err)
	}
	defer logf.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	cmd := exec.Command(r.Path, r.Args...)
	cmd.Dir = r.Dir
	cmd.Env = append(os.Environ()[:0:0], p.Env...)
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cgfd, Setpgid: true}
	say("RUN %s: %s %s (in %s)", r.Name, r.Path, strings.Join(r.Args, " "), leaf)
	err = cmd.Start()
	pw.Close()
	unix.Close(cgfd)
	if err != nil {
		pr.Close()
		return fail(err)
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		res.count(io.TeeReader(pr, logf), r.Name)
	}()
	timer := time.AfterFunc(r.Timeout, func() {
		say("%s: timed out after %v: killing it", r.Name, r.Timeout)
		_ = os.WriteFile(filepath.Join(leaf, "cgroup.kill"), []byte("1"), 0)
	})
	err = cmd.Wait()
	timer.Stop()
	<-copied
	pr.Close()
	res.Exit = cmd.ProcessState.ExitCode()
	if err != nil && res.Exit == 0 {
		res.Exit = -1
	}
	res.Seconds = time.Since(start).Seconds()
	// What the tests left in the delegated subtree: every engine's
	// directory must be gone, and the runner's leaf must be empty.
	_ = os.WriteFile(filepath.Join(leaf, "cgroup.kill"), []byte("1"), 0)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if os.Remove(leaf) == nil || time.Now().After(deadline) {
			break
		}
	}
	entries, _ := os.ReadDir(p.Parent)
	for _, e := range entries {
		// The engines' shared leaf for released processes, removed by
		// the next engine once empty, is a leftover only when populated.
		if e.Name() == "bashvisor-released" && os.Remove(filepath.Join(p.Parent, e.Name())) == nil {
			continue
		}
		if e.IsDir() {
			res.Leftovers = append(res.Leftovers, e.Name())
			_ = os.WriteFile(filepath.Join(p.Parent, e.Name(), "cgroup.kill"), []byte("1"), 0)
		}
	}
	say("END %s: exit %d, %d passed, %d failed, %d skipped, %.1fs, cgroups left: %v",
		r.Name, res.Exit, res.Passed, res.Failed, res.Skipped, res.Seconds, res.Leftovers)
	return res
}

var (
	verdict = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): `)
	loud    = regexp.MustCompile(`^(FAIL|panic:|fatal error:|WARNING: DATA RACE|goleak|REQUIRE_)`)
)

// count reads a test binary's -test.v output, counts the verdicts and
// prints to the console what is not a pass: failures and skips with the
// lines that explain them.
func (res *result) count(r io.Reader, name string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var pending []string // output since the last verdict
	for sc.Scan() {
		line := sc.Text()
		m := verdict.FindStringSubmatch(line)
		switch {
		case m == nil:
			if loud.MatchString(line) {
				say("%s| %s", name, line)
			} else if !strings.HasPrefix(line, "=== ") && len(pending) < 40 {
				pending = append(pending, line)
			}
			continue
		case m[1] == "PASS":
			res.Passed++
		case m[1] == "FAIL":
			res.Failed++
		case m[1] == "SKIP":
			res.Skipped++
		}
		if m[1] != "PASS" {
			for _, l := range pending {
				say("%s| %s", name, l)
			}
			say("%s| %s", name, line)
		}
		pending = pending[:0]
	}
}
