package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// pidnsEnv names, in the test binary InPidNamespace starts, the test that
// runs there.
const pidnsEnv = "BASHVISOR_TESTENV_PIDNS"

// InPidNamespace runs the calling test again in a process of its own: the
// test binary, as pid 1 of a new pid namespace with its own /proc (in a
// new mount namespace; in a new user namespace too when not root), where
// [NextPid] can give a chosen pid to the next process, so that a test can
// make a number it saw reaped name a process of its own. It returns true
// in that process, which then runs the test's body; and false in the
// test that started it, which has then failed if that run failed (its
// output is in the failure). Without namespaces it gives up as [Need]
// does with [Namespaces].
//
// In the namespace the test is pid 1: orphans are re-parented to it, and
// it never reaps them (they stay zombies, keeping their numbers), and
// when it exits the kernel kills every process of the namespace.
func InPidNamespace(t *testing.T) bool {
	t.Helper()
	if os.Getenv(pidnsEnv) == t.Name() {
		if os.Getpid() != 1 {
			t.Fatalf("%s=%s but this is pid %d, not 1", pidnsEnv, t.Name(), os.Getpid())
		}
		// A /proc of the namespace, on a mount the host does not see.
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			t.Fatalf("making / private: %v", err)
		}
		if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			t.Fatalf("mounting the namespace's /proc: %v", err)
		}
		return true
	}
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	cmd := exec.Command(os.Args[0], "-test.run="+strings.Join(parts, "/"), "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), pidnsEnv+"="+t.Name())
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWPID | unix.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() != 0 {
		cmd.SysProcAttr.Cloneflags |= unix.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err != nil && !errors.As(err, &exit):
		Need(t, Namespaces, fmt.Errorf("a new pid namespace: %w", err))
	case err != nil:
		t.Fatalf("in a pid namespace of its own: %v\n%s", err, out)
	case !strings.Contains(string(out), "--- PASS: "+t.Name()) && !strings.Contains(string(out), "--- SKIP: "+t.Name()):
		t.Fatalf("in a pid namespace of its own, the test did not run:\n%s", out)
	}
	if strings.Contains(string(out), "--- SKIP: "+t.Name()) {
		t.Skipf("skipped in its pid namespace:\n%s", out)
	}
	return false
}

// NextPid makes the next process forked in InPidNamespace's namespace get
// pid n, which no process may have (a zombie keeps its number): it
// writes n-1 to /proc/sys/kernel/ns_last_pid, which belongs to the pid
// namespace. Only in the process for which InPidNamespace returned true,
// with nothing else forking meanwhile.
func NextPid(t testing.TB, n int) {
	t.Helper()
	if os.Getpid() != 1 {
		t.Fatalf("NextPid outside InPidNamespace's namespace (pid %d)", os.Getpid())
	}
	if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(n-1)), 0); err != nil {
		t.Fatalf("NextPid(%d): %v", n, err)
	}
}
