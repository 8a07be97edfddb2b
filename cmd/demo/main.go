// Command demo is bashvisor's CLI: run, mcp, check, schema, stress, bench
// and tour.
package main

import (
	"fmt"
	"os"
	"sort"

	"github.com/bashvisor/bashvisor/sandbox"
)

// commands maps a subcommand name to its entry point; each file registers
// its own in init. An entry returns the process exit code.
var commands = map[string]func(args []string) int{}

func main() {
	sandbox.Main() // the restricted-mode helper: confines itself and execs bash
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		usage()
		os.Exit(2)
	}
	os.Exit(cmd(os.Args[2:]))
}

func usage() {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(os.Stderr, "usage: demo COMMAND [flags]\ncommands: %v\n", names)
}
