package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/bashvisor/bashvisor/engine"
)

func init() {
	commands["run"] = func(args []string) int { return cmdRun(args, os.Stdout, os.Stderr) }
	commands["schema"] = func(args []string) int { return cmdSchema(args, os.Stdout, os.Stderr) }
}

// Exit codes of `demo run` beyond the command's own (SPEC §2.10).
const (
	exitTimeout = 124
	exitBlocked = 125
	exitSystem  = 126
	exitUsage   = 64
)

// engineFlags are the engine settings shared by run, mcp and tour.
type engineFlags struct {
	dir         string
	timeout     time.Duration
	slowTimeout time.Duration
	grace       time.Duration
	restricted  bool
}

func (f *engineFlags) register(fs *flag.FlagSet) {
	d := engine.DefaultConfig()
	fs.StringVar(&f.dir, "C", "", "working directory (default: the current directory)")
	fs.DurationVar(&f.timeout, "timeout", d.Timeout, "timeout of default mode")
	fs.DurationVar(&f.slowTimeout, "slow-timeout", d.SlowTimeout, "timeout of slow mode")
	fs.DurationVar(&f.grace, "grace", d.Grace, "time between SIGTERM and SIGKILL")
	fs.BoolVar(&f.restricted, "restricted", false, "run in the Landlock sandbox (read-only filesystem, no network)")
}

func (f *engineFlags) config() engine.Config {
	c := engine.DefaultConfig()
	c.Timeout, c.SlowTimeout, c.Grace = f.timeout, f.slowTimeout, f.grace
	return c
}

func (f *engineFlags) workdir() (string, error) {
	if f.dir != "" {
		return f.dir, nil
	}
	return os.Getwd()
}

func cmdRun(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: demo run [flags] [--] COMMAND")
		fs.PrintDefaults()
	}
	var ef engineFlags
	ef.register(fs)
	mode := fs.String("mode", "default", "default, slow or background")
	asJSON := fs.Bool("json", false, "print the structured result as JSON")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return exitUsage
	}
	command := strings.Join(fs.Args(), " ")
	cfg := ef.config()
	if engine.Mode(*mode) == engine.ModeBackground {
		// The CLI exits right after starting the job: leave it running.
		cfg.LeaveJobsRunning, cfg.KeepFiles = true, true
	}
	dir, err := ef.workdir()
	if err != nil {
		fmt.Fprintln(stderr, "demo run:", err)
		return exitSystem
	}
	e, err := engine.New(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "demo run:", err)
		return exitSystem
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res := e.Run(ctx, engine.ToolContext{WorkingDir: dir, Restricted: ef.restricted}, engine.Input{Command: command, Mode: engine.Mode(*mode)})
	_ = e.Shutdown(context.Background())
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		_ = enc.Encode(res)
	} else {
		fmt.Fprint(stdout, res.Output)
		if res.Output != "" && !strings.HasSuffix(res.Output, "\n") {
			fmt.Fprintln(stdout)
		}
	}
	return exitCode(res)
}

// exitCode maps a result to the exit code of SPEC §2.10.
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
	fs := flag.NewFlagSet("schema", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var ef engineFlags
	ef.register(fs)
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	dir, err := ef.workdir()
	if err != nil {
		fmt.Fprintln(stderr, "demo schema:", err)
		return exitSystem
	}
	e, err := engine.New(ef.config())
	if err != nil {
		fmt.Fprintln(stderr, "demo schema:", err)
		return exitSystem
	}
	defer e.Shutdown(context.Background())
	out := struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}{"bash", e.Description(engine.ToolContext{WorkingDir: dir, Restricted: ef.restricted}), engine.InputSchema()}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return exitSystem
	}
	return 0
}
