//go:build linux

package transact_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/layer/layertest"
	"github.com/bashvisor/bashvisor/internal/transact"
)

// A command that joined a job's layer reports what it changed even when
// an apply of the job's (the job's own end, or a checkpoint of it) took
// the layer first, after the command's Commit began: the command's
// processes are gone then, so that apply applies the command's changes
// too, and the command's own end then finds nothing left to apply
// (issue 32: engine's TestJoinedCommandsOnlyStandardDescriptors reported
// "0\n1\n2\n" with no change line when the job, seeing the file, ended
// in that window). The interleaving is forced: the conversation's turn
// is held while the job's call holds the layer, until the command's
// Commit began.
func TestJoinedCommandReportsWhatAnotherApplyTook(t *testing.T) {
	if layertest.Unprivileged() {
		t.Skip("layers are premounted (and so joined) by a root engine only")
	}
	run := func(g func()) bool { g(); return true } // the job: nothing runs to freeze
	for _, first := range []string{"the job's end", "a checkpoint of the job"} {
		t.Run(first, func(t *testing.T) {
			f := newFixture(t)
			m, err := transact.New(transact.Options{Dir: filepath.Join(t.TempDir(), "state"), Premount: true})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			c := m.Conversation()
			roots, err := transact.Roots(f.ws)
			if err != nil {
				t.Fatal(err)
			}
			job, err := c.Begin(roots, "job")
			if err != nil {
				t.Fatal(err)
			}
			job.Background(run)
			cmd, err := c.Begin(roots, "echo x > ready")
			if err != nil {
				t.Fatal(err)
			}
			if !cmd.Shared() {
				t.Fatal("the command did not join the job's layer")
			}
			if out, err := layertest.Run(t, cmd.Spec(), f.ws, f.env, "echo x > ready"); err != nil {
				t.Fatal(err, out)
			}
			release := transact.HoldTurn(c)
			jobDone := make(chan *transact.Report, 1)
			go func() {
				var rep *transact.Report
				if first == "the job's end" {
					rep, _ = job.Commit(context.Background(), true)
				} else {
					rep, _ = job.Checkpoint(context.Background(), run)
				}
				jobDone <- rep
			}()
			waitUntil(t, "the job's call holds the layer", func() bool { return transact.ShareBusy(job) })
			cmdDone := make(chan *transact.Report, 1)
			go func() {
				rep, err := cmd.Commit(context.Background(), true)
				if err != nil {
					t.Errorf("the command's commit: %v", err)
				}
				cmdDone <- rep
			}()
			waitUntil(t, "the command's Commit began", func() bool { return transact.Ending(cmd) })
			release()
			jobRep, cmdRep := <-jobDone, <-cmdDone
			if got := kinds(f.ws, cmdRep.Listed()); got != "A ready" || f.read("ready") != "x\n" {
				t.Errorf("the command's report lists %q (want A ready); ready in the workspace: %q; the job's: %q", got, f.read("ready"), kinds(f.ws, jobRep.Listed()))
			}
			if first != "the job's end" {
				if rep, err := job.Commit(context.Background(), true); err != nil || rep.NotApplied != "" {
					t.Fatalf("the job's commit: %+v %v", rep, err)
				}
			}
		})
	}
}

// waitUntil polls cond for up to a minute.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for this: %s", what)
		}
	}
}
