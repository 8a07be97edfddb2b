package mcpserver

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// declinedText is the result text of a command a person declined to
// approve.
const declinedText = "[command denied: the user declined to approve it]"

// Approval of "ask" commands (permission profiles) through MCP
// elicitation.
//
// Clients on protocol versions before 2026-07-28 get a server-initiated
// elicitation/create request while the tool call waits. From 2026-07-28 on,
// servers may not send requests; the call instead returns an
// input-required result whose input request asks the same question, and the
// client retries the call with the answer and the opaque request state. The
// state is an HMAC (key random per server) over the exact command, mode,
// working directory and hosts asked for (Input.Network) plus an expiry, so an answer cannot be replayed for
// another command or after approvalTTL.

const (
	approvalKey  = "approve"
	approvalTTL  = 10 * time.Minute
	protocolMRTR = "2026-07-28" // first protocol version with multi round-trip requests
)

// canElicit reports whether the client advertised form elicitation.
func (s *server) canElicit(req *mcp.CallToolRequest) bool {
	if s.o.DisableElicitation {
		return false
	}
	caps := req.ClientCapabilities()
	if caps == nil || caps.Elicitation == nil {
		return false
	}
	el := caps.Elicitation
	return el.Form != nil || el.URL == nil // no sub-capabilities means form
}

// usesMultiRoundTrip mirrors the go-sdk's own test for whether the client
// expects input requests in results rather than server-initiated requests.
func usesMultiRoundTrip(req *mcp.CallToolRequest) bool {
	ip := req.Session.InitializeParams()
	return ip == nil || ip.ProtocolVersion >= protocolMRTR
}

// elicitParams is the question put to the user.
func (s *server) elicitParams(tc engine.ToolContext, in engine.Input, r engine.Result) *mcp.ElicitParams {
	mode := in.Mode
	if mode == "" {
		mode = engine.ModeDefault
	}
	var b strings.Builder
	b.WriteString("The bash tool wants to run a command that needs your approval.\n\n")
	fmt.Fprintf(&b, "Command (mode %s, in %s):\n\n%s\n", mode, tc.WorkingDir, in.Command)
	if len(in.Network) > 0 {
		fmt.Fprintf(&b, "\nNetwork it asks for, granted for the rest of the conversation: %s\n", strings.Join(in.Network, ", "))
	}
	// The reason without the result text's advice to the agent.
	if r.Err != nil {
		why := strings.TrimPrefix(r.Err.Error(), engine.ErrNeedsApproval.Error()+": ")
		fmt.Fprintf(&b, "\nWhy: %s.\n", why)
	}
	b.WriteString("\nAccept to run it exactly as shown; decline to refuse.")
	return &mcp.ElicitParams{
		Mode:            "form",
		Message:         b.String(),
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}},
	}
}

// askApproval handles a needs_approval result for a client that supports
// elicitation.
func (s *server) askApproval(c *toolCall, in engine.Input, r engine.Result, run func(bool) engine.Result) (*mcp.CallToolResult, error) {
	params := s.elicitParams(c.tc, in, r)
	if usesMultiRoundTrip(c.req) {
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{approvalKey: params},
			RequestState:  s.sign(c.tc, in, time.Now().Add(approvalTTL)),
		}, nil
	}
	res, err := c.req.Session.Elicit(c.ctx, params)
	if err != nil {
		s.log.Warn("elicitation failed; returning needs_approval", "err", err)
		return s.finish(c, in, r), nil
	}
	return s.finish(c, in, s.decide(res, r, run)), nil
}

// approvalRetry handles the retried call of the multi-round-trip flow. ok
// is false when the request state does not match this call.
func (s *server) approvalRetry(req *mcp.CallToolRequest, tc engine.ToolContext, in engine.Input, run func(bool) engine.Result) (r engine.Result, ok bool) {
	res, _ := req.Params.InputResponses[approvalKey].(*mcp.ElicitResult)
	if res == nil {
		return r, false
	}
	// verify consumes the state: check the response first, so a retry
	// without one does not burn the user's answer.
	if !s.verify(req.Params.RequestState, tc, in) {
		s.log.Warn("approval retry with an invalid, expired or already used request state", "conversation", tc.ConversationID)
		return r, false
	}
	if res.Action == "accept" {
		return run(true), true
	}
	return s.decide(res, run(false), run), true
}

// decide maps the user's answer to a result: accept runs the command as
// approved, decline makes it "denied", cancel (dismissed) leaves the
// needs_approval result r.
func (s *server) decide(res *mcp.ElicitResult, r engine.Result, run func(bool) engine.Result) engine.Result {
	switch res.Action {
	case "accept":
		return run(true)
	case "decline":
		if r.Status != engine.StatusNeedsApproval {
			return r
		}
		r.Status = engine.StatusDenied
		r.Output = declinedText
		r.Err = engine.ErrDenied
		return r
	default:
		return r
	}
}

func (s *server) mac(tc engine.ToolContext, in engine.Input, expiry int64, nonce []byte) []byte {
	h := hmac.New(sha256.New, s.key)
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], uint64(expiry))
	h.Write(buf[:])
	h.Write(nonce)
	for _, part := range append([]string{tc.ConversationID, tc.WorkingDir, string(in.Mode), in.Command}, in.Network...) {
		binary.BigEndian.PutUint64(buf[:], uint64(len(part)))
		h.Write(buf[:])
		h.Write([]byte(part))
	}
	return h.Sum(nil)
}

// nonceSize is the random part of an approval state, which makes every
// state single-use.
const nonceSize = 16

func (s *server) sign(tc engine.ToolContext, in engine.Input, expiry time.Time) string {
	exp := expiry.Unix()
	b := make([]byte, 8+nonceSize, 8+nonceSize+sha256.Size)
	binary.BigEndian.PutUint64(b, uint64(exp))
	_, _ = rand.Read(b[8:])
	return base64.RawURLEncoding.EncodeToString(append(b, s.mac(tc, in, exp, b[8:])...))
}

// verify accepts a state this server signed for exactly this call, once:
// a replayed state (the same approval sent again) is refused.
func (s *server) verify(state string, tc engine.ToolContext, in engine.Input) bool {
	b, err := base64.RawURLEncoding.DecodeString(state)
	if err != nil || len(b) != 8+nonceSize+sha256.Size {
		return false
	}
	exp := int64(binary.BigEndian.Uint64(b[:8]))
	now := time.Now().Unix()
	if now > exp || !hmac.Equal(b[8+nonceSize:], s.mac(tc, in, exp, b[8:8+nonceSize])) {
		return false
	}
	s.used.Range(func(k, v any) bool { // forget states that expired anyway
		if v.(int64) < now {
			s.used.Delete(k)
		}
		return true
	})
	_, replayed := s.used.LoadOrStore(string(b[8:8+nonceSize]), exp)
	return !replayed
}
