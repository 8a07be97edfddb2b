package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/bashvisor/bashvisor/internal/jobs"
)

// onBecomeBackground: a foreground job that reached its timeout goes on
// as a background job (running or draining stays so). Its output from now
// on goes to the file; the caller gets what it printed so far.
func (j *job) onBecomeBackground(ctx actor.Context, m *BecomeBackground) {
	if !j.yielding || j.spec.Background || (j.ph != running && j.ph != draining) {
		// Ended meanwhile (cancelled, or ended on its own): the supervisor
		// takes back the job id when its final report arrives.
		m.File.Close()
		return
	}
	j.yielding = false
	j.outSW.switchTo(m.File)
	if j.errSW != nil {
		j.errSW.switchTo(m.File)
	}
	o := jobs.Outcome{Duration: time.Since(j.start), Queued: j.spec.Queued,
		Yielded: &jobs.Yielded{ID: m.ID, OutputFile: m.OutputFile}, Limits: j.l.applied}
	o.Output = j.l.out.Result()
	_ = j.l.out.Close()
	if j.l.errBuf != nil {
		r := j.l.errBuf.Result()
		o.Stderr = &r
		_ = j.l.errBuf.Close()
	}
	done := j.spec.Done
	sp := *j.spec
	sp.ID, sp.Background, sp.OutputFile, sp.Done = m.ID, true, m.OutputFile, nil
	sp.Timeout, sp.Completion = sp.Yield.Lifetime, sp.Yield.Completion
	j.spec = &sp
	// The caller may still read the buffers (progress): they stay, unused.
	j.yielded, j.l.file = true, m.File
	if sp.Timeout > 0 {
		j.timeout = time.AfterFunc(sp.Timeout, func() { j.send(timedOut{}) })
	}
	// Report first: the supervisor then lists the job under its new id
	// before the caller, who may use the id at once, has the result.
	j.report(ctx, j.jobState(nil), nil)
	if tx := j.l.tx; tx != nil {
		// Its transaction takes the job's handle (checkpoints, joins)
		// off the actor (it may wait for a checkpoint), before the
		// caller hears.
		live := j.l.live
		go func() {
			tx.Background(live.Freeze)
			done <- o
		}()
	} else {
		done <- o
	}
	j.step(ctx)
}

// onYieldRefused: the supervisor cannot take the job as a background job
// (a cap); it ends as a timeout, saying why.
func (j *job) onYieldRefused(ctx actor.Context, m *YieldRefused) {
	j.yielding = false
	j.yieldRefused = m.Err
	j.terminate(ctx, jobs.ReasonTimeout)
}
