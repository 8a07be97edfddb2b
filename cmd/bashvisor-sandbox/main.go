// Command bashvisor-sandbox is a minimal sandbox helper: the same confinement
// as the engine binary re-executing itself, in a small static binary that
// starts faster. Build it with CGO_ENABLED=0 and name it in the engine's
// configuration (the sandbox helper path), or put it next to the engine's
// executable (`make build`, `make install`): an engine that is not root
// then uses it without configuration, once its start-up probe made a
// world with it (a helper of another version refuses, and the engine
// falls back to its own executable).
package main

import "github.com/bashvisor/bashvisor/internal/sandbox"

func main() {
	sandbox.Main()
}
