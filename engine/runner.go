package engine

import (
	"context"
	"time"
)

// Runner runs tool calls and manages their background jobs: an [*Engine]
// runs them on this machine; another implementation may run them
// elsewhere (on a fleet of executor machines). Package mcpserver and the
// demo CLI accept any Runner. The methods mean what Engine's documentation
// says.
type Runner interface {
	// Run runs one tool call and returns its result.
	Run(ctx context.Context, tc ToolContext, in Input) Result
	// Description is the tool description for the model.
	Description(tc ToolContext) string
	// Jobs lists the background jobs of tc's conversation, oldest first.
	Jobs(tc ToolContext) []JobInfo
	// Job returns one background job of tc's conversation.
	Job(tc ToolContext, id string) (JobInfo, error)
	// JobOutput reads a slice of a background job's output.
	JobOutput(tc ToolContext, id string, tail, offset, limit int64) (JobOutput, error)
	// Kill ends a background job and returns its final state.
	Kill(ctx context.Context, tc ToolContext, id string) (JobInfo, error)
	// Write sends input to a background job's stdin (Input.Stdin "pipe"
	// or Input.TTY), closing it after when close is set.
	Write(ctx context.Context, tc ToolContext, id string, data []byte, close bool) error
	// WaitOutput waits (bounded) until a background job has more than
	// offset bytes of output or has ended, and returns its state.
	WaitOutput(ctx context.Context, tc ToolContext, id string, offset int64, d time.Duration) (JobInfo, error)
	// EndConversation ends a conversation's jobs and forgets them.
	EndConversation(ctx context.Context, conversationID string) error
	// RedactCommand makes command text fit for a log.
	RedactCommand(command string) string
	// Shutdown ends every job and stops the runner.
	Shutdown(ctx context.Context) error
}

var _ Runner = (*Engine)(nil)

// A Runner may also take back what the last workspace-write commands of
// a conversation changed, with Engine's Undo method (Engine; a fleet's
// cluster.Client, which forwards it to the executor that holds the
// conversation): mcpserver offers the bash_undo tool for one. One with
// Engine's Held and Review methods (Engine) holds change sets for
// review: mcpserver offers bash_review.
