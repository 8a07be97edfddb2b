//go:build linux

package gitpolicy_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/bashvisor/bashvisor/internal/gitpolicy"
	"github.com/bashvisor/bashvisor/internal/layer"
	"github.com/bashvisor/bashvisor/internal/layer/layertest"
	"github.com/bashvisor/bashvisor/internal/testenv"
	"golang.org/x/sys/unix"
)

// world is a test's workspace, engine state directory and sentinel
// directory (where planted code would leave its mark).
type world struct {
	ws, state, sent string
	env             []string
}

func newWorld(t testing.TB) *world {
	t.Helper()
	layertest.Need(t)
	testenv.NeedsTool(t, "git")
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := &world{ws: base + "/ws", state: base + "/state", sent: base + "/sent"}
	home := base + "/home"
	for _, d := range []string{w.ws, w.state, w.sent, home} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LC_ALL=C", "SENT=" + w.sent,
		"GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_TERMINAL_PROMPT=0"}
	return w
}

// sh runs script in the workspace without a layer (the user, outside
// the sandbox) and returns its output.
func (w *world) sh(t testing.TB, script string) string {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir, cmd.Env = w.ws, w.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return string(out)
}

// repo makes a repository with one commit in the workspace.
func (w *world) repo(t testing.TB) {
	t.Helper()
	w.sh(t, "git init -q -b main . && echo hello > README && git add README && git commit -qm init")
}

// outcome is what happened to one sandboxed command.
type outcome struct {
	set      *layer.Set
	refusals []gitpolicy.Refusal
	res      *layer.Result
	out      string
	alloc    uint64 // bytes the process allocated while Check ran
}

// run runs script over a layer, checks the changes and applies what
// policy allows.
func (w *world) run(t testing.TB, script string) *outcome {
	t.Helper()
	return w.runIn(t, w.ws, []string{w.ws}, script)
}

// runIn is run with the command in dir over a layer of roots.
func (w *world) runIn(t testing.TB, dir string, roots []string, script string) *outcome {
	t.Helper()
	l, err := layer.New(layer.Options{Roots: roots, Dir: w.state, UserXattr: layertest.Unprivileged()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Remove()
	out, err := runLayered(t, l.Spec(), dir, w.env, script)
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	s, err := l.Diff()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	o := &outcome{set: s, out: out}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	o.refusals = gitpolicy.CheckEnv(s, w.env, l.Roots(), s.Changes)
	runtime.ReadMemStats(&after)
	o.alloc = after.TotalAlloc - before.TotalAlloc
	if o.res, err = s.Apply(context.Background(), gitpolicy.Paths(o.refusals), nil, script); err != nil {
		t.Fatal(err)
	}
	if len(o.res.Failed) > 0 {
		t.Fatalf("failed to apply: %v", o.res.Failed)
	}
	return o
}

// refused returns "rule rel" lines for the refusals.
func (w *world) refused(o *outcome) []string {
	var out []string
	for _, r := range o.refusals {
		out = append(out, string(r.Rule)+" "+strings.TrimPrefix(r.Path, w.ws+"/"))
	}
	return out
}

// expectRefused checks that every refusal has rule and that each of the
// paths (relative) is refused.
func (w *world) expectRefused(t testing.TB, o *outcome, rule gitpolicy.Rule, paths ...string) {
	t.Helper()
	got := w.refused(o)
	if len(got) == 0 {
		t.Fatalf("nothing refused; changes: %v", o.set.Changes)
	}
	for _, r := range o.refusals {
		if r.Rule != rule {
			t.Errorf("refused by %s, want %s: %v", r.Rule, rule, got)
			break
		}
	}
	for _, p := range paths {
		if !slices.Contains(got, string(rule)+" "+p) {
			t.Errorf("%s not refused by %s: %v", p, rule, got)
		}
	}
	for _, l := range gitpolicy.Lines(o.refusals, w.ws) {
		if !strings.HasPrefix(l, "refused ") || !strings.Contains(l, "("+string(rule)+")") || strings.Count(l, "\n") > 0 {
			t.Errorf("bad line %q", l)
		}
	}
}

// expectAllowed checks that nothing was refused.
func (w *world) expectAllowed(t testing.TB, o *outcome) {
	t.Helper()
	if len(o.refusals) > 0 {
		t.Fatalf("refused:\n%s", strings.Join(gitpolicy.Lines(o.refusals, w.ws), "\n"))
	}
}

// sentinels lists what planted code left in the sentinel directory.
func (w *world) sentinels(t testing.TB) []string {
	t.Helper()
	entries, err := os.ReadDir(w.sent)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// userGit runs what the user's shell prompt or editor would run
// outside the sandbox, and expects no planted code to have run.
func (w *world) userGit(t testing.TB, dirs ...string) {
	t.Helper()
	if len(dirs) == 0 {
		dirs = []string{"."}
	}
	for _, d := range dirs {
		cmd := exec.Command("bash", "-c", "echo x >> userfile; git status --short; git log --oneline -1; git diff --stat; true")
		cmd.Dir, cmd.Env = filepath.Join(w.ws, d), w.env
		_, _ = cmd.CombinedOutput()
	}
	if s := w.sentinels(t); len(s) > 0 {
		t.Fatalf("planted code ran outside the sandbox: %v", s)
	}
}

func (w *world) exists(rel string) bool {
	_, err := os.Lstat(filepath.Join(w.ws, rel))
	return err == nil
}

// copyTree copies the tree at src into dst (an existing directory) as
// cp -a does, modes and modification times kept, without starting a
// process: directories, regular files and symlinks.
func copyTree(src, dst string) error {
	var dirs []string // set their times last: copying into them changes them
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch mode := fi.Mode(); {
		case mode.IsDir():
			if rel != "." {
				if err := os.Mkdir(to, mode.Perm()); err != nil {
					return err
				}
			}
			dirs = append(dirs, rel)
			return nil
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case mode.IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.WriteFile(to, b, mode.Perm()); err != nil {
				return err
			}
			return os.Chtimes(to, fi.ModTime(), fi.ModTime())
		default:
			return fmt.Errorf("copy %s: %v is not copied", p, mode.Type())
		}
	})
	if err != nil {
		return err
	}
	for _, rel := range slices.Backward(dirs) {
		fi, err := os.Stat(filepath.Join(src, rel))
		if err != nil {
			return err
		}
		if err := os.Chtimes(filepath.Join(dst, rel), fi.ModTime(), fi.ModTime()); err != nil {
			return err
		}
	}
	return nil
}

// runLayered runs script with bash over the layer spec, in dir, as
// layertest.Run does: in a new private mount namespace where spec is
// mounted (Spec.Mount). As root it makes that namespace on a thread of
// the test process instead of in a re-executed test binary (with -race
// its start costs about 15 ms of CPU, a tenth of a property case): the
// thread unshares its mount namespace, mounts the layer and starts bash
// from there, and ends with the goroutine (never unlocked), its
// namespace with it once bash is gone. Unprivileged (the mount needs a
// user namespace, which a threaded process cannot enter) it is
// layertest.Run.
func runLayered(t testing.TB, spec layer.Spec, dir string, env []string, script string) (string, error) {
	t.Helper()
	if layertest.Unprivileged() {
		return layertest.Run(t, spec, dir, env, script)
	}
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // for good: the thread's mount namespace is the command's
		var out bytes.Buffer
		err := func() error {
			if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
				return fmt.Errorf("unshare: %w", err)
			}
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
				return fmt.Errorf("make mounts private: %w", err)
			}
			if err := spec.Mount(); err != nil {
				return err
			}
			cmd := exec.Command("bash", "-c", script)
			cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, &out, &out
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			return cmd.Run() // started from this thread: in its namespace
		}()
		done <- result{out.String(), err}
	}()
	r := <-done
	return r.out, r.err
}
