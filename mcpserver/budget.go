package mcpserver

import "github.com/modelcontextprotocol/go-sdk/mcp"

// Output budgets per client: what the clients people use pass on to the
// model of a tool result, so that the model reads the engine's own cut
// (its header saying what is shown) rather than the client's. Measured by
// TestClientsHandTheModelTheText.
const (
	// codexOutputMax: Codex passes on about 12,000 characters of a tool
	// result and cuts the middle of a longer one itself, without saying
	// what it dropped; 10,000 bytes of output leave room for the header
	// and the notes.
	codexOutputMax = 10_000
	// claudeOutputMax: Claude Code replaces a result over 25,000 tokens
	// (MAX_MCP_OUTPUT_TOKENS) with an error, so the model reads none of
	// it; digit-heavy output runs to about 2 bytes a token, so 40,000
	// bytes stay under it.
	claudeOutputMax = 40_000
)

// clientOutputMax maps the initialize request's clientInfo.name to the
// client's output budget.
var clientOutputMax = map[string]int{
	"codex-mcp-client": codexOutputMax,
	"claude-code":      claudeOutputMax,
}

// outputMax is the output budget of a call in session ss
// ([engine.ToolContext.OutputMax]): Options.OutputMax when set, else the
// budget of the client that initialized the session, else 0 (the
// engine's). A stateless request has no initialize request: the engine's.
func (s *server) outputMax(ss *mcp.ServerSession) int {
	if s.o.OutputMax != 0 {
		return max(s.o.OutputMax, 0)
	}
	if ss == nil {
		return 0
	}
	if p := ss.InitializeParams(); p != nil && p.ClientInfo != nil {
		return clientOutputMax[p.ClientInfo.Name]
	}
	return 0
}
