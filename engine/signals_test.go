package engine_test

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestSignalsIgnoredByTheProgram starts this test binary again under
// `env --ignore-signal=INT,QUIT`, as nohup or a script's background job
// would start a program that embeds the engine: its commands, unrestricted
// and sandboxed (both launchers), still start with SIGINT and SIGQUIT at
// their defaults, so ^C reaches a terminal job.
func TestSignalsIgnoredByTheProgram(t *testing.T) {
	if os.Getenv("BASHVISOR_TEST_SIGIGN") == "1" {
		signalsIgnoredInner(t)
		return
	}
	envBin := testenv.NeedsTool(t, "env")[0]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, envBin, "--ignore-signal=INT,QUIT", os.Args[0],
		"-test.run=^TestSignalsIgnoredByTheProgram$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "BASHVISOR_TEST_SIGIGN=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestSignalsIgnoredByTheProgram") {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, sub := range []string{"unrestricted", "direct", "helper"} {
		if !strings.Contains(string(out), "--- PASS: TestSignalsIgnoredByTheProgram/"+sub) {
			t.Errorf("subtest %s did not pass:\n%s", sub, out)
		}
	}
}

var sigIgnRE = regexp.MustCompile(`SigIgn:\s*([0-9a-f]+)`)

func sigIgnOf(t *testing.T, status string) uint64 {
	t.Helper()
	m := sigIgnRE.FindStringSubmatch(status)
	if m == nil {
		t.Fatalf("no SigIgn in %q", status)
	}
	v, err := strconv.ParseUint(m[1], 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func signalsIgnoredInner(t *testing.T) {
	self, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	// Go handles SIGQUIT itself even when it starts ignored; SIGINT it
	// keeps ignored.
	if sigIgnOf(t, string(self))&(1<<(syscall.SIGINT-1)) == 0 {
		t.Fatal("started without SIGINT ignored: the premise failed")
	}
	t.Run("unrestricted", func(t *testing.T) {
		e := newEngine(t)
		signalsAtDefaults(t, e, tc(t), "bash")
	})
	bothLaunchers(t, func(t *testing.T, mod func(*engine.Config)) {
		e := newEngine(t, mod)
		signalsAtDefaults(t, e, restricted(t.TempDir()), "/") // sandboxed bash's $0 is its path
	})
}

// signalsAtDefaults checks a command's SigIgn, that bash's $0 is still
// name (or starts with it), and ^C on a terminal job.
func signalsAtDefaults(t *testing.T, e *engine.Engine, tc engine.ToolContext, name string) {
	const intQuit = 1<<(syscall.SIGINT-1) | 1<<(syscall.SIGQUIT-1)
	r := e.Run(context.Background(), tc, engine.Input{Command: "cat /proc/self/status; echo name=$0"})
	if r.Status != engine.StatusOK {
		t.Fatalf("%+v", r)
	}
	if ign := sigIgnOf(t, r.Output); ign&intQuit != 0 {
		t.Errorf("a command's SigIgn %x has SIGINT or SIGQUIT", ign)
	}
	if !strings.Contains(r.Output, "name="+name) {
		t.Errorf("bash's $0 changed: %q", r.Output)
	}
	r = e.Run(context.Background(), tc, engine.Input{Command: "echo ready; sleep 60; echo after:$?", Mode: engine.ModeBackground, TTY: true})
	if r.Status != engine.StatusStarted {
		t.Fatalf("%+v", r)
	}
	waitFor(t, e, tc, r.JobID, "ready")
	waitChild(t, r.PID, "sleep")
	start := time.Now()
	if err := e.Write(context.Background(), tc, r.JobID, []byte("\x03"), false); err != nil {
		t.Fatal(err)
	}
	j := waitJob(t, e, r.JobID, tc.ConversationID)
	if time.Since(start) > 20*time.Second || j.Status == engine.JobRunning {
		t.Fatalf("Ctrl-C did not interrupt sleep: %+v after %v", j, time.Since(start))
	}
}
