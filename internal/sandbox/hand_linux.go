//go:build linux

package sandbox

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
)

// layerHand is the socket over which the helper of a command in a
// rootless world and the engine hand a held layer's overlays over
// (layer.Spec.Hand, layer.Spec.Exchange): the helper, in the world's
// user namespace, makes the overlays and sends them to the engine,
// which cannot make them, or, for a command that joins a running one's
// layer, gets them from it and clones them. The helper gets its end as
// a descriptor after the proxy's (see Prepare), and closes it before
// it execs bash.
type layerHand struct {
	sock  *fd.FD   // the engine's end
	child *os.File // the helper's end, until the helper started
	join  bool
	spec  func(sock int) error // the Spec's Exchange
}

// setLayerHand gives a command in a rootless world whose layer hands
// its overlays over (layer.Spec.HandsOver) the socket for it: cfg.Layer
// becomes a copy that names the helper's descriptor.
func (cmd *Command) setLayerHand(cfg *helperConfig) error {
	w := cmd.world
	if w == nil || !w.rootless || cfg.Layer == nil || !cfg.Layer.HandsOver() {
		return nil
	}
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sandbox: layer socket: %w", err)
	}
	spec := *cfg.Layer
	spec.Hand = 3 + len(cmd.extraFiles())
	cfg.Layer = &spec
	cmd.hand = &layerHand{sock: fd.New(sp[0]), child: os.NewFile(uintptr(sp[1]), "layer-hand"), join: spec.Join, spec: spec.Exchange}
	return nil
}

// extraFiles are the descriptors the helper gets from 3 up: the proxy
// listener's socket, then the layer's, then the one it tells its mount
// namespace on.
func (c *Command) extraFiles() []*os.File {
	var out []*os.File
	if c.proxyChild != nil {
		out = append(out, c.proxyChild)
	}
	if c.hand != nil && c.hand.child != nil {
		out = append(out, c.hand.child)
	}
	if c.nsChild != nil {
		out = append(out, c.nsChild)
	}
	return out
}

// beforeStart sends the overlays a joining command's helper clones
// (nil-safe).
func (h *layerHand) beforeStart() error {
	if h == nil || !h.join {
		return nil
	}
	if err := h.spec(h.sock.Int()); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	return nil
}

// afterStart closes the helper's end and, when the helper started,
// receives the overlays it made (a held layer's first command): the
// layer keeps them for later commands. When that fails (the helper
// ended first) the layer is not shared. Nil-safe.
func (h *layerHand) afterStart(started bool) {
	if h == nil {
		return
	}
	_ = h.child.Close()
	h.child = nil
	if started && !h.join {
		_ = h.spec(h.sock.Int())
	}
	h.close()
}

// close closes what is left of the socket (nil-safe).
func (h *layerHand) close() {
	if h == nil {
		return
	}
	if h.child != nil {
		_ = h.child.Close()
		h.child = nil
	}
	_ = h.sock.Close()
}
