package engine

import "time"

// Decide runs the part of Run that decides about in's command under tc
// without running it (the analysis, the network question, the gate and
// the sandbox the command would run in) and writes the audit log's
// record of it (Config.Audit), as Run does: the engine's analysis path,
// for benchmarks.
func Decide(e *Engine, tc ToolContext, in Input) (Status, Profile) {
	start := time.Now()
	res := Result{Command: in.Command}
	tc0 := tc
	g := e.analyze(tc, in)
	res, ok := e.askNetwork(res, &tc, in, g)
	if ok {
		res, _, ok = e.admit(res, tc, in, g)
	}
	if ok {
		tc.Sandbox = e.kernelProfile(tc, in.Command, g)
		res.Status = StatusOK
	}
	e.audit(tc0, in, res, g, start)
	return res.Status, tc.Sandbox.Profile
}
