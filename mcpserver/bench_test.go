package mcpserver

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/engine"
)

// Per-call overhead of the MCP stdio path against a raw spawn, side by
// side:
//
//	go test ./mcpserver -run '^$' -bench 'True$' -benchtime 2000x
//	MCP_OVERHEAD=1 go test ./mcpserver -run TestMCPOverhead -v

var trueArgs = map[string]any{"command": "true"}

// BenchmarkMCPStdioTrue is one `true` call through `demo mcp` over stdio:
// JSON-RPC encode, pipe, decode, engine (actor, spawn, wait), result back.
func BenchmarkMCPStdioTrue(b *testing.B) {
	cs, _, _ := stdioServer(b, "-C", b.TempDir())
	ctx := context.Background()
	for b.Loop() {
		mcpTrue(b, ctx, cs)
	}
}

// BenchmarkInMemoryTrue is the same call through an in-process server.
func BenchmarkInMemoryTrue(b *testing.B) {
	s := newSetup(b, nil, Options{})
	ctx := context.Background()
	for b.Loop() {
		mcpTrue(b, ctx, s.cs)
	}
}

// BenchmarkEngineTrue is engine.Run alone.
func BenchmarkEngineTrue(b *testing.B) {
	e := newEngine(b, nil)
	tc := engine.ToolContext{WorkingDir: b.TempDir()}
	ctx := context.Background()
	for b.Loop() {
		if r := e.Run(ctx, tc, engine.Input{Command: "true"}); r.Status != engine.StatusOK {
			b.Fatal(r.Output)
		}
	}
}

// BenchmarkRawBashTrue is the baseline: os/exec running bash -c true.
func BenchmarkRawBashTrue(b *testing.B) {
	for b.Loop() {
		rawTrue(b)
	}
}

func mcpTrue(tb testing.TB, ctx context.Context, cs *mcp.ClientSession) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolBash, Arguments: trueArgs})
	if err != nil || res.IsError {
		tb.Fatalf("%v %v", res, err)
	}
}

func rawTrue(tb testing.TB) {
	if err := exec.Command("bash", "-c", "true").Run(); err != nil {
		tb.Fatal(err)
	}
}

// TestMCPOverhead interleaves raw and MCP stdio calls (so that machine
// noise hits both alike) and reports per-call medians and the overhead.
func TestMCPOverhead(t *testing.T) {
	if os.Getenv("MCP_OVERHEAD") == "" {
		t.Skip("set MCP_OVERHEAD=1 to measure")
	}
	cs, _, _ := stdioServer(t, "-C", t.TempDir())
	ctx := context.Background()
	const n = 1000
	for range 50 { // warm up
		rawTrue(t)
		mcpTrue(t, ctx, cs)
	}
	raw := make([]time.Duration, 0, n)
	viaMCP := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		rawTrue(t)
		raw = append(raw, time.Since(start))
		start = time.Now()
		mcpTrue(t, ctx, cs)
		viaMCP = append(viaMCP, time.Since(start))
	}
	stat := func(d []time.Duration) (median, mean time.Duration) {
		slices.Sort(d)
		var sum time.Duration
		for _, x := range d {
			sum += x
		}
		return d[len(d)/2], sum / time.Duration(len(d))
	}
	rmed, rmean := stat(raw)
	mmed, mmean := stat(viaMCP)
	t.Logf("raw bash -c true: median %v mean %v", rmed, rmean)
	t.Logf("MCP stdio true:   median %v mean %v", mmed, mmean)
	t.Logf("overhead: median +%v (%.2fx), mean +%v (%.2fx)", mmed-rmed, float64(mmed)/float64(rmed), mmean-rmean, float64(mmean)/float64(rmean))
}
