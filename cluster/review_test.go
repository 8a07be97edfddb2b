package cluster_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/cluster"
	"github.com/bashvisor/bashvisor/engine"
)

// reviewer is a runner that holds change sets for review: a front, or a
// local engine.
type reviewer interface {
	engine.Runner
	Held(context.Context, engine.ToolContext) ([]engine.HeldChanges, error)
	Review(context.Context, engine.ToolContext, int, string, bool) (engine.Result, error)
}

// reviewSide is one side of TestReviewThroughFront: a reviewer and its
// working directory.
type reviewSide struct {
	r   reviewer
	dir string
}

// noDigest is h without its digest (an executor's and a local engine's
// differ: the digest covers inodes and change times).
func noDigest(h *engine.HeldChanges) engine.HeldChanges {
	if h == nil {
		return engine.HeldChanges{}
	}
	out := *h
	out.Digest = ""
	return out
}

// heldTC is a workspace-write call in the hold review mode.
func heldTC(dir, conv string) engine.ToolContext {
	return engine.ToolContext{WorkingDir: dir, ConversationID: conv, Review: "hold", Sandbox: engine.Sandbox{Profile: engine.WorkspaceWrite}}
}

// TestReviewThroughFront: a front carries the review mode to the
// executor and the held change set back in the result, lists the
// conversation's held change sets and accepts or rejects them on its
// executor: a wrong digest and a path the user edited since are
// refused, applying nothing. Each answer is what a local engine answers
// for the same calls in a directory of its own (digests aside). A
// conversation on no executor holds nothing; the front serves the held
// changes of conversations on each executor of the fleet.
func TestReviewThroughFront(t *testing.T) {
	needWorkspaceWrite(t)
	if inFreshProcess(t) {
		return
	}
	// The local engine first: its goroutines are not the front's.
	local, err := engine.New(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = local.Shutdown(context.Background()) })
	// Its workspace layers are made on first use: now, so that their
	// goroutine is not counted as the front's.
	if _, err := local.Held(context.Background(), heldTC(t.TempDir(), "warm")); err != nil {
		t.Fatal(err)
	}
	mark := t.Name()
	a := startExecutor(t, execSpec{name: "exec-a", mark: mark})
	b := startExecutor(t, execSpec{name: "exec-b", mark: mark})
	t.Cleanup(func() {
		a.stop()
		b.stop()
		waitNoLeftovers(t, mark)
	})
	c := newClient(t, cluster.ClientOptions{Membership: cluster.Static(a.addr, b.addr)})
	t.Cleanup(func() { shutdown(t, c) })
	waitReady(t, c, 2)
	ctx := context.Background()
	sides := []reviewSide{{c, t.TempDir()}, {local, t.TempDir()}}
	for i := range sides {
		sides[i].dir, _ = filepath.EvalSymlinks(sides[i].dir)
		if err := os.WriteFile(filepath.Join(sides[i].dir, "a.txt"), []byte("orig\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(s reviewSide, name string) bool { _, err := os.Stat(filepath.Join(s.dir, name)); return err == nil }
	run := func(command, made string) [2]*engine.HeldChanges {
		t.Helper()
		var rs [2]engine.Result
		for i, s := range sides {
			rs[i] = s.r.Run(ctx, heldTC(s.dir, "review"), engine.Input{Command: command})
		}
		d0, d1 := noDigest(rs[0].Held), noDigest(rs[1].Held)
		if rs[0].Held == nil || !reflect.DeepEqual(d0, d1) || strings.ReplaceAll(rs[0].Output, rs[0].Held.Digest, "D") != strings.ReplaceAll(rs[1].Output, rs[1].Held.Digest, "D") {
			t.Fatalf("%q: front %+v %q; local %+v %q", command, rs[0].Held, rs[0].Output, rs[1].Held, rs[1].Output)
		}
		if exists(sides[0], made) {
			t.Fatal("a held change was applied")
		}
		return [2]*engine.HeldChanges{rs[0].Held, rs[1].Held}
	}
	type answer struct {
		r   engine.Result
		err error
	}
	review := func(hs [2]*engine.HeldChanges, digest bool, accept bool) [2]answer {
		t.Helper()
		var out [2]answer
		for i, s := range sides {
			d := "0000"
			if digest {
				d = hs[i].Digest
			}
			out[i].r, out[i].err = s.r.Review(ctx, heldTC(s.dir, "review"), hs[i].ID, d, accept)
		}
		if (out[0].err == nil) != (out[1].err == nil) || out[0].err != nil && out[0].err.Error() != out[1].err.Error() ||
			!reflect.DeepEqual(out[0].r, out[1].r) {
			t.Fatalf("review: front %+v %v; local %+v %v", out[0].r, out[0].err, out[1].r, out[1].err)
		}
		return out
	}

	hs := run("echo b > b.txt", "b.txt")
	hs2 := run("echo c > c.txt && echo more >> a.txt", "c.txt")
	for i, s := range sides {
		l, err := s.r.Held(ctx, heldTC(s.dir, "review"))
		if err != nil || len(l) != 2 || l[0].Digest != hs[i].Digest || !reflect.DeepEqual(noDigest(&l[1]), noDigest(hs2[i])) {
			t.Fatalf("held on side %d: %+v %v", i, l, err)
		}
	}
	if a := review(hs, false, true); !errors.Is(a[0].err, engine.ErrBadInput) || exists(sides[0], "b.txt") {
		t.Fatalf("a wrong digest through the front: %v", a[0].err)
	}
	if a := review(hs, true, true); a[0].err != nil || !exists(sides[0], "b.txt") || len(a[0].r.Changes) != 1 {
		t.Fatalf("accept through the front: %+v %v", a[0].r, a[0].err)
	}
	for _, s := range sides {
		if err := os.WriteFile(filepath.Join(s.dir, "a.txt"), []byte("the user's\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var conflict *engine.UndoConflictError // the refusal's identity crosses the wire
	if a := review(hs2, true, true); !errors.Is(a[0].err, engine.ErrBadInput) || !strings.Contains(a[0].err.Error(), "changed since the command ran at a.txt;") || exists(sides[0], "c.txt") ||
		!errors.Is(a[0].err, engine.ErrUndoConflict) || !errors.As(a[0].err, &conflict) || len(conflict.Paths) != 1 || filepath.Base(conflict.Paths[0]) != "a.txt" {
		t.Fatalf("accept over the user's edit through the front: %v (%+v)", a[0].err, conflict)
	}
	if a := review(hs2, false, false); a[0].err != nil || !strings.Contains(a[0].r.Output, "[rejected held change set 2") {
		t.Fatalf("reject through the front: %+v %v", a[0].r, a[0].err)
	}

	// A conversation on no executor holds nothing.
	if l, err := c.Held(ctx, heldTC(sides[0].dir, "never-ran")); err != nil || len(l) != 0 {
		t.Fatalf("held of a conversation on no executor: %+v %v", l, err)
	}
	if _, err := c.Review(ctx, heldTC(sides[0].dir, "never-ran"), 1, "", true); !errors.Is(err, engine.ErrBadInput) {
		t.Fatalf("review of a conversation on no executor: %v", err)
	}

	// Conversations until each executor holds one: the front lists and
	// accepts each on its own.
	on := map[string]string{} // executor name: conversation
	for i := 0; len(on) < 2 && i < 16; i++ {
		conv := "spread-" + strconv.Itoa(i)
		dir := filepath.Join(sides[0].dir, conv)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		r := c.Run(ctx, heldTC(dir, conv), engine.Input{Command: "echo $BV_NAME; echo x > x.txt"})
		name, _, _ := strings.Cut(r.Output, "\n")
		if r.Held == nil {
			t.Fatalf("%s: not held: %q", conv, r.Output)
		}
		if on[name] == "" {
			on[name] = conv
		}
	}
	if len(on) != 2 {
		t.Fatalf("16 conversations ran on %v only", on)
	}
	for name, conv := range on {
		dir := filepath.Join(sides[0].dir, conv)
		l, err := c.Held(ctx, heldTC(dir, conv))
		if err != nil || len(l) != 1 {
			t.Fatalf("held of %s on %s: %+v %v", conv, name, l, err)
		}
		if _, err := c.Review(ctx, heldTC(dir, conv), l[0].ID, l[0].Digest, true); err != nil || !exists(reviewSide{dir: dir}, "x.txt") {
			t.Fatalf("accept of %s on %s: %v", conv, name, err)
		}
	}
}
