//go:build linux

package sandbox_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestDirect runs the whole matrix again with Command.StartDirect (bash
// forked from a confined thread of this process, no helper re-exec).
func TestDirect(t *testing.T) {
	requireSandbox(t)
	direct = true
	defer func() { direct = false }()
	for name, f := range map[string]func(*testing.T){
		"WritesOutsideScratchFail":     TestWritesOutsideScratchFail,
		"ScratchAndDevNullWritable":    TestScratchAndDevNullWritable,
		"ScratchIsPrivateAndRemoved":   TestScratchIsPrivateAndRemoved,
		"LargeHeredoc":                 TestLargeHeredoc,
		"ReadingAndTools":              TestReadingAndTools,
		"NetworkDenied":                TestNetworkDenied,
		"NetworkOnlyThroughProxy":      TestNetworkOnlyThroughProxy,
		"WorkspaceWritePlainRepo":      TestWorkspaceWritePlainRepo,
		"WorkspaceWriteWorktree":       TestWorkspaceWriteWorktree,
		"WorkspaceWriteSubmodule":      TestWorkspaceWriteSubmodule,
		"WorkspaceKeepsReadOnlyMounts": TestWorkspaceKeepsReadOnlyMounts,
		"CacheDir":                     TestCacheDir,
		"UnixSocketpairWorks":          TestUnixSocketpairWorks,
		"UnixListenInScratchNoConnect": TestUnixListenInScratchButNoConnect,
		"ProcessesOutsideUnreachable":  TestProcessesOutsideUnreachable,
		"SignalsInsideWork":            TestSignalsInsideWork,
		"Limits":                       TestLimits,
		"ForkBombContained":            TestForkBombContained,
		"CleanupKillsEscapees":         TestCleanupKillsEscapees,
		"ExampleFlow":                  TestExampleFlow,
		"SysVIPCIsPrivate":             TestSysVIPCIsPrivate,
		"ResourceLimitsOnlyOwn":        TestResourceLimitsOnlyOwn,
		"OnlyStandardDescriptors":      TestOnlyStandardDescriptors,
		"NoNamespacesOrCgroupEscape":   TestNoNamespacesOrCgroupEscape,
		"AbstractSocketsArePrivate":    TestAbstractSocketsArePrivate,
		"ScratchQuota":                 TestScratchQuota,
		"FlockHeldOnlyByTheCommand":    TestFlockHeldOnlyByTheCommand,
	} {
		t.Run(name, f)
	}
	// The engine itself stayed unconfined: it can still write here.
	f, err := os.CreateTemp(t.TempDir(), "after")
	if err != nil {
		t.Fatalf("the test process lost write access: %v", err)
	}
	f.Close()
	// No thread of this process stays confined: the throwaway threads exit.
	var confined []string
	testenv.Eventually(t, 10*time.Second, func() bool {
		confined = confinedThreads(t)
		return len(confined) == 0
	}, "threads still confined: %v", testenv.Last(&confined))
}

// confinedThreads lists the threads of this process with no_new_privs or a
// seccomp filter.
func confinedThreads(t *testing.T) []string {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if err != nil {
			continue // exited meanwhile
		}
		s := string(b)
		if !strings.Contains(s, "NoNewPrivs:\t0") || !strings.Contains(s, "Seccomp:\t0") {
			out = append(out, task.Name())
		}
	}
	return out
}

// TestStartDirectNeverConfinesTheMainThread starts many commands while the
// main thread is idle and free to be picked by the scheduler.
func TestStartDirectNeverConfinesTheMainThread(t *testing.T) {
	requireSandbox(t)
	direct = true
	defer func() { direct = false }()
	for range 30 {
		if r := run(t, "true"); r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.out)
		}
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/status", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "NoNewPrivs:\t0") || !strings.Contains(string(b), "Seccomp:\t0") {
		t.Fatalf("main thread confined:\n%s", b)
	}
}
