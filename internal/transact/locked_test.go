//go:build linux

package transact_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/layer"
	"github.com/bashvisor/bashvisor/internal/layer/layertest"
	"github.com/bashvisor/bashvisor/internal/testenv"
	"github.com/bashvisor/bashvisor/internal/transact"
)

// holdEnv makes the test binary a process that holds the apply lock
// of the workspace it names, as another engine's apply does (the
// abstract unix socket "@bashvisor-apply-<dev>:<ino>" of the root),
// until its standard input ends.
const holdEnv = "TRANSACT_TEST_HOLD_APPLY_LOCK"

// TestApplyLockedByAnotherProcessHolds: while another process holds
// the workspace's apply lock (as another engine's apply does) for
// longer than the apply waits, the command's changes are held, not
// lost; once it lets go, accepting them applies them.
func TestApplyLockedByAnotherProcessHolds(t *testing.T) {
	if ws := os.Getenv(holdEnv); ws != "" {
		layertest.HoldApplyLock(t, ws)
		return
	}
	f := newFixture(t)
	m, err := transact.New(transact.Options{Dir: filepath.Join(filepath.Dir(f.ws), "state2"), UserXattr: layertest.Unprivileged(),
		LockWait: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	f.m, f.c = m, m.Conversation()

	release := startHolder(t, f.ws)
	rep := f.run(t, "echo new > new.txt && echo more >> README")
	if rep.Held == nil || len(rep.Applied) > 0 || f.exists("new.txt") {
		t.Fatalf("while another process held the lock: held %+v, applied %s, new.txt there: %v", rep.Held, kinds(f.ws, rep.Applied), f.exists("new.txt"))
	}
	if reasons := strings.Join(mapValues(rep.Held.Reasons), "; "); !strings.Contains(reasons, "another process") {
		t.Errorf("held for %q", reasons)
	}
	release()
	acc, err := f.c.Accept(context.Background(), rep.Held.ID, rep.Held.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(f.ws, acc.Applied); !strings.Contains(got, "A new.txt") || f.read("README") != "hello\nmore\n" {
		t.Errorf("accepted: %s; README %q", got, f.read("README"))
	}
}

// startHolder starts the test binary as another engine holding ws's
// apply lock, and returns when it holds it, with what makes it let go
// (also run at the test's cleanup).
func startHolder(t *testing.T, ws string) (release func()) {
	t.Helper()
	holder := exec.Command(os.Args[0], "-test.run=^TestApplyLockedByAnotherProcessHolds$")
	holder.Env = append(os.Environ(), holdEnv+"="+ws)
	stdin, _ := testenv.Piped(t, holder, "locked")
	return func() {
		if holder.ProcessState == nil {
			_ = stdin.Close()
			if err := holder.Wait(); err != nil {
				t.Errorf("the holder: %v", err)
			}
		}
	}
}

// TestCommitStopsWaitingWithContext: while another process holds the
// workspace's apply lock, a commit or an accept whose context ends (a
// cancelled call, an MCP call that timed out) stops waiting then, long
// before LockWait (the default 10 minutes here), with an error wrapping
// the context's; the change set is held, nothing lost, and accepting it
// once the other process let go applies it.
func TestCommitStopsWaitingWithContext(t *testing.T) {
	f := newFixture(t)
	release := startHolder(t, f.ws)
	roots, err := transact.Roots(f.ws)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := f.c.Begin(roots, "edit")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := layertest.Run(t, tx.Spec(), f.ws, f.env, "echo new > new.txt && echo more >> README"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	oneSecond := func(what string, call func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		err := call(ctx)
		if took := time.Since(start); took < time.Second || took > 60*time.Second {
			t.Errorf("%s stopped waiting after %v with a 1 s context", what, took)
		}
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, layer.ErrLocked) {
			t.Errorf("%s: got %v, want the context's error and layer.ErrLocked", what, err)
		}
	}
	var rep *transact.Report
	oneSecond("commit", func(ctx context.Context) (err error) {
		rep, err = tx.Commit(ctx, true)
		return err
	})
	if rep == nil || rep.Held == nil || len(rep.Applied) > 0 || f.exists("new.txt") {
		t.Fatalf("commit: report %+v; new.txt there: %v", rep, f.exists("new.txt"))
	}
	if reasons := strings.Join(mapValues(rep.Held.Reasons), "; "); !strings.Contains(reasons, "call ended") {
		t.Errorf("held for %q", reasons)
	}
	oneSecond("accept", func(ctx context.Context) error {
		_, err := f.c.Accept(ctx, rep.Held.ID, rep.Held.Digest)
		return err
	})
	if hs, err := f.c.Held(context.Background()); err != nil || len(hs) != 1 || f.exists("new.txt") {
		t.Fatalf("after the accept that stopped waiting: held %d (%v); new.txt there: %v", len(hs), err, f.exists("new.txt"))
	}
	release()
	acc, err := f.c.Accept(context.Background(), rep.Held.ID, rep.Held.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(f.ws, acc.Applied); !strings.Contains(got, "A new.txt") || f.read("README") != "hello\nmore\n" {
		t.Errorf("accepted: %s; README %q", got, f.read("README"))
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
