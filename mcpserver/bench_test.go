package mcpserver

import (
	"context"
	"os/exec"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/engine"
)

// Sequential per-call cost of each layer, and allocation per call (client
// and server together, for the in-process ones):
//
//	go test ./mcpserver -run '^$' -bench . -benchtime 2000x
//
// Overhead against a raw spawn, as a client sees it, is measured side by
// side with raw os/exec (interleaved rounds, Go and TypeScript SDK clients,
// serial and 64 in flight) by `go run ./cmd/demo bench -only mcp`.

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
	b.ReportAllocs()
	for b.Loop() {
		mcpTrue(b, ctx, s.cs)
	}
}

// BenchmarkInMemoryJobs is a call that starts no process (bash_jobs with
// no jobs): the MCP round trip alone, client and server in this process.
// Its B/op is what the go-sdk allocates per call.
func BenchmarkInMemoryJobs(b *testing.B) {
	s := newSetup(b, nil, Options{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: toolJobs, Arguments: map[string]any{}})
		if err != nil || res.IsError {
			b.Fatalf("%v %v", res, err)
		}
	}
}

// BenchmarkEngineTrue is engine.Run alone.
func BenchmarkEngineTrue(b *testing.B) {
	e := newEngine(b, nil)
	tc := engine.ToolContext{WorkingDir: b.TempDir()}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r := e.Run(ctx, tc, engine.Input{Command: "true"}); r.Status != engine.StatusOK {
			b.Fatal(r.Output)
		}
	}
}

// BenchmarkRawBashTrue is the baseline: os/exec running bash -c true.
func BenchmarkRawBashTrue(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if err := exec.Command("bash", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

func mcpTrue(tb testing.TB, ctx context.Context, cs *mcp.ClientSession) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolBash, Arguments: trueArgs})
	if err != nil || res.IsError {
		tb.Fatalf("%v %v", res, err)
	}
}
