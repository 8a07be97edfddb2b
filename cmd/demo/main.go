// Command demo is bashvisor's developer program: the tour (make demo), the
// benchmarks against raw os/exec (make bench) and the stress run (make
// stress), plus every bashvisor command (run, check, schema, mcp,
// executor), so that bench measures the same server it starts.
//
// The conventions of cmd/internal/cli hold for every subcommand: -h prints the
// usage on stdout and exits 0; a usage error prints it on stderr and exits
// 64.
package main

import (
	"flag"
	"io"
	"os"

	cmap "github.com/orcaman/concurrent-map"

	"github.com/bashvisor/bashvisor/cmd/internal/cli"
	"github.com/bashvisor/bashvisor/engine"
)

// Exit statuses the demo's own commands share with the CLI.
const (
	exitUsage  = cli.ExitUsage
	exitSystem = cli.ExitSystem
)

func program() *cli.Program {
	return &cli.Program{
		Name: "demo",
		Summary: "demo is bashvisor's developer program: the tour, the benchmarks and the stress\n" +
			"run, plus every bashvisor command.",
		Commands: append(cli.Standard(),
			cli.Command{Name: "stress", Synopsis: "[flags]", Summary: "run a mixed load through one engine; exit 0 only if nothing was lost or leaked", Run: cmdStress},
			cli.Command{Name: "bench", Synopsis: "[flags]", Summary: "measure the engine against raw os/exec", Run: cmdBench},
			cli.Command{Name: "tour", Summary: "seventeen commands at once through one engine, and what happened to each (make demo)",
				Details: "Output files the tour names (a spooled full output, a background job's log) are kept;\n" +
					"its last line says where.", Run: cmdTour},
		),
		Missing: "bashvisor-fleet (go install github.com/bashvisor/bashvisor/cmd/bashvisor-fleet@latest)",
	}
}

func main() {
	engine.SandboxMain() // the restricted-mode helper: confines itself and execs bash
	// Before any map is made (the setting is read at every lookup): the
	// actor system's registry is 1,024 maps already, and 32 shards in each
	// (32,768 maps) cost a one-command run about 8 ms of CPU at start.
	cmap.SHARD_COUNT = 1
	os.Exit(program().Main(os.Args[1:], os.Stdout, os.Stderr))
}

func newFlagSet(name string) *flag.FlagSet { return cli.NewFlagSet(name) }

func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (int, bool) {
	return cli.ParseFlags(fs, args, stdout, stderr)
}

func usageError(fs *flag.FlagSet, stderr io.Writer, format string, args ...any) int {
	return cli.UsageError(fs, stderr, format, args...)
}
