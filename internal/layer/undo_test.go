//go:build linux

package layer_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/layer"
	"github.com/bashvisor/bashvisor/internal/layer/layertest"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

func (w *world) store(t testing.TB, lim layer.StoreLimits) *layer.Store {
	t.Helper()
	st, err := layer.NewStore(filepath.Join(w.state, "undo"), lim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Remove() })
	return st
}

// step runs script over a layer and applies everything into st.
func (w *world) step(t testing.TB, st *layer.Store, script string) *layer.Result {
	t.Helper()
	_, s := w.run(t, script)
	res, err := s.Apply(context.Background(), nil, st, script)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failed) > 0 {
		t.Fatalf("%s: failed: %v", script, res.Failed)
	}
	return res
}

// TestApplyCopy puts the upper layers and the undo store on another
// file system than the workspace (a tmpfs), so that applying copies
// and undo keeps copies.
func TestApplyCopy(t *testing.T) {
	var fs unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &fs); err != nil || fs.Type != unix.TMPFS_MAGIC {
		t.Fatalf("no tmpfs at /dev/shm: %v", err)
	}
	w := newWorld(t)
	shm, err := os.MkdirTemp("/dev/shm", "layer-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(shm) })
	w.state = shm
	w.write(t, kindsFiles)
	script := kindsScript + "; touch -d '2002-02-02' mod.txt chmod.sh refill/keep typ/f new/a/b/f sub/deep/g private/p"
	want := sameAsUnsandboxed(t, kindsFiles, "", script)
	before := snapshot(t, w.ws)
	st := w.store(t, layer.StoreLimits{})
	w.step(t, st, script)
	if d := diffSnapshots(want, snapshot(t, w.ws)); len(d) > 0 {
		t.Errorf("workspace differs from an unsandboxed run:\n%s", strings.Join(d, "\n"))
	}
	if _, err := st.Undo(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if d := diffSnapshots(before, snapshot(t, w.ws)); len(d) > 0 {
		t.Errorf("after undo:\n%s", strings.Join(d, "\n"))
	}
}

// TestUndoSteps undoes the last two of three commands.
func TestUndoSteps(t *testing.T) {
	w := newWorld(t)
	w.write(t, map[string]string{"a": "0"})
	st := w.store(t, layer.StoreLimits{})
	w.step(t, st, "echo 1 > a; echo x > x")
	mid := snapshot(t, w.ws)
	w.step(t, st, "echo 2 > a; rm x; mkdir d; echo y > d/y")
	w.step(t, st, "echo 3 > a; echo z > d/z; mv d/y d/y2")
	if w.read(t, "a") != "3\n" {
		t.Fatal("not applied")
	}
	if n := len(st.Steps()); n != 3 {
		t.Fatalf("%d steps kept", n)
	}
	undone, err := st.Undo(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffSnapshots(mid, snapshot(t, w.ws)); len(d) > 0 {
		t.Errorf("after undoing 2 steps:\n%s", strings.Join(d, "\n"))
	}
	if !slices.ContainsFunc(undone, func(c layer.Change) bool { return c.Path == filepath.Join(w.ws, "x") && c.Kind == layer.Added }) {
		t.Errorf("undo did not report x put back: %v", undone)
	}
}

// TestUndoOneStepAtATime: steps that changed the same paths can be
// undone one call at a time (putting a file back moves its change
// time, which the steps before must not take for a change by someone
// else).
func TestUndoOneStepAtATime(t *testing.T) {
	w := newWorld(t)
	w.write(t, map[string]string{"a": "0", "b/c": "0"})
	st := w.store(t, layer.StoreLimits{})
	var snaps []map[string]string
	for _, script := range []string{
		"echo 1 > a; mkdir d; echo 1 > d/e",
		"echo 2 > a; echo 2 > d/e; rm -r b",
		"echo 3 > a; rm -r d; mkdir b; echo 3 > b/c",
	} {
		snaps = append(snaps, snapshot(t, w.ws))
		w.step(t, st, script)
	}
	for i := len(snaps) - 1; i >= 0; i-- {
		if _, err := st.Undo(context.Background(), 1); err != nil {
			t.Fatalf("undo of step %d: %v", i+1, err)
		}
		if d := diffSnapshots(snaps[i], snapshot(t, w.ws)); len(d) > 0 {
			t.Errorf("after undoing step %d:\n%s", i+1, strings.Join(d, "\n"))
		}
	}
}

// TestStepKeepsOnlyReplaced: a step keeps what the changes replaced
// (the command's upper layer moves into it whole) and nothing else: a
// file the command only copied up goes, in the background; undo puts
// the replaced file back.
func TestStepKeepsOnlyReplaced(t *testing.T) {
	w := newWorld(t)
	w.write(t, map[string]string{"a": "0", "d/big": strings.Repeat("b", 8192)})
	st := w.store(t, layer.StoreLimits{})
	w.step(t, st, ": >> d/big; echo 1 > a")
	var files []string
	testenv.Eventually(t, 30*time.Second, func() bool {
		files = files[:0]
		_ = filepath.WalkDir(filepath.Join(w.state, "undo"), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files = append(files, p)
			}
			return nil
		})
		return len(files) == 1
	}, "the store keeps %v, want the old a only", testenv.Last(&files))
	if b, err := os.ReadFile(files[0]); err != nil || string(b) != "0" {
		t.Fatalf("kept %q, %v", b, err)
	}
	if _, err := st.Undo(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if w.read(t, "a") != "0" || w.read(t, "d/big") != strings.Repeat("b", 8192) {
		t.Fatal("undo did not put the workspace back")
	}
}

// TestUndoRefusesChangedOutside: a file changed after the command (by
// the user, outside the sandbox) is named, and nothing is undone.
func TestUndoRefusesChangedOutside(t *testing.T) {
	w := newWorld(t)
	w.write(t, map[string]string{"a": "0", "b": "0"})
	st := w.store(t, layer.StoreLimits{})
	w.step(t, st, "echo 1 > a; echo 1 > b; echo n > n")
	if err := os.WriteFile(filepath.Join(w.ws, "b"), []byte("user\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.ws, "n"), []byte("user\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := st.Undo(context.Background(), 1)
	var ce *layer.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("undo: %v", err)
	}
	want := []string{filepath.Join(w.ws, "b"), filepath.Join(w.ws, "n")}
	if !slices.Equal(ce.Paths, want) {
		t.Errorf("conflicts %v, want %v", ce.Paths, want)
	}
	if !strings.Contains(err.Error(), filepath.Join(w.ws, "b")) {
		t.Errorf("message does not name the path: %v", err)
	}
	if w.read(t, "a") != "1\n" || w.read(t, "b") != "user\n" {
		t.Error("a refused undo changed files")
	}
	if len(st.Steps()) != 1 {
		t.Error("a refused undo dropped its step")
	}
}

// TestUndoRefusesLaterCommand: a later command whose change is not in
// the store (applied without one) touched the path.
func TestUndoRefusesLaterCommand(t *testing.T) {
	w := newWorld(t)
	w.write(t, map[string]string{"a": "0"})
	st := w.store(t, layer.StoreLimits{})
	w.step(t, st, "echo 1 > a; mkdir d; echo f > d/f")
	w.step(t, nil, "echo 2 > a; echo g > d/g")
	_, err := st.Undo(context.Background(), 1)
	var ce *layer.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("undo: %v", err)
	}
	want := []string{filepath.Join(w.ws, "a"), filepath.Join(w.ws, "d")}
	if !slices.Equal(ce.Paths, want) {
		t.Errorf("conflicts %v, want %v", ce.Paths, want)
	}
}

// TestStoreBounds: past the step bound the oldest step goes; a step
// larger than the byte bound is not kept, and neither is what came
// before it.
func TestStoreBounds(t *testing.T) {
	w := newWorld(t)
	w.write(t, map[string]string{"a": "0", "big": strings.Repeat("b", 4096)})
	st := w.store(t, layer.StoreLimits{Steps: 2, Bytes: 1024})
	for _, s := range []string{"echo 1 > a", "echo 2 > a", "echo 3 > a"} {
		w.step(t, st, s)
	}
	steps := st.Steps()
	if len(steps) != 2 || steps[0].Label != "echo 2 > a" {
		t.Fatalf("steps %+v", steps)
	}
	if res := w.step(t, st, "echo small > big"); res.Step != 0 {
		t.Errorf("a 4 KiB step was kept under a 1 KiB bound (step %d)", res.Step)
	}
	if n := len(st.Steps()); n != 0 {
		t.Errorf("%d steps kept past a step that was not", n)
	}
	// Dropped steps are removed in the background.
	var left []string
	testenv.Eventually(t, 30*time.Second, func() bool {
		entries, _ := os.ReadDir(filepath.Join(w.state, "undo"))
		left = left[:0]
		for _, e := range entries {
			left = append(left, e.Name())
		}
		return len(left) == 0
	}, "dropped steps left %v in the store", testenv.Last(&left))
	if err := st.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(w.state, "undo")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("store not removed: %v", err)
	}
}

// TestApplyRefused: refused paths, and everything below a refused added
// directory, stay as they were.
func TestApplyRefused(t *testing.T) {
	w := newWorld(t)
	w.write(t, map[string]string{"keep": "k", "old/x": "x"})
	_, s := w.run(t, "echo 2 > keep; echo a > a; mkdir -p newdir/sub; echo n > newdir/sub/n; rm -r old")
	refused := []string{filepath.Join(w.ws, "keep"), filepath.Join(w.ws, "newdir"), filepath.Join(w.ws, "old")}
	res, err := s.Apply(context.Background(), refused, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := w.kinds(res.Applied); got != "A a" {
		t.Errorf("applied:\n%s", got)
	}
	if w.read(t, "keep") != "k" || w.exists("newdir") || !w.exists("old/x") || !w.exists("a") {
		t.Error("a refused change reached the workspace")
	}
}

// TestApplyRefusedBelowNewDir: an added directory with a refused entry
// is made entry by entry, without it; undo removes it whole.
func TestApplyRefusedBelowNewDir(t *testing.T) {
	w := newWorld(t)
	st := w.store(t, layer.StoreLimits{})
	_, s := w.run(t, "mkdir -p n/a; echo 1 > n/a/ok; echo 2 > n/bad")
	res, err := s.Apply(context.Background(), []string{filepath.Join(w.ws, "n/bad")}, st, "")
	if err != nil || len(res.Failed) > 0 {
		t.Fatal(err, res.Failed)
	}
	if !w.exists("n/a/ok") || w.exists("n/bad") {
		t.Fatal("wrong entries applied")
	}
	if _, err := st.Undo(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if w.exists("n") {
		t.Error("undo left the added directory")
	}
}

// TestApplySiblingTrees: new directories whose names share a prefix
// ("a", "a-b") are each moved into place whole, with their contents.
func TestApplySiblingTrees(t *testing.T) {
	w := newWorld(t)
	_, s := w.run(t, "mkdir -p a/x a-b/y a.c && echo 1 > a/x/f && echo 2 > a-b/y/g && echo 3 > a.c/h")
	res, err := s.Apply(context.Background(), nil, nil, "")
	if err != nil || len(res.Failed) > 0 {
		t.Fatal(err, res.Failed)
	}
	for _, f := range []string{"a/x/f", "a-b/y/g", "a.c/h"} {
		if !w.exists(f) {
			t.Errorf("%s not applied", f)
		}
	}
	if got := layer.Summary(res.Applied, w.ws, 0); got != "[changed 3 files: A a/x/f, A a-b/y/g, A a.c/h]" {
		t.Errorf("summary %q", got)
	}
}

// TestApplyThroughSymlinkFails: a symlink put into the real tree after
// the command (where the command saw a directory) makes the change
// fail, not land where the symlink points.
func TestApplyThroughSymlinkFails(t *testing.T) {
	w := newWorld(t)
	w.write(t, map[string]string{"d/f": "f"})
	outside := t.TempDir()
	_, s := w.run(t, "echo changed > d/f; echo new > d/g")
	if err := os.Rename(filepath.Join(w.ws, "d"), filepath.Join(w.ws, "d.moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(w.ws, "d")); err != nil {
		t.Fatal(err)
	}
	res, err := s.Apply(context.Background(), nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failed) != 2 || len(res.Applied) != 0 {
		t.Errorf("applied %v, failed %v", res.Applied, res.Failed)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("written through the symlink: %v", entries)
	}
}

// TestSubmountNotInLayer: a mount below a root is not part of the
// layer; what a command writes under it stays in the upper layer, and
// applying it fails (it is not written to the mount), while the rest of
// the change set applies.
func TestSubmountNotInLayer(t *testing.T) {
	if layertest.Unprivileged() {
		t.Skip("the test mounts a tmpfs in the workspace, which needs root; the unprivileged layer code is the same")
	}
	w := newWorld(t)
	w.write(t, map[string]string{"vol": "DIR", "a": "0"})
	vol := filepath.Join(w.ws, "vol")
	if err := unix.Mount("tmpfs", vol, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(vol, unix.MNT_DETACH)
	_, s := w.run(t, "echo x > vol/x; echo 1 > a")
	if got := w.kinds(s.Changes); got != "M a\nA vol/x" {
		t.Fatalf("changes:\n%s", got)
	}
	res, err := s.Apply(context.Background(), nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failed) != 1 || !errors.Is(res.Failed[0].Err, unix.EXDEV) || w.read(t, "a") != "1\n" {
		t.Errorf("applied %v, failed %v", res.Applied, res.Failed)
	}
	if w.exists("vol/x") {
		t.Error("written into the mount")
	}
}

// TestMountInThread mounts the layer the way the sandbox's direct start
// does: on a locked throwaway thread that unshared its mount namespace,
// which then forks the command; and the same with the overlays made
// ahead of time in the engine's mount namespace (Premount).
func TestMountInThread(t *testing.T) {
	if layertest.Unprivileged() {
		t.Skip("a thread can make its own mount namespace only as root; an unprivileged command mounts in a child process (layertest.Command), which the other tests use")
	}
	for _, premount := range []bool{false, true} {
		t.Run(map[bool]string{false: "mount", true: "premount"}[premount], func(t *testing.T) {
			mountInThread(t, premount)
		})
	}
}

func mountInThread(t *testing.T, premount bool) {
	w := newWorld(t)
	w.write(t, map[string]string{"a": "0"})
	l := w.layer(t)
	if premount {
		if err := l.Premount(); err != nil {
			t.Fatal(err)
		}
		// Made ahead, and still to be used: the real tree changes
		// meanwhile, and the command sees it.
		w.write(t, map[string]string{"c": "c"})
	}
	errc := make(chan error, 1)
	onThrowawayThread(func() {
		errc <- func() error {
			if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
				return err
			}
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
				return err
			}
			if err := l.Spec().Mount(); err != nil {
				return err
			}
			script := "echo 1 > a; echo b > b"
			if premount {
				script = "test -f c || exit 3; " + script
			}
			return execCommand(w, script).Run()
		}()
	})
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if w.read(t, "a") != "0" {
		t.Fatal("the command wrote the real workspace")
	}
	s, err := l.Diff()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := w.kinds(s.Changes); got != "M a\nA b" {
		t.Errorf("changes:\n%s", got)
	}
}

// TestPremountStale: a layer made (and premounted) ahead of time is
// stale once its root is another directory, or has other permissions;
// removing it unused closes its premade overlays (both descriptors).
func TestPremountStale(t *testing.T) {
	if layertest.Unprivileged() {
		t.Skip("overlays are premade by a root engine only")
	}
	w := newWorld(t)
	l := w.layer(t)
	fds := func() int {
		entries, _ := os.ReadDir("/proc/self/fd")
		return len(entries)
	}
	before := fds()
	if err := l.Premount(); err != nil {
		t.Fatal(err)
	}
	if fds() != before+2 { // the overlay, and its clone for the command (Share keeps the first)
		t.Fatalf("premount holds %d descriptors, want 2", fds()-before)
	}
	if l.Stale() {
		t.Fatal("a fresh layer is stale")
	}
	if err := os.Chmod(w.ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if !l.Stale() {
		t.Error("not stale after its root's permissions changed")
	}
	if err := os.Chmod(w.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if l.Stale() {
		t.Error("stale with its root's permissions back")
	}
	if err := os.Rename(w.ws, w.ws+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(w.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if !l.Stale() {
		t.Error("not stale over another directory at its root's path")
	}
	if err := l.Remove(); err != nil {
		t.Fatal(err)
	}
	if fds() != before {
		t.Errorf("Remove left %d descriptors open", fds()-before)
	}
}

// TestUnprivileged runs the layer's tests again as a user other than
// root, in user namespaces with userxattr.
func TestUnprivileged(t *testing.T) {
	layertest.RerunUnprivileged(t, "^Test(DiffKinds|View|Apply|ApplyCopy|Undo|UndoSteps|UndoOneStepAtATime|StepKeepsOnlyReplaced|UndoRefusesChangedOutside|UndoRefusesLaterCommand|StoreBounds|ApplyRefused|ApplyRefusedBelowNewDir|ApplySiblingTrees|ApplyThroughSymlinkFails|ResetLayerIsNew)$")
}

// inThread runs cmd on a locked throwaway thread with a mount namespace
// of its own in which spec is mounted (as the sandbox's direct start
// does), and returns its error once it ends.
func inThread(spec layer.Spec, cmd *exec.Cmd) <-chan error {
	errc := make(chan error, 1)
	onThrowawayThread(func() {
		errc <- func() error {
			if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
				return err
			}
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
				return err
			}
			if err := spec.Mount(); err != nil {
				return err
			}
			return cmd.Run()
		}()
	})
	return errc
}

// TestShare: a command that mounts Share's Spec works on the same
// overlay as one that mounted the layer's Spec and still runs: a file
// the later command creates, at a path the first one looked up before,
// is seen by the first at once (two overlays of the same directory
// would not: overlayfs keeps what it looked up in its lower layer),
// and both commands' writes are in the one upper layer.
func TestShare(t *testing.T) {
	if layertest.Unprivileged() {
		t.Skip("Premount needs root (an unprivileged command mounts in a child process of its own)")
	}
	w := newWorld(t)
	w.write(t, map[string]string{"a": "0"})
	l := w.layer(t)
	if _, err := l.Share(); !errors.Is(err, layer.ErrNotShared) {
		t.Fatalf("Share before Premount: %v", err)
	}
	if err := l.Premount(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	wait := execCommand(w, "test -f ready; echo b > b; while [ ! -f ready ]; do sleep 0.02; done; cat ready")
	wait.Stdout = &out
	waitc := inThread(l.Spec(), wait)
	testenv.Eventually(t, 10*time.Second, func() bool {
		_, err := os.Lstat(filepath.Join(l.Spec().Overlays[0].Upper, "b"))
		return err == nil
	}, "the first command started")
	spec, err := l.Share()
	if err != nil {
		t.Fatal(err)
	}
	// ready is written aside and renamed: the first command, polling
	// for it, must not read it created but still empty.
	if err := <-inThread(spec, execCommand(w, "test -f b && echo x > r.tmp && mv r.tmp ready && echo 1 > a")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waitc:
		if err != nil || out.String() != "x\n" {
			t.Fatalf("the first command: %v, %q", err, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the first command never saw the file the second made")
	}
	l.Unshare()
	if _, err := l.Share(); !errors.Is(err, layer.ErrNotShared) {
		t.Errorf("Share after Unshare: %v", err)
	}
	s, err := l.Diff()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := w.kinds(s.Changes); got != "M a\nA b\nA ready" {
		t.Errorf("changes:\n%s", got)
	}
	if w.read(t, "a") != "0" {
		t.Error("a command wrote the real workspace")
	}
}

// fsImmutable is FS_IMMUTABLE_FL (linux/fs.h), which x/sys does not
// name.
const fsImmutable = 0x10

// immutable sets or clears the immutable flag of the workspace's
// directory rel, which keeps even root from changing the entries in it
// (rename(2) fails with EPERM), until the test's end.
func (w *world) immutable(t *testing.T, rel string, on bool) {
	t.Helper()
	f, err := os.Open(filepath.Join(w.ws, rel))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		t.Fatal(err)
	}
	if on {
		flags |= fsImmutable
		t.Cleanup(func() { w.immutable(t, rel, false) })
	} else {
		flags &^= fsImmutable
	}
	if err := unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags)); err != nil {
		t.Fatal(err)
	}
}

// TestUndoStopsKeepingStep: an undo that cannot put back one of a
// step's files (its directory is immutable) stops there with that
// error: the files it put back stay put back, the one it could not
// stays as the step left it, and the step stays kept with it (its old
// content too), so that an undo once the directory is writable again
// finishes the job; Redo then takes back both undos. Before, the undo
// went on past the failure and dropped the step: a/f's old content was
// lost (a second Undo found "0 kept").
func TestUndoStopsKeepingStep(t *testing.T) {
	if layertest.Unprivileged() {
		t.Skip("only root can make a directory immutable; an unprivileged engine's own failures are widened away (TestModesUndoBelowReadOnlyDir)")
	}
	w := newWorld(t)
	w.write(t, map[string]string{"a/f": "x\n", "b/g": "x\n", "c/h": "x\n"})
	st := w.store(t, layer.StoreLimits{})
	w.step(t, st, `echo y > a/f && echo y > b/g && echo y > c/h`)
	w.immutable(t, "b", true)
	_, err := st.Undo(context.Background(), 1)
	if !errors.Is(err, unix.EPERM) {
		t.Fatalf("undo below an immutable directory: %v, want EPERM", err)
	}
	got := w.read(t, "a/f") + w.read(t, "b/g") + w.read(t, "c/h")
	steps := st.Steps()
	if len(steps) != 1 || steps[0].N != 1 {
		t.Fatalf("steps kept after the failed undo: %+v, want step 1", steps)
	}
	// Restored newest first: c/h, then b/g fails; a/f is not tried.
	if got != "y\ny\nx\n" || steps[0].Paths != 2 {
		t.Errorf("after the failed undo: a/f b/g c/h %q, step keeps %d paths; want y y x, 2", got, steps[0].Paths)
	}
	w.immutable(t, "b", false)
	if _, err := st.Undo(context.Background(), 1); err != nil {
		t.Fatalf("undo again: %v", err)
	}
	if got := w.read(t, "a/f") + w.read(t, "b/g") + w.read(t, "c/h"); got != "x\nx\nx\n" {
		t.Fatalf("after the second undo: %q, want x x x", got)
	}
	if n := len(st.Steps()); n != 0 {
		t.Errorf("%d steps kept after both undos", n)
	}
	for range 2 {
		if _, _, err := st.Redo(context.Background()); err != nil {
			t.Fatalf("redo: %v", err)
		}
	}
	if got := w.read(t, "a/f") + w.read(t, "b/g") + w.read(t, "c/h"); got != "y\ny\ny\n" {
		t.Fatalf("after both redos: %q, want y y y", got)
	}
	if _, err := st.Undo(context.Background(), 2); err != nil {
		t.Fatalf("undo of both redone steps: %v", err)
	}
	if got := w.read(t, "a/f") + w.read(t, "b/g") + w.read(t, "c/h"); got != "x\nx\nx\n" {
		t.Fatalf("after the last undo: %q, want x x x", got)
	}
}

// TestUndoStopsAtFirst: an undo whose first restore fails changes
// nothing: the step stays kept whole (with its files' old content) and
// there is nothing to redo.
func TestUndoStopsAtFirst(t *testing.T) {
	if layertest.Unprivileged() {
		t.Skip("only root can make a directory immutable (see TestUndoStopsKeepingStep)")
	}
	w := newWorld(t)
	w.write(t, map[string]string{"a/f": "x\n", "c/h": "x\n"})
	st := w.store(t, layer.StoreLimits{})
	w.step(t, st, `echo y > a/f && echo y > c/h`)
	w.immutable(t, "c", true)
	if out, err := st.Undo(context.Background(), 1); !errors.Is(err, unix.EPERM) || len(out) != 0 {
		t.Fatalf("undo below an immutable directory: %v, changed %d; want EPERM, none", err, len(out))
	}
	if steps := st.Steps(); len(steps) != 1 || steps[0].Paths != 2 {
		t.Fatalf("steps kept after the failed undo: %+v, want step 1 whole", steps)
	}
	if _, _, err := st.Redo(context.Background()); !errors.Is(err, layer.ErrNothingToRedo) {
		t.Errorf("redo after an undo that changed nothing: %v", err)
	}
	w.immutable(t, "c", false)
	if _, err := st.Undo(context.Background(), 1); err != nil {
		t.Fatalf("undo again: %v", err)
	}
	if got := w.read(t, "a/f") + w.read(t, "c/h"); got != "x\nx\n" {
		t.Fatalf("after the second undo: %q, want x x", got)
	}
}

// TestRedoStopsKeepingRest: a redo that cannot put back one of the
// undone files stops there: what it put back is a step Undo takes back
// (the file's old content kept), what it did not stays for Redo, which
// finishes once the directory is writable again. Before, the files
// the redo put back could no longer be undone: their old content was
// dropped with the steps being made.
func TestRedoStopsKeepingRest(t *testing.T) {
	if layertest.Unprivileged() {
		t.Skip("only root can make a directory immutable (see TestUndoStopsKeepingStep)")
	}
	w := newWorld(t)
	w.write(t, map[string]string{"a/f": "x\n", "b/g": "x\n", "c/h": "x\n"})
	st := w.store(t, layer.StoreLimits{})
	w.step(t, st, `echo y > a/f && echo y > b/g && echo y > c/h`)
	if _, err := st.Undo(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	w.immutable(t, "b", true)
	if _, _, err := st.Redo(context.Background()); !errors.Is(err, unix.EPERM) {
		t.Fatalf("redo below an immutable directory: %v, want EPERM", err)
	}
	// The undo restored c/h, b/g, a/f; its redo goes the other way.
	if got := w.read(t, "a/f") + w.read(t, "b/g") + w.read(t, "c/h"); got != "y\nx\nx\n" {
		t.Fatalf("after the failed redo: %q, want y x x", got)
	}
	steps := st.Steps()
	if len(steps) != 1 || steps[0].Paths != 1 || steps[0].N == 1 {
		t.Fatalf("steps after the failed redo: %+v, want one of a/f under a new number", steps)
	}
	if len(st.RedoSteps()) != 1 {
		t.Fatalf("redo steps after the failed redo: %v, want the rest of step 1", st.RedoSteps())
	}
	w.immutable(t, "b", false)
	if _, _, err := st.Redo(context.Background()); err != nil {
		t.Fatalf("redo again: %v", err)
	}
	if got := w.read(t, "a/f") + w.read(t, "b/g") + w.read(t, "c/h"); got != "y\ny\ny\n" {
		t.Fatalf("after the second redo: %q, want y y y", got)
	}
	if _, err := st.Undo(context.Background(), 2); err != nil {
		t.Fatalf("undo of both redos: %v", err)
	}
	if got := w.read(t, "a/f") + w.read(t, "b/g") + w.read(t, "c/h"); got != "x\nx\nx\n" {
		t.Fatalf("after the last undo: %q, want x x x", got)
	}
}

// TestUndoStepsStopsAtOlder: an undo of two steps that cannot restore
// the older one's file undoes the newer step (kept for Redo) and keeps
// the older whole; both come back with Undo and Redo.
func TestUndoStepsStopsAtOlder(t *testing.T) {
	if layertest.Unprivileged() {
		t.Skip("only root can make a directory immutable (see TestUndoStopsKeepingStep)")
	}
	w := newWorld(t)
	w.write(t, map[string]string{"a/f": "x\n", "c/h": "x\n"})
	st := w.store(t, layer.StoreLimits{})
	w.step(t, st, `echo y > a/f`)
	w.step(t, st, `echo y > c/h`)
	w.immutable(t, "a", true)
	if _, err := st.Undo(context.Background(), 2); !errors.Is(err, unix.EPERM) {
		t.Fatalf("undo of two steps, the older below an immutable directory: %v, want EPERM", err)
	}
	if got := w.read(t, "a/f") + w.read(t, "c/h"); got != "y\nx\n" {
		t.Fatalf("after the failed undo: %q, want y x", got)
	}
	if steps, redo := st.Steps(), st.RedoSteps(); len(steps) != 1 || steps[0].N != 1 || !slices.Equal(redo, []int{2}) {
		t.Fatalf("after the failed undo: steps %+v, redo %v; want step 1, redo 2", steps, redo)
	}
	w.immutable(t, "a", false)
	if _, err := st.Undo(context.Background(), 1); err != nil {
		t.Fatalf("undo again: %v", err)
	}
	for range 2 {
		if _, _, err := st.Redo(context.Background()); err != nil {
			t.Fatalf("redo: %v", err)
		}
	}
	if got := w.read(t, "a/f") + w.read(t, "c/h"); got != "y\ny\n" {
		t.Fatalf("after both redos: %q, want y y", got)
	}
	var ns []int
	for _, s := range st.Steps() {
		ns = append(ns, s.N)
	}
	if !slices.Equal(ns, []int{1, 2}) {
		t.Errorf("steps after both redos: %v, want [1 2]", ns)
	}
	if _, err := st.Undo(context.Background(), 2); err != nil {
		t.Fatalf("undo of both: %v", err)
	}
	if got := w.read(t, "a/f") + w.read(t, "c/h"); got != "x\nx\n" {
		t.Fatalf("after the last undo: %q, want x x", got)
	}
}
