package engine_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/engine"
)

// A call's ToolContext.OutputMax shows less than Config.Output.Max (the
// middle cut's head and tail are its shares, the header says so, the full
// output is kept whole), and the tool description says so; above
// Config.Output.Max, or 0, it is the engine's.
func TestToolContextOutputMax(t *testing.T) {
	e := newEngine(t)
	if d := e.Description(engine.ToolContext{WorkingDir: t.TempDir(), OutputMax: 10000}); !strings.Contains(d, "Output over 9.8 KiB is cut in the middle:\nthe result shows its first 2.4 KiB and last 7.3 KiB, and names a file with all of it.") {
		t.Errorf("the description with OutputMax 10000:\n%s", d)
	}
	cmd := engine.Input{Command: `head -c 307200 /dev/zero | tr '\0' a`}
	call := tc(t)
	call.OutputMax = 10000
	r := e.Run(context.Background(), call, cmd)
	head := "[output truncated in middle: got 300.0 KiB, showing the first 2.4 KiB and the last 7.3 KiB]\n" + strings.Repeat("a", 2500) + "\n\n[snip]\n\n" + strings.Repeat("a", 7500)
	if !r.Truncated || r.Output != head+"\n[full output: "+r.FullOutputFile+"]" {
		t.Fatalf("OutputMax 10000: truncated=%v output %.200q", r.Truncated, r.Output)
	}
	if fi, err := os.Stat(r.FullOutputFile); err != nil || fi.Size() != 307200 {
		t.Fatalf("spool: %v %v", fi, err)
	}
	for _, max := range []int{0, 1 << 20} {
		call.OutputMax = max
		r = e.Run(context.Background(), call, cmd)
		if !strings.HasPrefix(r.Output, "[output truncated in middle: got 300.0 KiB, showing the first 32 KiB and the last 96 KiB]\n") {
			t.Errorf("OutputMax %d: %.120q", max, r.Output)
		}
	}
	call.OutputMax = 10000
	if r = e.Run(context.Background(), call, engine.Input{Command: "seq 1 2000"}); r.Truncated || len(r.Output) != 8893 {
		t.Errorf("8,893 bytes under OutputMax 10000: truncated=%v, %d bytes", r.Truncated, len(r.Output))
	}
}
