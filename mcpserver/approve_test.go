package mcpserver

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/engine"
)

// askRunner stands in for a permission profile answering "ask" for
// commands starting with "ask:" (run without the prefix once approved).
func askRunner(e *engine.Engine) runFunc {
	return func(ctx context.Context, tc engine.ToolContext, in engine.Input) engine.Result {
		cmd, ask := strings.CutPrefix(in.Command, "ask:")
		if ask && !tc.Approved {
			return engine.Result{
				Status:  engine.StatusNeedsApproval,
				Output:  "[command needs approval: matches rule ask:curl]",
				Command: in.Command, Display: in.Command,
				Err: engine.ErrNeedsApproval,
			}
		}
		in.Command = cmd
		return e.Run(ctx, tc, in)
	}
}

// elicitor is a client elicitation handler answering with action.
type elicitor struct {
	action string
	mu     sync.Mutex
	asked  []string
}

func (el *elicitor) handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	el.mu.Lock()
	el.asked = append(el.asked, req.Params.Message)
	el.mu.Unlock()
	return &mcp.ElicitResult{Action: el.action, Content: map[string]any{}}, nil
}

// elicitingClient connects a client to srv in memory, with protocol
// version proto ("" for the newest) and el answering its elicitations;
// the client closes, and the server's session is waited for, at cleanup.
func elicitingClient(t *testing.T, srv *mcp.Server, el *elicitor, proto string) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Wait() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, &mcp.ClientOptions{ElicitationHandler: el.handle}).
		Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: proto})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func TestApprovalByElicitation(t *testing.T) {
	e := newEngine(t, nil)
	for _, proto := range []string{"", "2025-11-25", "2025-06-18"} {
		for _, c := range []struct {
			action string
			status engine.Status
			output string
		}{
			{"accept", engine.StatusOK, "approved\n"},
			{"decline", engine.StatusDenied, "[command denied: the user declined to approve it]"},
			{"cancel", engine.StatusNeedsApproval, "[command needs approval: matches rule ask:curl]"},
		} {
			name := proto
			if name == "" {
				name = "latest"
			}
			t.Run(name+"/"+c.action, func(t *testing.T) {
				srv := newServer(e, Options{WorkingDir: t.TempDir(), Structured: true}, askRunner(e))
				el := &elicitor{action: c.action}
				cs := elicitingClient(t, srv, el, proto)
				r := bash(t, context.Background(), cs, map[string]any{"command": "ask:echo approved"})
				if r.Status != c.status || r.Output != c.output {
					t.Errorf("got %s %q, want %s %q", r.Status, r.Output, c.status, c.output)
				}
				if len(el.asked) != 1 || !strings.Contains(el.asked[0], "ask:echo approved") {
					t.Errorf("elicitation messages: %q", el.asked)
				}
				// Commands that need no approval are not asked about.
				if r := bash(t, context.Background(), cs, map[string]any{"command": "echo plain"}); r.Status != engine.StatusOK || len(el.asked) != 1 {
					t.Errorf("plain command: %+v, asked %d times", r, len(el.asked))
				}
			})
		}
	}
}

func TestApprovalWithoutElicitation(t *testing.T) {
	e := newEngine(t, nil)
	for name, opts := range map[string]*mcp.ClientOptions{
		"client cannot elicit": nil,
		"server disabled":      {ElicitationHandler: (&elicitor{action: "accept"}).handle},
	} {
		t.Run(name, func(t *testing.T) {
			srv := newServer(e, Options{WorkingDir: t.TempDir(), DisableElicitation: opts != nil, Structured: true}, askRunner(e))
			cs := connect(t, srv, opts)
			r := bash(t, context.Background(), cs, map[string]any{"command": "ask:echo x"})
			if r.Status != engine.StatusNeedsApproval {
				t.Errorf("got %+v", r)
			}
		})
	}
}

// A forged or replayed approval never runs a command.
func TestApprovalStateIsVerified(t *testing.T) {
	e := newEngine(t, nil)
	srv := newServer(e, Options{WorkingDir: t.TempDir(), Structured: true}, askRunner(e))
	cs := connect(t, srv, &mcp.ClientOptions{
		ElicitationHandler: (&elicitor{action: "accept"}).handle,
		MultiRoundTrip:     &mcp.MultiRoundTripOptions{Disabled: true},
	})
	ctx := context.Background()
	accept := mcp.InputResponseMap{approvalKey: &mcp.ElicitResult{Action: "accept"}}

	// First round: the server asks.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolBash, Arguments: map[string]any{"command": "ask:echo one"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.NeedsInput() || res.RequestState == "" || res.InputRequests[approvalKey] == nil {
		t.Fatalf("first round: %+v", res)
	}
	state := res.RequestState

	for name, p := range map[string]*mcp.CallToolParams{
		"forged state":     {Arguments: map[string]any{"command": "ask:echo one"}, InputResponses: accept, RequestState: "forged"},
		"no state":         {Arguments: map[string]any{"command": "ask:echo one"}, InputResponses: accept},
		"other command":    {Arguments: map[string]any{"command": "ask:echo two"}, InputResponses: accept, RequestState: state},
		"other mode":       {Arguments: map[string]any{"command": "ask:echo one", "mode": "slow"}, InputResponses: accept, RequestState: state},
		"missing response": {Arguments: map[string]any{"command": "ask:echo one"}, RequestState: state},
	} {
		p.Name = toolBash
		res, err := cs.CallTool(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		var r engine.Result
		decode(t, res, &r)
		if r.Status != engine.StatusNeedsApproval {
			t.Errorf("%s: got %s %q", name, r.Status, r.Output)
		}
	}
	// The genuine retry runs it.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: toolBash, Arguments: map[string]any{"command": "ask:echo one"}, InputResponses: accept, RequestState: state})
	if err != nil {
		t.Fatal(err)
	}
	var r engine.Result
	decode(t, res, &r)
	if r.Status != engine.StatusOK || r.Output != "one\n" {
		t.Errorf("approved retry: %+v", r)
	}
	// The same approval sent again is refused: states are single-use.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: toolBash, Arguments: map[string]any{"command": "ask:echo one"}, InputResponses: accept, RequestState: state})
	if err != nil {
		t.Fatal(err)
	}
	r = engine.Result{}
	decode(t, res, &r)
	if r.Status != engine.StatusNeedsApproval {
		t.Errorf("replayed approval: %+v", r)
	}
}

// A call that asks for hosts (Input.Network) names them in the question;
// once a person accepts, they are in the conversation's later calls'
// Sandbox.Network without asking again; declined, they are not.
func TestNetworkGrantedForTheConversation(t *testing.T) {
	e := newEngine(t, nil)
	for _, proto := range []string{"", "2025-11-25"} {
		for _, action := range []string{"accept", "decline"} {
			t.Run(proto+"/"+action, func(t *testing.T) {
				var mu sync.Mutex
				var seen [][]string // Sandbox.Network of each run
				run := func(ctx context.Context, tc engine.ToolContext, in engine.Input) engine.Result {
					mu.Lock()
					seen = append(seen, tc.Sandbox.Network)
					mu.Unlock()
					for _, h := range in.Network {
						if !tc.Approved && !slices.Contains(tc.Sandbox.Network, h) {
							return engine.Result{Status: engine.StatusNeedsApproval, Output: "[command needs approval: network " + h + "]",
								Command: in.Command, Display: in.Command, Err: engine.ErrNeedsApproval}
						}
					}
					in.Network = nil
					return e.Run(ctx, tc, in)
				}
				srv := newServer(e, Options{WorkingDir: t.TempDir(), Structured: true}, run)
				el := &elicitor{action: action}
				cs := elicitingClient(t, srv, el, proto)
				bash(t, context.Background(), cs, map[string]any{"command": "echo a", "network": []string{"pypi.org"}})
				if len(el.asked) != 1 || !strings.Contains(el.asked[0], "pypi.org") {
					t.Fatalf("asked %q, want one question naming pypi.org", el.asked)
				}
				bash(t, context.Background(), cs, map[string]any{"command": "echo b"})
				mu.Lock()
				last := seen[len(seen)-1]
				mu.Unlock()
				if granted := slices.Contains(last, "pypi.org"); granted != (action == "accept") {
					t.Fatalf("%s: the next call's network %q", action, last)
				}
				r := bash(t, context.Background(), cs, map[string]any{"command": "echo c", "network": []string{"pypi.org"}})
				if want := map[string]int{"accept": 1, "decline": 2}[action]; len(el.asked) != want {
					t.Errorf("%s: %d questions after asking again (%s), want %d", action, len(el.asked), r.Status, want)
				}
			})
		}
	}
}
