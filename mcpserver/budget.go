package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

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
// engine's), as for a session without clientInfo.
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

// describeBudgets makes tools/list state the session's output budget in
// the bash tool's description ("Output over 9.8 KiB is cut in the
// middle…"), when it is not the engine's. Such a list is the session's
// own: cacheable privately only.
func (s *server) describeBudgets(ms *mcp.Server) {
	ms.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			list, ok := res.(*mcp.ListToolsResult)
			if method != "tools/list" || err != nil || !ok {
				return res, err
			}
			ss, _ := req.GetSession().(*mcp.ServerSession)
			limit := s.outputMax(ss)
			if limit <= 0 {
				return res, nil
			}
			tc := s.toolContext(scope{principal: s.o.Principal, conv: s.o.ConversationID})
			tc.OutputMax = limit
			own := *list
			own.Tools = make([]*mcp.Tool, len(list.Tools))
			for i, tl := range list.Tools {
				if tl.Name == toolBash {
					bash := *tl
					bash.Description = s.e.Description(tc)
					tl = &bash
				}
				own.Tools[i] = tl
			}
			own.Cacheable = privateCache
			return &own, nil
		}
	})
}
