// Package cli is the command line shared by bashvisor's programs: the
// subcommands run, check, schema, mcp and executor, the version line, and
// the conventions every subcommand follows. cmd/bashvisor is these
// commands; cmd/bashvisor-fleet adds the etcd and Kubernetes memberships
// (-cluster etcd:… and -cluster k8s), whose clients are too large for the
// default binary; cmd/demo adds the tour, bench and stress.
//
// Conventions shared by every subcommand: -h, -help or --help prints the
// subcommand's usage on stdout and exits 0; a usage error (an unknown
// command or flag, a missing or extra argument, a bad flag value) prints
// the error and the usage on stderr and exits 64 (EX_USAGE). 64 rather than
// the flag package's 2, because `check` already answers 2 for "ask".
// Errors of the CLI itself go to stderr; what a command printed stays on
// stdout.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/bashvisor/bashvisor/cluster"
)

// Exit statuses shared by the subcommands.
const (
	ExitUsage   = 64  // a usage error (sysexits EX_USAGE)
	exitTimeout = 124 // run: the command timed out
	exitBlocked = 125 // run: blocked, denied or needs approval
	ExitSystem  = 126 // bad input, bad working directory, cannot start, other failures
	exitUsage   = ExitUsage
	exitSystem  = ExitSystem
)

// Command is one subcommand: `PROGRAM NAME ARGS`.
type Command struct {
	Name     string // what follows the program's name
	Synopsis string // the arguments after "PROGRAM NAME"
	Summary  string // one line for the command list
	Details  string // more text for the command's own usage, or ""
	// Run runs the command with its arguments and returns the exit status.
	Run func(args []string, stdout, stderr io.Writer) int
}

// Membership makes the membership `-cluster KIND:ARG` names; healthPort
// is an automanaged executor's own health port (0 on a front).
type Membership func(arg string, healthPort int) (cluster.Membership, error)

// Program is one command-line program made of Commands.
type Program struct {
	// Name is the program's name in usage lines and error messages.
	Name string
	// Summary is the first paragraph of the program's usage page.
	Summary string
	// Commands are its subcommands, in the order the usage page lists
	// them (help and version are built in).
	Commands []Command
	// Memberships are the -cluster kinds besides automanaged (which every
	// program has): bashvisor-fleet adds "etcd" and "k8s". Missing names
	// the program to use instead for a kind it lacks.
	Memberships map[string]Membership
	Missing     string
}

// prog is the program being run (set by Main; tests of single commands
// get bashvisor's name).
var prog = &Program{Name: "bashvisor"}

// Standard returns the subcommands every program has: run, check,
// schema, mcp and executor.
func Standard() []Command {
	return []Command{
		{"run", "[flags] [--] COMMAND", "run one command through the engine and print its result",
			"Prints the result's text (or the structured result with -json) and exits with the\n" +
				"command's exit code; 124 timed out; 125 blocked, denied or needs approval; 126 bad\n" +
				"input, bad working directory or cannot start; 130 cancelled by SIGINT/SIGTERM.\n" +
				"Errors of the CLI go to stderr. When the output is truncated, the complete output\n" +
				"is kept in the file the result names (under $TMPDIR/bashvisor-run-*); delete it\n" +
				"when done. -mode background leaves the job running and its output file in place.", cmdRun},
		{"check", "[flags] [--] COMMAND | -", "analyse a command (or JSON lines of commands on stdin) without running it: allow, block or ask",
			"Exit status: 0 allow, 1 block (or denied by -profile), 2 ask, 126 bad input\n" +
				"(an empty command, NUL bytes, ...), 64 usage error.", runCheck},
		{"schema", "[flags]", "print the bash tool's name, description and input schema (-output: and its output schema)", "", cmdSchema},
		{"mcp", "[flags]", "serve the tools over MCP: stdio, or streamable HTTP with -http",
			"Exits 0 on stdin EOF (stdio) or SIGINT/SIGTERM after ending every command and job.\n" +
				"-http :PORT binds 127.0.0.1:PORT. Every HTTP request needs a bearer token (-token,\n" +
				"-tokens FILE, -oauth-issuer URL; without them one is generated and kept in\n" +
				"$XDG_CONFIG_HOME/bashvisor/mcp-token); -no-auth opts out, on loopback only.", cmdMCP},
		{"executor", "[flags]", "serve an engine to fronts on other machines (mcp -executors or -cluster)",
			"Exits 0 on SIGINT/SIGTERM after ending every command and job; 75 after it fenced itself\n" +
				"(it was frozen or cut off, so fronts reported its calls lost): restart it. A non-loopback\n" +
				"-listen needs -token (or $BASHVISOR_CLUSTER_TOKEN), the same on every node.", cmdExecutor},
	}
}

// Main runs the program with its arguments (without the program name)
// and returns the exit status.
func (p *Program) Main(args []string, stdout, stderr io.Writer) int {
	prog = p
	if len(args) == 0 {
		fmt.Fprintf(stderr, "%s: missing COMMAND\n\n", p.Name)
		p.usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if args[0] == "help" && len(args) > 1 {
			if sc := lookup(args[1]); sc != nil {
				return sc.Run([]string{"-h"}, stdout, stderr)
			}
			return p.unknownCommand(args[1], stderr)
		}
		p.usage(stdout)
		return 0
	case "-version", "--version", "version":
		fmt.Fprintln(stdout, Version(p.Name))
		return 0
	}
	sc := lookup(args[0])
	if sc == nil {
		return p.unknownCommand(args[0], stderr)
	}
	return sc.Run(args[1:], stdout, stderr)
}

// Lookup returns the program's subcommand name, or nil.
func Lookup(name string) *Command { return lookup(name) }

func lookup(name string) *Command {
	for i := range prog.Commands {
		if prog.Commands[i].Name == name {
			return &prog.Commands[i]
		}
	}
	return nil
}

func (p *Program) unknownCommand(name string, stderr io.Writer) int {
	fmt.Fprintf(stderr, "%s: unknown command %q\n\n", p.Name, name)
	p.usage(stderr)
	return exitUsage
}

func (p *Program) usage(w io.Writer) {
	fmt.Fprintf(w, "%s\n\nusage: %s COMMAND [flags] [arguments]\n\ncommands:\n", p.Summary, p.Name)
	for _, sc := range p.Commands {
		fmt.Fprintf(w, "  %-8s %s\n", sc.Name, sc.Summary)
	}
	fmt.Fprintf(w, "  %-8s %s\n", "help", "this page, or a command's usage: "+p.Name+" help COMMAND (or "+p.Name+" COMMAND -h)")
	fmt.Fprintf(w, "  %-8s %s\n", "version", "print the version (also --version)")
	fmt.Fprint(w, "\nA usage error exits 64.\n")
}

// Version is the version line of program name: the module version the
// binary was built from, the commit and whether the checkout had
// uncommitted changes, and the Go version and platform. A build from a
// checkout (go build, make install) carries a pseudo-version with the
// commit ("+dirty" when modified), a `go install …@VERSION` its version;
// `go run` and builds with -buildvcs=false carry neither and say so.
func Version(name string) string {
	v, rev := "(devel)", ""
	modified := false
	if bi, ok := debug.ReadBuildInfo(); ok {
		v = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	line := name + " " + v
	switch {
	case rev != "":
		if len(rev) > 12 {
			rev = rev[:12]
		}
		line += " (commit " + rev
		if modified {
			line += ", modified"
		}
		line += ")"
	case v == "(devel)" || v == "":
		line += " (no version information: built by go run or with -buildvcs=false)"
	}
	return line + " " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
}

// moduleVersion is the module version the binary was built from, or
// "dev" without one (what the MCP server tells clients).
func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// NewFlagSet returns the flag set of subcommand name. Parse it with
// ParseFlags, which prints the usage.
func NewFlagSet(name string) *flag.FlagSet { return newFlagSet(name) }

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {} // parseFlags prints it: on stdout for -h, on stderr after an error
	return fs
}

// ParseFlags parses a subcommand's flags. When ok is false the subcommand
// returns code at once: 0 after -h (usage on stdout), ExitUsage after a
// bad flag (the flag package's message and the usage on stderr).
func ParseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	return parseFlags(fs, args, stdout, stderr)
}

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

// UsageError reports a usage error of fs's subcommand on stderr and
// returns ExitUsage.
func UsageError(fs *flag.FlagSet, stderr io.Writer, format string, args ...any) int {
	return usageError(fs, stderr, format, args...)
}

func usageError(fs *flag.FlagSet, stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "%s %s: %s\n\n", prog.Name, fs.Name(), fmt.Sprintf(format, args...))
	printUsage(stderr, fs)
	return exitUsage
}

// printUsage prints a subcommand's usage: synopsis, summary, details and
// flags (those documented as "internal: …" are left out).
func printUsage(w io.Writer, fs *flag.FlagSet) {
	sc := lookup(fs.Name())
	if sc == nil {
		sc = &Command{Name: fs.Name()}
	}
	fmt.Fprintf(w, "usage: %s %s %s\n", prog.Name, sc.Name, sc.Synopsis)
	if sc.Summary != "" {
		fmt.Fprintf(w, "\n%s%s.\n", strings.ToUpper(sc.Summary[:1]), sc.Summary[1:])
	}
	if sc.Details != "" {
		fmt.Fprintf(w, "\n%s\n", sc.Details)
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

// errPrefix is the prefix of a subcommand's error messages: "PROGRAM
// NAME:".
func errPrefix(name string) string { return prog.Name + " " + name + ":" }
