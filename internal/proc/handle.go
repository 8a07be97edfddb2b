package proc

import "sync"

// Handle is a running job's processes, held to read what they use and
// to freeze them, until End: its cgroup, or without one a Freezer of
// its sandbox's mount namespace. The job's owner ends it before it
// hands the cgroup back, so a recycled cgroup is never read or frozen
// for the wrong job. It is safe for concurrent use.
type Handle struct {
	mu sync.Mutex
	cg *Cgroup  // nil once ended
	fz *Freezer // without a cgroup; nil once ended
}

// NewHandle holds a job's processes through cg, or through fz when cg
// is nil (its usage then reads as zero). Both nil: it neither reads
// nor freezes anything.
func NewHandle(cg *Cgroup, fz *Freezer) *Handle {
	if cg != nil {
		fz = nil
	}
	return &Handle{cg: cg, fz: fz}
}

// Usage returns what the cgroup has accounted so far (zero without
// one, or once ended; nil-safe).
func (h *Handle) Usage() Usage {
	if h == nil {
		return Usage{}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cg == nil {
		return Usage{}
	}
	u, _ := h.cg.Usage()
	return u
}

// Freeze runs f with every process of the job frozen (the cgroup's
// freezer; without a cgroup, SIGSTOP of the processes of the mount
// namespace: see Freezer), then thaws them. It reports false, without
// running f, when it cannot: the handle ended (or is nil), holds
// neither, or the kernel did not freeze. End waits for it, so keep f
// short.
func (h *Handle) Freeze(f func()) bool {
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cg == nil {
		return h.fz != nil && h.fz.Frozen(f)
	}
	if h.cg.Freeze(true) != nil {
		return false
	}
	defer h.cg.Freeze(false)
	f()
	return true
}

// End lets the processes go: later calls read zero and freeze nothing
// (nil-safe). It does not close the Freezer, which stays its owner's.
func (h *Handle) End() {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.cg, h.fz = nil, nil
	h.mu.Unlock()
}
