package layer

import "sync"

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

	// pre holds overlays made ahead of time in this process (see
	// Layer.Premount); a copy of the Spec in another process (JSON) has
	// none and makes its own.
	pre *handoff
	own bool // pre is this Spec's own (Layer.Share), for Close
}

// handoff passes premade mount descriptors to the one Open that takes
// them.
type handoff struct {
	mu  sync.Mutex
	fds []int
}

// take returns the descriptors once (nil-safe).
func (h *handoff) take() []int {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	fds := h.fds
	h.fds = nil
	return fds
}

// Overlay is one overlay of a [Spec].
type Overlay struct {
	// Root is the real directory: the lower layer and the mount point.
	Root string `json:"root"`
	// Upper and Work are the overlay's upper and work directories.
	Upper string `json:"upper"`
	Work  string `json:"work"`
}
