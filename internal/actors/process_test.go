package actors

import (
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestForkingHelper is the helper of TestForking: the test binary run
// again, which waits (a program of the engine's binary, with an
// address space of its own, as a sandbox world's connector).
func TestForkingHelper(t *testing.T) {
	if os.Getenv("BASHVISOR_FORKING_HELPER") == "1" {
		time.Sleep(time.Minute)
	}
}

// TestForking: a child of the engine between its fork and its exec
// counts (held there: born into a frozen cgroup, it cannot run to its
// exec, and the engine's thread that forked it waits); one that exec'd,
// or one of the engine's own binary with an address space of its own,
// does not.
func TestForking(t *testing.T) {
	m, err := proc.ProbeCgroups(testenv.CgroupParent())
	testenv.Need(t, testenv.Cgroups, err)
	t.Cleanup(func() { _ = m.Close() })
	cg, err := m.New("forking")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cg.Remove)
	if err := cg.Freeze(true); err != nil {
		t.Fatal(err)
	}
	helper := exec.Command(os.Args[0], "-test.run=^TestForkingHelper$")
	helper.Env = append(os.Environ(), "BASHVISOR_FORKING_HELPER=1")
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = helper.Process.Kill(); _ = helper.Wait() })
	testenv.Eventually(t, 30*time.Second, func() bool {
		st, err := proc.ReadStat(helper.Process.Pid)
		return err == nil && st.Comm == "actors.test" // exec'd
	}, "the helper did not start")
	if forking() {
		t.Fatal("forking: true with no child before its exec (a helper of the test's binary runs)")
	}
	// While the child is held, the thread that forked it cannot be
	// stopped: a garbage collection (it stops the world) would wait for it
	// (and this test for the collection). None runs meanwhile.
	runtime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	held := exec.Command("/bin/true")
	held.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cg.FD()}
	var startErr error
	started := make(chan struct{})
	go func() { startErr = held.Start(); close(started) }()
	t.Cleanup(func() { // on failure too: the child runs to its exec, Start returns
		_ = cg.Freeze(false)
		<-started
		if startErr == nil {
			_ = held.Wait()
		}
	})
	testenv.Eventually(t, 30*time.Second, forking, "a child held before its exec is not seen")
	if err := cg.Freeze(false); err != nil {
		t.Fatal(err)
	}
	<-started
	if startErr != nil {
		t.Fatal(startErr)
	}
	if err := held.Wait(); err != nil {
		t.Fatal(err)
	}
	if forking() {
		t.Error("forking: true once the child exec'd and ended")
	}
}
