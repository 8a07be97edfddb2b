//go:build linux

package layer_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/layer/layertest"
)

func TestMain(m *testing.M) {
	layertest.Main()
	if len(os.Args) == 5 && os.Args[1] == setxattrArg {
		// What a command can do with setfattr(1): set an xattr on a path.
		if err := unix.Lsetxattr(os.Args[2], os.Args[3], []byte(os.Args[4]), 0); err != nil {
			fmt.Fprintln(os.Stderr, "setxattr:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if err := goleak.Find(); err != nil {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		code = 1
	}
	os.Exit(code)
}

// setxattrArg makes the test binary set one xattr (path, name, value)
// and exit: the setfattr of the commands the tests run over a layer.
const setxattrArg = "__setxattr"
