package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/truncate"
	"github.com/bashvisor/bashvisor/mcpserver"
)

// engineFlags are the engine settings shared by run and schema.
type engineFlags struct {
	dir         string
	timeout     time.Duration
	slowTimeout time.Duration
	grace       time.Duration
	sandbox     sandboxFlags
}

// register adds -C, -timeout, -slow-timeout and the sandbox flags, and -grace
// when withGrace (schema has no use for it: the description does not
// mention the grace period).
func (f *engineFlags) register(fs *flag.FlagSet, withGrace bool) {
	d := engine.DefaultConfig()
	fs.StringVar(&f.dir, "C", "", "working `dir`ectory (default: the current directory)")
	fs.DurationVar(&f.timeout, "timeout", d.Timeout, "timeout of default mode")
	fs.DurationVar(&f.slowTimeout, "slow-timeout", d.SlowTimeout, "timeout of slow mode")
	if withGrace {
		fs.DurationVar(&f.grace, "grace", d.Lifecycle.Grace, "time between SIGTERM and SIGKILL")
	}
	f.sandbox.register(fs)
}

func (f *engineFlags) config() (engine.Config, error) {
	c := engine.DefaultConfig()
	c.Timeout, c.SlowTimeout = f.timeout, f.slowTimeout
	if f.grace > 0 {
		c.Lifecycle.Grace = f.grace
	}
	return c, f.sandbox.apply(&c)
}

// workdir returns -C (checked to be a directory) or the current directory.
func (f *engineFlags) workdir() (string, error) {
	if f.dir == "" {
		return os.Getwd()
	}
	st, err := os.Stat(f.dir)
	if err != nil {
		return "", fmt.Errorf("-C: %w", err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("-C: %s is not a directory", f.dir)
	}
	return f.dir, nil
}

// cmdRun runs `demo run`: one command through a fresh engine.
//
// Files: the engine's output directory is a new $TMPDIR/bashvisor-run-*.
// When the result names a file in it (the complete output of a truncated
// result, a background job's output file), the directory is kept and, for
// a truncated output, stderr says where; otherwise it is removed.
func cmdRun(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("run")
	var ef engineFlags
	ef.register(fs, true)
	mode := fs.String("mode", "default", "default, slow or background")
	asJSON := fs.Bool("json", false, "print the structured result as JSON (its fields: bashvisor schema -output)")
	memory := fs.String("memory", "", "memory `size` of the command's processes together (e.g. 4GiB, 512MiB; none: no limit; default half of RAM, at most 16GiB)")
	cpuTime := fs.Duration("cpu-time", 0, "CPU time of the command's processes together (e.g. 10m; default: no limit)")
	pids := fs.Int("pids", 0, "processes and threads alive at once (-1: no limit; default 4096)")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() == 0 {
		return usageError(fs, stderr, "missing COMMAND")
	}
	limits, err := limitFlags(*memory, *cpuTime, *pids)
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	command := strings.Join(fs.Args(), " ")
	dir, err := ef.workdir()
	if err != nil {
		fmt.Fprintln(stderr, errPrefix("run"), err)
		return exitSystem
	}
	sbx, err := ef.sandbox.sandbox()
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	cfg, err := ef.config()
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	cfg.Limits = limits
	if cfg.OutputDir, err = os.MkdirTemp("", "bashvisor-run-"); err != nil {
		fmt.Fprintln(stderr, errPrefix("run"), err)
		return exitSystem
	}
	if engine.Mode(*mode) == engine.ModeBackground {
		cfg.LeaveJobsRunning = true // the CLI exits right after starting the job
	}
	defer startProbe(sbx)()
	e, err := engine.New(cfg)
	if err != nil {
		os.RemoveAll(cfg.OutputDir)
		fmt.Fprintln(stderr, errPrefix("run"), err)
		return exitSystem
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res := e.Run(ctx, engine.ToolContext{WorkingDir: dir, Sandbox: sbx}, engine.Input{Command: command, Mode: engine.Mode(*mode)})
	_ = e.Shutdown(context.Background())
	if res.FullOutputFile == "" && res.OutputFile == "" {
		os.RemoveAll(cfg.OutputDir)
	}
	switch {
	case *asJSON:
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		_ = enc.Encode(res)
	case res.Status == engine.StatusError:
		// Bad input, cannot start, restricted mode unavailable: the CLI's
		// own error, not the command's output.
		fmt.Fprintln(stderr, errPrefix("run"), res.Err)
	default:
		fmt.Fprint(stdout, res.Output)
		if res.Output != "" && !strings.HasSuffix(res.Output, "\n") {
			fmt.Fprintln(stdout)
		}
	}
	if res.FullOutputFile != "" {
		fmt.Fprintf(stderr, errPrefix("run")+" the complete output (%s) is kept in %s; delete it when done\n",
			truncate.Humanize(res.OutputBytes), res.FullOutputFile)
	}
	return exitCode(res)
}

// startProbe probes the sandbox on a goroutine of its own when the
// command is sandboxed, so that the probe (namespaces made and torn down:
// about 2 ms) runs while the engine starts (its cgroups, its watchdog)
// rather than after: the command, the engine's first sandboxed one, waits
// for its result (sandbox.Probe keeps it). The returned function waits
// for the probe to end.
func startProbe(sbx engine.Sandbox) (wait func()) {
	if !sbx.On() {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sandbox.Probe()
	}()
	return func() { <-done }
}

// limitFlags turns -memory, -cpu-time and -pids into the engine's limits
// (zero: the default; negative: none).
func limitFlags(memory string, cpuTime time.Duration, pids int) (config.Limits, error) {
	var l config.Limits
	switch memory {
	case "":
	case "none", "-1":
		l.Memory = -1
	default:
		n, err := ParseSize(memory)
		if err != nil {
			return l, fmt.Errorf("-memory: %w", err)
		}
		l.Memory = n
	}
	if cpuTime < 0 {
		return l, fmt.Errorf("-cpu-time: negative duration %v", cpuTime)
	}
	l.CPUTime, l.Processes = cpuTime, pids
	return l, nil
}

// exitCode maps a result to demo run's exit code: the command's own, 124
// on timeout, 125 when refused, 126 for errors, 130 when cancelled.
func exitCode(res engine.Result) int {
	switch res.Status {
	case engine.StatusOK, engine.StatusStarted:
		return 0
	case engine.StatusTimedOut:
		return exitTimeout
	case engine.StatusBlocked, engine.StatusDenied, engine.StatusNeedsApproval:
		return exitBlocked
	case engine.StatusCancelled:
		return 128 + int(syscall.SIGINT)
	case engine.StatusFailed:
		if res.ExitCode != nil {
			return *res.ExitCode
		}
		return 1
	}
	return exitSystem // status error: bad input, bad working directory, cannot start
}

func cmdSchema(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("schema")
	var ef engineFlags
	ef.register(fs, false)
	withOutput := fs.Bool("output", false, "also print the output schema: the fields of a result (run -json; over MCP, structuredContent with mcp -structured)")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected arguments: %q", fs.Args())
	}
	dir := ef.dir // only named in the description: need not exist here
	if dir == "" {
		dir, _ = os.Getwd()
	}
	sbx, err := ef.sandbox.sandbox()
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	cfg, err := ef.config()
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	e, err := engine.New(cfg)
	if err != nil {
		fmt.Fprintln(stderr, errPrefix("schema"), err)
		return exitSystem
	}
	defer e.Shutdown(context.Background())
	out := struct {
		Name         string          `json:"name"`
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"input_schema"`
		OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	}{Name: "bash", Description: e.Description(engine.ToolContext{WorkingDir: dir, Sandbox: sbx}), InputSchema: engine.InputSchema()}
	if *withOutput {
		out.OutputSchema = mcpserver.OutputSchema()
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(stderr, errPrefix("schema"), err)
		return exitSystem
	}
	return 0
}

// ParseSize parses 1GiB, 256MiB, 10KiB or a byte count.
func ParseSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = v, u.m
			break
		}
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return int64(n * float64(mult)), nil
}
