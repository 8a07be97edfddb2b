//go:build linux

package transact_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/bashvisor/bashvisor/internal/layer/layertest"
	"github.com/bashvisor/bashvisor/internal/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.Main() // the helper of TestJoinSandboxedCommands's commands
	layertest.Main()
	code := m.Run()
	if err := goleak.Find(); err != nil {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		code = 1
	}
	os.Exit(code)
}
