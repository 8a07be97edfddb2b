package engine

// Listening adds to res what a sandboxed result of conversation tc gains
// about its listening ports (the lookup every such result makes), for
// the benchmark of its cost.
func Listening(e *Engine, tc ToolContext, res *Result) { e.listening(tc, res) }
