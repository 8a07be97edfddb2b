package mcpserver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

func holdMode(c *engine.Config) { c.Review = "hold" }

// needLayer skips or fails where workspace-write commands cannot run.
func needLayer(t *testing.T) string {
	t.Helper()
	needLandlock(t)
	testenv.Needf(t, testenv.Namespaces, sandbox.Probe().Namespaces, "no private namespaces: %s", sandbox.Probe())
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	return dir
}

// listHeld calls bash_review list and returns the held change sets.
func listHeld(t *testing.T, ctx context.Context, cs *mcp.ClientSession) ([]engine.HeldChanges, string) {
	t.Helper()
	var out reviewReply
	res, txt := call(t, ctx, cs, toolReview, map[string]any{"action": "list"}, &out)
	validate(t, reviewOutputSchema, res.StructuredContent)
	if res.IsError {
		t.Fatalf("list: %q", txt)
	}
	return out.Held, txt
}

// bash_review through the official client without elicitation, in the
// hold review mode: a command's changes are held and named in its
// result; list shows them with a digest; a wrong digest applies
// nothing; accept applies them; reject discards them; bad arguments are
// refused.
func TestReviewTool(t *testing.T) {
	dir := needLayer(t)
	s := newSetup(t, holdMode, Options{WorkingDir: dir, Sandbox: engine.Sandbox{Profile: engine.WorkspaceWrite}})
	ctx := context.Background()
	r := bash(t, ctx, s.cs, map[string]any{"command": "echo b > b.txt"})
	if r.Status != engine.StatusOK || r.Held == nil || fileExists(filepath.Join(dir, "b.txt")) || !strings.Contains(r.Output, "[held: b.txt (") {
		t.Fatalf("%s %q %+v", r.Status, r.Output, r.Held)
	}
	hs, txt := listHeld(t, ctx, s.cs)
	if len(hs) != 1 || hs[0].ID != r.Held.ID || hs[0].Digest != r.Held.Digest || !strings.Contains(txt, "A b.txt (") {
		t.Fatalf("%+v %q", hs, txt)
	}
	res, txt := call(t, ctx, s.cs, toolReview, map[string]any{"action": "accept", "id": hs[0].ID, "digest": strings.Repeat("0", 64)}, nil)
	if !res.IsError || !strings.HasPrefix(txt, "[error: bad input: ") || fileExists(filepath.Join(dir, "b.txt")) {
		t.Fatalf("a wrong digest: %q", txt)
	}
	var out reviewReply
	res, txt = call(t, ctx, s.cs, toolReview, map[string]any{"action": "accept", "id": hs[0].ID, "digest": hs[0].Digest}, &out)
	validate(t, reviewOutputSchema, res.StructuredContent)
	if res.IsError || !fileExists(filepath.Join(dir, "b.txt")) || len(out.Changes) != 1 || !strings.Contains(txt, "[accepted held change set") {
		t.Fatalf("accept: %q %+v", txt, out)
	}
	r = bash(t, ctx, s.cs, map[string]any{"command": "echo c > c.txt"})
	if res, txt := call(t, ctx, s.cs, toolReview, map[string]any{"action": "reject", "id": r.Held.ID}, nil); res.IsError || !strings.Contains(txt, "rejected") {
		t.Fatalf("reject: %q", txt)
	}
	if hs, _ := listHeld(t, ctx, s.cs); len(hs) != 0 || fileExists(filepath.Join(dir, "c.txt")) {
		t.Fatalf("after reject: %+v", hs)
	}
	for _, args := range []map[string]any{{"action": "accept", "id": 1}, {"action": "take"}, {"action": "reject"}, {"id": "1", "action": "reject"}, {"what": 1}} {
		if res, txt := call(t, ctx, s.cs, toolReview, args, nil); !res.IsError || !strings.HasPrefix(txt, "[error: bad input: ") {
			t.Errorf("%v: %v %q", args, res.IsError, txt)
		}
	}
}

// bash_review's accept asks the user through elicitation (a
// server-initiated request, or from 2026-07-28 on an input-required
// result the client answers): accept applies the held changes, decline
// leaves them held.
func TestReviewByElicitation(t *testing.T) {
	dir := needLayer(t)
	for _, proto := range []string{"", "2025-06-18"} {
		for _, action := range []string{"accept", "decline"} {
			t.Run(proto+"/"+action, func(t *testing.T) {
				ws := filepath.Join(dir, proto+action)
				if err := os.Mkdir(ws, 0o755); err != nil {
					t.Fatal(err)
				}
				e := newEngine(t, holdMode)
				srv := New(e, Options{WorkingDir: ws, Sandbox: engine.Sandbox{Profile: engine.WorkspaceWrite}})
				el := &elicitor{action: action}
				cs := elicitingClient(t, srv, el, proto)
				ctx := context.Background()
				r := bash(t, ctx, cs, map[string]any{"command": "echo b > b.txt"})
				if r.Held == nil {
					t.Fatalf("not held: %q", r.Output)
				}
				res, txt := call(t, ctx, cs, toolReview, map[string]any{"action": "accept", "id": r.Held.ID, "digest": r.Held.Digest}, nil)
				if len(el.asked) != 1 || !strings.Contains(el.asked[0], "A b.txt") || !strings.Contains(el.asked[0], r.Held.Digest) {
					t.Fatalf("asked %q", el.asked)
				}
				hs, _ := listHeld(t, ctx, cs)
				if action == "accept" {
					if res.IsError || !fileExists(filepath.Join(ws, "b.txt")) || len(hs) != 0 {
						t.Fatalf("accepted: %q, held %+v", txt, hs)
					}
					return
				}
				if !res.IsError || !strings.Contains(txt, "stays held") || fileExists(filepath.Join(ws, "b.txt")) || len(hs) != 1 {
					t.Fatalf("declined: %q, held %+v", txt, hs)
				}
			})
		}
	}
}

// With elicitation, an accept naming a set that is not held (a wrong
// digest, an unknown id) is refused without asking and applies nothing.
func TestReviewByElicitationUnknown(t *testing.T) {
	dir := needLayer(t)
	e := newEngine(t, holdMode)
	srv := New(e, Options{WorkingDir: dir, Sandbox: engine.Sandbox{Profile: engine.WorkspaceWrite}})
	el := &elicitor{action: "accept"}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Wait()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, &mcp.ClientOptions{ElicitationHandler: el.handle}).
		Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx := context.Background()
	r := bash(t, ctx, cs, map[string]any{"command": "echo b > b.txt"})
	if r.Held == nil {
		t.Fatalf("not held: %q", r.Output)
	}
	for _, args := range []map[string]any{
		{"action": "accept", "id": r.Held.ID, "digest": strings.Repeat("0", 64)},
		{"action": "accept", "id": r.Held.ID + 1, "digest": r.Held.Digest},
	} {
		res, txt := call(t, ctx, cs, toolReview, args, nil)
		if !res.IsError || !strings.HasPrefix(txt, "[error: bad input: ") || len(el.asked) != 0 || fileExists(filepath.Join(dir, "b.txt")) {
			t.Fatalf("%v: %q, asked %q", args, txt, el.asked)
		}
	}
	if hs, _ := listHeld(t, ctx, cs); len(hs) != 1 {
		t.Fatalf("held %+v", hs)
	}
}

// failingLister is a reviewer whose list fails and whose Review would
// accept: askReview must refuse without reaching Review.
type failingLister struct{ reviewed bool }

func (f *failingLister) Held(context.Context, engine.ToolContext) ([]engine.HeldChanges, error) {
	return nil, errors.New("list failed")
}

func (f *failingLister) Review(context.Context, engine.ToolContext, int, string, bool) (engine.Result, error) {
	f.reviewed = true
	return engine.Result{Status: engine.StatusOK}, nil
}

// With elicitation, an accept whose held sets cannot be listed is
// refused: the user could not be asked, so nothing is accepted.
func TestAskReviewListFails(t *testing.T) {
	rv := &failingLister{}
	c := &toolCall{ctx: context.Background(), req: &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: toolReview}}}
	res, answer := (&server{}).askReview(c, rv, reviewArgs{action: "accept", id: 1, digest: strings.Repeat("0", 64)})
	if rv.reviewed || answer == "" || res == nil || !res.IsError {
		t.Fatalf("accepted without asking: reviewed %v, answer %q, result %+v", rv.reviewed, answer, res)
	}
}
