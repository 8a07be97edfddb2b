package config_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bashvisor/bashvisor/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A call's override replaces only the limits it sets.
func ExampleLimits_Over() {
	engine := config.Limits{Memory: 4 << 30, Processes: 4096}
	call := engine.Over(config.Limits{CPUTime: 10 * time.Minute, Processes: 64})
	fmt.Println(call.Memory>>30, "GiB,", call.CPUTime, "of CPU,", call.Processes, "processes")
	// Output: 4 GiB, 10m0s of CPU, 64 processes
}

func ExampleSandboxLimits_WithDefaults() {
	l := config.SandboxLimits{ScratchBytes: 256 << 20, FileSize: config.Unlimited}.WithDefaults()
	fmt.Println(l.ScratchBytes>>20, "MiB scratch,", l.Processes, "processes,", l.FileSize == config.Unlimited)
	// Output: 256 MiB scratch, 512 processes, true
}

func TestAdmissionDefaults(t *testing.T) {
	cpus := runtime.NumCPU()
	got := config.Admission{MaxRunning: 6}.WithDefaults()
	want := config.Admission{MaxRunning: 6, MaxRunningPerConversation: 3, MaxQueue: 24, QueueWait: 30 * time.Second,
		MaxJobsPerConversation: 16, MaxJobs: 16 * cpus}
	if got != want {
		t.Fatalf("%+v, want %+v", got, want)
	}
	if d := (config.Limits{}).WithDefaults(); d.Memory != config.DefaultMemoryLimit() || d.Processes != config.DefaultProcesses || d.CPUTime != 0 {
		t.Fatalf("limit defaults %+v", d)
	}
}
