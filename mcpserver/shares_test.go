package mcpserver

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/engine"
)

// Per-principal caps and rates of sessions and named conversations: a
// principal at its own cap is refused naming that cap, while another
// principal is served.

// TestSessionsPerPrincipal: over MaxSessionsPerPrincipal alice's new
// session gets 429 naming her cap, bob opens his; ending one of alice's
// frees her place.
func TestSessionsPerPrincipal(t *testing.T) {
	s := tenantServerHTTP(t, nil, Options{}, HTTPOptions{MaxSessionsPerPrincipal: 2, SessionRate: Rate{PerSecond: -1}})
	alice := map[string]string{"Authorization": "Bearer " + aliceToken}
	bob := map[string]string{"Authorization": "Bearer " + bobToken}
	_, a1 := s.openSession(t, alice)
	_, a2 := s.openSession(t, alice)
	resp, body := s.openSession(t, alice)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(body, `principal "alice" has 2 MCP sessions open, the most one principal may`) {
		t.Fatalf("alice's third session: %d Retry-After %q %q", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if resp, b1 := s.openSession(t, bob); resp.StatusCode != http.StatusOK {
		t.Fatalf("bob's session: %d %s", resp.StatusCode, b1)
	} else {
		defer s.deleteSession(t, b1, bob)
	}
	if code := s.deleteSession(t, a2, alice); code != http.StatusNoContent {
		t.Fatalf("DELETE: %d", code)
	}
	resp, a3 := s.openSession(t, alice)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("alice's session after ending one: %d", resp.StatusCode)
	}
	s.deleteSession(t, a1, alice)
	s.deleteSession(t, a3, alice)
}

// TestSessionRate: beyond SessionRate's burst alice's new session gets
// 429 with the seconds to wait; bob is not slowed by her.
func TestSessionRate(t *testing.T) {
	s := tenantServerHTTP(t, nil, Options{}, HTTPOptions{SessionRate: Rate{PerSecond: 0.2, Burst: 2}})
	alice := map[string]string{"Authorization": "Bearer " + aliceToken}
	bob := map[string]string{"Authorization": "Bearer " + bobToken}
	for range 2 {
		if resp, sid := s.openSession(t, alice); resp.StatusCode != http.StatusOK {
			t.Fatalf("alice's session: %d", resp.StatusCode)
		} else {
			defer s.deleteSession(t, sid, alice)
		}
	}
	resp, body := s.openSession(t, alice)
	retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != http.StatusTooManyRequests || retry < 1 || retry > 5 ||
		!strings.Contains(body, `principal "alice" opens MCP sessions faster than this server allows (0.2 a second, in bursts of 2)`) {
		t.Fatalf("alice's third session: %d Retry-After %q %q", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if resp, sid := s.openSession(t, bob); resp.StatusCode != http.StatusOK {
		t.Fatalf("bob's session: %d", resp.StatusCode)
	} else {
		s.deleteSession(t, sid, bob)
	}
}

// namedCall runs echo in conversation conv over cs and returns the result
// (status "error" and the text for an error result).
func namedCall(t *testing.T, cs *mcp.ClientSession, conv string) engine.Result {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: toolBash, Arguments: map[string]any{"command": "echo hi"}, Meta: mcp.Meta{metaConversation: conv, metaStructured: true}})
	if err != nil {
		t.Fatal(err)
	}
	var r engine.Result
	text := decode(t, res, &r)
	if r.Status == "" {
		r.Status, r.Output = engine.StatusError, text
	}
	return r
}

// TestConversationsPerPrincipal: over MaxConversationsPerPrincipal a call
// of alice naming a new conversation is busy, naming her cap; her open
// ones go on and bob opens his.
func TestConversationsPerPrincipal(t *testing.T) {
	s := tenantServer(t, nil, Options{MaxConversationsPerPrincipal: 2, ConversationRate: Rate{PerSecond: -1}})
	alice := s.connectAs(t, aliceToken, "2026-07-28", "")
	bob := s.connectAs(t, bobToken, "2026-07-28", "")
	for _, conv := range []string{"c0", "c1", "c0"} {
		if r := namedCall(t, alice, conv); r.Status != engine.StatusOK {
			t.Errorf("alice's %s: %+v", conv, r)
		}
	}
	if r := namedCall(t, alice, "c2"); r.Status != engine.StatusError ||
		!strings.Contains(r.Output, `[error: busy: principal "alice" has 2 named conversations open, the most one principal may`) {
		t.Errorf("alice's c2: %+v", r)
	}
	for _, conv := range []string{"c2", "c3"} {
		if r := namedCall(t, bob, conv); r.Status != engine.StatusOK {
			t.Errorf("bob's %s: %+v", conv, r)
		}
	}
	if r := namedCall(t, alice, "c1"); r.Status != engine.StatusOK {
		t.Errorf("alice's c1 again: %+v", r)
	}
}

// TestConversationRate: beyond ConversationRate's burst alice's new
// conversation is busy, saying when to retry; calls in her open ones and
// bob's new ones are served.
func TestConversationRate(t *testing.T) {
	s := tenantServer(t, nil, Options{ConversationRate: Rate{PerSecond: 0.2, Burst: 2}})
	alice := s.connectAs(t, aliceToken, "2026-07-28", "")
	bob := s.connectAs(t, bobToken, "2026-07-28", "")
	for _, conv := range []string{"c0", "c1"} {
		if r := namedCall(t, alice, conv); r.Status != engine.StatusOK {
			t.Errorf("alice's %s: %+v", conv, r)
		}
	}
	if r := namedCall(t, alice, "c2"); r.Status != engine.StatusError ||
		!strings.Contains(r.Output, `[error: busy: principal "alice" opens named conversations faster than this server allows (0.2 a second, in bursts of 2); retry in `) {
		t.Errorf("alice's c2: %+v", r)
	}
	if r := namedCall(t, alice, "c0"); r.Status != engine.StatusOK {
		t.Errorf("alice's c0 again: %+v", r)
	}
	if r := namedCall(t, bob, "c2"); r.Status != engine.StatusOK {
		t.Errorf("bob's c2: %+v", r)
	}
}
