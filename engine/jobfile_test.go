package engine_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
)

// TestJobFileCapped: a background job that prints far more than
// Output.JobFileCap leaves a file no larger than the cap, which keeps the
// first output, says what it dropped, and ends with the newest output and
// the completion line; bash_output's offsets count every byte printed, so
// reading on from an offset the file dropped starts after the gap, and a
// tail read still works. Without secrets to redact too (the job's output
// went straight into its file before the cap existed).
func TestJobFileCapped(t *testing.T) {
	const capBytes = 256 << 10
	e := newEngine(t, func(c *engine.Config) { c.Output.JobFileCap = capBytes })
	tc := tc(t)
	// 4 MiB of numbered lines: "line 000001\n"...
	r := e.Run(context.Background(), tc, engine.Input{Mode: engine.ModeBackground,
		Command: `seq -f 'line %06g' 1 349525; echo last`})
	if r.Status != engine.StatusStarted {
		t.Fatalf("%s %q", r.Status, r.Output)
	}
	j := waitJob(t, e, r.JobID, tc.ConversationID)
	fi, err := os.Stat(j.OutputFile)
	if err != nil || fi.Size() > capBytes {
		t.Fatalf("output file %d bytes, cap %d (%v)", fi.Size(), capBytes, err)
	}
	b, _ := os.ReadFile(j.OutputFile)
	s := string(b)
	if !strings.HasPrefix(s, "line 000001\n") || !strings.Contains(s, "bytes dropped here, between the first 32 KiB and the newest output]") ||
		!strings.Contains(s, "last\n\n\n[background process completed]") {
		t.Fatalf("file: %q ... %q", s[:100], s[len(s)-200:])
	}
	if j.Bytes <= 4<<20 {
		t.Fatalf("Bytes = %d: not the output's size", j.Bytes)
	}
	// Reading on from an offset in the dropped range.
	out, err := e.JobOutput(tc, r.JobID, 0, 1<<20, 100)
	if err != nil || out.Offset <= 1<<20 || out.Skipped != out.Offset-1<<20 || !strings.HasPrefix(out.Text(), "[job ") ||
		!strings.Contains(out.Text(), "were dropped: the job's output file is capped") {
		t.Fatalf("JobOutput(1 MiB) = %+v, %v\n%s", out, err, out.Text())
	}
	// The line at that offset is whole: offsets are the output's.
	line := int64(len("line 000001\n"))
	if out.Offset%line == 0 && !strings.HasPrefix(out.Data, "line ") {
		t.Fatalf("data at offset %d: %q", out.Offset, out.Data)
	}
	// Paging from 0: the head, then the gap is skipped.
	out, err = e.JobOutput(tc, r.JobID, 0, 0, 1<<20)
	if err != nil || out.Offset != 0 || out.Skipped != 0 || int64(len(out.Data)) != capBytes/8 || out.EOF {
		t.Fatalf("JobOutput(0) = offset %d skipped %d len %d eof %v, %v", out.Offset, out.Skipped, len(out.Data), out.EOF, err)
	}
	next, err := e.JobOutput(tc, r.JobID, 0, out.Offset+int64(len(out.Data)), 100)
	if err != nil || next.Skipped == 0 || next.Offset != out.Offset+int64(len(out.Data))+next.Skipped {
		t.Fatalf("next page %+v, %v", next, err)
	}
	// The tail.
	tail, err := e.JobOutput(tc, r.JobID, 40, 0, 0)
	if err != nil || !tail.EOF || !strings.HasSuffix(tail.Data, "[background process completed]") || tail.Offset+int64(len(tail.Data)) != tail.Size {
		t.Fatalf("tail %+v, %v", tail, err)
	}
}

// TestJobFileAndStateAgree: a background job's file gets its completion
// line exactly when its state ends — never "[background process
// completed]" beside a running job, never an ended job whose file lacks
// the line (an unrestricted job, and a sandboxed one, whose clean-up runs
// between its end and its final state).
func TestJobFileAndStateAgree(t *testing.T) {
	check := func(t *testing.T, e *engine.Engine, tc engine.ToolContext) {
		for i := range 15 {
			r := e.Run(context.Background(), tc, engine.Input{Mode: engine.ModeBackground, Command: "echo hi"})
			if r.Status != engine.StatusStarted {
				t.Fatalf("%s %q", r.Status, r.Output)
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				jo, err := e.JobOutput(tc, r.JobID, 0, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				line := strings.Contains(jo.Data, "[background process completed]")
				running := jo.Job.Status == engine.JobRunning
				if line && running {
					t.Fatalf("job %d: the file says completed, the state %s: %q", i, jo.Job.Status, jo.Data)
				}
				if !running {
					if !line {
						t.Fatalf("job %d: state %s, the file lacks the completion line: %q", i, jo.Job.Status, jo.Data)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("job %d still running: %q", i, jo.Data)
				}
			}
		}
	}
	// Kill returns once the file has the line too.
	kill := func(t *testing.T, e *engine.Engine, tc engine.ToolContext) {
		for i := range 5 {
			r := e.Run(context.Background(), tc, engine.Input{Mode: engine.ModeBackground, Command: "echo up; sleep 60"})
			if r.Status != engine.StatusStarted {
				t.Fatalf("%s %q", r.Status, r.Output)
			}
			waitFor(t, e, tc, r.JobID, "up")
			j, err := e.Kill(context.Background(), tc, r.JobID)
			if err != nil || j.Status == engine.JobRunning {
				t.Fatalf("kill: %+v %v", j, err)
			}
			if b, _ := os.ReadFile(j.OutputFile); !strings.Contains(string(b), "[background process killed") {
				t.Fatalf("job %d: killed, its file lacks the line: %q", i, b)
			}
		}
	}
	t.Run("unrestricted", func(t *testing.T) {
		e := newEngine(t)
		check(t, e, tc(t))
		kill(t, e, tc(t))
	})
	bothLaunchers(t, func(t *testing.T, mod func(*engine.Config)) {
		e := newEngine(t, mod)
		check(t, e, restricted(t.TempDir()))
		kill(t, e, restricted(t.TempDir()))
	})
}
