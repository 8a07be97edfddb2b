package engine

import (
	"errors"
	"fmt"

	"github.com/bashvisor/bashvisor/actors"
	"github.com/bashvisor/bashvisor/sandbox"
)

// restrict turns cmd into a sandboxed command (SPEC §2.8). By default bash
// is started from a throwaway OS thread that confines itself first
// (sandbox.Command.StartDirect: no helper process, about +0.6 ms per
// command); with Config.SandboxHelper the same binary is re-executed as
// the sandbox helper (sandbox.Main), which confines itself and execs bash
// (+2 to +5 ms, dominated by the binary's start-up). The scratch directory and the
// pids cgroup are removed by the command actor once the group is gone. A
// restricted command is never retried unrestricted.
func (e *Engine) restrict(cmd *actors.Command, command, workdir string) ([]string, error) {
	if !e.caps.Available() {
		return nil, fmt.Errorf("%w: %s; restricted mode needs Linux 5.13+ with Landlock enabled (6.7+ for network rules, 6.12+ for signal scoping)",
			ErrRestrictedMode, e.caps.Reason)
	}
	sc, err := sandbox.Prepare(e.cfg.Sandbox, e.bash, command, workdir)
	switch {
	case errors.Is(err, sandbox.ErrUnavailable):
		return nil, fmt.Errorf("%w: %w", ErrRestrictedMode, err)
	case err != nil: // the host's trouble (out of descriptors, disk full): say so
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}
	if e.cfg.SandboxHelper {
		cmd.Spec.Launch = sc.StartHelper
	} else {
		cmd.Spec.Launch = sc.StartDirect
	}
	cmd.Cleanup = func() {
		if err := sc.Cleanup(); err != nil {
			e.log.Warn("restricted command cleanup", "err", err)
		}
	}
	return sc.Env, nil
}
