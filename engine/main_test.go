package engine_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/bashvisor/bashvisor/internal/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.Main() // restricted tests re-execute this binary as the sandbox helper
	if runChild() {
		return
	}
	goleak.VerifyTestMain(m)
}

// runChild runs a helper role when the test binary is re-executed by a
// test (see TestEnvironNotReadableUnprivileged); it reports whether it did.
func runChild() bool {
	switch os.Getenv("BASHVISOR_TEST_CHILD") {
	case "environ":
		childEnviron()
		return true
	case "out-of-fds":
		childOutOfFDs()
		return true
	case "notowned":
		childWorkspaceNotOwned()
		return true
	}
	return false
}
