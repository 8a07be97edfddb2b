package proc_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// The victim of the tests below is this test binary run with
// BASHVISOR_TEST_CHILD=zombie-leader: its leader thread exits (SYS_exit,
// not exit_group) while another thread counts on in the file named by
// BASHVISOR_TEST_COUNTER. Its stat then says 'Z' although it runs.
func init() {
	if os.Getenv("BASHVISOR_TEST_CHILD") == "zombie-leader" {
		runtime.LockOSThread() // the main goroutine stays on the leader thread
	}
}

// zombieLeader is the victim's main: a goroutine (on another thread)
// writes a rising count, the leader thread exits; the process ends on
// its own after a minute, should a test fail to kill it.
func zombieLeader() {
	path := os.Getenv("BASHVISOR_TEST_COUNTER")
	go func() {
		for i := 1; i < 6000; i++ {
			_ = os.WriteFile(path+".new", []byte(strconv.Itoa(i)), 0o644)
			_ = os.Rename(path+".new", path)
			time.Sleep(10 * time.Millisecond)
		}
		os.Exit(0)
	}()
	for readCount(path) == 0 {
		time.Sleep(time.Millisecond)
	}
	// Syscall, not RawSyscall: the runtime sees the goroutine in a
	// system call for good and runs the others without it.
	syscall.Syscall(syscall.SYS_EXIT, 0, 0, 0)
}

func readCount(path string) int {
	b, _ := os.ReadFile(path)
	n, _ := strconv.Atoi(string(b))
	return n
}

// zombieLeaderCmd returns the command that runs the victim, counting in
// dir/count.
func zombieLeaderCmd(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), "BASHVISOR_TEST_CHILD=zombie-leader", "BASHVISOR_TEST_COUNTER="+filepath.Join(dir, "count"))
	return cmd
}

// waits are closed when the victims' Wait returned (tests run one at a
// time).
var waits = map[*exec.Cmd]chan struct{}{}

// startZombieLeader starts cmd (zombieLeaderCmd) and waits until it is
// what the tests need: its leader thread a zombie, another thread
// running and counting. The test's cleanup kills it.
func startZombieLeader(t *testing.T, cmd *exec.Cmd, dir string) int {
	t.Helper()
	err := cmd.Start()
	if cmd.SysProcAttr != nil && cmd.SysProcAttr.Cloneflags != 0 {
		testenv.Need(t, testenv.Namespaces, err)
	} else if err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	waited := make(chan struct{})
	waits[cmd] = waited
	go func() { _ = cmd.Wait(); close(waited) }() // waits for every thread
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // by its pidfd: Wait may have reaped it
		<-waited
	})
	testenv.Eventually(t, 10*time.Second, func() bool {
		st, err := proc.ReadStat(pid)
		return err == nil && st.State == 'Z' && liveThreads(pid) > 0
	}, "pid %d: no zombie leader with live threads", pid)
	counting(t, dir, true)
	return pid
}

// liveThreads counts the threads of pid that have not exited.
func liveThreads(pid int) int {
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/stat")
	n := 0
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if i := strings.LastIndexByte(string(b), ')'); err == nil && i > 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X' {
			n++
		}
	}
	return n
}

// counting checks whether the victim's count rises over 200 ms.
func counting(t *testing.T, dir string, want bool) {
	t.Helper()
	path := filepath.Join(dir, "count")
	a := readCount(path)
	time.Sleep(200 * time.Millisecond)
	if b := readCount(path); (b > a) != want {
		t.Fatalf("count %d -> %d in 200ms, want rising: %v", a, b, want)
	}
}

// gone waits until pid has ended (cmd.Wait returns once every thread
// exited).
func gone(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	select {
	case <-waits[cmd]:
	case <-time.After(10 * time.Second):
		t.Fatalf("pid %d still runs (%d live threads)", cmd.Process.Pid, liveThreads(cmd.Process.Pid))
	}
}

func member(ms []proc.Member, pid int) bool {
	return slices.ContainsFunc(ms, func(m proc.Member) bool { return m.Pid == pid })
}

// A process whose leader thread exited while its other threads run is
// alive for the process group's scans, GroupAlive and LiveMembers, and
// a signal to the group ends it (root and unprivileged).
func TestZombieLeaderAliveInGroup(t *testing.T) {
	dir := t.TempDir()
	cmd := zombieLeaderCmd(t, dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pid := startZombieLeader(t, cmd, dir)
	if !proc.GroupAlive(pid) {
		t.Error("GroupAlive: false")
	}
	if ms := proc.LiveMembers(pid); !member(ms, pid) {
		t.Errorf("LiveMembers: %v", ms)
	}
	if err := proc.SignalGroup(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	gone(t, cmd)
	if proc.GroupAlive(pid) {
		t.Error("GroupAlive after the kill")
	}
}

// The same process in a cgroup is one of its Members, the cgroup is
// populated, and cgroup.kill ends it (root with cgroups).
func TestZombieLeaderAliveInCgroup(t *testing.T) {
	m := cgroups(t)
	cg, err := m.New("zombie-leader")
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Remove()
	dir := t.TempDir()
	cmd := zombieLeaderCmd(t, dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, UseCgroupFD: true, CgroupFD: cg.FD()}
	pid := startZombieLeader(t, cmd, dir)
	if ms := cg.Members(); !member(ms, pid) {
		t.Errorf("Members: %v", ms)
	}
	if !cg.Populated() {
		t.Error("not populated")
	}
	if err := cg.Freeze(true); err != nil {
		t.Fatal(err)
	}
	counting(t, dir, false)
	if err := cg.Freeze(false); err != nil {
		t.Fatal(err)
	}
	counting(t, dir, true)
	if err := cg.Kill(); err != nil {
		t.Fatal(err)
	}
	gone(t, cmd)
	testenv.Eventually(t, 5*time.Second, func() bool { return !cg.Populated() }, "populated after the kill")
}

// The same process in a command's mount namespace, for the Freezer
// (the engine without cgroups): it is one of Members, Frozen stops every
// thread of it (the count stands still) and continues it, and Signal
// ends it (root and unprivileged).
func TestZombieLeaderAliveInFreezer(t *testing.T) {
	dir := t.TempDir()
	cmd := zombieLeaderCmd(t, dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:     true,
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}},
	}
	pid := startZombieLeader(t, cmd, dir)
	// Found through its threads: the leader's own namespace is gone.
	own, _ := proc.MountNamespace(0)
	if ns, err := proc.MountNamespace(pid); err != nil || ns == own {
		t.Fatalf("MountNamespace(%d) = %d, %v (the test's: %d)", pid, ns, err, own)
	}
	z := proc.NewFreezer(pid)
	defer z.Close()
	if ms := z.Members(); !member(ms, pid) {
		t.Fatalf("Members: %v", ms)
	}
	ran := false
	if !z.Frozen(func() { ran = true; counting(t, dir, false) }) || !ran {
		t.Fatal("Frozen: false")
	}
	counting(t, dir, true)
	z.Signal(syscall.SIGKILL)
	gone(t, cmd)
}
