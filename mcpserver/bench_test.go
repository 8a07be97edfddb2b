package mcpserver

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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

// naiveServerEnv makes this test binary a naive go-sdk MCP server on
// stdio (see naiveServer).
const naiveServerEnv = "BASHVISOR_TEST_NAIVE_MCP_SERVER"

func init() {
	if os.Getenv(naiveServerEnv) == "1" {
		naiveServer()
		os.Exit(0)
	}
}

// naiveServer is the baseline of the MCP comparison, as the field review
// wrote it: the go-sdk's StdioTransport and a typed tool (mcp.AddTool)
// whose handler runs `bash -c COMMAND` with os/exec and returns its
// combined output. It serves until stdin closes.
func naiveServer() {
	type in struct {
		Command string `json:"command"`
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "naive"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: toolBash}, func(ctx context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		out, err := exec.CommandContext(ctx, "bash", "-c", a.Command).CombinedOutput()
		res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(out)}}, IsError: err != nil}
		return res, nil, nil
	})
	_ = s.Run(context.Background(), &mcp.StdioTransport{})
}

// BenchmarkMCPStdioVsNaive calls `true` over stdio through `demo mcp` and
// through a naive go-sdk server (naiveServer, this binary re-executed),
// alternating call by call so that both see the same machine, and reports
// each side's median per call and their ratio (the target: bashvisor's at
// most the naive server's). ns/op is one call of each.
func BenchmarkMCPStdioVsNaive(b *testing.B) {
	ours, ourCmd, _ := stdioServer(b, "-C", b.TempDir())
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), naiveServerEnv+"=1")
	naive, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { naive.Close() })
	ctx := context.Background()
	for range 20 { // warm-up, not measured
		mcpTrue(b, ctx, ours)
		mcpTrue(b, ctx, naive)
	}
	var o, n []time.Duration
	cpu0o, cpu0n := processCPU(b, ourCmd.Process.Pid), processCPU(b, cmd.Process.Pid)
	timed := func(cs *mcp.ClientSession) time.Duration {
		t0 := time.Now()
		mcpTrue(b, ctx, cs)
		return time.Since(t0)
	}
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 { // each side goes first half of the time
			o, n = append(o, timed(ours)), append(n, timed(naive))
		} else {
			n, o = append(n, timed(naive)), append(o, timed(ours))
		}
	}
	p50 := func(d []time.Duration) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[len(s)/2].Microseconds())
	}
	calls := float64(len(o))
	b.ReportMetric(float64((processCPU(b, ourCmd.Process.Pid)-cpu0o).Microseconds())/calls, "bashvisor-CPU-µs/call")
	b.ReportMetric(float64((processCPU(b, cmd.Process.Pid)-cpu0n).Microseconds())/calls, "naive-CPU-µs/call")
	b.ReportMetric(p50(o), "bashvisor-µs/call")
	b.ReportMetric(p50(n), "naive-µs/call")
	b.ReportMetric(p50(o)/p50(n), "ratio")
}

// processCPU is the user and system time process pid has used so far
// (its threads, not its children), from /proc/PID/stat.
func processCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		tb.Fatal(err)
	}
	// The fields after the command name, which is in parentheses:
	// state is the first, utime the 12th, stime the 13th.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		tb.Fatalf("/proc/%d/stat: %q", pid, data)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

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

// BenchmarkStdioTransportJobs is BenchmarkInMemoryJobs through the
// server's StdioTransport (over pipes, the go-sdk's client on the other
// end, both in this process): what the transport adds to a call,
// allocations included.
func BenchmarkStdioTransportJobs(b *testing.B) {
	srv := New(newEngine(b, nil), Options{WorkingDir: b.TempDir()})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ss, err := srv.Connect(context.Background(), &StdioTransport{Reader: inR, Writer: outW}, nil)
	if err != nil {
		b.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolJobs, Arguments: map[string]any{}})
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
