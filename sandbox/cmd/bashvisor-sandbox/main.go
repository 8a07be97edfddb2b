// Command bashvisor-sandbox is a minimal sandbox helper: the same confinement
// as the engine binary re-executing itself, in a small static binary that
// starts faster. Point the engine at it with sandbox.HelperPath.
package main

import "github.com/bashvisor/bashvisor/sandbox"

func main() {
	sandbox.Main()
}
