package engine

import (
	"fmt"

	"github.com/bashvisor/bashvisor/actors"
	"github.com/bashvisor/bashvisor/sandbox"
)

// restrict turns cmd into a sandboxed command (SPEC §2.8): the sandbox
// helper confines itself and execs bash. The scratch directory and the
// pids cgroup are removed by the command actor once the group is gone. A
// restricted command is never retried unrestricted.
func (e *Engine) restrict(cmd *actors.Command, command, workdir string) ([]string, error) {
	if !e.caps.Available() {
		return nil, fmt.Errorf("%w: %s; restricted mode needs Linux 5.13+ with Landlock enabled (6.7+ for network rules, 6.12+ for signal scoping)",
			ErrRestrictedMode, e.caps.Reason)
	}
	sc, err := sandbox.Prepare(e.cfg.Sandbox, e.bash, command, workdir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRestrictedMode, err)
	}
	cmd.Spec.Path, cmd.Spec.Args = sc.Path, sc.Args
	cmd.Cleanup = func() {
		if err := sc.Cleanup(); err != nil {
			e.log.Warn("restricted command cleanup", "err", err)
		}
	}
	return sc.Env, nil
}
