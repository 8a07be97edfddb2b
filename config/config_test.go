package config_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ExampleSandboxLimits_WithDefaults() {
	l := config.SandboxLimits{ScratchBytes: 256 << 20, FileSize: config.Unlimited}.WithDefaults()
	fmt.Println(l.ScratchBytes>>20, "MiB scratch,", l.Processes, "processes,", l.FileSize == config.Unlimited)
	// Output: 256 MiB scratch, 512 processes, true
}

func TestAdmissionDefaults(t *testing.T) {
	cpus := runtime.NumCPU()
	// Per-principal caps are three quarters of the engine's, rounded up,
	// and a conversation's default to its principal's; MaxBusy is 4 per
	// CPU within MaxRunning.
	got := config.Admission{MaxRunning: 6}.WithDefaults()
	jobs := max(32*cpus, 64)
	want := config.Admission{MaxBusy: min(4*cpus, 6), MemoryPressure: 20, MaxRunning: 6, MaxRunningPerPrincipal: 5, MaxRunningPerConversation: 5,
		MaxQueue: 24, MaxQueuePerPrincipal: 18, QueueWait: 30 * time.Second,
		MaxJobsPerConversation: 16, MaxJobsPerPrincipal: max((3*jobs+3)/4, 16), MaxJobs: jobs}
	if got != want {
		t.Fatalf("%+v, want %+v", got, want)
	}
	// The defaults of an engine with none set.
	d := config.Admission{}.WithDefaults()
	var nofile unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &nofile); err != nil {
		t.Fatal(err)
	}
	if d.MaxRunning != max(min(1024*cpus, int(min(nofile.Cur, 1<<31-1))/8), 256) || d.MaxRunningPerConversation != d.MaxRunningPerPrincipal || d.MaxRunningPerPrincipal != (3*d.MaxRunning+3)/4 {
		t.Fatalf("defaults %+v", d)
	}
	// A conversation cap set alone lifts its principal's to it.
	if a := (config.Admission{MaxRunning: 8, MaxRunningPerConversation: 8}).WithDefaults(); a.MaxRunningPerPrincipal != 8 {
		t.Fatalf("%+v", a)
	}
}
