package cluster

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/bashvisor/bashvisor/cluster/clusterpb"
	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/engine"
)

// A call's principal, sandbox, limits and review mode cross the wire unchanged: an executor never
// runs a command with less confinement than its front was asked for. Its
// output budget crosses too.
func TestToolContextRoundTrip(t *testing.T) {
	allow := []string{"npm", "127.0.0.1:8080", "*.example.com"}
	in := engine.ToolContext{
		WorkingDir: "/w", ConversationID: "c", Principal: "alice", Env: map[string]string{"A": "1"}, Approved: true, CallID: "id", Review: "hold",
		Sandbox: engine.Sandbox{Profile: engine.WorkspaceWrite, Writable: []string{"/extra"}, Network: allow},
		Limits:  &config.Limits{Memory: 1 << 30, CPUTime: 90 * time.Second, Processes: 64}, OutputMax: 10000,
	}
	out, err := decodeTC(encodeTC(in, "id"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", out, in)
	}
	if out, err := decodeTC(encodeTC(engine.ToolContext{WorkingDir: "/w"}, "")); err != nil || out.Sandbox.On() || out.Limits != nil {
		t.Fatalf("no sandbox, no limits: %+v %v", out, err)
	}
	// An allowlist that does not parse crosses unchanged: the executor's
	// engine refuses the call (engine's TestBadNetworkAllowlist).
	bad := encodeTC(engine.ToolContext{}, "")
	bad.AllowNet = []string{"http://not a host"}
	if out, err := decodeTC(bad); err != nil || !reflect.DeepEqual(out.Sandbox.Network, bad.AllowNet) {
		t.Fatalf("bad allowlist: %+v %v", out.Sandbox.Network, err)
	}
}

// A busy refusal crosses the wire as the executor's engine worded it and
// still matches ErrBusy on the front.
func TestBusyCrossesTheWire(t *testing.T) {
	e, err := engine.New(engine.Config{Admission: config.Admission{MaxJobsPerConversation: 1}, Env: config.Env{KeepCapabilities: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	tc := engine.ToolContext{WorkingDir: t.TempDir(), ConversationID: "c", Principal: "alice"}
	if r := e.Run(context.Background(), tc, engine.Input{Command: "sleep 60", Mode: engine.ModeBackground}); r.Status != engine.StatusStarted {
		t.Fatalf("%s %q", r.Status, r.Output)
	}
	r := e.Run(context.Background(), tc, engine.Input{Command: "sleep 60", Mode: engine.ModeBackground})
	if !errors.Is(r.Err, engine.ErrBusy) {
		t.Fatalf("%s %q", r.Status, r.Output)
	}
	got := decodeResult(encodeResult(r))
	if !errors.Is(got.Err, engine.ErrBusy) || got.Err.Error() != r.Err.Error() || got.Output != r.Output ||
		!strings.HasPrefix(got.Err.Error(), "busy: this conversation already has 1 background jobs running, the most it may; stop one (bash_kill)") {
		t.Fatalf("front: %v %q; executor: %v", got.Err, got.Output, r.Err)
	}
}

// TestChangeReportCrossesTheWire: a workspace-write command's change report
// (structured and as text) and a job output's skipped bytes reach the
// front as the executor's engine made them.
func TestChangeReportCrossesTheWire(t *testing.T) {
	code := 0
	r := engine.Result{Status: engine.StatusOK, ExitCode: &code, Output: "[changed 2 files: M a.go, A b.txt]\n",
		ChangeSet: engine.ChangeSet{
			Changes:        []engine.Change{{Path: "a.go", Kind: "M", Size: 12}, {Path: "b.txt", Kind: "A", Size: 3}},
			ChangesOmitted: 4,
			Refused:        []engine.Refusal{{Path: ".git/config", Rule: "git-config", Reason: "a repository's configuration"}}}}
	if got := decodeResult(encodeResult(r)); !reflect.DeepEqual(got, r) {
		t.Errorf("result:\n got %+v\nwant %+v", got, r)
	}
	j := engine.JobInfo{JobID: "job-1", Status: engine.JobRunning, ChangeSet: engine.ChangeSet{Changes: r.Changes, ChangesOmitted: 1, Refused: r.Refused},
		ChangeReport: "[changed 2 files: M a.go, A b.txt]"}
	if got := decodeJob(encodeJob(j)); !reflect.DeepEqual(got, j) {
		t.Errorf("job:\n got %+v\nwant %+v", got, j)
	}
}

// TestUndoCrossesTheWire: an undo's result (its text included) and its
// errors, through a marshalled reply, reach the front as the executor's
// engine made them: ErrNothingToUndo and ErrBadInput as sentinels, a
// conflict as an *engine.UndoConflictError with its paths that matches
// ErrUndoConflict, each with the engine's words.
func TestUndoCrossesTheWire(t *testing.T) {
	roundTrip := func(r *clusterpb.QueryReply) *clusterpb.QueryReply {
		t.Helper()
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out := &clusterpb.QueryReply{}
		if err := proto.Unmarshal(b, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	u := engine.UndoResult{Steps: 2, Changes: []engine.Change{{Path: "a.txt", Kind: "M", Size: 5}, {Path: "b.txt", Kind: "D", Size: 2}},
		ChangesOmitted: 3, Report: "[undid the last 2 commands: changed 2 files: M a.txt, D b.txt]"}
	r := &clusterpb.QueryReply{}
	encodeUndo(r, u)
	if got := decodeUndo(roundTrip(r)); !reflect.DeepEqual(got, u) || got.Text() != u.Report {
		t.Errorf("undo:\n got %+v\nwant %+v", got, u)
	}
	r = &clusterpb.QueryReply{}
	encodeUndo(r, engine.UndoResult{Steps: 1, Changes: []engine.Change{}, Report: "[undid the last command: nothing to put back]"})
	if got := decodeUndo(roundTrip(r)); got.Changes == nil || len(got.Changes) != 0 || got.Text() != "[undid the last command: nothing to put back]" {
		t.Errorf("no changes: %#v", got)
	}

	// Errors from a real engine's Undo, and the conflict as it makes it.
	e, err := engine.New(engine.Config{Env: config.Env{KeepCapabilities: true}}) // see testConfig
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	tc := engine.ToolContext{WorkingDir: t.TempDir(), ConversationID: "c"}
	_, nothing := e.Undo(context.Background(), tc, 1)
	_, bad := e.Undo(context.Background(), tc, 0)
	conflict := &engine.UndoConflictError{Paths: []string{"/w/a.txt", "/w/b.txt"}}
	for _, c := range []struct {
		err, is error
	}{
		{nothing, engine.ErrNothingToUndo},
		{bad, engine.ErrBadInput},
		{conflict, engine.ErrUndoConflict},
		{fmt.Errorf("wrapped: %w", conflict), engine.ErrUndoConflict},
	} {
		if !errors.Is(c.err, c.is) {
			t.Fatalf("the engine's %v is not %v", c.err, c.is)
		}
		r := &clusterpb.QueryReply{}
		encodeReplyErr(r, c.err)
		got := decodeReplyErr(roundTrip(r))
		if !errors.Is(got, c.is) || got.Error() != c.err.Error() {
			t.Errorf("%v: front %v (is %v: %v)", c.err, got, c.is, errors.Is(got, c.is))
		}
		var want, front *engine.UndoConflictError
		if errors.As(c.err, &want) != errors.As(got, &front) || want != nil && !reflect.DeepEqual(front.Paths, want.Paths) {
			t.Errorf("%v: UndoConflictError: front %#v, executor %#v", c.err, front, want)
		}
		for _, other := range []error{engine.ErrNothingToUndo, engine.ErrUndoConflict, engine.ErrBadInput} {
			if other != c.is && errors.Is(got, other) {
				t.Errorf("%v: the front's error also matches %v", c.err, other)
			}
		}
	}
	if got := decodeReplyErr(roundTrip(&clusterpb.QueryReply{})); got != nil {
		t.Errorf("no error: %v", got)
	}
}
