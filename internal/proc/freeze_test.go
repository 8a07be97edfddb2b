package proc_test

import (
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

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// startInMountNS starts script under sh in new user and mount
// namespaces (root or not), as the leader of its process group; the
// test's cleanup kills every process in that mount namespace, by pid.
func startInMountNS(t *testing.T, dir, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:     true,
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}},
	}
	testenv.Need(t, testenv.Namespaces, cmd.Start())
	ns, err := proc.MountNamespace(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// Held until the cleanup ends: the kernel gives a freed namespace's
	// number to the next namespace made (another test binary's), whose
	// processes the cleanup would otherwise kill.
	held, err := os.Open(fmt.Sprintf("/proc/%d/ns/mnt", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		defer held.Close()
		testenv.Eventually(t, 10*time.Second, func() bool {
			left := inNamespace(t, ns)
			for pid := range left {
				killInNamespace(pid, ns)
			}
			return len(left) == 0
		}, "processes left in the namespace")
		_ = cmd.Wait()
	})
	return cmd
}

// killInNamespace sends SIGKILL to pid through a pidfd, when the process
// the pidfd names is in mount namespace ns: never to a pid reused since
// it was found.
func killInNamespace(pid int, ns uint64) {
	p, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(p)
	if got, err := proc.MountNamespace(pid); err == nil && got == ns {
		_ = unix.PidfdSendSignal(p, unix.SIGKILL, nil, 0)
	}
}

func readInt(t *testing.T, path string) int {
	t.Helper()
	b, _ := os.ReadFile(path)
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// vforkWait reports whether pid waits for its vfork child.
func vforkWait(pid int) bool {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/wchan")
	return string(b) == "wait_for_vfork_done" || string(b) == "kernel_clone"
}

// inNamespace lists the processes in mount namespace ns.
func inNamespace(t *testing.T, ns uint64) map[int]proc.Stat {
	t.Helper()
	names, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]proc.Stat{}
	for _, n := range names {
		pid, _ := strconv.Atoi(filepath.Base(n))
		if got, err := proc.MountNamespace(pid); err != nil || got != ns {
			continue
		}
		if st, err := proc.ReadStat(pid); err == nil && st.State != 'Z' {
			out[pid] = st
		}
	}
	return out
}

// A Freezer stops every process of the command's mount namespace: a loop
// that forks all the time, and one that left the process group and the
// session; it continues them after, but not one the command had stopped
// itself.
func TestFreezerStopsTheMountNamespace(t *testing.T) {
	dir := t.TempDir()
	cmd := startInMountNS(t, dir, `
		sleep 1000 & kill -STOP $!
		setsid sh -c 'while :; do n=$((n+1)); echo $n > escaped; done' &
		while :; do /bin/true; c=$((c+1)); echo $c > counter; done`)
	testenv.Eventually(t, 10*time.Second, func() bool {
		return readInt(t, filepath.Join(dir, "counter")) > 0 && readInt(t, filepath.Join(dir, "escaped")) > 0
	}, "the command did not start")
	ns, err := proc.MountNamespace(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	stoppedBefore := func() []int {
		var pids []int
		for pid, st := range inNamespace(t, ns) {
			if st.State == 'T' {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	var self []int // the process the command stopped itself
	testenv.Eventually(t, 10*time.Second, func() bool { self = stoppedBefore(); return len(self) == 1 }, "no process stopped")
	z := proc.NewFreezer(cmd.Process.Pid)
	for round := range 3 {
		ran := false
		ok := z.Frozen(func() {
			ran = true
			c, e := readInt(t, filepath.Join(dir, "counter")), readInt(t, filepath.Join(dir, "escaped"))
			time.Sleep(100 * time.Millisecond)
			if c2, e2 := readInt(t, filepath.Join(dir, "counter")), readInt(t, filepath.Join(dir, "escaped")); c2 != c || e2 != e {
				t.Errorf("round %d: changed while frozen: counter %d -> %d, escaped %d -> %d", round, c, c2, e, e2)
			}
			procs := inNamespace(t, ns)
			if len(procs) < 3 { // sh, the stopped sleep, the escaped sh (and maybe a true)
				t.Errorf("round %d: %d processes in the namespace: %v", round, len(procs), procs)
			}
			for pid, s := range procs {
				// sh (dash) starts /bin/true with vfork: caught before the
				// child's exec, it waits for the child, stopped too.
				if s.State != 'T' && (s.State != 'D' || !vforkWait(pid)) {
					t.Errorf("round %d: pid %d (%s) is %c while frozen", round, pid, s.Comm, s.State)
				}
			}
		})
		if !ok || !ran {
			for pid, st := range inNamespace(t, ns) { // what did not stop (continued since)
				w, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/wchan")
				t.Logf("pid %d (%s): %c, wchan %s", pid, st.Comm, st.State, w)
			}
			t.Fatalf("round %d: Frozen = %v, ran %v", round, ok, ran)
		}
		c, e := readInt(t, filepath.Join(dir, "counter")), readInt(t, filepath.Join(dir, "escaped"))
		testenv.Eventually(t, 10*time.Second, func() bool {
			return readInt(t, filepath.Join(dir, "counter")) > c && readInt(t, filepath.Join(dir, "escaped")) > e
		}, "round %d: not continued", round)
	}
	if now := stoppedBefore(); len(now) != 1 || now[0] != self[0] {
		t.Fatalf("stopped after: %v, before: %v", now, self)
	}
	// Members and Signal reach the process that left the group too.
	left := 0
	for _, m := range z.Members() {
		if st, err := proc.ReadStat(m.Pid); err == nil && st.Pgrp != cmd.Process.Pid {
			left++
		}
	}
	if left == 0 {
		t.Fatalf("no member outside the process group: %v", z.Members())
	}
	z.Signal(syscall.SIGKILL)
	testenv.Eventually(t, 10*time.Second, func() bool { return len(inNamespace(t, ns)) == 0 }, "left after Signal: %v", inNamespace(t, ns))
	z.Close()
	if z.Frozen(func() {}) || z.Members() != nil {
		t.Fatal("a closed Freezer still finds processes")
	}
}

// A Freezer never stops a process in the engine's own mount namespace
// (nor in those named as not the command's): without a process in a
// namespace of its own, Frozen reports false.
func TestFreezerRefusesOtherNamespaces(t *testing.T) {
	cmd := exec.Command("sleep", "100")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	own := proc.NewFreezer(cmd.Process.Pid)
	defer own.Close()
	if own.Frozen(func() { t.Error("ran") }) {
		t.Fatal("froze a process in the engine's mount namespace")
	}
	other := startInMountNS(t, t.TempDir(), "sleep 100")
	ns, err := proc.MountNamespace(other.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	named := proc.NewFreezer(other.Process.Pid, ns)
	defer named.Close()
	if named.Frozen(func() { t.Error("ran") }) {
		t.Fatal("froze a namespace named as not the command's")
	}
	for _, pid := range []int{cmd.Process.Pid, other.Process.Pid} {
		if st, err := proc.ReadStat(pid); err != nil || st.State == 'T' {
			t.Fatalf("pid %d: %+v %v", pid, st, err)
		}
	}
}

// BenchmarkFreezer measures what a job without a cgroup costs the engine:
// finding its processes (Members: every process's /proc/PID/ns/mnt is
// read) and a checkpoint's stop and continue (Frozen) of a command of
// three processes, beside a cgroup-less process-group scan
// (LiveMembers), the engine's way before.
func BenchmarkFreezer(b *testing.B) {
	dir := b.TempDir()
	cmd := exec.Command("sh", "-c", "sleep 1000 & sleep 1000 & wait")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:     true,
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}},
	}
	if err := cmd.Start(); err != nil {
		b.Skip(err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	z := proc.NewFreezer(cmd.Process.Pid)
	defer z.Close()
	for len(z.Members()) < 3 { // NewFreezer found the namespace: the fork made it
		time.Sleep(time.Millisecond)
	}
	b.Run("group-scan", func(b *testing.B) {
		for b.Loop() {
			proc.LiveMembers(cmd.Process.Pid)
		}
	})
	b.Run("members", func(b *testing.B) {
		for b.Loop() {
			z.Members()
		}
	})
	b.Run("frozen", func(b *testing.B) {
		for b.Loop() {
			if !z.Frozen(func() {}) {
				b.Fatal("not frozen")
			}
		}
	})
}

// A Freezer never finds the processes of a mount namespace that got
// the number of the command's once the command ended: the kernel gives
// a freed namespace's inode number to the next namespace made (the
// lowest free one), which may be another command's (of another
// conversation) while the ended job's actor still looks for leftovers
// and kills them. The commands here, as a rootless sandbox's, make
// their mount namespaces in a user namespace that exists already.
func TestFreezerNamespaceNumberReused(t *testing.T) {
	testenv.NeedsTool(t, "nsenter")
	testenv.NeedsTool(t, "unshare")
	world := exec.Command("sleep", "1000")
	world.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:     true,
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	testenv.Need(t, testenv.Namespaces, world.Start())
	defer func() {
		_ = world.Process.Kill()
		_ = world.Wait()
	}()
	inWorld := func(script string) *exec.Cmd {
		cmd := exec.Command("nsenter", "--user", "--preserve-credentials", "--target", strconv.Itoa(world.Process.Pid),
			"unshare", "--mount", "sh", "-c", script)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return cmd
	}
	cmd := inWorld("read x || :")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	z := proc.NewFreezer(cmd.Process.Pid)
	defer z.Close()
	// The command makes its namespace after it started: look until the
	// Freezer finds it (from the shell, while it runs).
	found := false
	for end := time.Now().Add(10 * time.Second); !found && time.Now().Before(end); time.Sleep(100 * time.Microsecond) {
		found = z.Members() != nil
	}
	if !found {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("the command's namespace was not found")
	}
	old, err := proc.MountNamespace(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	// Other commands start in new namespaces, one of which (unless
	// other namespaces are made meanwhile on the host) gets the ended
	// command's number.
	own, err := proc.MountNamespace(0)
	if err != nil {
		t.Fatal(err)
	}
	var victims []int
	for range 20 {
		v := inWorld("exec sleep 100")
		if err := v.Start(); err != nil {
			t.Fatal(err)
		}
		victims = append(victims, v.Process.Pid)
		defer func() {
			_ = v.Process.Kill()
			_ = v.Wait()
		}()
		var ns uint64
		testenv.Eventually(t, 10*time.Second, func() bool {
			ns, err = proc.MountNamespace(v.Process.Pid)
			return err == nil && ns != own
		}, "pid %d did not make its namespace", v.Process.Pid)
		if ns == old {
			t.Logf("namespace %d reused by pid %d", old, v.Process.Pid)
			break
		}
	}
	for _, m := range z.Members() {
		if slices.Contains(victims, m.Pid) {
			t.Fatalf("the ended command's Freezer finds pid %d of another namespace", m.Pid)
		}
	}
	if z.Frozen(func() { t.Error("ran with no process of the command left") }) {
		t.Error("Frozen with no process of the command left")
	}
	z.Signal(syscall.SIGKILL)
	for _, pid := range victims {
		if st, err := proc.ReadStat(pid); err != nil || st.State == 'T' || st.State == 'Z' {
			t.Errorf("another command's pid %d was stopped or killed: %+v %v", pid, st, err)
		}
	}
}

// A process that started a child with vfork (posix_spawn) waits,
// unstoppable, until the child execs; the child, stopped, cannot: the
// parent counts as stopped, and Frozen succeeds. The child here blocks
// in posix_spawn's file action (opening a fifo) before it execs.
func TestFreezerVforkParent(t *testing.T) {
	testenv.NeedsTool(t, "python3")
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := startInMountNS(t, dir, `exec python3 -c '
import os
pid = os.posix_spawn("/bin/true", ["true"], {}, file_actions=[(os.POSIX_SPAWN_OPEN, 3, "fifo", os.O_RDONLY, 0)])
os.waitpid(pid, 0)
open("spawned", "w").close()
'`)
	testenv.Eventually(t, 10*time.Second, func() bool { return vforkWait(cmd.Process.Pid) },
		"python3 does not wait for a vfork child")
	z := proc.NewFreezer(cmd.Process.Pid)
	defer z.Close()
	ran := false
	if !z.Frozen(func() {
		ran = true
		ns, _ := proc.MountNamespace(cmd.Process.Pid)
		for pid, st := range inNamespace(t, ns) {
			if pid != cmd.Process.Pid && st.State != 'T' {
				t.Errorf("the vfork child %d is %c", pid, st.State)
			}
		}
	}) || !ran {
		t.Fatal("not frozen")
	}
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0) // the child's open goes on
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	testenv.Eventually(t, 10*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(dir, "spawned"))
		return err == nil
	}, "the spawn did not go on after Frozen")
}
