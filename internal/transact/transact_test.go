//go:build linux

package transact_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/gitpolicy"
	"github.com/bashvisor/bashvisor/internal/layer"
	"github.com/bashvisor/bashvisor/internal/layer/layertest"
	"github.com/bashvisor/bashvisor/internal/testenv"
	"github.com/bashvisor/bashvisor/internal/transact"
)

var gitEnv = []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
	"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "LC_ALL=C"}

// fixture is a repository and a Manager.
type fixture struct {
	ws  string
	m   *transact.Manager
	c   *transact.Conv // conversation "c"
	env []string
	// hold begins f.run's commands with BeginHeld.
	hold bool
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	layertest.Need(t)
	testenv.NeedsTool(t, "git")
	base, _ := filepath.EvalSymlinks(t.TempDir())
	f := &fixture{ws: filepath.Join(base, "ws"), env: append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + base}, gitEnv...)}
	if err := os.Mkdir(f.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	f.git(t, "init", "-q", "-b", "main")
	f.writeFile(t, "README", "hello\n")
	f.git(t, "add", "README")
	f.git(t, "commit", "-qm", "first")
	m, err := transact.New(transact.Options{Dir: filepath.Join(base, "state"), UserXattr: layertest.Unprivileged()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	f.m, f.c = m, m.Conversation()
	return f
}

func (f *fixture) git(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = f.ws, f.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func (f *fixture) writeFile(t *testing.T, rel, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(f.ws, rel), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) read(rel string) string {
	b, _ := os.ReadFile(filepath.Join(f.ws, rel))
	return string(b)
}

// run runs script as a command of conversation "c" over a layer and
// commits it.
func (f *fixture) run(t *testing.T, script string) *transact.Report {
	t.Helper()
	roots, err := transact.Roots(f.ws)
	if err != nil {
		t.Fatal(err)
	}
	begin := f.c.Begin
	if f.hold {
		begin = f.c.BeginHeld
	}
	tx, err := begin(roots, script)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := layertest.Run(t, tx.Spec(), f.ws, f.env, script); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	rep, err := tx.Commit(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func kinds(ws string, cs []layer.Change) string {
	var out []string
	for _, c := range layer.Listed(cs) {
		out = append(out, string(c.Kind)+" "+strings.TrimPrefix(c.Path, ws+"/"))
	}
	return strings.Join(out, ", ")
}

// A command's edits, git add and git commit reach the workspace when it
// is committed, and not before; its layer is gone once the manager is
// closed.
func TestCommitAppliesEditsAndCommits(t *testing.T) {
	f := newFixture(t)
	rep := f.run(t, `echo world >> README && echo new > b.txt && git add -A && git commit -qm second`)
	if len(rep.Refused) > 0 || len(rep.Failed) > 0 {
		t.Fatalf("refused %v, failed %v", rep.Refused, rep.Failed)
	}
	if got := kinds(f.ws, rep.Applied); !strings.Contains(got, "M README") || !strings.Contains(got, "A b.txt") || !strings.Contains(got, "M .git/index") {
		t.Fatalf("applied: %s", got)
	}
	out, err := exec.Command("git", "-C", f.ws, "log", "--oneline").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "second") {
		t.Fatalf("git log: %v %s", err, out)
	}
	if f.read("README") != "hello\nworld\n" {
		t.Fatalf("README: %q", f.read("README"))
	}
	// Used layers are removed in the background, and a spare one waits
	// for the next command: Close removes both.
	if err := f.m.Close(); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Join(filepath.Dir(f.ws), "state"))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "layer-") {
			t.Fatalf("layer left behind: %s", e.Name())
		}
	}
}

// The two attacks of the review are refused whole and named: a
// commondir pointing git at a planted config, and a nested repository
// whose config sets core.fsmonitor registered as a submodule.
func TestCommitRefusesGitAttacks(t *testing.T) {
	for name, c := range map[string]struct {
		script string
		rule   gitpolicy.Rule
		absent string
	}{
		"commondir": {`mkdir -p /tmp/x 2>/dev/null; mkdir evil && printf '[core]\n\tfsmonitor = touch pwned\n' > evil/config && echo ../evil > .git/commondir`,
			gitpolicy.Commondir, ".git/commondir"},
		"submodule": {`git init -q sub && git -C sub config core.fsmonitor 'touch pwned' && echo x > sub/f && git -C sub add f && git -C sub commit -qm s && git submodule add ./sub sub >/dev/null 2>&1; git add sub; true`,
			gitpolicy.NewConfig, "sub/.git/config"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			rep := f.run(t, c.script)
			if !slices.ContainsFunc(rep.Refused, func(r gitpolicy.Refusal) bool { return r.Rule == c.rule }) {
				t.Fatalf("not refused by %s: %+v", c.rule, rep.Refused)
			}
			if _, err := os.Lstat(filepath.Join(f.ws, c.absent)); err == nil {
				t.Fatalf("%s reached the workspace", c.absent)
			}
			cmd := exec.Command("git", "status", "--short")
			cmd.Dir, cmd.Env = f.ws, f.env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("git status after the attack: %v\n%s", err, out)
			}
			if _, err := os.Lstat(filepath.Join(f.ws, "pwned")); err == nil {
				t.Fatal("git status ran the planted fsmonitor")
			}
		})
	}
}

// Undo puts back what the last commands changed, refuses naming the
// paths when something changed them since, and counts its bytes.
func TestUndo(t *testing.T) {
	f := newFixture(t)
	f.run(t, `echo one > a.txt`)
	f.run(t, `echo two > a.txt && rm README`)
	if n := len(f.c.Steps()); n != 2 {
		t.Fatalf("%d steps", n)
	}
	if f.c.Bytes() <= 0 {
		t.Fatal("the store counts no bytes")
	}
	if _, err := f.c.Undo(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if f.read("a.txt") != "one\n" || f.read("README") != "hello\n" {
		t.Fatalf("after undo: a.txt %q README %q", f.read("a.txt"), f.read("README"))
	}
	f.writeFile(t, "a.txt", "changed by the user\n")
	_, err := f.c.Undo(context.Background(), 1)
	var conflict *layer.ConflictError
	if !errors.As(err, &conflict) || !slices.Contains(conflict.Paths, filepath.Join(f.ws, "a.txt")) {
		t.Fatalf("undo over a later change: %v", err)
	}
	if f.read("a.txt") != "changed by the user\n" {
		t.Fatal("a refused undo changed the file")
	}
	if _, err := f.m.Conversation().Undo(context.Background(), 1); !errors.Is(err, layer.ErrNothingToUndo) {
		t.Fatalf("another conversation: %v", err)
	}
	if err := f.c.End(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Undo(context.Background(), 1); !errors.Is(err, layer.ErrNothingToUndo) {
		t.Fatalf("after End: %v", err)
	}
}

// Without gone nothing is applied: a process could still write.
func TestCommitWithoutGoneAppliesNothing(t *testing.T) {
	f := newFixture(t)
	tx, err := f.c.Begin([]string{f.ws}, "x")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := layertest.Run(t, tx.Spec(), f.ws, f.env, "echo x > x"); err != nil {
		t.Fatal(err, out)
	}
	rep, err := tx.Commit(context.Background(), false)
	if err != nil || rep.NotApplied == "" || !rep.Discarded || len(rep.Applied) > 0 {
		t.Fatalf("%+v %v", rep, err)
	}
	if _, err := os.Lstat(filepath.Join(f.ws, "x")); err == nil {
		t.Fatal("applied")
	}
}

// Roots finds a linked worktree's git directory and its common one,
// and ignores a .git file that names no git directory.
func TestRoots(t *testing.T) {
	f := newFixture(t)
	wt := filepath.Join(filepath.Dir(f.ws), "wt")
	f.git(t, "worktree", "add", "-q", "-b", "feature", wt)
	roots, err := transact.Roots(wt)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{wt, filepath.Join(f.ws, ".git", "worktrees", "wt"), filepath.Join(f.ws, ".git")}
	if !slices.Equal(roots, want) {
		t.Fatalf("roots %v, want %v", roots, want)
	}
	stray := filepath.Join(filepath.Dir(f.ws), "stray")
	if err := os.Mkdir(stray, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(stray, ".git"), []byte("gitdir: /etc\n"), 0o644)
	if roots, _ := transact.Roots(stray); !slices.Equal(roots, []string{stray}) {
		t.Fatalf("a stray .git file made %v writable", roots)
	}
}

// The first command queues no spare (a one-command engine would only
// make and remove it): its layer, reset, is the second command's; from
// the second on, the next command's layer is made while the last one is
// committed, and the last one's, reset, is the directories of the one
// after (two layers cycle); a layer made ahead of time is not used once
// its root's permissions changed (the command would see the old ones,
// and the commit would report them as its change).
func TestSpareLayerFollowsTheRoot(t *testing.T) {
	f := newFixture(t)
	state := filepath.Join(filepath.Dir(f.ws), "state")
	seen := map[string]bool{}
	layers := func() int {
		entries, _ := os.ReadDir(state)
		n := 0
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "layer-") {
				n++
				seen[e.Name()] = true
			}
		}
		return n
	}
	roots, err := transact.Roots(f.ws)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := f.c.Begin(roots, "first")
	if err != nil {
		t.Fatal(err)
	}
	transact.Settle(f.m) // a spare queued would be made by now
	if n := layers(); n != 1 {
		t.Fatalf("the first command's Begin left %d layers, want 1 (no spare)", n)
	}
	if err := tx.Abort(); err != nil {
		t.Fatal(err)
	}
	transact.Settle(f.m) // the first command's layer, reset, is the spare
	first := maps.Clone(seen)
	for i := range 5 {
		if rep := f.run(t, "echo x > f; true"); len(rep.Applied) != 1 {
			t.Fatalf("applied %v", rep.Applied)
		}
		if err := os.Remove(filepath.Join(f.ws, "f")); err != nil {
			t.Fatal(err)
		}
		if i == 0 && !maps.Equal(seen, first) {
			t.Fatalf("the second command did not reuse the first one's layer: %v, then %v", first, seen)
		}
		// A spare stays, and the used layer, reset, is the next spare's
		// directories: the commands cycle two layers.
		testenv.Eventually(t, 30*time.Second, func() bool { return layers() == 2 }, "a spare and a free layer")
	}
	if len(seen) != 2 {
		t.Errorf("5 commands used %d layer directories, want 2: %v", len(seen), seen)
	}
	for _, mode := range []os.FileMode{0o750, 0o755} {
		if err := os.Chmod(f.ws, mode); err != nil {
			t.Fatal(err)
		}
		rep := f.run(t, `test "$(stat -c %a .)" = `+strconv.FormatUint(uint64(mode), 8))
		if len(rep.Applied) > 0 {
			t.Fatalf("mode %o: applied %s", mode, kinds(f.ws, rep.Applied))
		}
	}
}

// Two commands at a time (the second begins before the first one's
// layer is reset, as commands back to back do) cycle three layers'
// directories: a spare and two free layers are kept, so that no round
// makes a new layer and removes another one.
func TestOverlappingCommandsCycleThreeLayers(t *testing.T) {
	f := newFixture(t)
	state := filepath.Join(filepath.Dir(f.ws), "state")
	seen := map[string]bool{}
	look := func() {
		entries, _ := os.ReadDir(state)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "layer-") {
				seen[e.Name()] = true
			}
		}
	}
	roots, err := transact.Roots(f.ws)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 6 {
		a, err := f.c.Begin(roots, "a")
		if err != nil {
			t.Fatal(err)
		}
		b, err := f.c.Begin(roots, "b")
		if err != nil {
			t.Fatal(err)
		}
		look()
		for _, tx := range []*transact.Tx{a, b} {
			if _, err := tx.Commit(context.Background(), true); err != nil {
				t.Fatal(err)
			}
		}
		transact.Settle(f.m)
		look()
		if round == 0 {
			continue // the first round makes what later ones reuse
		}
		if len(seen) > 3 {
			t.Fatalf("round %d: %d layer directories made, want at most 3: %v", round, len(seen), seen)
		}
	}
}

// Which commands join a running background job's layer (see the package
// doc, "Shared layers"): with the overlays held (Premount), a command
// over the same roots while every command over the layer is a
// background job; not one over other roots, not while a foreground
// command is over it, not once the job ended, and never while the
// overlays are not held (without Premount a held layer's overlays are
// made by its first command's mount, and no command mounts here).
// (The engine tests run real jobs over shared layers, the sandbox's
// TestLayerShared held ones; nothing needs freezing, so freeze just
// runs f.)
func TestJoinRules(t *testing.T) {
	if layertest.Unprivileged() {
		t.Skip("layers are premounted (and so joined) by a root engine only")
	}
	f := newFixture(t)
	other := t.TempDir()
	run := func(g func()) bool { g(); return true }
	for _, premount := range []bool{false, true} {
		m, err := transact.New(transact.Options{Dir: filepath.Join(t.TempDir(), "state"), Premount: premount})
		if err != nil {
			t.Fatal(err)
		}
		c := m.Conversation()
		begin := func(dir string) *transact.Tx {
			t.Helper()
			tx, err := c.Begin([]string{dir}, "cmd")
			if err != nil {
				t.Fatal(err)
			}
			return tx
		}
		job := begin(f.ws)
		if fg := begin(f.ws); fg.Shared() {
			t.Fatal("joined a command not marked as a background job")
		} else if err := fg.Abort(); err != nil {
			t.Fatal(err)
		}
		job.Background(run)
		fg := begin(f.ws)
		if fg.Shared() != premount {
			t.Fatalf("premount %v: joined %v", premount, fg.Shared())
		}
		if second := begin(f.ws); second.Shared() {
			t.Fatal("joined while a foreground command runs over the layer")
		} else {
			_ = second.Abort()
		}
		if elsewhere := begin(other); elsewhere.Shared() {
			t.Fatal("joined a layer over other roots")
		} else {
			_ = elsewhere.Abort()
		}
		if err := fg.Abort(); err != nil {
			t.Fatal(err)
		}
		if bg := begin(f.ws); bg.Shared() != premount {
			t.Fatalf("premount %v: a second command joined %v", premount, bg.Shared())
		} else {
			_ = bg.Abort()
		}
		if rep, err := job.Commit(context.Background(), true); err != nil || len(rep.Applied) != 0 || rep.NotApplied != "" {
			t.Fatalf("the job's commit: %+v %v", rep, err)
		}
		if after := begin(f.ws); after.Shared() {
			t.Fatal("joined the layer of a job that ended")
		} else {
			_ = after.Abort()
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// New marks its directory as the top of directory hierarchies
// (FS_TOPDIR_FL) where the file system keeps that flag (ext4), so that
// each layer's directory is placed in a block group of its own; where
// the flag cannot be read New works all the same.
func TestNewSpreadsLayers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tx")
	m, err := transact.New(transact.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	n, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(n)
	var st unix.Statfs_t
	if err := unix.Fstatfs(n, &st); err != nil {
		t.Fatal(err)
	}
	flags, err := unix.IoctlGetUint32(n, unix.FS_IOC_GETFLAGS)
	if st.Type != unix.EXT4_SUPER_MAGIC {
		t.Logf("%s is not on ext4 (magic %#x, flags %#x, %v): only New's success is checked", dir, st.Type, flags, err)
		return
	}
	if err != nil || flags&0x00020000 == 0 {
		t.Errorf("%s on ext4: flags %#x, %v; want FS_TOPDIR_FL (0x20000)", dir, flags, err)
	}
}
