package mcpserver

import (
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/engine"
)

// The job tools: bash_jobs, bash_output, bash_kill and bash_write. Each is
// a body behind the opening every tool shares ([handle]).

// jobsResult is bash_jobs's structured content.
type jobsResult struct {
	Jobs []engine.JobInfo `json:"jobs"`
}

func (s *server) jobs(c *toolCall, _ noArgs) (*mcp.CallToolResult, error) {
	out := jobsResult{Jobs: s.e.Jobs(c.tc)}
	if out.Jobs == nil {
		out.Jobs = []engine.JobInfo{}
	}
	return s.reply(c, engine.JobsText(out.Jobs, time.Now()), out), nil
}

func (s *server) output(c *toolCall, a outputArgs) (*mcp.CallToolResult, error) {
	if a.wait > 0 {
		from := c.job.Bytes
		if a.ranged {
			from = a.offset
		}
		if _, err := s.e.WaitOutput(c.ctx, c.tc, a.jobID, from, a.wait); err != nil {
			return nil, engine.JobError(a.jobID, err)
		}
	}
	return s.jobOutput(c, a.jobID, a.tail, a.offset, a.limit)
}

// jobOutput is bash_output's and bash_write's result: the slice's text
// (at most the call's output budget, Options.OutputMax) and, when the call
// asks for the fields, a resource link to the job's whole output.
func (s *server) jobOutput(c *toolCall, id string, tail, offset, limit int64) (*mcp.CallToolResult, error) {
	if b := int64(c.tc.OutputMax); b > 0 {
		tail, limit = min(tail, b), min(limit, b)
	}
	jo, err := s.e.JobOutput(c.tc, id, tail, offset, limit)
	if err != nil {
		return nil, engine.JobError(id, err)
	}
	return s.reply(c, jo.Text(), jo, jobLink(c.sc, jo.Job)), nil
}

func (s *server) kill(c *toolCall, a jobArg) (*mcp.CallToolResult, error) {
	j, err := s.e.Kill(c.ctx, c.tc, a.jobID)
	if err != nil {
		return nil, engine.JobError(a.jobID, err)
	}
	return s.reply(c, j.Text(), j), nil
}

// settle is how long bash_write waits, once new output arrived, for the
// job to go quiet before it answers (an echoed line and the answer to it
// usually come apart).
const settle = 100 * time.Millisecond

func (s *server) write(c *toolCall, a writeArgs) (*mcp.CallToolResult, error) {
	from := c.job.Bytes
	if err := s.e.Write(c.ctx, c.tc, a.jobID, []byte(a.input), a.close); err != nil {
		return nil, err
	}
	// Wait for the first new output that is more than a terminal's echo
	// of the input, then until the job is quiet for settle, it ends, or
	// the wait is over.
	deadline := time.Now().Add(a.wait)
	echo := ttyEcho(a.input)
	seen, answered := from, false
	for {
		wait := time.Until(deadline)
		if answered {
			wait = min(wait, settle)
		}
		j, err := s.e.WaitOutput(c.ctx, c.tc, a.jobID, seen, wait)
		if err != nil {
			return nil, engine.JobError(a.jobID, err)
		}
		if j.Status != engine.JobRunning || j.Bytes <= seen || !time.Now().Before(deadline) || c.ctx.Err() != nil {
			break
		}
		seen = j.Bytes
		answered = answered || !s.onlyEcho(c.tc, a.jobID, from, seen, echo)
	}
	return s.jobOutput(c, a.jobID, 0, from, maxReadBytes)
}

// ttyEcho is what a terminal echoes of input: each line end as "\r\n".
func ttyEcho(input string) string {
	return strings.NewReplacer("\r\n", "\r\n", "\r", "\r\n", "\n", "\r\n").Replace(input)
}

// onlyEcho reports whether the output of job id between offsets from and
// to is (a start of) echo: a terminal echoing the input, not yet the
// program's answer. The output reads rendered (a line end as "\n") unless
// the engine gives it raw.
func (s *server) onlyEcho(tc engine.ToolContext, id string, from, to int64, echo string) bool {
	if echo == "" || to-from > int64(len(echo)) {
		return false
	}
	jo, err := s.e.JobOutput(tc, id, 0, from, to-from)
	return err == nil && (strings.HasPrefix(echo, jo.Data) || strings.HasPrefix(strings.ReplaceAll(echo, "\r\n", "\n"), jo.Data))
}
