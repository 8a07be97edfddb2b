// Command demo is bashvisor's CLI: run, check, schema, mcp, executor,
// stress, bench and tour.
//
// Conventions shared by every subcommand: -h, -help or --help prints the
// subcommand's usage on stdout and exits 0; a usage error (an unknown
// command or flag, a missing or extra argument, a bad flag value) prints
// the error and the usage on stderr and exits 64 (EX_USAGE). 64 rather than
// the flag package's 2, because `demo check` already answers 2 for "ask".
// Errors of the CLI itself go to stderr; what a command printed stays on
// stdout.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/bashvisor/bashvisor/engine"
)

// Exit statuses shared by the subcommands.
const (
	exitUsage   = 64  // a usage error (sysexits EX_USAGE)
	exitTimeout = 124 // run: the command timed out
	exitBlocked = 125 // run: blocked, denied or needs approval
	exitSystem  = 126 // bad input, bad working directory, cannot start, other failures
)

// subcommand is one entry of `demo COMMAND`.
type subcommand struct {
	name     string
	synopsis string // the arguments after "demo NAME"
	summary  string // one line for the command list
	details  string // more text for the command's own usage, or ""
	run      func(args []string, stdout, stderr io.Writer) int
}

// subcommands lists the commands in the order the usage page shows them
// (set in init: the entries refer to functions that use the list).
var subcommands []subcommand

func init() {
	subcommands = []subcommand{
		{"run", "[flags] [--] COMMAND", "run one command through the engine and print its result",
			"Prints the result's text (or the structured result with -json) and exits with the\n" +
				"command's exit code; 124 timed out; 125 blocked, denied or needs approval; 126 bad\n" +
				"input, bad working directory or cannot start; 130 cancelled by SIGINT/SIGTERM.\n" +
				"Errors of the CLI go to stderr. When the output is truncated, the complete output\n" +
				"is kept in the file the result names (under $TMPDIR/bashvisor-run-*); delete it\n" +
				"when done. -mode background leaves the job running and its output file in place.", cmdRun},
		{"check", "[flags] [--] COMMAND", "analyse a command without running it: allow, block or ask",
			"Exit status: 0 allow, 1 block (or denied by -profile), 2 ask, 126 bad input\n" +
				"(an empty command, NUL bytes, ...), 64 usage error.", runCheck},
		{"schema", "[flags]", "print the bash tool's name, description and input schema (-output: and its output schema)", "", cmdSchema},
		{"mcp", "[flags]", "serve the tools over MCP: stdio, or streamable HTTP with -http",
			"Exits 0 on stdin EOF (stdio) or SIGINT/SIGTERM after ending every command and job.\n" +
				"-http :PORT binds 127.0.0.1:PORT; a non-loopback address needs a token.", cmdMCP},
		{"executor", "[flags]", "serve an engine to fronts on other machines (demo mcp -executors or -cluster)",
			"Exits 0 on SIGINT/SIGTERM after ending every command and job; 75 after it fenced itself\n" +
				"(it was frozen or cut off, so fronts reported its calls lost): restart it. A non-loopback\n" +
				"-listen needs -token (or $BASHVISOR_CLUSTER_TOKEN), the same on every node.", cmdExecutor},
		{"stress", "[flags]", "run a mixed load through one engine; exit 0 only if nothing was lost or leaked", "", cmdStress},
		{"bench", "[flags]", "measure the engine against raw os/exec", "", cmdBench},
		{"tour", "", "a dozen commands at once through one engine, and what happened to each (make demo)",
			"Output files the tour names (a spooled full output, a background job's log) are kept;\n" +
				"its last line says where.", cmdTour},
	}
}

func main() {
	engine.SandboxMain() // the restricted-mode helper: confines itself and execs bash
	os.Exit(demoMain(os.Args[1:], os.Stdout, os.Stderr))
}

func demoMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "demo: missing COMMAND")
		fmt.Fprintln(stderr)
		mainUsage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if args[0] == "help" && len(args) > 1 {
			if sc := lookup(args[1]); sc != nil {
				return sc.run([]string{"-h"}, stdout, stderr)
			}
			return unknownCommand(args[1], stderr)
		}
		mainUsage(stdout)
		return 0
	case "-version", "--version", "version":
		fmt.Fprintln(stdout, version())
		return 0
	}
	sc := lookup(args[0])
	if sc == nil {
		return unknownCommand(args[0], stderr)
	}
	return sc.run(args[1:], stdout, stderr)
}

func lookup(name string) *subcommand {
	for i := range subcommands {
		if subcommands[i].name == name {
			return &subcommands[i]
		}
	}
	return nil
}

func unknownCommand(name string, stderr io.Writer) int {
	fmt.Fprintf(stderr, "demo: unknown command %q\n\n", name)
	mainUsage(stderr)
	return exitUsage
}

func mainUsage(w io.Writer) {
	fmt.Fprint(w, "demo is bashvisor's command line: run shell commands through the engine,\n"+
		"serve them over MCP, and test and measure it.\n\n"+
		"usage: demo COMMAND [flags] [arguments]\n\ncommands:\n")
	for _, sc := range subcommands {
		fmt.Fprintf(w, "  %-8s %s\n", sc.name, sc.summary)
	}
	fmt.Fprintf(w, "  %-8s %s\n", "help", "this page, or a command's usage: demo help COMMAND (or demo COMMAND -h)")
	fmt.Fprintf(w, "  %-8s %s\n", "version", "print the version (also --version)")
	fmt.Fprint(w, "\nA usage error exits 64.\n")
}

// version names the module version the binary was built from (a
// pseudo-version when built in a git checkout, "(devel)" under go run)
// and the Go version.
func version() string {
	v := "(unknown)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		v = bi.Main.Path + " " + bi.Main.Version
	}
	return "demo " + v + " " + runtime.Version()
}

// newFlagSet returns the flag set of subcommand name. Parse it with
// parseFlags, which prints the usage.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {} // parseFlags prints it: on stdout for -h, on stderr after an error
	return fs
}

// parseFlags parses a subcommand's flags. When ok is false the subcommand
// returns code at once: 0 after -h (usage on stdout), exitUsage after a
// bad flag (the flag package's message and the usage on stderr).
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	fs.SetOutput(stderr)
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, flag.ErrHelp):
		printUsage(stdout, fs)
		return 0, false
	default:
		fmt.Fprintln(stderr)
		printUsage(stderr, fs)
		return exitUsage, false
	}
}

// usageError reports a usage error of fs's subcommand on stderr and
// returns exitUsage.
func usageError(fs *flag.FlagSet, stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "demo %s: %s\n\n", fs.Name(), fmt.Sprintf(format, args...))
	printUsage(stderr, fs)
	return exitUsage
}

// printUsage prints a subcommand's usage: synopsis, summary, details and
// flags (those documented as "internal: …" are left out).
func printUsage(w io.Writer, fs *flag.FlagSet) {
	sc := lookup(fs.Name())
	if sc == nil {
		sc = &subcommand{name: fs.Name()}
	}
	fmt.Fprintf(w, "usage: demo %s %s\n", sc.name, sc.synopsis)
	if sc.summary != "" {
		fmt.Fprintf(w, "\n%s%s.\n", strings.ToUpper(sc.summary[:1]), sc.summary[1:])
	}
	if sc.details != "" {
		fmt.Fprintf(w, "\n%s\n", sc.details)
	}
	first := true
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Usage, "internal:") {
			return
		}
		if first {
			fmt.Fprint(w, "\nflags:\n")
			first = false
		}
		name, usage := flag.UnquoteUsage(f)
		line := "  -" + f.Name
		if name != "" {
			line += " " + name
		}
		if def := f.DefValue; def != "" && def != "false" && def != "0" && def != "0s" {
			if g, ok := f.Value.(flag.Getter); ok {
				if _, ok := g.Get().(string); ok {
					def = strconv.Quote(def)
				}
			}
			usage += fmt.Sprintf(" (default %s)", def)
		}
		fmt.Fprintf(w, "%s\n    \t%s\n", line, strings.ReplaceAll(usage, "\n", "\n    \t"))
	})
}
