//go:build linux

package sandbox_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// The tests in this file prove the fixes of the second security review:
// each one failed on the code before them.

// TestSysVIPCIsPrivate: SysV IPC objects of the host are invisible and
// untouchable inside, and what a command creates dies with it.
func TestSysVIPCIsPrivate(t *testing.T) {
	c := requireSandbox(t)
	testenv.NeedsTool(t, "ipcmk", "ipcs")
	out, err := exec.Command("ipcmk", "-M", "4096").CombinedOutput()
	if err != nil {
		t.Fatalf("ipcmk: %v %s", err, out)
	}
	m := regexp.MustCompile(`id: (\d+)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("ipcmk: %q", out)
	}
	id := m[1]
	t.Cleanup(func() { _ = exec.Command("ipcrm", "-m", id).Run() })
	queuesBefore := ipcIDs(t, "-q")

	r := run(t, fmt.Sprintf(`ipcs -m | grep -qw %[1]s && echo "sees host segment"; ipcrm -m %[1]s && echo "removed host segment"; ipcmk -Q && echo "made queue"; true`, id))
	if strings.Contains(r.out, "sees host segment") || strings.Contains(r.out, "removed host segment") {
		t.Errorf("the host's segment %s is reachable inside:\n%s", id, r.out)
	}
	if c.Namespaces != strings.Contains(r.out, "made queue") {
		t.Errorf("namespaces=%v but creating a queue inside: %s", c.Namespaces, r.out)
	}
	if !slicesContain(ipcIDs(t, "-m"), id) {
		t.Errorf("the host's segment %s is gone", id)
	}
	if after := ipcIDs(t, "-q"); len(after) > len(queuesBefore) {
		t.Errorf("a queue created inside outlived the command: before %v, after %v", queuesBefore, after)
	}
}

// ipcIDs lists the host's SysV IPC ids of one kind (-m, -q, -s).
func ipcIDs(t *testing.T, kind string) []string {
	out, err := exec.Command("ipcs", kind).Output()
	if err != nil {
		t.Fatalf("ipcs %s: %v", kind, err)
	}
	var ids []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 2 && strings.HasPrefix(f[0], "0x") {
			ids = append(ids, f[1])
		}
	}
	return ids
}

func slicesContain(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestResourceLimitsOnlyOwn: prlimit, renice, taskset and ionice reach
// only the command's own processes; the engine's and outside processes'
// limits and scheduling stay as they were.
func TestResourceLimitsOnlyOwn(t *testing.T) {
	requireSandbox(t)
	victim := startOutside(t)
	pid := victim.Process.Pid
	limitsBefore, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	prioBefore, _ := syscall.Getpriority(syscall.PRIO_PROCESS, pid) // the raw value: 20 - nice
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{
		fmt.Sprintf("prlimit --pid %d --nofile=12:12", pid),
		fmt.Sprintf("prlimit --pid %d --cpu=1:1", pid),
		"prlimit --pid $PPID --nofile=12:12",
		"prlimit --pid $$ --nofile=100:100", // even its own shell, by pid
		fmt.Sprintf("renice -n 5 -p %d", pid),
		fmt.Sprintf("renice -n 5 -g %d", pid),
		"renice -n 5 -u $(id -u)",
		fmt.Sprintf("taskset -p 1 %d", pid),
		fmt.Sprintf("ionice -c 3 -p %d", pid),
	} {
		tool := strings.Fields(cmd)[0]
		if !testenv.HasTool(t, tool) {
			continue
		}
		if r := run(t, cmd); r.code == 0 || !denied(r.out) {
			t.Errorf("%s: exit %d, want EPERM\n%s", cmd, r.code, r.out)
		}
	}
	limitsAfter, _ := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if string(limitsAfter) != string(limitsBefore) {
		t.Errorf("outside limits changed:\n%s", limitsAfter)
	}
	if prio, _ := syscall.Getpriority(syscall.PRIO_PROCESS, pid); prio != prioBefore {
		t.Errorf("outside priority changed: %d, was %d", prio, prioBefore)
	}
	// Its own limits it may lower, its own priority it may raise (nice).
	r := run(t, `ulimit -n 100 && ulimit -n && prlimit --nofile=50:50 sh -c 'ulimit -n' && nice -n 5 nice`)
	self, _ := syscall.Getpriority(syscall.PRIO_PROCESS, 0) // 20 - the test's own nice, which commands inherit
	if want := fmt.Sprintf("100\n50\n%d\n", min(20-self+5, 19)); r.code != 0 || !strings.Contains(r.out, want) {
		t.Errorf("own limits: exit %d\n%s", r.code, r.out)
	}
}

// TestOnlyStandardDescriptors: a descriptor the engine's process holds
// without close-on-exec does not reach the command.
func TestOnlyStandardDescriptors(t *testing.T) {
	requireSandbox(t)
	sentinel := filepath.Join(t.TempDir(), "sentinel")
	fd, err := syscall.Open(sentinel, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_APPEND, 0o600) // no O_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	// ls lists its parent shell's descriptors (a glob would see its own
	// directory descriptor too).
	r := run(t, fmt.Sprintf(`echo fds:; ls /proc/$$/fd; echo leaked >&%d`, fd))
	if !strings.Contains(r.out, "fds:\n0\n1\n2\n/") {
		t.Errorf("the command has more than 0, 1, 2:\n%s", r.out)
	}
	if b, _ := os.ReadFile(sentinel); len(b) > 0 {
		t.Errorf("the command wrote through inherited fd %d: %q", fd, b)
	}
}

// TestNoNamespacesOrCgroupEscape: no new namespace of any kind from inside,
// and no leaving the command's cgroup through clone3's CLONE_INTO_CGROUP.
func TestNoNamespacesOrCgroupEscape(t *testing.T) {
	requireSandbox(t)
	testenv.NeedsTool(t, "python3")
	cgroupRoot := "/sys/fs/cgroup"
	if _, err := os.Stat("/sys/fs/cgroup/unified/cgroup.procs"); err == nil {
		cgroupRoot = "/sys/fs/cgroup/unified"
	}
	// clone3 with a struct clone_args; the child (if any) exits at once.
	clone3 := func(flags, cgroupFD string) string {
		return fmt.Sprintf(`python3 -c '
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
class A(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("flags","pidfd","child_tid","parent_tid","exit_signal","stack","stack_size","tls","set_tid","set_tid_size","cgroup")]
a = A(flags=%s, exit_signal=17, cgroup=%s)
r = libc.syscall(435, ctypes.byref(a), ctypes.sizeof(a))
if r == 0:
    os._exit(0)
e = ctypes.get_errno()
if r > 0:
    os.waitpid(r, 0)
    print("clone3 created child", r); sys.exit(0)
print("clone3:", os.strerror(e)); sys.exit(1)'`, flags, cgroupFD)
	}
	for _, tc := range []struct{ name, cmd string }{
		{"unshare-user", "unshare -U true"},
		{"unshare-net", "unshare -n true"},
		{"unshare-mount-user", "unshare -Urm true"},
		{"clone-newuser", `python3 -c '
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0)  # clone(CLONE_NEWUSER|SIGCHLD)
if r == 0:
    os._exit(0)
print("clone:", os.strerror(ctypes.get_errno())); sys.exit(0 if r > 0 else 1)'`},
		{"clone3-newuser", clone3("0x10000000", "0")},
		{"clone3-newnet", clone3("0x40000000", "0")},
		{"clone3-into-root-cgroup", "exec 9<" + cgroupRoot + "; " + clone3("0x200000000", "9")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, tc.cmd)
			if r.code == 0 {
				t.Errorf("%s succeeded:\n%s", tc.cmd, r.out)
			}
			t.Logf("exit %d: %s", r.code, lastLine(r.out))
		})
	}
}

// TestAbstractSocketsArePrivate: an abstract unix socket bound inside is
// not reachable from the host (the command has a network namespace of its
// own, or may not bind at all).
func TestAbstractSocketsArePrivate(t *testing.T) {
	c := requireSandbox(t)
	testenv.NeedsTool(t, "python3")
	name := fmt.Sprintf("bashvisor-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	cmd, out := startAsync(t, fmt.Sprintf(`python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.bind("\0%s")
except OSError as e:
    print("bind:", e, flush=True); sys.exit(1)
s.listen()
print("listening", flush=True)
time.sleep(30)'`, name))
	line, err := out.ReadString('\n')
	if !c.Namespaces {
		if !strings.Contains(line, "bind:") {
			t.Fatalf("without namespaces bind must be denied; got %q %v", line, err)
		}
		return
	}
	if !strings.Contains(line, "listening") {
		t.Fatalf("the command did not bind: %q %v", line, err)
	}
	conn, err := net.Dial("unix", "@"+name)
	if err == nil {
		conn.Close()
		t.Fatalf("the host reached the abstract socket @%s bound inside the sandbox", name)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("connect: %v, want ECONNREFUSED (no such name here)", err)
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// startAsync starts command restricted and returns it with a reader of its
// output; everything is killed and cleaned up at the end of the test.
func startAsync(t *testing.T, command string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	sc, cg := prepare(t, config.SandboxLimits{}, command)
	cmd := exec.Command(sc.Path, sc.Args[1:]...)
	cmd.Args[0] = sc.Args[0]
	cmd.Env = append(os.Environ(), sc.Env...)
	cmd.SysProcAttr = sysProcAttr(cg)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := start(sc, cmd); err != nil {
		pr.Close()
		pw.Close()
		t.Fatal(err)
	}
	pw.Close()
	g := testenv.GroupOf(t, cmd.Process.Pid) // tests may have reaped it by the cleanup
	t.Cleanup(func() {
		g.Kill()
		_ = cmd.Wait()
		pr.Close()
		if err := sc.Cleanup(endCgroup(cg)); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
	})
	return cmd, bufio.NewReader(pr)
}

// TestScratchQuota: the scratch directory holds at most ScratchBytes and
// ScratchFiles; beyond, writes fail with ENOSPC and the host is unharmed.
func TestScratchQuota(t *testing.T) {
	requireNamespaces(t)
	r := runIn(t, config.SandboxLimits{ScratchBytes: 32 << 20, ScratchFiles: 500}, t.TempDir(), `
head -c 100000000 /dev/zero > "$TMPDIR/big"; echo "big: $?"; stat -c "size %s" "$TMPDIR/big"; rm "$TMPDIR/big"
i=0; while [ $i -lt 1000 ]; do : > "$TMPDIR/f$i" || break; i=$((i+1)); done; echo "files: $i"`)
	if !strings.Contains(r.out, "No space left on device") || !strings.Contains(r.out, "big: 1") {
		t.Errorf("100 MB into a 32 MiB scratch:\n%s", r.out)
	}
	if m := regexp.MustCompile(`size (\d+)`).FindStringSubmatch(r.out); m == nil {
		t.Errorf("no size:\n%s", r.out)
	} else if n, _ := strconv.Atoi(m[1]); n > 32<<20 {
		t.Errorf("wrote %d bytes into a 32 MiB scratch", n)
	}
	if m := regexp.MustCompile(`files: (\d+)`).FindStringSubmatch(r.out); m == nil {
		t.Errorf("no file count:\n%s", r.out)
	} else if n, _ := strconv.Atoi(m[1]); n >= 500 {
		t.Errorf("created %d files with ScratchFiles 500", n)
	}
	// The default is 2 GiB.
	r = run(t, `df -B1 --output=size "$TMPDIR" | tail -1`)
	if strings.TrimSpace(r.out) != strconv.Itoa(int(config.SandboxLimits{}.WithDefaults().ScratchBytes)) {
		t.Errorf("default scratch size %q, want %d", r.out, int(config.SandboxLimits{}.WithDefaults().ScratchBytes))
	}
	// The engine can still write its own files.
	if err := os.WriteFile(filepath.Join(t.TempDir(), "x"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestFlockHeldOnlyByTheCommand documents the choice for advisory locks:
// flock(2) works on files the command can read (go build locks its cache
// with it), including outside files; the lock ends with the command.
func TestFlockHeldOnlyByTheCommand(t *testing.T) {
	requireSandbox(t)
	testenv.NeedsTool(t, "flock")
	f := filepath.Join(t.TempDir(), "lockme")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd, out := startAsync(t, fmt.Sprintf(`exec 8<%q; flock -x 8 && echo locked; sleep 30`, f))
	if line, _ := out.ReadString('\n'); !strings.Contains(line, "locked") {
		t.Fatalf("flock inside: %q", line)
	}
	if exec.Command("flock", "-n", "-x", f, "true").Run() == nil {
		t.Error("the lock taken inside is not held")
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
	if err := exec.Command("flock", "-w", "10", "-x", f, "true").Run(); err != nil {
		t.Errorf("the lock outlived the command: %v", err)
	}
}
