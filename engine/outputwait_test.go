//go:build linux

package engine_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/layer/layertest"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestJobOutputDoesNotWaitForApply: while another engine process holds
// the workspace's apply lock (for up to the 10 minutes an apply waits),
// reading a workspace-write job's output, which first applies what the
// job changed so far, returns within seconds: the checkpoint gives up,
// applies nothing (the job's new file stays in its layer, not lost) and
// leaves the job running; once the lock is free the next read applies it.
// (No other command runs meanwhile: it would join the job's layer, and
// its end's checkpoint would wait for the lock with its call's context.)
func TestJobOutputDoesNotWaitForApply(t *testing.T) {
	if ws := os.Getenv(applyLockHolderEnv); ws != "" {
		layertest.HoldApplyLock(t, ws)
		return
	}
	needNamespaces(t)
	e := newEngine(t)
	dir := repo(t)
	tc := workspaceWrite(dir)
	job := e.Run(t.Context(), tc, engine.Input{Mode: engine.ModeBackground,
		Command: `echo a > a.txt; echo written; sleep 1; echo b > b.txt; echo second; sleep 600`})
	if job.Status != engine.StatusStarted {
		t.Fatalf("%s %q", job.Status, job.Output)
	}
	waitFor(t, e, tc, job.JobID, "written")
	holder := exec.Command(os.Args[0], "-test.run=^TestJobOutputDoesNotWaitForApply$")
	holder.Env = append(os.Environ(), applyLockHolderEnv+"="+dir)
	holder.Stderr = os.Stderr
	stdin, _ := testenv.Piped(t, holder, "locked")
	j, err := e.Job(tc, job.JobID)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { // the file, not JobOutput: no checkpoint
		b, _ := os.ReadFile(j.OutputFile)
		return strings.Contains(string(b), "second")
	}, "the job never wrote b.txt")
	done := make(chan error, 1)
	start := time.Now()
	go func() { _, err := e.JobOutput(tc, job.JobID, 0, 0, 0); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("reading the job's output still waits for the other process's apply 90 s on")
	}
	t.Logf("JobOutput returned after %v", time.Since(start))
	if _, err := os.Stat(filepath.Join(dir, "b.txt")); err == nil {
		t.Fatal("b.txt was applied while another process held the lock")
	}
	_ = stdin.Close()
	if err := holder.Wait(); err != nil {
		t.Fatalf("the holder: %v", err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		_, _ = e.JobOutput(tc, job.JobID, 0, 0, 0)
		_, err := os.Stat(filepath.Join(dir, "b.txt"))
		return err == nil
	}, "b.txt never applied once the lock was free")
	if _, err := e.Kill(t.Context(), tc, job.JobID); err != nil {
		t.Fatal(err)
	}
}
