package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/bashvisor/bashvisor/cluster/clusterpb"
	"github.com/bashvisor/bashvisor/engine"
)

type recordedJob struct {
	gen  int
	exec string // executor id
	info engine.JobInfo
}

const maxRecordedJobs = 1000

// --- jobs ---

// jobID is a job's id on the front: the executor's id, prefixed with the
// placement generation from the second executor on.
func jobID(gen int, id string) string {
	if gen <= 1 {
		return id
	}
	return "g" + strconv.Itoa(gen) + "." + id
}

// splitJobID undoes jobID.
func splitJobID(id string) (gen int, execID string) {
	if rest, ok := strings.CutPrefix(id, "g"); ok {
		if n, tail, ok := strings.Cut(rest, "."); ok {
			if g, err := strconv.Atoi(n); err == nil && g > 1 {
				return g, tail
			}
		}
	}
	return 1, id
}

func (c *Client) recordJob(conv string, a assignment, st *execState, r engine.Result) string {
	id := jobID(a.gen, r.JobID)
	c.remember(conv, a, st.id, engine.JobInfo{
		JobID: id, PID: r.PID, Command: r.Command, Display: r.Display, ConversationID: conv,
		Status: engine.JobRunning, Started: time.Now().Add(-time.Duration(r.DurationMS) * time.Millisecond), OutputFile: r.OutputFile,
	})
	return id
}

// remember records a job of conv on executor execID (once), to report it
// lost should the executor be lost.
func (c *Client) remember(conv string, a assignment, execID string, j engine.JobInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cs := c.convs[conv]
	if cs == nil {
		cs = &convState{}
		c.convs[conv] = cs
	}
	for _, rj := range cs.jobs {
		if rj.exec == execID && rj.info.JobID == j.JobID {
			return
		}
	}
	cs.jobs = append(cs.jobs, recordedJob{gen: a.gen, exec: execID, info: j})
	if len(cs.jobs) > maxRecordedJobs {
		cs.jobs = cs.jobs[len(cs.jobs)-maxRecordedJobs:]
	}
}

// lostJobs returns the conversation's recorded jobs whose executor is
// lost, as lost jobs.
func (c *Client) lostJobs(conv string) []engine.JobInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []engine.JobInfo
	if cs := c.convs[conv]; cs != nil {
		for _, rj := range cs.jobs {
			if st := c.execs[rj.exec]; st == nil || st.isLost() {
				j := rj.info
				j.Status, j.Reason = engine.JobLost, "executor "+nameOf(st, rj.exec)+" stopped answering; the job may have finished or may still be running"
				out = append(out, j)
			}
		}
	}
	return out
}

func nameOf(st *execState, id string) string {
	if st == nil {
		return id
	}
	return st.name()
}

// target returns the live executor of conv for a job query: the one
// this front knows, or (with lookup) the one the executors say holds it;
// ok is false when it runs nowhere (or its executor is gone).
func (c *Client) target(ctx context.Context, conv string, lookup bool) (*execState, assignment, bool) {
	if st, a, ok := c.cached(conv); ok || !lookup {
		return st, a, ok
	}
	holder, a, _, err := c.lookup(ctx, conv)
	if err != nil || holder == nil {
		if err != nil {
			c.log.Warn("looking for a conversation's executor", "conversation", conv, "err", err)
		}
		return nil, a, false
	}
	c.learn(conv, a)
	return holder, a, true
}

// convQuery runs q on the executor of conv's job id (all its jobs when id
// is ""), looking for the executor again once if the one it asked no
// longer holds the conversation (another front ended it and it runs
// elsewhere now). A job id of another placement generation, and a
// conversation that runs nowhere, are ErrNoSuchJob (errNotPlaced for the
// job list).
func (c *Client) convQuery(ctx context.Context, conv, id string, q *clusterpb.Query) (assignment, *clusterpb.QueryReply, error) {
	gen, rid := splitJobID(id)
	q.JobId = rid
	for attempt := 0; ; attempt++ {
		st, a, ok := c.target(ctx, conv, true)
		switch {
		case !ok && id == "":
			return a, nil, errNotPlaced
		case !ok || (id != "" && gen != a.gen):
			return a, nil, fmt.Errorf("%w: %q", engine.ErrNoSuchJob, id)
		}
		r, err := c.query(ctx, st, q)
		if err != nil || !r.NotHeld {
			return a, r, err
		}
		c.forget(conv, st.id)
		if attempt > 0 {
			return a, nil, fmt.Errorf("%w: %q", engine.ErrNoSuchJob, id)
		}
	}
}

// query asks st one question and waits for the answer.
func (c *Client) query(ctx context.Context, st *execState, q *clusterpb.Query) (*clusterpb.QueryReply, error) {
	q.ExecutorId = st.id
	ctx, cancel := context.WithTimeout(ctx, c.o.QueryTimeout)
	defer cancel()
	ev, pid := c.spawnCall(st, q)
	defer c.stopActor(pid)
	lost := st.lost
	for {
		select {
		case e := <-ev:
			switch m := e.(type) {
			case *clusterpb.QueryReply:
				return m, decodeReplyErr(m)
			case *clusterpb.Refused:
				if m.Kind == "shutdown" {
					return nil, fmt.Errorf("%w: executor %s: %s", engine.ErrShutdown, st.name(), m.Reason)
				}
				c.markLost(st, m.Reason)
				return nil, fmt.Errorf("%w: %s: %s", ErrExecutorLost, st.name(), m.Reason)
			case *actor.Terminated:
				c.markLost(st, terminatedWhy(m))
				return nil, fmt.Errorf("%w: %s: %s", ErrExecutorLost, st.name(), terminatedWhy(m))
			case callFlush:
				return nil, fmt.Errorf("%w: %s: %s", ErrExecutorLost, st.name(), st.lostWhy)
			}
		case <-lost: // the answer may be in the call actor's mailbox (see runOn)
			lost = nil
			c.node.sys.Root.Send(pid, callFlush{})
		case <-ctx.Done():
			return nil, fmt.Errorf("executor %s: %w", st.name(), ctx.Err())
		}
	}
}

// Jobs implements engine.Runner: the conversation's jobs on its executor,
// after those of lost executors (status "lost").
func (c *Client) Jobs(tc engine.ToolContext) []engine.JobInfo {
	out := c.lostJobs(tc.ConversationID)
	a, r, err := c.convQuery(context.Background(), tc.ConversationID, "", &clusterpb.Query{Op: "jobs", Tc: encodeTC(tc, "")})
	switch {
	case errors.Is(err, errNotPlaced):
		return out
	case err != nil:
		c.log.Warn("jobs query failed", "executor", a.name, "err", err)
		return c.lostJobs(tc.ConversationID)
	}
	for _, p := range r.Jobs {
		j := decodeJob(p)
		j.JobID = jobID(a.gen, j.JobID)
		if j.Status == engine.JobRunning {
			c.remember(tc.ConversationID, a, a.execID, j)
		}
		out = append(out, j)
	}
	return out
}

// Job implements engine.Runner.
func (c *Client) Job(tc engine.ToolContext, id string) (engine.JobInfo, error) {
	if j, ok := c.lostJob(tc.ConversationID, id); ok {
		return j, nil
	}
	a, r, err := c.convQuery(context.Background(), tc.ConversationID, id, &clusterpb.Query{Op: "job", Tc: encodeTC(tc, "")})
	if err != nil {
		if j, ok := c.lostJob(tc.ConversationID, id); ok {
			return j, nil
		}
		return engine.JobInfo{}, err
	}
	return c.firstJob(r, a), nil
}

func (c *Client) firstJob(r *clusterpb.QueryReply, a assignment) engine.JobInfo {
	if len(r.Jobs) == 0 {
		return engine.JobInfo{}
	}
	j := decodeJob(r.Jobs[0])
	j.JobID = jobID(a.gen, j.JobID)
	return j
}

func (c *Client) lostJob(conv, id string) (engine.JobInfo, bool) {
	for _, j := range c.lostJobs(conv) {
		if j.JobID == id {
			return j, true
		}
	}
	return engine.JobInfo{}, false
}

// JobOutput implements engine.Runner. The output of a lost job was on its
// executor: the error says so.
func (c *Client) JobOutput(tc engine.ToolContext, id string, tail, offset, limit int64) (engine.JobOutput, error) {
	if j, ok := c.lostJob(tc.ConversationID, id); ok {
		return engine.JobOutput{Job: j}, fmt.Errorf("%w: job %s: its output was on executor %s, which stopped answering", ErrExecutorLost, id, j.Reason)
	}
	a, r, err := c.convQuery(context.Background(), tc.ConversationID, id, &clusterpb.Query{Op: "output", Tc: encodeTC(tc, ""), Tail: tail, Offset: offset, Limit: limit})
	if err != nil {
		return engine.JobOutput{}, err
	}
	return engine.JobOutput{Job: c.firstJob(r, a), Offset: r.Offset, End: r.End, Data: r.Data, Size: r.Size, EOF: r.Eof, Skipped: r.Skipped}, nil
}

// Kill implements engine.Runner. A lost job cannot be killed from here:
// the error says so.
func (c *Client) Kill(ctx context.Context, tc engine.ToolContext, id string) (engine.JobInfo, error) {
	if j, ok := c.lostJob(tc.ConversationID, id); ok {
		return j, fmt.Errorf("%w: job %s cannot be killed: %s", ErrExecutorLost, id, j.Reason)
	}
	a, r, err := c.convQuery(ctx, tc.ConversationID, id, &clusterpb.Query{Op: "kill", Tc: encodeTC(tc, "")})
	if err != nil {
		return engine.JobInfo{}, err
	}
	return c.firstJob(r, a), nil
}

// Write implements engine.Runner: the bytes go to the job's executor.
func (c *Client) Write(ctx context.Context, tc engine.ToolContext, id string, data []byte, close bool) error {
	if j, ok := c.lostJob(tc.ConversationID, id); ok {
		return fmt.Errorf("%w: job %s takes no input: %s", ErrExecutorLost, id, j.Reason)
	}
	_, _, err := c.convQuery(ctx, tc.ConversationID, id, &clusterpb.Query{Op: "write", Tc: encodeTC(tc, ""), Data: data, Close: close})
	return err
}

// WaitOutput implements engine.Runner: the job's executor waits.
func (c *Client) WaitOutput(ctx context.Context, tc engine.ToolContext, id string, offset int64, d time.Duration) (engine.JobInfo, error) {
	if j, ok := c.lostJob(tc.ConversationID, id); ok {
		return j, nil // ended, as far as anyone can tell
	}
	a, r, err := c.convQuery(ctx, tc.ConversationID, id, &clusterpb.Query{Op: "wait", Tc: encodeTC(tc, ""), Offset: offset, WaitMs: d.Milliseconds()})
	if err != nil {
		return engine.JobInfo{}, err
	}
	return c.firstJob(r, a), nil
}

// fullChunk bounds one read of a full output over the wire, so that a
// long output is not one message to build and take in whole.
const fullChunk = 1 << 20

// ReadFullOutput reads length bytes (at most; from offset) of full output
// id of tc's conversation, the output of a truncated result
// (engine.Result.FullOutputFile, whose id is its name without "output-"
// and ".log"), on the conversation's executor, as text that ends on a
// character boundary. It returns the text, the file offset after the
// bytes it covers, and the output's size. An output the conversation does
// not have (or no longer: executors serve the newest 16 of each
// conversation, engines keep Config.Output.SpoolKeep) is an error
// matching fs.ErrNotExist. mcpserver serves the full outputs of a fleet
// with it, from any front.
func (c *Client) ReadFullOutput(tc engine.ToolContext, id string, offset, length int64) (string, int64, int64, error) {
	var b strings.Builder
	end, size := offset, int64(0)
	for {
		_, r, err := c.convQuery(context.Background(), tc.ConversationID, "", &clusterpb.Query{Op: "full", Tc: encodeTC(tc, ""),
			OutputId: id, Offset: end, Limit: min(length-int64(b.Len()), fullChunk)})
		switch {
		case errors.Is(err, errNotPlaced):
			return "", 0, 0, fmt.Errorf("%w: no full output %q in this conversation", fs.ErrNotExist, id)
		case err != nil:
			return "", 0, 0, err
		}
		b.WriteString(r.Data)
		size = r.Size
		if r.End <= end || r.End >= size || int64(b.Len()) >= length {
			return b.String(), max(end, r.End), size, nil
		}
		end = r.End
	}
}

// Undo is engine.Engine's Undo: the executor that holds the
// conversation undoes its last steps workspace-write commands there, or
// what tc's UndoTurn, UndoPaths or Redo choose (its engine keeps the
// conversation's undo store and what it can redo), and its answer and errors
// reach the caller as the engine gave them (an *engine.UndoConflictError
// with its paths). A conversation that runs on no executor has nothing
// to undo: one that never ran a command, and one whose executor was lost
// (its store went with it; with SharedDirs the conversation's next
// executor starts a new one).
func (c *Client) Undo(ctx context.Context, tc engine.ToolContext, steps int) (engine.UndoResult, error) {
	chosen := tc.UndoTurn != "" || len(tc.UndoPaths) > 0 || tc.Redo
	if steps < 1 && !chosen {
		return engine.UndoResult{}, fmt.Errorf("%w: steps must be at least 1", engine.ErrBadInput)
	}
	_, r, err := c.convQuery(ctx, tc.ConversationID, "", &clusterpb.Query{Op: "undo", Tc: encodeTC(tc, ""), Steps: int64(steps)})
	switch {
	case errors.Is(err, errNotPlaced):
		what := "1 step"
		switch {
		case tc.Redo:
			what = "a redo"
		case chosen:
			what = "its steps"
		case steps > 1:
			what = strconv.Itoa(steps) + " steps"
		}
		if lost := c.lostExecutor(tc.ConversationID); lost != "" {
			return engine.UndoResult{}, fmt.Errorf("%w: %s asked for, 0 kept (executor %s kept them and stopped answering: %w)",
				engine.ErrNothingToUndo, what, lost, ErrExecutorLost)
		}
		return engine.UndoResult{}, fmt.Errorf("%w: %s asked for, 0 kept", engine.ErrNothingToUndo, what)
	case err != nil:
		return engine.UndoResult{}, err
	}
	return decodeUndo(r), nil
}

// lostExecutor names the lost executor this front last found conv on
// ("" when none).
func (c *Client) lostExecutor(conv string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.placed[conv]
	if st := c.execs[a.execID]; ok && st != nil && st.isLost() {
		return st.name()
	}
	return ""
}
