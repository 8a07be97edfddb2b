//go:build linux

package sandbox_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// threadsIn lists the threads of this process in mount namespace ns
// ("mnt:[N]").
func threadsIn(t *testing.T, ns string) []string {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, task := range tasks {
		if l, err := os.Readlink("/proc/self/task/" + task.Name() + "/ns/mnt"); err == nil && l == ns {
			out = append(out, task.Name())
		}
	}
	return out
}

// A command's mount namespace is torn down off its path (keep_linux.go):
// the thread that made it and forked the shell stays in it, parked,
// after the shell ended, so the shell's exit does not unmount it; Cleanup
// lets the thread end, and the namespace with it. Both launchers. As a
// user other than root, a process the engine forks makes the namespace,
// not a thread of the engine: none of its threads is ever in it, and none
// is parked (the saving is root's).
func TestMountNamespaceOutlivesTheShell(t *testing.T) {
	caps := requireSandbox(t)
	if !caps.Namespaces {
		testenv.Need(t, testenv.Namespaces, os.ErrPermission)
	}
	parked := 1
	if caps.Rootless {
		parked = 0
	}
	for _, d := range []bool{true, false} {
		name := "helper"
		if d {
			name = "direct"
		}
		t.Run(name, func(t *testing.T) {
			sc, cg := prepareOpts(t, sandbox.Options{}, "readlink /proc/self/ns/mnt")
			cmd := exec.Command(sc.Path, sc.Args[1:]...)
			cmd.Args[0] = sc.Args[0]
			cmd.Dir, cmd.Env = t.TempDir(), withEnv(os.Environ(), sc.Env)
			cmd.SysProcAttr = sysProcAttr(cg)
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			start := sc.StartHelper
			if d {
				start = sc.StartDirect
			}
			if err := start(cmd); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("%v: %s", err, out.String())
			}
			ns := strings.TrimSpace(out.String())
			if !strings.HasPrefix(ns, "mnt:[") {
				t.Fatalf("output %q", ns)
			}
			if got := threadsIn(t, ns); len(got) != parked {
				t.Errorf("threads of this process in the ended command's mount namespace: %v, want %d (parked)", got, parked)
			}
			if err := sc.Cleanup(endCgroup(cg)); err != nil {
				t.Fatal(err)
			}
			var got []string
			testenv.Eventually(t, 10*time.Second, func() bool { got = threadsIn(t, ns); return len(got) == 0 },
				"threads still in the command's mount namespace after Cleanup: %v", testenv.Last(&got))
		})
	}
}
