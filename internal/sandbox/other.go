//go:build !linux

package sandbox

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"

	"github.com/bashvisor/bashvisor/internal/proc"
)

func probe() Capabilities {
	return Capabilities{Reason: "restricted mode needs Linux (Landlock); this is " + runtime.GOOS}
}

// Main must be the first statement of the embedding program's main. On
// this platform there is no sandbox: a helper invocation fails with
// status 126, anything else returns at once.
func Main() {
	if len(os.Args) < 2 || os.Args[1] != HelperArg {
		return
	}
	fmt.Fprintln(os.Stderr, "bashvisor sandbox: "+unavailable("not Linux").Error())
	os.Exit(helperExitCode)
}

func makeCacheDir(string) error { return nil }

// Freezer is nil: there is no sandboxed command.
func (c *Command) Freezer(pid int) *proc.Freezer { return nil }

func (c *Command) setNamespaceReport(*helperConfig) error { return nil }

func (c *Command) closeNamespaceReport() {}

type world struct {
	dir      string
	rootless bool
	bases    map[string]string
	hide     []string
	show     []string
}

type worldConfig struct {
	Dir        string
	Hide, Show []string
	Rootless   bool
	Size       uint64
}

func (w *world) listen() (net.Listener, error) { return nil, unavailable("not Linux") }

type handover struct{}

type passedListener struct {
	net.Listener
	h    *handover
	i    int
	addr net.Addr
}

func newHandover(int) (*handover, *os.File, error) { return nil, nil, unavailable("not Linux") }

func (cmd *Command) setCapture(*helperConfig, []int, *handover) error {
	return unavailable("not Linux")
}
func (cmd *Command) freeCapture() {}

type layerHand struct{}

func (cmd *Command) setLayerHand(*helperConfig) error { return nil }
func (h *layerHand) close()                           {}

// NewWorld is not available on this platform.
func NewWorld(opts WorldOptions) (*World, error) { return nil, unavailable("not Linux") }

// Usage is not available on this platform.
func (w *World) Usage() (used, size uint64, err error) { return 0, 0, unavailable("not Linux") }

// Close does nothing on this platform.
func (w *World) Close() error { return nil }
func removeStaleOnce(string)  {}

type netnsHandle struct{ fd int }

func noNetns() *netnsHandle                          { return &netnsHandle{fd: -1} }
func newNetnsHandle() (*netnsHandle, error)          { return nil, unavailable("not Linux") }
func (h *netnsHandle) release(reuse bool)            {}
func (h *netnsHandle) listen() (net.Listener, error) { return nil, unavailable("not Linux") }

type filterOpts struct{ denyIPC, denyBind, metadata, network bool }

// StartDirect is not available on this platform.
func (c *Command) StartDirect(cmd *exec.Cmd) error { return unavailable("not Linux") }

// StartHelper is not available on this platform.
func (c *Command) StartHelper(cmd *exec.Cmd) error { return unavailable("not Linux") }
