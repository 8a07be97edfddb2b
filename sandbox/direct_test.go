//go:build linux

package sandbox_test

import (
	"os"
	"strings"
	"testing"
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
		"UnixSocketpairWorks":          TestUnixSocketpairWorks,
		"UnixListenInScratchNoConnect": TestUnixListenInScratchButNoConnect,
		"ProcessesOutsideUnreachable":  TestProcessesOutsideUnreachable,
		"SignalsInsideWork":            TestSignalsInsideWork,
		"Limits":                       TestLimits,
		"ForkBombContained":            TestForkBombContained,
		"CleanupKillsEscapees":         TestCleanupKillsEscapees,
		"ExampleFlow":                  TestExampleFlow,
	} {
		t.Run(name, f)
	}
	// The engine itself stayed unconfined: it can still write here.
	f, err := os.CreateTemp(t.TempDir(), "after")
	if err != nil {
		t.Fatalf("the test process lost write access: %v", err)
	}
	f.Close()
	if b, err := os.ReadFile("/proc/self/status"); err == nil && !strings.Contains(string(b), "NoNewPrivs:\t0") {
		t.Errorf("main thread has no_new_privs set")
	}
}
