package cluster

import (
	"context"
	"fmt"
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

func (c *Client) recordJob(conv string, a Assignment, st *execState, r engine.Result) string {
	id := jobID(a.Generation, r.JobID)
	c.mu.Lock()
	defer c.mu.Unlock()
	cs := c.convs[conv]
	if cs == nil {
		cs = &convState{}
		c.convs[conv] = cs
	}
	cs.jobs = append(cs.jobs, recordedJob{gen: a.Generation, exec: st.id, info: engine.JobInfo{
		JobID: id, PID: r.PID, Command: r.Command, Display: r.Display, ConversationID: conv,
		Status: engine.JobRunning, Started: time.Now().Add(-time.Duration(r.DurationMS) * time.Millisecond), OutputFile: r.OutputFile,
	}})
	if len(cs.jobs) > maxRecordedJobs {
		cs.jobs = cs.jobs[len(cs.jobs)-maxRecordedJobs:]
	}
	return id
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

// target returns the live executor and generation of tc's conversation
// for a job query, or ok false when it has none.
func (c *Client) target(conv string) (*execState, Assignment, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok, err := c.o.Placement.Get(conv)
	if err != nil || !ok {
		return nil, a, false
	}
	st := c.execs[a.ExecutorID]
	if st == nil || st.isLost() {
		return nil, a, false
	}
	return st, a, true
}

// query asks st one question and waits for the answer.
func (c *Client) query(ctx context.Context, st *execState, q *clusterpb.Query) (*clusterpb.QueryReply, error) {
	q.ExecutorId = st.id
	ctx, cancel := context.WithTimeout(ctx, c.o.QueryTimeout)
	defer cancel()
	ev, pid := c.spawnCall(st, q)
	defer c.stopActor(pid)
	for {
		select {
		case e := <-ev:
			switch m := e.(type) {
			case *clusterpb.QueryReply:
				return m, decodeErr(m.ErrKind, m.Err)
			case *clusterpb.Refused:
				if m.Kind == "shutdown" {
					return nil, fmt.Errorf("%w: executor %s: %s", engine.ErrShutdown, st.name(), m.Reason)
				}
				c.markLost(st, m.Reason)
				return nil, fmt.Errorf("%w: %s: %s", ErrExecutorLost, st.name(), m.Reason)
			case *actor.Terminated:
				c.markLost(st, terminatedWhy(m))
				return nil, fmt.Errorf("%w: %s: %s", ErrExecutorLost, st.name(), terminatedWhy(m))
			}
		case <-st.lost:
			return nil, fmt.Errorf("%w: %s: %s", ErrExecutorLost, st.name(), st.lostWhy)
		case <-ctx.Done():
			return nil, fmt.Errorf("executor %s: %w", st.name(), ctx.Err())
		}
	}
}

// Jobs implements engine.Runner: the conversation's jobs on its executor,
// after those of lost executors (status "lost").
func (c *Client) Jobs(tc engine.ToolContext) []engine.JobInfo {
	out := c.lostJobs(tc.ConversationID)
	st, a, ok := c.target(tc.ConversationID)
	if !ok {
		return out
	}
	r, err := c.query(context.Background(), st, &clusterpb.Query{Op: "jobs", Tc: encodeTC(tc, "")})
	if err != nil {
		c.log.Warn("jobs query failed", "executor", st.name(), "err", err)
		return c.lostJobs(tc.ConversationID)
	}
	for _, p := range r.Jobs {
		j := decodeJob(p)
		j.JobID = jobID(a.Generation, j.JobID)
		out = append(out, j)
	}
	return out
}

// Job implements engine.Runner.
func (c *Client) Job(tc engine.ToolContext, id string) (engine.JobInfo, error) {
	if j, ok := c.lostJob(tc.ConversationID, id); ok {
		return j, nil
	}
	st, a, rid, err := c.jobTarget(tc.ConversationID, id)
	if err != nil {
		return engine.JobInfo{}, err
	}
	r, err := c.query(context.Background(), st, &clusterpb.Query{Op: "job", Tc: encodeTC(tc, ""), JobId: rid})
	if err != nil {
		if j, ok := c.lostJob(tc.ConversationID, id); ok {
			return j, nil
		}
		return engine.JobInfo{}, err
	}
	return c.firstJob(r, a), nil
}

func (c *Client) firstJob(r *clusterpb.QueryReply, a Assignment) engine.JobInfo {
	if len(r.Jobs) == 0 {
		return engine.JobInfo{}
	}
	j := decodeJob(r.Jobs[0])
	j.JobID = jobID(a.Generation, j.JobID)
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

// jobTarget finds the executor that holds job id of conv: the
// conversation's current executor when the id is of its generation.
func (c *Client) jobTarget(conv, id string) (*execState, Assignment, string, error) {
	st, a, ok := c.target(conv)
	gen, rid := splitJobID(id)
	if !ok || gen != a.Generation {
		return nil, a, "", fmt.Errorf("%w: %q", engine.ErrNoSuchJob, id)
	}
	return st, a, rid, nil
}

// JobOutput implements engine.Runner. The output of a lost job was on its
// executor: the error says so.
func (c *Client) JobOutput(tc engine.ToolContext, id string, tail, offset, limit int64) (engine.JobOutput, error) {
	if j, ok := c.lostJob(tc.ConversationID, id); ok {
		return engine.JobOutput{Job: j}, fmt.Errorf("%w: job %s: its output was on executor %s, which stopped answering", ErrExecutorLost, id, j.Reason)
	}
	st, a, rid, err := c.jobTarget(tc.ConversationID, id)
	if err != nil {
		return engine.JobOutput{}, err
	}
	r, err := c.query(context.Background(), st, &clusterpb.Query{Op: "output", Tc: encodeTC(tc, ""), JobId: rid, Tail: tail, Offset: offset, Limit: limit})
	if err != nil {
		return engine.JobOutput{}, err
	}
	return engine.JobOutput{Job: c.firstJob(r, a), Offset: r.Offset, End: r.End, Data: r.Data, Size: r.Size, EOF: r.Eof}, nil
}

// Kill implements engine.Runner. A lost job cannot be killed from here:
// the error says so.
func (c *Client) Kill(ctx context.Context, tc engine.ToolContext, id string) (engine.JobInfo, error) {
	if j, ok := c.lostJob(tc.ConversationID, id); ok {
		return j, fmt.Errorf("%w: job %s cannot be killed: %s", ErrExecutorLost, id, j.Reason)
	}
	st, a, rid, err := c.jobTarget(tc.ConversationID, id)
	if err != nil {
		return engine.JobInfo{}, err
	}
	r, err := c.query(ctx, st, &clusterpb.Query{Op: "kill", Tc: encodeTC(tc, ""), JobId: rid})
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
	st, _, rid, err := c.jobTarget(tc.ConversationID, id)
	if err != nil {
		return err
	}
	_, err = c.query(ctx, st, &clusterpb.Query{Op: "write", Tc: encodeTC(tc, ""), JobId: rid, Data: data, Close: close})
	return err
}

// WaitOutput implements engine.Runner: the job's executor waits.
func (c *Client) WaitOutput(ctx context.Context, tc engine.ToolContext, id string, offset int64, d time.Duration) (engine.JobInfo, error) {
	if j, ok := c.lostJob(tc.ConversationID, id); ok {
		return j, nil // ended, as far as anyone can tell
	}
	st, a, rid, err := c.jobTarget(tc.ConversationID, id)
	if err != nil {
		return engine.JobInfo{}, err
	}
	r, err := c.query(ctx, st, &clusterpb.Query{Op: "wait", Tc: encodeTC(tc, ""), JobId: rid, Offset: offset, WaitMs: d.Milliseconds()})
	if err != nil {
		return engine.JobInfo{}, err
	}
	return c.firstJob(r, a), nil
}
