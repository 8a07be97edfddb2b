//go:build linux && (amd64 || arm64)

package sandbox

import "golang.org/x/sys/unix"

// vforkFlags make forkRaw's clone a vfork (see forkRaw): the child
// shares the engine's memory and this thread waits until it exec'd or
// exited, so neither copies the engine's page tables nor leaves the
// engine to take a copy-on-write fault for every page it writes next.
const vforkFlags = unix.CLONE_VM | unix.CLONE_VFORK

// seccompFilter is the seccomp program for opts as socket filter
// instructions (installSeccomp's, for a child to install).
func seccompFilter(opts filterOpts) ([]unix.SockFilter, error) {
	raw, err := buildFilter(opts)
	if err != nil {
		return nil, err
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return filter, nil
}
