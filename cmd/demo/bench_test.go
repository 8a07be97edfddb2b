package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/cmd/internal/cli"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestBenchSmall runs every case of the benchmark at a tiny size (the
// numbers are meaningless here; the report's shape is checked).
func TestBenchSmall(t *testing.T) {
	r := demo(t, nil, "bench", "-serial", "5", "-conc-n", "20", "-c", "8", "-flood", "8MiB", "-timeouts", "5", "-sleepers", "20", "-inproc",
		"-admission-sleepers", "10", "-admission-window", "1s",
		"-mcp-rounds", "2", "-mcp-calls", "3", "-mcp-conc-rounds", "1", "-mcp-variants", "GOGC=100 GOMAXPROCS=2", "-ts=false", "-cli-rounds", "2")
	if r.code != 0 {
		t.Fatal(r)
	}
	for _, want := range []string{"serial `bash -c true`", "throughput at c=8", "8.0 MiB output throughput", "peak RSS",
		"timeout to return past deadline, p99", "restricted", "20 concurrent sleeps: goroutines per command",
		"MCP stdio `true`, Go client: median (2x3)", "MCP throughput at c=8, Go client (1x20)",
		"MCP stdio `true`, Go client, GOGC=100 GOMAXPROCS=2: median", "server CPU/call, GCs per 1000 calls, peak RSS",
		"10 parallel `sleep 2`, one conversation", "CPU share of A, 48 of A's and 16 of B's busy loops, 1s",
		"another principal's `echo` next to 12 commands + 32 jobs",
		"CLI per command: bash -c true, median of 2", "CLI per command: demo run -sandbox workspace-write -- true"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("missing %q in\n%s", want, r.stdout)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1GiB": 1 << 30, "256MiB": 256 << 20, "10K": 10 << 10, "1000": 1000, "1.5M": 3 << 19} {
		if got, err := cli.ParseSize(in); err != nil || got != want {
			t.Errorf("cli.ParseSize(%q) = %d, %v", in, got, err)
		}
	}
	if _, err := cli.ParseSize("x"); err == nil {
		t.Error("cli.ParseSize(x) succeeded")
	}
}

func TestParseMCPVariants(t *testing.T) {
	vs, err := parseMCPVariants(" GOGC=100 GOMAXPROCS=2 ; ;bin=/x/demo GOGC=off")
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs[0].label != "GOGC=100 GOMAXPROCS=2" || vs[0].bin != "" ||
		!slices.Equal(vs[0].env, []string{"GOGC=100", "GOMAXPROCS=2"}) ||
		vs[1].bin != "/x/demo" || !slices.Equal(vs[1].env, []string{"GOGC=off"}) {
		t.Errorf("got %+v", vs)
	}
	if _, err := parseMCPVariants("GOGC"); err == nil {
		t.Error("GOGC without a value accepted")
	}
}

func TestServerEnv(t *testing.T) {
	t.Setenv("GODEBUG", "x=1")
	env := serverEnv([]string{"GOGC=5"})
	if !slices.Contains(env, "GOGC=5") || env[len(env)-1] != "GODEBUG=x=1,gctrace=1" {
		t.Errorf("env ends %q", env[len(env)-2:])
	}
}

func TestGCCounter(t *testing.T) {
	var g gcCounter
	for _, p := range []string{"gc 1 @0.0", "1s 0%: ...\nlevel=INFO msg=hi\ngc 2 @", "0.2s\n", "gcx\n", "tail"} {
		g.Write([]byte(p))
	}
	if g.count() != 2 {
		t.Errorf("counted %d GCs, want 2", g.count())
	}
	if got := g.tailString(); got != "level=INFO msg=hi\ngcx\ntail" {
		t.Errorf("tail %q", got)
	}
}

// The TypeScript client is only run by `demo bench` (it needs npm); here
// node checks its syntax, offline.
func TestTSClientScriptParses(t *testing.T) {
	node := testenv.NeedsTool(t, "node")[0]
	f := filepath.Join(t.TempDir(), "client.mjs")
	if err := os.WriteFile(f, tsClientScript, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(node, "--check", f).CombinedOutput(); err != nil {
		t.Fatalf("node --check: %v\n%s", err, out)
	}
}

func TestNPMError(t *testing.T) {
	out := `npm warn Unknown user config "nodedir".
npm error code ECONNREFUSED
npm error syscall connect
npm error errno ECONNREFUSED
npm error FetchError: request to http://127.0.0.1:9/x failed, reason: connect ECONNREFUSED 127.0.0.1:9
npm error     at ClientRequest.<anonymous> (index.js:130:14)
npm error A complete log of this run can be found in: /root/.npm/_logs/x.log
`
	want := "ECONNREFUSED: FetchError: request to http://127.0.0.1:9/x failed, reason: connect ECONNREFUSED 127.0.0.1:9"
	if got := npmError(out, errors.New("exit status 1")); got != want {
		t.Errorf("got %q", got)
	}
	if got := npmError("", errors.New("exit status 1")); got != "exit status 1" {
		t.Errorf("got %q", got)
	}
}

// TestBenchIdle runs the idle case at a tiny size: every variant has a
// row at each spacing (or a row saying why it was not measured).
func TestBenchIdle(t *testing.T) {
	r := demo(t, nil, "bench", "-only", "idle", "-idle", "0,5ms", "-idle-n", "2", "-peers")
	if r.code != 0 {
		t.Fatal(r)
	}
	for _, sp := range []string{"idle 0s: ", "idle 5ms: "} {
		for _, v := range []string{"raw os/exec, p50 / mean of 2", "unrestricted, p50 / mean of 2"} {
			if !strings.Contains(r.stdout, sp+v) {
				t.Errorf("missing %q in\n%s", sp+v, r.stdout)
			}
		}
	}
	for _, v := range []string{"read-only", "workspace-write", "bwrap --unshare-all", "codex sandbox", "srt"} {
		if !strings.Contains(r.stdout, "idle 0s: "+v+", p50") && !strings.Contains(r.stdout, "idle: not measured: "+v) {
			t.Errorf("neither a row nor a reason for %s in\n%s", v, r.stdout)
		}
	}
}
