package engine_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/bashvisor/bashvisor/engine"
)

// An agent server creates one Engine and calls Run for every tool call of
// every conversation; the ToolContext carries the per-call state.
func Example() {
	e, err := engine.New(engine.DefaultConfig())
	if err != nil {
		panic(err)
	}
	defer e.Shutdown(context.Background())

	tc := engine.ToolContext{WorkingDir: os.TempDir(), ConversationID: "conv-42"}
	r := e.Run(context.Background(), tc, engine.Input{Command: "echo hello; exit 3"})
	fmt.Printf("%s %d\n%s", r.Status, *r.ExitCode, r.Output)

	r = e.Run(context.Background(), tc, engine.Input{Command: "git push --force"})
	fmt.Println(r.Status)
	// Output:
	// failed 3
	// [command failed: exit code 3]
	// hello
	// blocked
}

// A cancelled context ends the command's whole process group with the
// grace sequence (SIGTERM, grace period, SIGKILL). Here the caller cancels
// once progress shows the command has started.
func ExampleEngine_Run_cancel() {
	e, _ := engine.New(engine.DefaultConfig())
	defer e.Shutdown(context.Background())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tc := engine.ToolContext{WorkingDir: os.TempDir(), Progress: func(p engine.Progress) {
		if p.LastLine == "started" { // progress reports arrive once a second
			cancel()
		}
	}}
	r := e.Run(ctx, tc, engine.Input{Command: "echo started; sleep 60"})
	fmt.Print(r.Output)
	// Output:
	// [command cancelled]
	// started
}

// Background jobs return at once; their output goes to a file that Jobs,
// JobOutput and Kill work with.
func ExampleEngine_Kill() {
	e, _ := engine.New(engine.DefaultConfig())
	defer e.Shutdown(context.Background())

	r := e.Run(context.Background(), engine.ToolContext{WorkingDir: os.TempDir()},
		engine.Input{Command: "echo serving; sleep 600", Mode: engine.ModeBackground})
	fmt.Println(r.Status, r.JobID)
	// Wait until the job is serving: it has written its first line.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if out, _ := e.JobOutput(engine.ToolContext{}, r.JobID, 0, 0, 0); strings.Contains(out.Data, "serving") {
			break
		}
	}
	job, _ := e.Kill(context.Background(), engine.ToolContext{}, r.JobID)
	out, _ := e.JobOutput(engine.ToolContext{}, r.JobID, 0, 0, 0)
	fmt.Println(job.Status, job.Reason)
	fmt.Printf("%q\n", out.Data)
	// Output:
	// started job-1
	// killed killed by request
	// "serving\n\n\n[background process killed: killed by request]"
}
