package main

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The mcp case of `demo bench`: `true` through `demo mcp` over stdio, as an
// MCP client sees it, side by side with raw os/exec with output capture, in
// one run. Each client starts its own server (this binary's `mcp`): the
// official Go SDK's client (mcp.CommandTransport) in this process, one per
// server variant, and the official TypeScript SDK's client in a node
// process, installed with npm into a temporary directory (skipped, with the
// reason, when node, npm or the registry is unavailable). Serial: rounds of
// calls, each round running raw spawns and every client in turn, the order
// rotated from round to round; per-call overhead is the median over rounds
// of (client's round median - raw's round median). Throughput: rounds of
// -conc-n calls with -c in flight, rotated the same way; the ratio is the
// median over rounds of client rate / raw rate of the same round.

//go:embed benchmcp_client.mjs
var tsClientScript []byte

// tsSDKVersion is the TypeScript SDK the mcp case installs.
const tsSDKVersion = "1.32.2"

// mcpWarmup is the number of unmeasured calls per side before measuring.
const mcpWarmup = 30

// mcpSide is one column of the mcp case: raw os/exec or one MCP client and
// its server.
type mcpSide struct {
	label  string
	target bool // the targets apply (default server, not an experiment)
	serial func(n int) (durations, error)
	conc   func(c, n int) (float64, error)
	close  func()
	pid    int        // the server's, 0 for raw
	client int        // the client's process (raw: the spawning one)
	stderr *gcCounter // the server's stderr, nil for raw

	rounds []durations   // serial samples per round
	rates  []float64     // calls per second per throughput round
	cpu    time.Duration // the server's, during the throughput rounds
	ccpu   time.Duration // the client's (raw: the spawner's), same rounds
	gcs    int
	calls  int
	hwmKiB int64
}

// mcpVariant is one server to measure with the Go client: extra
// environment and, optionally, another binary.
type mcpVariant struct {
	label string
	bin   string
	env   []string
}

// parseMCPVariants parses -mcp-variants: variants separated by ";", each
// a space-separated list of ENV=VALUE and an optional bin=PATH.
func parseMCPVariants(s string) ([]mcpVariant, error) {
	var vs []mcpVariant
	for v := range strings.SplitSeq(s, ";") {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		mv := mcpVariant{label: v}
		for _, f := range strings.Fields(v) {
			k, val, ok := strings.Cut(f, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("-mcp-variants: %q is not ENV=VALUE or bin=PATH", f)
			}
			if k == "bin" {
				mv.bin = val
			} else {
				mv.env = append(mv.env, f)
			}
		}
		vs = append(vs, mv)
	}
	return vs, nil
}

// serverEnv is the environment of a measured server: this process's, the
// variant's, and gctrace so that its GCs can be counted on stderr.
func serverEnv(extra []string) []string {
	env := append(os.Environ(), extra...)
	debug := "gctrace=1"
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], "GODEBUG="); ok {
			if v != "" {
				debug = v + ",gctrace=1"
			}
			break
		}
	}
	return append(env, "GODEBUG="+debug)
}

func benchMCP(o benchOpts, dir string, log io.Writer) ([]benchRow, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("executable: %w", err)
	}
	variants, err := parseMCPVariants(o.mcpVariants)
	if err != nil {
		return nil, err
	}
	variants = append([]mcpVariant{{label: "default"}}, variants...)
	raw := &mcpSide{label: "raw", client: os.Getpid(), close: func() {}}
	raw.serial = func(n int) (durations, error) {
		d := make(durations, 0, n)
		for range n {
			t := time.Now()
			if err := rawRun(dir, "true"); err != nil {
				return nil, fmt.Errorf("raw: %w", err)
			}
			d = append(d, time.Since(t))
		}
		return d, nil
	}
	raw.conc = func(c, n int) (float64, error) {
		return concRound(c, n, func() error { return rawRun(dir, "true") })
	}
	sides := []*mcpSide{raw}
	defer func() {
		for _, s := range sides {
			s.close()
		}
	}()
	for i, v := range variants {
		bin := exe
		if v.bin != "" {
			bin = v.bin
		}
		s, err := startGoMCPClient(bin, serverArgs(bin, dir, o.conc), v.env)
		if err != nil {
			return nil, fmt.Errorf("mcp server %s: %w", v.label, err)
		}
		s.label, s.target = "Go client", i == 0
		if i > 0 {
			s.label = "Go client, " + v.label
		}
		sides = append(sides, s)
	}
	var tsSkipped string
	if o.ts {
		s, err := startTSMCPClient(o, exe, dir, log)
		if err != nil {
			tsSkipped = err.Error()
			fmt.Fprintf(log, "bench: TypeScript client skipped: %s\n", tsSkipped)
		} else {
			s.label, s.target = "TS client", true
			sides = append(sides, s)
		}
	}

	for _, s := range sides {
		if _, err := s.serial(mcpWarmup); err != nil {
			return nil, fmt.Errorf("%s: warm-up: %w", s.label, err)
		}
	}
	for r := range o.mcpRounds {
		for k := range sides {
			s := sides[(r+k)%len(sides)]
			d, err := s.serial(o.mcpCalls)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", s.label, err)
			}
			s.rounds = append(s.rounds, d)
		}
	}
	for r := range o.mcpConcRounds {
		for k := range sides {
			s := sides[(r+k)%len(sides)]
			cpu0, ccpu0, gc0 := procCPU(s.pid), procCPU(s.client), s.stderr.count()
			rate, err := s.conc(o.conc, o.concN)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", s.label, err)
			}
			s.rates = append(s.rates, rate)
			s.cpu += procCPU(s.pid) - cpu0
			s.ccpu += procCPU(s.client) - ccpu0
			s.gcs += s.stderr.count() - gc0
			s.calls += o.concN
		}
	}
	for _, s := range sides[1:] {
		s.hwmKiB = procStatusKiB(strconv.Itoa(s.pid), "VmHWM")
	}
	return mcpRows(o, raw, sides[1:], tsSkipped), nil
}

func mcpRows(o benchOpts, raw *mcpSide, clients []*mcpSide, tsSkipped string) []benchRow {
	roundMedians := func(s *mcpSide) durations {
		m := make(durations, len(s.rounds))
		for i, d := range s.rounds {
			m[i] = d.median()
		}
		return m
	}
	all := func(s *mcpSide) durations { return slices.Concat(s.rounds...) }
	rawMed := roundMedians(raw)
	var rows []benchRow
	for _, s := range clients {
		med := roundMedians(s)
		over := make(durations, len(med))
		for i := range med {
			over[i] = med[i] - rawMed[i]
		}
		ratios := make([]float64, len(s.rates))
		for i := range s.rates {
			ratios[i] = s.rates[i] / raw.rates[i] * 100
		}
		var okLat, okThr *bool
		if s.target {
			okLat, okThr = pass(over.median() <= 300*time.Microsecond), pass(median(ratios) >= 97)
		}
		target := func(t string) string {
			if s.target {
				return t
			}
			return ""
		}
		rows = append(rows,
			benchRow{name: fmt.Sprintf("MCP stdio `true`, %s: median (%dx%d)", s.label, o.mcpRounds, o.mcpCalls),
				raw: ms(rawMed.median()), eng: ms(med.median()),
				ratio:  fmt.Sprintf("%+.3f [%+.3f..%+.3f]", msf(over.median()), msf(slices.Min(over)), msf(slices.Max(over))),
				target: target("<= +0.3 ms"), ok: okLat},
			benchRow{name: "  p90 of all calls", raw: ms(all(raw).pct(90)), eng: ms(all(s).pct(90)),
				ratio: fmt.Sprintf("%+.3f ms", msf(all(s).pct(90)-all(raw).pct(90)))},
			benchRow{name: fmt.Sprintf("MCP throughput at c=%d, %s (%dx%d)", o.conc, s.label, o.mcpConcRounds, o.concN),
				raw: fmt.Sprintf("%.0f /s", median(raw.rates)), eng: fmt.Sprintf("%.0f /s", median(s.rates)),
				ratio:  fmt.Sprintf("%.1f%% [%.1f..%.1f]", median(ratios), slices.Min(ratios), slices.Max(ratios)),
				target: target(">= 97%"), ok: okThr},
			benchRow{name: "  server CPU/call, GCs per 1000 calls, peak RSS",
				eng: fmt.Sprintf("%.0f µs, %.1f, %.1f MiB", perCall(s.cpu, s.calls),
					float64(s.gcs)*1000/float64(max(1, s.calls)), float64(s.hwmKiB)/1024)},
			benchRow{name: "  client CPU/call (raw: the spawning process)",
				raw: fmt.Sprintf("%.0f µs", perCall(raw.ccpu, raw.calls)), eng: fmt.Sprintf("%.0f µs", perCall(s.ccpu, s.calls))},
		)
	}
	if tsSkipped != "" {
		rows = append(rows, benchRow{name: "MCP stdio, TS client", ratio: "skipped: " + firstLine(tsSkipped)})
	}
	return rows
}

func msf(d time.Duration) float64 { return float64(d) / 1e6 }

// perCall is d per call in µs.
func perCall(d time.Duration, calls int) float64 {
	return float64(d.Microseconds()) / float64(max(1, calls))
}

func (d durations) median() time.Duration {
	f := make([]float64, len(d))
	for i, x := range d {
		f[i] = float64(x)
	}
	return time.Duration(median(f))
}

// median is the middle value (the mean of the two middle ones for an even
// count).
func median(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := slices.Clone(x)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// serverArgs are the arguments of a measured server: `mcp -C dir` and, for
// a server with admission limits (-max-running, -max-busy), room for every
// call in flight, as benchConfig gives the in-process cases.
func serverArgs(bin, dir string, conc int) []string {
	args := []string{"mcp", "-C", dir}
	usage, _ := exec.Command(bin, "mcp", "-h").Output()
	if bytes.Contains(usage, []byte("-max-running")) {
		args = append(args, "-max-running", strconv.Itoa(2*max(conc, 64)))
	}
	if bytes.Contains(usage, []byte("-max-busy")) {
		args = append(args, "-max-busy", strconv.Itoa(max(conc, 64)))
	}
	return args
}

// startGoMCPClient starts bin with args (a `demo mcp` server) and connects
// the Go SDK's client to it over stdio.
func startGoMCPClient(bin string, args, env []string) (*mcpSide, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = serverEnv(env)
	stderr := &gcCounter{}
	cmd.Stderr = stderr
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bashvisor-bench"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, fmt.Errorf("%w (stderr: %s)", err, stderr.tailString())
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		cs.Close()
		return nil, err
	}
	callArgs := map[string]any{"command": "true"}
	call := func() error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: callArgs})
		if err != nil {
			return err
		}
		if res.IsError {
			return fmt.Errorf("tool error: %s", resultText(res))
		}
		return nil
	}
	s := &mcpSide{pid: cmd.Process.Pid, client: os.Getpid(), stderr: stderr, close: func() { cs.Close() }}
	s.serial = func(n int) (durations, error) {
		d := make(durations, 0, n)
		for range n {
			t := time.Now()
			if err := call(); err != nil {
				return nil, err
			}
			d = append(d, time.Since(t))
		}
		return d, nil
	}
	s.conc = func(c, n int) (float64, error) { return concRound(c, n, call) }
	return s, nil
}

func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return firstLine(b.String())
}

// startTSMCPClient installs the TypeScript SDK (in -ts-dir, or a temporary
// directory) and starts the node client, which starts its own server.
func startTSMCPClient(o benchOpts, exe, dir string, log io.Writer) (*mcpSide, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, errors.New("node not found")
	}
	sdkDir := o.tsDir
	cleanup := func() {}
	if sdkDir == "" {
		if sdkDir, err = os.MkdirTemp("", "bashvisor-bench-ts-"); err != nil {
			return nil, err
		}
		cleanup = func() { os.RemoveAll(sdkDir) }
	}
	if err := installTSSDK(sdkDir, log); err != nil {
		cleanup()
		return nil, err
	}
	script := filepath.Join(sdkDir, "bashvisor-bench-client.mjs")
	if err := os.WriteFile(script, tsClientScript, 0o644); err != nil {
		cleanup()
		return nil, err
	}
	cmd := exec.Command(node, append([]string{script, exe}, serverArgs(exe, dir, o.conc)...)...)
	cmd.Env = serverEnv(nil)
	stderr := &gcCounter{}
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		cleanup()
		return nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		cleanup()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		cleanup()
		return nil, err
	}
	out := json.NewDecoder(bufio.NewReader(outPipe))
	type answer struct {
		PID     int       `json:"pid"`
		NS      []float64 `json:"ns"`
		Seconds float64   `json:"seconds"`
		Error   string    `json:"error"`
	}
	read := func() (answer, error) {
		var a answer
		if err := out.Decode(&a); err != nil {
			return a, fmt.Errorf("TS client: %w (stderr: %s)", err, stderr.tailString())
		}
		if a.Error != "" {
			return a, fmt.Errorf("TS client: %s", a.Error)
		}
		return a, nil
	}
	ask := func(req map[string]any) (answer, error) {
		b, _ := json.Marshal(req)
		if _, err := in.Write(append(b, '\n')); err != nil {
			return answer{}, fmt.Errorf("TS client: %w", err)
		}
		return read()
	}
	stop := func() {
		_, _ = in.Write([]byte(`{"op":"close"}` + "\n"))
		in.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		cleanup()
	}
	hello, err := read()
	if err != nil {
		stop()
		return nil, err
	}
	s := &mcpSide{pid: hello.PID, client: cmd.Process.Pid, stderr: stderr, close: stop}
	s.serial = func(n int) (durations, error) {
		a, err := ask(map[string]any{"op": "serial", "n": n})
		if err != nil {
			return nil, err
		}
		d := make(durations, len(a.NS))
		for i, ns := range a.NS {
			d[i] = time.Duration(ns)
		}
		return d, nil
	}
	s.conc = func(c, n int) (float64, error) {
		a, err := ask(map[string]any{"op": "conc", "c": c, "n": n})
		if err != nil {
			return 0, err
		}
		return float64(n) / a.Seconds, nil
	}
	return s, nil
}

// installTSSDK installs @modelcontextprotocol/sdk@tsSDKVersion into dir
// unless it is there already.
func installTSSDK(dir string, log io.Writer) error {
	pj, err := os.ReadFile(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	if err == nil {
		var p struct{ Version string }
		if json.Unmarshal(pj, &p) == nil && p.Version == tsSDKVersion {
			return nil
		}
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return errors.New("npm not found")
	}
	fmt.Fprintf(log, "bench: npm install @modelcontextprotocol/sdk@%s into %s...\n", tsSDKVersion, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--fetch-retries=1", "--fetch-timeout=30000",
		"--prefix", dir, "@modelcontextprotocol/sdk@"+tsSDKVersion)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("npm: %s (installing @modelcontextprotocol/sdk@%s)", npmError(string(out), err), tsSDKVersion)
	}
	return nil
}

// npmError condenses npm's error output to its code and first message
// line ("ECONNREFUSED: FetchError: request to ... failed, reason: ...").
func npmError(out string, err error) string {
	var code, msg string
	for line := range strings.SplitSeq(out, "\n") {
		rest, ok := strings.CutPrefix(line, "npm error ")
		if !ok {
			rest, ok = strings.CutPrefix(line, "npm ERR! ")
		}
		if !ok || strings.HasPrefix(rest, " ") {
			continue // not an error line, or a stack frame
		}
		switch k, v, _ := strings.Cut(rest, " "); k {
		case "code":
			if code == "" {
				code = v
			}
		case "syscall", "errno", "path", "A":
		default:
			if msg == "" {
				msg = rest
			}
		}
	}
	switch {
	case code != "" && msg != "":
		return code + ": " + msg
	case code != "" || msg != "":
		return code + msg
	}
	return err.Error()
}

// gcCounter is a server's stderr: it counts the gctrace lines ("gc N @...")
// and keeps the last few KiB of everything else for error messages.
type gcCounter struct {
	mu      sync.Mutex
	partial []byte
	gcs     int
	tail    []byte
}

func (g *gcCounter) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.partial = append(g.partial, p...)
	for {
		i := bytes.IndexByte(g.partial, '\n')
		if i < 0 {
			break
		}
		line := g.partial[:i+1]
		if bytes.HasPrefix(line, []byte("gc ")) {
			g.gcs++
		} else {
			g.tail = append(g.tail, line...)
			if len(g.tail) > 4096 {
				g.tail = g.tail[len(g.tail)-4096:]
			}
		}
		g.partial = g.partial[i+1:]
	}
	if len(g.partial) > 4096 {
		g.partial = g.partial[len(g.partial)-4096:]
	}
	return len(p), nil
}

func (g *gcCounter) count() int {
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gcs
}

func (g *gcCounter) tailString() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return strings.TrimSpace(string(g.tail) + string(g.partial))
}

// procCPU is the user+system CPU time a process has used (0 for pid 0 or
// when it cannot be read).
func procCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const clkTck = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / clkTck
}

// procStatusKiB reads a "Name: N kB" field of /proc/PID/status (PID may be
// "self").
func procStatusKiB(pid, name string) int64 {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
