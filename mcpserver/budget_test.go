package mcpserver

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/engine"
)

// budgetKiB is how the description names each budget.
var budgetKiB = map[int]string{codexOutputMax: "9.8 KiB", claudeOutputMax: "39.1 KiB", 20_000: "19.5 KiB"}

// connectAsClient connects to srv in memory as a client named name.
func connectAsClient(t *testing.T, srv *mcp.Server, name string) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

// The output a result shows fits the client that initialized the session
// (clientInfo.name): Codex 10,000 bytes, Claude Code 40,000, any other
// the engine's 128 KiB, each cut in the middle under a header that says
// what is shown; bash_output returns at most as much a call.
// Options.OutputMax sets one budget for all (negative: the engine's).
// Only a call that asks for the fields gets resource links.
func TestOutputBudgetPerClient(t *testing.T) {
	e := newEngine(t, nil)
	ctx := context.Background()
	text := func(res *mcp.CallToolResult) string { return res.Content[0].(*mcp.TextContent).Text }
	for _, tc := range []struct {
		client    string
		outputMax int
		budget    int    // the bytes of output a call shows
		want      string // the header of seq 1 20000's result ("": whole)
	}{
		{"codex-mcp-client", 0, codexOutputMax, "showing the first 2.4 KiB and the last 7.3 KiB]"},
		{"claude-code", 0, claudeOutputMax, "showing the first 9.8 KiB and the last 29.3 KiB]"},
		{"test", 0, 0, ""},
		{"codex-mcp-client", -1, 0, ""},
		{"test", 20_000, 20_000, "showing the first 4.9 KiB and the last 14.6 KiB]"},
	} {
		srv := New(e, Options{WorkingDir: t.TempDir(), OutputMax: tc.outputMax})
		cs := connectAsClient(t, srv, tc.client)
		// The bash tool's description states the budget.
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		wantDesc := "Output over 128 KiB is cut"
		if tc.budget > 0 {
			shares := strings.Replace(strings.TrimSuffix(strings.TrimPrefix(tc.want, "showing the first "), "]"), "and the last", "and last", 1)
			wantDesc = "Output over " + budgetKiB[tc.budget] + " is cut in the middle:\nthe result shows its first " + shares
		}
		if i := slices.IndexFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == toolBash }); i < 0 || !strings.Contains(tools.Tools[i].Description, wantDesc) {
			t.Errorf("%s, OutputMax %d: the bash tool's description does not say %q", tc.client, tc.outputMax, wantDesc)
		}
		res, got := call(t, ctx, cs, toolBash, map[string]any{"command": "seq 1 20000"}, nil)
		if tc.want == "" {
			if len(got) != 108894 || len(res.Content) != 1 {
				t.Errorf("%s, OutputMax %d: %d bytes, %d content blocks, want the whole 108,894 alone", tc.client, tc.outputMax, len(got), len(res.Content))
			}
			continue
		}
		if !strings.HasPrefix(got, "[output truncated in middle: got 106.3 KiB, "+tc.want+"\n1\n2\n") || !strings.Contains(got, "\n20000\n") ||
			len(res.Content) != 1 {
			t.Errorf("%s, OutputMax %d: %d bytes, %d content blocks: %.120q", tc.client, tc.outputMax, len(got), len(res.Content), got)
		}
		// bash_output returns at most the budget a call.
		start, _ := call(t, ctx, cs, toolBash, map[string]any{"command": "seq 1 20000", "mode": "background"}, nil)
		if len(start.Content) != 1 {
			t.Errorf("%s: the job's start carries %d content blocks, want the text alone", tc.client, len(start.Content))
		}
		out, _ := call(t, ctx, cs, toolOutput, map[string]any{"job_id": "job-1", "wait_ms": 5000, "tail_bytes": 100000}, nil)
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(text(out), "job-1 completed") && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			out, _ = call(t, ctx, cs, toolOutput, map[string]any{"job_id": "job-1", "tail_bytes": 100000}, nil)
		}
		// The text is the budget's bytes after a status line.
		if n := len(text(out)); n < tc.budget || n > tc.budget+200 || len(out.Content) != 1 {
			t.Errorf("%s: bash_output tail_bytes 100000 returned %d bytes (budget %d), %d content blocks: %.200q", tc.client, n, tc.budget, len(out.Content), text(out))
		}
	}
	// Asking for the fields brings the link to the whole output.
	cs := connectAsClient(t, New(e, Options{WorkingDir: t.TempDir()}), "codex-mcp-client")
	var r engine.Result
	res, _ := call(t, ctx, cs, toolBash, map[string]any{"command": "seq 1 20000"}, &r)
	if !r.Truncated || len(res.Content) != 2 || res.Content[1].(*mcp.ResourceLink).Size == nil || *res.Content[1].(*mcp.ResourceLink).Size != 108894 {
		t.Errorf("with the fields: truncated %v, content %v", r.Truncated, res.Content)
	}
}
