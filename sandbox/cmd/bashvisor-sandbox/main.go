// Command bashvisor-sandbox is a minimal sandbox helper: the same confinement
// as the engine binary re-executing itself, in a small static binary that
// starts faster. Build it with CGO_ENABLED=0 next to the engine binary and
// point the engine at it: sandbox.HelperPath = sandbox.FindHelper().
package main

import "github.com/bashvisor/bashvisor/sandbox"

func main() {
	sandbox.Main()
}
