package layer

import (
	"sync"

	"github.com/bashvisor/bashvisor/internal/fd"
)

// The types a process other than the engine needs to mount a layer. They
// are declared on every platform, so that a configuration can carry them
// (package sandbox's Options); everything else is Linux-only.

// Spec is what mounting a layer takes, for a process other than the
// one that made it (the sandbox's helper gets it in its JSON config).
type Spec struct {
	// Overlays are the overlays to mount, outer roots first.
	Overlays []Overlay `json:"overlays"`
	// UserXattr is [Options.UserXattr].
	UserXattr bool `json:"userxattr,omitempty"`
	// Hand, when not 0, is the descriptor of a socket, in the process
	// that mounts the layer, over which [Spec.Open] hands the overlay
	// mounts over (see [Layer.Hold]): it sends those it made to the
	// process that holds the layer, or, with Join, receives them from
	// it. Open closes it. The sandbox sets it for a helper process
	// (Spec.Exchange is the other end).
	Hand int `json:"hand,omitempty"`
	// Join: the overlays are those of a command that runs, held by the
	// process that holds the layer ([Layer.Share] of a held layer):
	// [Spec.Open] clones them (open_tree(2)) instead of making new ones.
	Join bool `json:"join,omitempty"`

	// pre holds overlays made ahead of time in this process (see
	// Layer.Premount), or held for a join (Share); a copy of the Spec
	// in another process (JSON) has none: it makes its own, or gets
	// them over Hand.
	pre  *handoff
	own  bool     // pre is this Spec's own (Layer.Share), for Close
	hold *handoff // where the overlays go once made (Layer.Hold)
	uses *threads // the layer's: threads whose exit unmounts its overlays (Spec.MountedBy)
}

// threads are the threads of this process whose exit ends a mount
// namespace with a layer's overlays in it (see [Spec.MountedBy]).
type threads struct {
	mu   sync.Mutex
	tids []int
}

// handoff passes mount descriptors from one owner to the next: premade
// overlays to the one Open that takes them, held ones to Share until
// Unshare.
type handoff struct {
	mu      sync.Mutex
	fds     []*fd.FD
	closed  bool // taken: put refuses
	foreign bool // the fds came from a process in another user namespace (Spec.Exchange)
}

// take returns the descriptors once (nil-safe); later puts are refused.
func (h *handoff) take() []*fd.FD {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	fds := h.fds
	h.fds, h.closed = nil, true
	return fds
}

// put keeps fds unless h was taken or holds some already; it reports
// whether it did (otherwise the caller still owns them).
func (h *handoff) put(fds []*fd.FD, foreign bool) bool {
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.fds != nil {
		return false
	}
	h.fds, h.foreign = fds, foreign
	return true
}

// Overlay is one overlay of a [Spec].
type Overlay struct {
	// Root is the real directory: the lower layer and the mount point.
	Root string `json:"root"`
	// Upper and Work are the overlay's upper and work directories.
	Upper string `json:"upper"`
	Work  string `json:"work"`
}
