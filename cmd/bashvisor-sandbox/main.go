// Command bashvisor-sandbox is a minimal sandbox helper: the same confinement
// as the engine binary re-executing itself, in a small static binary that
// starts faster. Build it with CGO_ENABLED=0 and name it in the engine's
// configuration (the sandbox helper path).
package main

import "github.com/bashvisor/bashvisor/internal/sandbox"

func main() {
	sandbox.Main()
}
