package engine

// WithoutLayer makes e run workspace-write commands without a layer
// (read-only binds of git's hooks and config, as before the layer), for
// benchmarks that compare the two.
func WithoutLayer(e *Engine) { e.noLayer = true }

// Admit returns what the engine decides about command under tc before
// running it (the analysis and the gate, with an ask that contained
// answers let through, but nothing run): StatusOK when it would run,
// else the refusal's status; held says whether all it changes would be
// held for review.
func Admit(e *Engine, tc ToolContext, command string) (status Status, held bool) {
	in := Input{Command: command}
	res, held, ok := e.admit(Result{}, tc, in, e.analyze(tc, in))
	if ok {
		return StatusOK, held
	}
	return res.Status, false
}
