//go:build linux

package engine_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/layer/layertest"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// applyLockHolderEnv makes the test binary another engine process that
// holds the apply lock of the workspace it names (the abstract unix
// socket "@bashvisor-apply-<dev>:<ino>" of the root) until its standard
// input ends.
const applyLockHolderEnv = "ENGINE_TEST_HOLD_APPLY_LOCK"

// TestCancelledCallStopsWaitingForApply: while another engine process
// applies to the workspace (it holds the apply lock, for the 10 minutes
// an apply waits at most), a workspace-write call whose context ends
// after its command ran (an MCP client cancelling, a call timing out)
// returns at once instead of waiting for the lock: the command's
// changes are held, not applied and not lost, and accepting them once
// the other process let go applies them.
func TestCancelledCallStopsWaitingForApply(t *testing.T) {
	if ws := os.Getenv(applyLockHolderEnv); ws != "" {
		layertest.HoldApplyLock(t, ws)
		return
	}
	needNamespaces(t)
	e := newEngine(t, func(c *engine.Config) { c.ProgressInterval = 50 * time.Millisecond })
	dir := repo(t)
	holder := exec.Command(os.Args[0], "-test.run=^TestCancelledCallStopsWaitingForApply$")
	holder.Env = append(os.Environ(), applyLockHolderEnv+"="+dir)
	holder.Stderr = os.Stderr
	stdin, _ := testenv.Piped(t, holder, "locked")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tc := workspaceWrite(dir)
	var ranAt atomic.Int64
	tc.Progress = func(p engine.Progress) {
		// The command ran: its commit now waits for the other process.
		if strings.Contains(p.Output, "written") && ranAt.CompareAndSwap(0, time.Now().UnixNano()) {
			cancel()
		}
	}
	got := make(chan engine.Result, 1)
	go func() { got <- e.Run(ctx, tc, engine.Input{Command: "echo new > new.txt && echo written"}) }()
	var r engine.Result
	select {
	case r = <-got:
	case <-time.After(2 * time.Minute):
		t.Fatal("the call still waits for the other process's apply two minutes on")
	}
	if ranAt.Load() == 0 {
		t.Fatalf("the call ended before the command's output was seen: %s %q", r.Status, r.Output)
	}
	if took := time.Since(time.Unix(0, ranAt.Load())); took > time.Minute {
		t.Errorf("returned %v after it was cancelled", took)
	}
	if r.Held == nil || len(r.Held.Changes) != 1 || r.Held.Changes[0].Path != "new.txt" {
		t.Fatalf("held %+v; output %q", r.Held, r.Output)
	}
	if _, err := os.Stat(filepath.Join(dir, "new.txt")); err == nil {
		t.Fatal("new.txt was applied while another process held the lock")
	}
	_ = stdin.Close()
	if err := holder.Wait(); err != nil {
		t.Fatalf("the holder: %v", err)
	}
	if _, err := e.Review(context.Background(), tc, r.Held.ID, r.Held.Digest, true); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "new.txt")); err != nil || string(b) != "new\n" {
		t.Errorf("after the accept: new.txt %q %v", b, err)
	}
}
