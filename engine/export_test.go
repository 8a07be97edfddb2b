package engine

// WithoutLayer makes e run workspace-write commands without a layer
// (read-only binds of git's hooks and config, as before the layer), for
// benchmarks that compare the two.
func WithoutLayer(e *Engine) { e.noLayer = true }
