package engine

import "time"

// Decide runs what Run decides about in's command under tc before
// starting it (decide: the analysis, the network question, the gate and
// the sandbox it would run in), and writes the audit log's record of it
// (Config.Audit) as Run does: the engine's analysis path, for benchmarks.
func Decide(e *Engine, tc ToolContext, in Input) (Status, Profile) {
	start := time.Now()
	res, run, a, _, _, ok := e.decide(Result{Command: in.Command}, tc, in)
	if ok {
		res.Status = StatusOK
	}
	e.audit(tc, in, res, a, start)
	return res.Status, run.Sandbox.Profile
}
