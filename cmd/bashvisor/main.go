// Command bashvisor runs shell commands for LLM coding agents: one command
// from the shell (run), analysis without running (check), the tool's
// schema (schema), an MCP server (mcp), and an executor of a fleet
// (executor), with static or automanaged membership. The etcd and
// Kubernetes memberships are in bashvisor-fleet, which is the same program
// with their (large) clients linked in.
//
// Install it with `go install github.com/bashvisor/bashvisor/cmd/bashvisor@latest`,
// or from a checkout with `make install`; `bashvisor version` names the
// version or commit it was built from.
package main

import (
	"os"

	cmap "github.com/orcaman/concurrent-map"

	"github.com/bashvisor/bashvisor/cmd/internal/cli"
	"github.com/bashvisor/bashvisor/engine"
)

func main() {
	engine.SandboxMain() // the restricted-mode helper: confines itself and execs bash
	// Before any map is made (the setting is read at every lookup): the
	// actor system's registry is 1,024 maps already, and 32 shards in each
	// (32,768 maps) cost a one-command run about 8 ms of CPU at start.
	cmap.SHARD_COUNT = 1
	p := &cli.Program{
		Name: "bashvisor",
		Summary: "bashvisor runs shell commands for LLM coding agents: from the shell, or as\n" +
			"an MCP server, on this machine or on a fleet of executors.",
		Commands: cli.Standard(),
		Missing:  "bashvisor-fleet (go install github.com/bashvisor/bashvisor/cmd/bashvisor-fleet@latest)",
	}
	os.Exit(p.Main(os.Args[1:], os.Stdout, os.Stderr))
}
