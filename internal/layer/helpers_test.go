//go:build linux

package layer_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/layer"
	"github.com/bashvisor/bashvisor/internal/layer/layertest"
	"golang.org/x/sys/unix"
)

var fixedTime = time.Date(2020, 2, 2, 0, 0, 0, 0, time.UTC)

// world is a test's workspace and engine state directory.
type world struct {
	ws, state string
	env       []string
}

func newWorld(t testing.TB) *world {
	t.Helper()
	layertest.Need(t)
	base := t.TempDir()
	w := &world{ws: filepath.Join(base, "ws"), state: filepath.Join(base, "state")}
	for _, d := range []string{w.ws, w.state} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w.ws, _ = filepath.EvalSymlinks(w.ws)
	home := filepath.Join(base, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	w.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com"}
	return w
}

// write creates files (path → content; a content "DIR" makes a directory).
func (w *world) write(t testing.TB, files map[string]string) {
	t.Helper()
	keys := make([]string, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := filepath.Join(w.ws, k)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if files[k] == "DIR" {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(files[k]), 0o644); err != nil {
			t.Fatal(err)
		}
		// A fixed time, so that two worlds can be compared.
		if err := os.Chtimes(p, fixedTime, fixedTime); err != nil {
			t.Fatal(err)
		}
	}
}

// layer makes a layer over the workspace.
func (w *world) layer(t testing.TB) *layer.Layer {
	t.Helper()
	l, err := layer.New(layer.Options{Roots: []string{w.ws}, Dir: w.state, UserXattr: layertest.Unprivileged()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Remove() })
	return l
}

// run runs script over a new layer and returns the layer's change set.
func (w *world) run(t testing.TB, script string) (*layer.Layer, *layer.Set) {
	t.Helper()
	l := w.layer(t)
	out, err := layertest.Run(t, l.Spec(), w.ws, w.env, script)
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	s, err := l.Diff()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return l, s
}

// kinds renders changes as "K rel" lines relative to the workspace.
func (w *world) kinds(changes []layer.Change) string {
	var out []string
	for _, c := range changes {
		rel := strings.TrimPrefix(strings.TrimPrefix(c.Path, w.ws), "/")
		if c.Mode.IsDir() {
			rel += "/"
		}
		out = append(out, string(c.Kind)+" "+rel)
	}
	return strings.Join(out, "\n")
}

func (w *world) read(t testing.TB, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(w.ws, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (w *world) exists(rel string) bool {
	_, err := os.Lstat(filepath.Join(w.ws, rel))
	return err == nil
}

// execCommand is `bash -c script` in the workspace, unconfined.
func execCommand(w *world, script string) *exec.Cmd {
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir, cmd.Env = w.ws, w.env
	return cmd
}

// onThrowawayThread runs f on a goroutine locked to an OS thread that
// ends with it (it is never unlocked), so that what f does to the thread
// (a mount namespace) stays there. The runtime keeps a main thread that
// ends locked instead of ending it, so when the goroutine lands on the
// main thread it holds it while f runs on another goroutine, which then
// cannot land there.
func onThrowawayThread(f func()) {
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			started := make(chan struct{})
			onThrowawayThread(func() { close(started); f() })
			<-started
			runtime.UnlockOSThread()
			return
		}
		f()
	}()
}
