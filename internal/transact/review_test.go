//go:build linux

package transact_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/layer"
	"github.com/bashvisor/bashvisor/internal/layer/layertest"
	"github.com/bashvisor/bashvisor/internal/transact"
)

// hookScript writes a file policy allows and a hook it refuses.
const hookScript = `echo a > a.txt && printf '#!/bin/sh\necho hook\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit`

func (f *fixture) exists(rel string) bool {
	_, err := os.Lstat(filepath.Join(f.ws, rel))
	return err == nil
}

// held runs hookScript and checks that the hook is held, with its
// reason, and the rest applied; it returns the held set as listed.
func (f *fixture) held(t *testing.T) transact.Held {
	t.Helper()
	rep := f.run(t, hookScript)
	hook := filepath.Join(f.ws, ".git/hooks/pre-commit")
	if rep.Held == nil || !strings.Contains(rep.Held.Reasons[hook], "git-hooks") {
		t.Fatalf("not held: %+v", rep.Held)
	}
	if !f.exists("a.txt") || f.exists(".git/hooks/pre-commit") {
		t.Fatalf("a.txt applied %v, hook applied %v", f.exists("a.txt"), f.exists(".git/hooks/pre-commit"))
	}
	hs, err := f.c.Held(context.Background())
	if err != nil || len(hs) != 1 || hs[0].ID != rep.Held.ID || hs[0].Digest != rep.Held.Digest {
		t.Fatalf("listed %+v, %v; held %+v", hs, err, rep.Held)
	}
	if got := kinds(f.ws, hs[0].Changes); got != "A .git/hooks/pre-commit" {
		t.Fatalf("held changes: %s", got)
	}
	return hs[0]
}

// What policy refuses is held, not dropped: accepting it with the
// digest of the listing applies exactly it (one undo step), and a wrong
// digest applies nothing.
func TestHeldAccepted(t *testing.T) {
	f := newFixture(t)
	h := f.held(t)
	if _, err := f.c.Accept(context.Background(), h.ID, strings.Repeat("0", 64)); !errors.Is(err, transact.ErrDigest) {
		t.Fatalf("a wrong digest: %v", err)
	}
	if f.exists(".git/hooks/pre-commit") {
		t.Fatal("a refused accept applied")
	}
	steps := len(f.c.Steps())
	rep, err := f.c.Accept(context.Background(), h.ID, h.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(f.ws, rep.Applied); got != "A .git/hooks/pre-commit" || !strings.Contains(f.read(".git/hooks/pre-commit"), "echo hook") {
		t.Fatalf("accepted: %s; hook %q", got, f.read(".git/hooks/pre-commit"))
	}
	if len(f.c.Steps()) != steps+1 {
		t.Fatal("the accept is not an undo step")
	}
	if hs, _ := f.c.Held(context.Background()); len(hs) != 0 {
		t.Fatalf("still held: %+v", hs)
	}
	if _, err := f.c.Accept(context.Background(), h.ID, h.Digest); !errors.Is(err, transact.ErrNoHeld) {
		t.Fatalf("accepted twice: %v", err)
	}
	if _, err := f.c.Undo(context.Background(), 1); err != nil || f.exists(".git/hooks/pre-commit") {
		t.Fatalf("undo of the accept: %v", err)
	}
}

// A held change that changes after it was listed (here written in its
// layer) is refused with the
// old digest; listed again, its new digest applies the new content.
func TestHeldDigestMismatch(t *testing.T) {
	f := newFixture(t)
	roots, err := transact.Roots(f.ws)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := f.c.BeginHeld(roots, "held")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := layertest.Run(t, tx.Spec(), f.ws, f.env, `echo one > x.txt`); err != nil {
		t.Fatal(err, out)
	}
	rep, err := tx.Commit(context.Background(), true)
	if err != nil || rep.Held == nil || f.exists("x.txt") {
		t.Fatalf("%+v %v", rep, err)
	}
	upper := tx.Spec().Overlays[0].Upper
	if err := os.WriteFile(filepath.Join(upper, "x.txt"), []byte("two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Accept(context.Background(), rep.Held.ID, rep.Held.Digest); !errors.Is(err, transact.ErrDigest) || f.exists("x.txt") {
		t.Fatalf("accept of changed content: %v", err)
	}
	hs, err := f.c.Held(context.Background())
	if err != nil || len(hs) != 1 || hs[0].Digest == rep.Held.Digest {
		t.Fatalf("%+v %v", hs, err)
	}
	if _, err := f.c.Accept(context.Background(), hs[0].ID, hs[0].Digest); err != nil || f.read("x.txt") != "two\n" {
		t.Fatalf("%v %q", err, f.read("x.txt"))
	}
}

// A rejected held change set is gone, as are those of an ended
// conversation, and their layers with them.
func TestHeldRejectedAndEnded(t *testing.T) {
	f := newFixture(t)
	h := f.held(t)
	if err := f.c.Reject(context.Background(), h.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Accept(context.Background(), h.ID, h.Digest); !errors.Is(err, transact.ErrNoHeld) || f.exists(".git/hooks/pre-commit") {
		t.Fatalf("accept after reject: %v", err)
	}
	h = f.held(t)
	if f.c.HeldBytes() <= 0 {
		t.Fatal("held bytes not counted")
	}
	if err := f.c.End(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Accept(context.Background(), h.ID, h.Digest); !errors.Is(err, transact.ErrNoHeld) {
		t.Fatalf("accept after End: %v", err)
	}
	f.m.Close()
	entries, _ := os.ReadDir(filepath.Join(filepath.Dir(f.ws), "state"))
	for _, e := range entries {
		t.Errorf("left in the state directory: %s", e.Name())
	}
}

// In hold mode nothing is applied until it is accepted.
func TestHoldAll(t *testing.T) {
	f := newFixture(t)
	f.hold = true
	rep := f.run(t, `echo b > b.txt && echo more >> README`)
	if len(rep.Applied) != 0 || rep.Held == nil || f.exists("b.txt") || f.read("README") != "hello\n" {
		t.Fatalf("applied %v, held %+v", rep.Applied, rep.Held)
	}
	if got := kinds(f.ws, rep.Held.Changes); got != "M README, A b.txt" {
		t.Fatalf("held: %s", got)
	}
	if _, err := f.c.Accept(context.Background(), rep.Held.ID, rep.Held.Digest); err != nil || f.read("b.txt") != "b\n" || f.read("README") != "hello\nmore\n" {
		t.Fatalf("%v", err)
	}
}

// In hold mode a background job's checkpoint applies nothing; its
// Commit holds everything.
func TestHoldAllCheckpoint(t *testing.T) {
	f := newFixture(t)
	f.hold = true
	roots, err := transact.Roots(f.ws)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := f.c.BeginHeld(roots, "job")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := layertest.Run(t, tx.Spec(), f.ws, f.env, `echo j > j.txt`); err != nil {
		t.Fatal(err, out)
	}
	ran := func(f func()) bool { f(); return true } // the job's process has exited
	if rep, err := tx.Checkpoint(context.Background(), ran); err != nil || rep != nil && len(rep.Applied) > 0 || f.exists("j.txt") {
		t.Fatalf("checkpoint in hold mode: %+v %v", rep, err)
	}
	rep, err := tx.Commit(context.Background(), true)
	if err != nil || rep.Held == nil || f.exists("j.txt") {
		t.Fatalf("%+v %v", rep, err)
	}
	if _, err := f.c.Accept(context.Background(), rep.Held.ID, rep.Held.Digest); err != nil || f.read("j.txt") != "j\n" {
		t.Fatal(err)
	}
}

// A conversation holds at most 64 change sets: the command whose
// changes would be one more is not held, and its report says so; the
// held ones stay as they were, and once one is reviewed the next
// command is held again.
func TestHeldBounded(t *testing.T) {
	f := newFixture(t)
	f.hold = true
	for i := range 64 {
		if rep := f.run(t, "echo x > f"+strconv.Itoa(i)); rep.Held == nil || rep.Unheld != "" {
			t.Fatalf("command %d: held %+v, unheld %q", i, rep.Held, rep.Unheld)
		}
	}
	rep := f.run(t, "echo x > f64")
	if rep.Held != nil || !rep.Discarded || !strings.Contains(rep.Unheld, "64 change sets") || f.exists("f64") {
		t.Fatalf("the 65th: held %+v, discarded %v, unheld %q", rep.Held, rep.Discarded, rep.Unheld)
	}
	hs, err := f.c.Held(context.Background())
	if err != nil || len(hs) != 64 || hs[0].ID != 1 || hs[63].ID != 64 {
		t.Fatalf("%d held, %v", len(hs), err)
	}
	if err := f.c.Reject(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if rep := f.run(t, "echo x > f65"); rep.Held == nil || rep.Held.ID != 65 {
		t.Fatalf("after a reject: held %+v, unheld %q", rep.Held, rep.Unheld)
	}
}

// Accepting does not overwrite what changed in the workspace since the
// command ran: a held file the user edited in place, or a path the user
// made where the command added one, refuses the accept whole (a
// *layer.ConflictError naming them, nothing applied, still held); an
// edit elsewhere does not.
func TestHeldAcceptConflict(t *testing.T) {
	f := newFixture(t)
	f.hold = true
	rep := f.run(t, `echo command >> README && echo b > b.txt`)
	if rep.Held == nil {
		t.Fatalf("not held: %+v", rep)
	}
	f.writeFile(t, "other.txt", "unrelated\n")
	fh, err := os.OpenFile(filepath.Join(f.ws, "README"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteString("user\n"); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	_, err = f.c.Accept(context.Background(), rep.Held.ID, rep.Held.Digest)
	var conflict *layer.ConflictError
	if !errors.Is(err, transact.ErrConflict) || !errors.As(err, &conflict) || strings.Join(conflict.Paths, " ") != filepath.Join(f.ws, "README") {
		t.Fatalf("accept over a user's edit: %v", err)
	}
	if f.read("README") != "hello\nuser\n" || f.exists("b.txt") {
		t.Fatalf("a refused accept applied: README %q, b.txt %v", f.read("README"), f.exists("b.txt"))
	}
	if hs, err := f.c.Held(context.Background()); err != nil || len(hs) != 1 {
		t.Fatalf("no longer held: %+v %v", hs, err)
	}
	if err := f.c.Reject(context.Background(), rep.Held.ID); err != nil {
		t.Fatal(err)
	}

	rep = f.run(t, `echo new > new.txt`)
	f.writeFile(t, "new.txt", "the user's\n")
	_, err = f.c.Accept(context.Background(), rep.Held.ID, rep.Held.Digest)
	if !errors.As(err, &conflict) || strings.Join(conflict.Paths, " ") != filepath.Join(f.ws, "new.txt") || f.read("new.txt") != "the user's\n" {
		t.Fatalf("accept over a user's new file: %v; %q", err, f.read("new.txt"))
	}

	rep = f.run(t, `echo c > c.txt`)
	f.writeFile(t, "other.txt", "edited again\n")
	if _, err := f.c.Accept(context.Background(), rep.Held.ID, rep.Held.Digest); err != nil || f.read("c.txt") != "c\n" {
		t.Fatalf("an edit elsewhere refused the accept: %v", err)
	}
}

// Hold mode and a command that left processes running hold everything,
// and what policy refuses carries the policy's reason there too, as in
// apply mode (and is in Refused); the rest carries the mode's reason.
func TestHeldReasonsEveryMode(t *testing.T) {
	for _, mode := range []string{"hold", "stray"} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t)
			roots, err := transact.Roots(f.ws)
			if err != nil {
				t.Fatal(err)
			}
			begin, why := f.c.BeginHeld, "review mode"
			if mode == "stray" {
				begin, why = f.c.Begin, "still running"
			}
			tx, err := begin(roots, mode)
			if err != nil {
				t.Fatal(err)
			}
			if out, err := layertest.Run(t, tx.Spec(), f.ws, f.env, hookScript); err != nil {
				t.Fatal(err, out)
			}
			rep, err := tx.Commit(context.Background(), mode == "hold")
			if err != nil || rep.Held == nil {
				t.Fatalf("%+v %v", rep, err)
			}
			hook, a := filepath.Join(f.ws, ".git/hooks/pre-commit"), filepath.Join(f.ws, "a.txt")
			if r := rep.Held.Reason(hook); !strings.HasPrefix(r, "policy: git-hooks") {
				t.Errorf("the hook's reason: %q", r)
			}
			if r := rep.Held.Reason(a); !strings.Contains(r, why) {
				t.Errorf("a.txt's reason: %q", r)
			}
			if len(rep.Refused) != 1 || rep.Refused[0].Path != hook {
				t.Errorf("refused: %+v", rep.Refused)
			}
			if f.exists("a.txt") || f.exists(".git/hooks/pre-commit") {
				t.Error("applied")
			}
			hs, err := f.c.Held(context.Background())
			if err != nil || len(hs) != 1 || !strings.HasPrefix(hs[0].Reason(hook), "policy: git-hooks") {
				t.Fatalf("listed: %+v %v", hs, err)
			}
		})
	}
}

// A held change below a new directory (a new repository whose config
// runs code): the rest of the directory applies, the repository is
// held, and accepting it applies exactly what was held.
func TestHeldBelowNewDirectory(t *testing.T) {
	f := newFixture(t)
	rep := f.run(t, `git init -q sub && git -C sub config core.fsmonitor 'touch pwned' && echo x > sub/f`)
	cfg := filepath.Join(f.ws, "sub/.git/config")
	if rep.Held == nil || rep.Held.Reasons[cfg] == "" || !f.exists("sub/f") || f.exists("sub/.git/config") {
		t.Fatalf("held %+v; sub/f %v", rep.Held, f.exists("sub/f"))
	}
	hs, err := f.c.Held(context.Background())
	if err != nil || len(hs) != 1 {
		t.Fatalf("%+v %v", hs, err)
	}
	held := kinds(f.ws, hs[0].Changes)
	if !strings.Contains(held, "A sub/.git/config") || strings.Contains(held, "sub/f") {
		t.Fatalf("held changes: %s", held)
	}
	for _, c := range hs[0].Changes {
		if !strings.HasPrefix(c.Path, filepath.Join(f.ws, "sub/.git")) {
			t.Errorf("held outside the new repository: %s", c.Path)
		}
	}
	res, err := f.c.Accept(context.Background(), hs[0].ID, hs[0].Digest)
	if err != nil || !strings.Contains(f.read("sub/.git/config"), "fsmonitor") || kinds(f.ws, res.Applied) != held {
		t.Fatalf("%v; applied %s", err, kinds(f.ws, res.Applied))
	}
}

// Hold belongs to the command: a command begun without it never joins a
// held job's layer (nor a held command an ordinary job's), so the
// ordinary command's checkpoint cannot apply the held job's changes.
func TestHoldJoin(t *testing.T) {
	if layertest.Unprivileged() {
		t.Skip("layers are premounted (and so joined) by a root engine only")
	}
	f := newFixture(t)
	m, err := transact.New(transact.Options{Dir: filepath.Join(t.TempDir(), "state"), Premount: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := m.Conversation()
	roots, err := transact.Roots(f.ws)
	if err != nil {
		t.Fatal(err)
	}
	run := func(g func()) bool { g(); return true }
	held, err := c.BeginHeld(roots, "held job")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := layertest.Run(t, held.Spec(), f.ws, f.env, `echo j > j.txt`); err != nil {
		t.Fatal(err, out)
	}
	held.Background(run)
	fg, err := c.Begin(roots, "ordinary")
	if err != nil {
		t.Fatal(err)
	}
	if fg.Shared() {
		t.Fatal("an ordinary command joined a held job's layer")
	}
	if rep, err := fg.Commit(context.Background(), true); err != nil || len(rep.Applied) != 0 || f.exists("j.txt") {
		t.Fatalf("the ordinary command applied the held job's changes: %+v %v", rep, err)
	}
	same, err := c.BeginHeld(roots, "held too")
	if err != nil {
		t.Fatal(err)
	}
	if !same.Shared() {
		t.Fatal("a held command did not join a held job's layer")
	}
	if rep, err := same.Commit(context.Background(), true); err != nil || len(rep.Applied) != 0 || f.exists("j.txt") {
		t.Fatalf("the held command applied: %+v %v", rep, err)
	}
	rep, err := held.Commit(context.Background(), true)
	if err != nil || rep.Held == nil || f.exists("j.txt") {
		t.Fatalf("the held job: %+v %v", rep, err)
	}
}

// The held changes of a command that left processes running (which may
// still write its layer) are refused, nothing applied; they can be
// rejected.
func TestHeldStrayRefused(t *testing.T) {
	f := newFixture(t)
	roots, err := transact.Roots(f.ws)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := f.c.Begin(roots, "stray")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := layertest.Run(t, tx.Spec(), f.ws, f.env, `echo one > x.txt`); err != nil {
		t.Fatal(err, out)
	}
	rep, err := tx.Commit(context.Background(), false)
	if err != nil || !rep.Discarded || rep.Held == nil || f.exists("x.txt") {
		t.Fatalf("%+v %v", rep, err)
	}
	if _, err := f.c.Accept(context.Background(), rep.Held.ID, rep.Held.Digest); !errors.Is(err, transact.ErrStray) || f.exists("x.txt") {
		t.Fatalf("accept of a stray set: %v", err)
	}
	if err := f.c.Reject(context.Background(), rep.Held.ID); err != nil {
		t.Fatal(err)
	}
}

// A held symlink's digest covers its target: retargeted after it was
// listed (same size), the old digest is refused and the new one applies
// the new target.
func TestHeldDigestSymlink(t *testing.T) {
	f := newFixture(t)
	roots, err := transact.Roots(f.ws)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := f.c.BeginHeld(roots, "held")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := layertest.Run(t, tx.Spec(), f.ws, f.env, `ln -s aaaa link`); err != nil {
		t.Fatal(err, out)
	}
	rep, err := tx.Commit(context.Background(), true)
	if err != nil || rep.Held == nil {
		t.Fatalf("%+v %v", rep, err)
	}
	link := filepath.Join(tx.Spec().Overlays[0].Upper, "link")
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("bbbb", link); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Accept(context.Background(), rep.Held.ID, rep.Held.Digest); !errors.Is(err, transact.ErrDigest) {
		t.Fatalf("accept of a retargeted symlink: %v", err)
	}
	hs, err := f.c.Held(context.Background())
	if err != nil || len(hs) != 1 {
		t.Fatalf("%+v %v", hs, err)
	}
	if _, err := f.c.Accept(context.Background(), hs[0].ID, hs[0].Digest); err != nil {
		t.Fatal(err)
	}
	if got, err := os.Readlink(filepath.Join(f.ws, "link")); err != nil || got != "bbbb" {
		t.Fatalf("%q %v", got, err)
	}
}

// The engine's CPU time spent on a change set is measured: a large
// one's Commit and Accept report it (Report.CPU), the engine charges it
// to the principal.
func TestChangeSetCPU(t *testing.T) {
	f := newFixture(t)
	f.hold = true
	rep := f.run(t, `mkdir d && cd d && seq -f 'f%g' 2000 | xargs touch`)
	if rep.Held == nil || rep.CPU <= 0 {
		t.Fatalf("held %v, cpu %v", rep.Held != nil, rep.CPU)
	}
	// A refused accept (a wrong digest) diffed the layer too: its CPU is
	// reported, for the engine to charge.
	bad, err := f.c.Accept(context.Background(), rep.Held.ID, strings.Repeat("0", 64))
	if !errors.Is(err, transact.ErrDigest) || bad == nil || bad.CPU <= 0 || f.exists("d/f1") {
		t.Fatalf("wrong digest: %v, report %+v", err, bad)
	}
	acc, err := f.c.Accept(context.Background(), rep.Held.ID, rep.Held.Digest)
	if err != nil || acc.CPU <= 0 || !f.exists("d/f2000") {
		t.Fatalf("accept: %v, cpu %v", err, acc)
	}
	t.Logf("2000 new files: held in %v of CPU, accepted in %v", rep.CPU, acc.CPU)
}

// A write in place to a held path after Accept's conflict check and
// before its apply (the same inode: only size, times or contents
// differ) refuses the accept with ErrConflict, and nothing of the
// change set is applied; it stays held. Before ApplyExact, the apply
// checked only device, inode and type there, and overwrote the edit.
func TestHeldAcceptRacedEdit(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*os.File) error
	}{
		{"append", func(fh *os.File) error { _, err := fh.WriteString("user\n"); return err }},
		{"same size", func(fh *os.File) error { _, err := fh.WriteAt([]byte("HELLO"), 0); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.hold = true
			rep := f.run(t, `echo command >> README && echo b > b.txt`)
			if rep.Held == nil {
				t.Fatalf("not held: %+v", rep)
			}
			readme := filepath.Join(f.ws, "README")
			var editErr error
			transact.SetBeforeAcceptApply(func() {
				fh, err := os.OpenFile(readme, os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					editErr = err
					return
				}
				defer fh.Close()
				if tc.name == "same size" {
					fh.Close()
					if fh, err = os.OpenFile(readme, os.O_WRONLY, 0); err != nil {
						editErr = err
						return
					}
					defer fh.Close()
				}
				editErr = tc.edit(fh)
			})
			t.Cleanup(func() { transact.SetBeforeAcceptApply(nil) })
			edited, _ := os.ReadFile(readme) // before the hook: the test's own reference
			_, err := f.c.Accept(context.Background(), rep.Held.ID, rep.Held.Digest)
			if editErr != nil {
				t.Fatal(editErr)
			}
			var conflict *layer.ConflictError
			if !errors.Is(err, transact.ErrConflict) || !errors.As(err, &conflict) || strings.Join(conflict.Paths, " ") != readme {
				t.Fatalf("accept over an edit in its window: %v", err)
			}
			want := map[string]string{"append": string(edited) + "user\n", "same size": "HELLO\n"}[tc.name]
			if f.read("README") != want || f.exists("b.txt") {
				t.Fatalf("a refused accept applied: README %q (want %q), b.txt %v", f.read("README"), want, f.exists("b.txt"))
			}
			if hs, err := f.c.Held(context.Background()); err != nil || len(hs) != 1 {
				t.Fatalf("no longer held: %+v %v", hs, err)
			}
		})
	}
}
