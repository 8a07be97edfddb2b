//go:build linux

package layer_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/layer"
	"github.com/bashvisor/bashvisor/internal/layer/layertest"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// undoHolderEnv makes the test binary, run for
// TestUndoWaitEndsWithContext, another engine process that holds the
// apply lock of the workspace it names until its standard input ends.
const undoHolderEnv = "LAYER_TEST_HOLD_FOR_UNDO"

// TestUndoWaitEndsWithContext: while another process holds the
// workspace's apply lock (another engine applying), an undo, an undo
// of a turn or of paths, and a redo whose context ends stop waiting
// then, long before the 10 minutes an undo waits at most, with an
// error wrapping ErrLocked and the context's, having changed nothing
// (workspace and kept steps as they were); so does an undo that waits
// behind an apply of its own store (which waits for that process). Once
// the process lets go, each succeeds.
func TestUndoWaitEndsWithContext(t *testing.T) {
	if ws := os.Getenv(undoHolderEnv); ws != "" {
		layertest.HoldApplyLock(t, ws)
		return
	}
	w := newWorld(t)
	w.write(t, map[string]string{"a": "a\n"})
	st := w.store(t, layer.StoreLimits{})
	st.SetTurn(w.step(t, st, "echo b > a").Step, "t1")
	kept := st.Steps()
	oneSecond := func(what string, call func(ctx context.Context) error) {
		t.Helper()
		start := time.Now() // before the deadline is set: it ends 1 s after this
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := call(ctx)
		if took := time.Since(start); took < time.Second || took > time.Minute {
			t.Errorf("%s stopped waiting after %v with a 1 s context", what, took)
		}
		if !errors.Is(err, layer.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: got %v, want ErrLocked and the context's error", what, err)
		}
	}
	unchanged := func(what, a string) {
		t.Helper()
		if got := w.read(t, "a"); got != a {
			t.Errorf("after %s: a is %q, want %q", what, got, a)
		}
		if got := st.Steps(); !reflect.DeepEqual(got, kept) {
			t.Errorf("after %s: steps %+v, want %+v", what, got, kept)
		}
	}

	release := startUndoHolder(t, w.ws)
	oneSecond("undo", func(ctx context.Context) error { _, err := st.Undo(ctx, 1); return err })
	unchanged("the undo that stopped waiting", "b\n")
	oneSecond("undo of a turn", func(ctx context.Context) error { _, err := st.UndoTurn(ctx, "t1"); return err })
	unchanged("the undo of a turn that stopped waiting", "b\n")
	oneSecond("undo of paths", func(ctx context.Context) error {
		_, _, err := st.UndoPaths(ctx, []string{filepath.Join(w.ws, "a")})
		return err
	})
	unchanged("the undo of paths that stopped waiting", "b\n")

	// An apply to the store that waits for the other process holds the
	// store's turn meanwhile.
	_, s := w.run(t, "echo c > c")
	applied := make(chan error, 1)
	go func() {
		_, err := s.Apply(context.Background(), nil, st, "echo c > c")
		applied <- err
	}()
	for deadline := time.Now().Add(time.Minute); !layer.StoreBusy(st); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the apply never took the store's turn")
		}
	}
	oneSecond("undo behind an apply of the store", func(ctx context.Context) error { _, err := st.Undo(ctx, 1); return err })
	if w.exists("c") || w.read(t, "a") != "b\n" {
		t.Errorf("the workspace changed while the other process held it: c there %v, a %q", w.exists("c"), w.read(t, "a"))
	}
	release()
	select {
	case err := <-applied:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the apply still waits two minutes after the other process let go")
	}
	if _, err := st.Undo(context.Background(), 2); err != nil || w.exists("c") || w.read(t, "a") != "a\n" {
		t.Fatalf("undo once free: %v; c there %v, a %q", err, w.exists("c"), w.read(t, "a"))
	}

	kept = st.Steps()
	release = startUndoHolder(t, w.ws)
	oneSecond("redo", func(ctx context.Context) error { _, _, err := st.Redo(ctx); return err })
	unchanged("the redo that stopped waiting", "a\n")
	release()
	if _, _, err := st.Redo(context.Background()); err != nil || !w.exists("c") || w.read(t, "a") != "b\n" {
		t.Fatalf("redo once free: %v; c there %v, a %q", err, w.exists("c"), w.read(t, "a"))
	}
}

// startUndoHolder starts the test binary as another engine holding
// ws's apply lock, and returns when it holds it, with what makes it
// let go (also run at the test's cleanup).
func startUndoHolder(t *testing.T, ws string) (release func()) {
	t.Helper()
	holder := exec.Command(os.Args[0], "-test.run=^TestUndoWaitEndsWithContext$")
	holder.Env = append(os.Environ(), undoHolderEnv+"="+ws)
	holder.Stderr = os.Stderr
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
