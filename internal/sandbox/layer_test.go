//go:build linux

package sandbox_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/layer"
	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// newLayer makes a copy-on-write layer over roots in a state directory of
// its own (outside them), removed at the end of the test. A rootless
// sandbox mounts it in a user namespace: userxattr.
func newLayer(t testing.TB, roots sandbox.Roots, state string) *layer.Layer {
	t.Helper()
	if state == "" {
		state = t.TempDir()
	}
	l, err := layer.New(layer.Options{Roots: roots.Writable, Dir: state, UserXattr: sandbox.Probe().Rootless})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Remove(); err != nil {
			t.Error(err)
		}
	})
	return l
}

// layered runs command in the workspace-write profile of dir over a new
// layer (in a World when w is set) and returns the result and the
// layer's changes; the real tree is not touched. The command starts in
// dir, or with the test's working directory when that is dir.
func layered(t *testing.T, w *sandbox.World, dir, command string) (result, *layer.Layer, *layer.Set) {
	t.Helper()
	roots, err := sandbox.WorkspaceRoots(dir)
	if err != nil {
		t.Fatal(err)
	}
	l := newLayer(t, roots, "")
	spec := l.Spec()
	opts := sandbox.Options{Roots: roots, Layer: &spec}
	if w != nil {
		opts.World, opts.Dir = w, dir
	}
	workdir := dir
	if wd, _ := os.Getwd(); wd == dir {
		workdir = "" // inherited
	}
	r := runOpts(t, opts, nil, workdir, command, gitEnv...)
	s, err := l.Diff()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return r, l, s
}

// changed lists a set's changes as "K path" relative to dir.
func changed(dir string, s *layer.Set) []string {
	var out []string
	for _, c := range s.Changes {
		out = append(out, string(c.Kind)+" "+strings.TrimPrefix(strings.TrimPrefix(c.Path, dir), "/"))
	}
	return out
}

// wantChanges fails unless every entry of want is in the set.
func wantChanges(t *testing.T, dir string, s *layer.Set, want ...string) {
	t.Helper()
	got := changed(dir, s)
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("change %q missing; the layer has:\n%s", w, strings.Join(got, "\n"))
		}
	}
}

// TestLayerWorkspaceWrite: over a layer, the workspace-write profile
// edits, chmods, touches and copies with cp -p, through relative paths
// (bash starts in the overlay), and commits; the real tree is unchanged
// until the caller applies the change set, and then holds all of it.
func TestLayerWorkspaceWrite(t *testing.T) {
	requireNamespaces(t)
	requireGit(t)
	ws := newRepo(t)
	before := snapshot(t, ws)
	r, _, s := layered(t, nil, ws, `set -e
test "$(pwd -P)" = "$PWD"
echo more >> README
mkdir -p src && echo 'echo hi' > src/run.sh && chmod 755 src/run.sh && touch -d 2001-01-01 src/run.sh
cp -p src/run.sh src/copy.sh
chmod 600 README && touch -d @7 README
git add README src
git commit -qm second
git log --format=%s | head -1
stat -c %a README`)
	if r.code != 0 || r.out != "second\n600\n" {
		t.Fatalf("work over the layer: exit %d\n%s", r.code, r.out)
	}
	if after := snapshot(t, ws); after != before {
		t.Fatalf("the real tree changed before the layer was applied:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	wantChanges(t, ws, s, "M README", "A src", "A src/run.sh", "A src/copy.sh", "M .git/index")
	res, err := s.Apply(context.Background(), nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failed) > 0 {
		t.Fatalf("apply failed: %v", res.Failed)
	}
	if got := git(t, ws, "log", "-1", "--format=%s"); got != "second" {
		t.Fatalf("last commit %q after apply, want the sandbox's", got)
	}
	if st := git(t, ws, "status", "--porcelain"); st != "" {
		t.Fatalf("the applied tree is not clean:\n%s", st)
	}
	for p, want := range map[string]struct {
		perm os.FileMode
		mod  int64
	}{"README": {0o600, 7}, "src/run.sh": {0o755, 978307200}, "src/copy.sh": {0o755, 978307200}} {
		fi, err := os.Stat(filepath.Join(ws, p))
		if err != nil || fi.Mode().Perm() != want.perm || fi.ModTime().Unix() != want.mod {
			t.Errorf("%s after apply: %v %v, want mode %o mtime %d", p, fi, err, want.perm, want.mod)
		}
	}
}

// TestLayerNewRepository: the agent workflow in an empty workspace (git
// init, chmod, touch, cp -p, tar, commit) works over a layer, the same
// as root and rootless, and leaves the real directory empty.
func TestLayerNewRepository(t *testing.T) {
	requireNamespaces(t)
	requireGit(t)
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r, _, s := layered(t, nil, ws, `set -e
git init -q -b main . && echo a > a && chmod 755 a && touch -d @5 a && cp -p a b && tar cf "$TMPDIR/x.tar" a b
git add a b && git commit -qm one && git log --format=%s && stat -c '%a %Y' b`)
	if r.code != 0 || r.out != "one\n755 5\n" {
		t.Fatalf("exit %d\n%s", r.code, r.out)
	}
	if entries, _ := os.ReadDir(ws); len(entries) != 0 {
		t.Fatalf("the real workspace got %d entries before apply", len(entries))
	}
	wantChanges(t, ws, s, "A .git", "A a", "A b")
}

// TestLayerStateUnreachable: the command cannot write the layer's upper
// and work directories (nor its state directory), which are outside
// every writable root; in a world that hides the engine's state it does
// not even see them.
func TestLayerStateUnreachable(t *testing.T) {
	requireNamespaces(t)
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	state, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	roots := sandbox.Roots{Writable: []string{ws}}
	l := newLayer(t, roots, state)
	spec := l.Spec()
	o := spec.Overlays[0]
	probes := `echo ok > f
for d in ` + o.Upper + ` ` + o.Work + ` ` + filepath.Dir(o.Upper) + ` ` + state + `; do
	(echo x > "$d/planted") 2>/dev/null && echo "wrote $d"
	(mkdir "$d/dir") 2>/dev/null && echo "mkdir $d"
	(chmod 777 "$d") 2>/dev/null && echo "chmod $d"
	(touch -d @1 "$d") 2>/dev/null && echo "touch $d"
done
(echo x > ` + o.Upper + `/f) 2>/dev/null && echo "wrote upper/f"
true`
	r := runOpts(t, sandbox.Options{Roots: roots, Layer: &spec}, nil, ws, probes)
	if r.code != 0 || r.out != "" {
		t.Fatalf("the command reached its layer: exit %d\n%s", r.code, r.out)
	}
	s, err := l.Diff()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := changed(ws, s); !slices.Equal(got, []string{"A f"}) {
		t.Fatalf("changes %v, want only the command's own file", got)
	}
	if b, err := os.ReadFile(filepath.Join(o.Upper, "f")); err != nil || string(b) != "ok\n" {
		t.Fatalf("upper/f = %q %v", b, err)
	}

	// In a world that hides the engine's state, the layer is not in view.
	hidden := filepath.Join(state, "layers")
	if err := os.Mkdir(hidden, 0o700); err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, sandbox.WorldOptions{Dir: filepath.Join(state, "world"), Hide: []string{state}})
	l2 := newLayer(t, roots, hidden)
	spec2 := l2.Spec()
	up2 := spec2.Overlays[0].Upper
	r = runOpts(t, sandbox.Options{Roots: roots, Layer: &spec2, World: w, Dir: ws}, nil, ws, `echo ok > g
test -e `+hidden+` && echo sees-layers; test -e `+up2+` && echo sees-upper
(echo x > `+up2+`/h) 2>/dev/null && echo wrote; true`)
	if r.code != 0 || r.out != "" {
		t.Fatalf("the world shows the layer: exit %d\n%s", r.code, r.out)
	}
	s2, err := l2.Diff()
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got := changed(ws, s2); !slices.Equal(got, []string{"A g"}) {
		t.Fatalf("changes %v, want only the command's own file", got)
	}
}

// TestLayerGitAttacks: the two attacks on git of issue 19 run to the end
// inside the sandbox, and nothing of them reaches the real tree: git
// status there (run by the test, as the user would) runs no fsmonitor,
// the tree is as it was, and the change set shows the attack's files for
// policy to refuse.
func TestLayerGitAttacks(t *testing.T) {
	requireNamespaces(t)
	requireGit(t)
	sentinel := filepath.Join(t.TempDir(), "pwned")
	evil := `[core]
	fsmonitor = "touch ` + sentinel + `; false"
`
	for name, attack := range map[string]struct {
		command string
		changes []string
	}{
		// A commondir that points git at a directory the command filled
		// with its own config.
		"commondir": {`set -e
mkdir evil && cp -r .git/objects .git/refs .git/HEAD evil/
printf '%s' '` + evil + `' > evil/config
echo "$PWD/evil" > .git/commondir`, []string{"A .git/commondir", "A evil/config"}},
		// A nested repository whose config runs code, registered as a
		// submodule.
		"nested-submodule": {`set -e
git init -q -b main sub && printf '%s' '` + evil + `' >> sub/.git/config
(cd sub && git commit -q --allow-empty -m x)
printf '[submodule "sub"]\n\tpath = sub\n\turl = ./sub\n' > .gitmodules
git add .gitmodules sub`, []string{"A sub/.git/config", "A .gitmodules", "M .git/index"}},
	} {
		t.Run(name, func(t *testing.T) {
			ws := newRepo(t)
			before := snapshot(t, ws)
			r, _, s := layered(t, nil, ws, attack.command)
			if r.code != 0 {
				t.Fatalf("the attack did not run: exit %d\n%s", r.code, r.out)
			}
			if after := snapshot(t, ws); after != before {
				t.Fatalf("the attack reached the real tree:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			// The user's git in the real tree, unconfined.
			git(t, ws, "status")
			git(t, ws, "status", "--ignore-submodules=none")
			if _, err := os.Stat(sentinel); err == nil {
				t.Fatal("git status in the real tree ran the command's fsmonitor")
			}
			wantChanges(t, ws, s, attack.changes...)
		})
	}
}

// TestLayerWorld: in a conversation's world (root or rootless) the
// workspace over a layer works as without one, and the world's /tmp
// stays shared.
func TestLayerWorld(t *testing.T) {
	requireGit(t)
	w := newWorld(t, sandbox.WorldOptions{})
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r, _, s := layered(t, w, ws, `set -e
git init -q -b main . && echo a > a && chmod 700 a && touch -d @9 a && cp -p a b && git add a b && git commit -qm one
echo kept > /tmp/kept && git log --format=%s`)
	if r.code != 0 || r.out != "one\n" {
		t.Fatalf("exit %d\n%s", r.code, r.out)
	}
	if entries, _ := os.ReadDir(ws); len(entries) != 0 {
		t.Fatalf("the real workspace got %d entries", len(entries))
	}
	wantChanges(t, ws, s, "A a", "A b", "A .git")
	if r := runWorld(t, w, sandbox.Options{}, ws, `cat /tmp/kept`); r.out != "kept\n" {
		t.Fatalf("the world's /tmp: %q", r.out)
	}
}

// TestLayerDirectStart: with StartDirect (bash forked from a confined
// thread of the engine) the layer works the same.
func TestLayerDirectStart(t *testing.T) {
	requireNamespaces(t)
	direct = true
	defer func() { direct = false }()
	t.Run("WorkspaceWrite", TestLayerWorkspaceWrite)
	t.Run("StateUnreachable", TestLayerStateUnreachable)
	t.Run("World", TestLayerWorld)
}

// TestLayerRefused: Prepare refuses a layer it cannot enforce: one whose
// upper directory lies in a writable root, one over a directory that is
// not writable, and (rootless) one made without userxattr.
func TestLayerRefused(t *testing.T) {
	c := requireNamespaces(t)
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	other, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	inside := filepath.Join(ws, "state")
	for name, spec := range map[string]layer.Spec{
		"upper-in-root":   {Overlays: []layer.Overlay{{Root: ws, Upper: inside + "/u", Work: "/nonexistent/w"}}, UserXattr: c.Rootless},
		"work-in-root":    {Overlays: []layer.Overlay{{Root: ws, Upper: "/nonexistent/u", Work: inside + "/w"}}, UserXattr: c.Rootless},
		"root-not-listed": {Overlays: []layer.Overlay{{Root: other, Upper: "/nonexistent/u", Work: "/nonexistent/w"}}, UserXattr: c.Rootless},
		"no-overlays":     {},
		"rootless-xattr":  {Overlays: []layer.Overlay{{Root: ws, Upper: "/nonexistent/u", Work: "/nonexistent/w"}}, UserXattr: false},
	} {
		if name == "rootless-xattr" && !c.Rootless {
			continue
		}
		_, err := sandbox.Prepare(sandbox.Options{Bash: bashPath(t), Command: "true", Roots: sandbox.Roots{Writable: []string{ws}}, Layer: &spec})
		if err == nil {
			t.Errorf("%s: Prepare accepted %+v", name, spec)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// TestLayerManyCommands: a layer is mounted for one command; the next
// command gets a new one, and sees the real tree (what the first wrote
// was not applied).
func TestLayerManyCommands(t *testing.T) {
	requireNamespaces(t)
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		r, _, s := layered(t, nil, ws, `ls; echo x > f`)
		if r.code != 0 || r.out != "" {
			t.Fatalf("command %d: exit %d %q", i, r.code, r.out)
		}
		wantChanges(t, ws, s, "A f")
	}
}

// TestLayerWorktree: in a worktree whose git directory lies outside the
// workspace, both are layered (the workspace and the common git
// directory): a commit stays in the layer until it is applied, and is
// then the branch's.
func TestLayerWorktree(t *testing.T) {
	requireNamespaces(t)
	requireGit(t)
	main := newRepo(t)
	wt := filepath.Join(t.TempDir(), "wt")
	git(t, main, "worktree", "add", "-q", "-b", "feature", wt)
	before := snapshot(t, main) + snapshot(t, wt)
	r, l, s := layered(t, nil, wt, `set -e
echo feature >> README
git add README && git commit -qm feature
git log --oneline | wc -l`)
	if r.code != 0 || r.out != "2\n" {
		t.Fatalf("commit in a worktree: exit %d\n%s", r.code, r.out)
	}
	if got := l.Roots(); !slices.Contains(got, filepath.Join(main, ".git")) || !slices.Contains(got, wt) {
		t.Fatalf("layer roots %v, want the worktree and the common git directory", got)
	}
	if after := snapshot(t, main) + snapshot(t, wt); after != before {
		t.Fatal("the commit reached the real trees before apply")
	}
	if res, err := s.Apply(context.Background(), nil, nil, ""); err != nil || len(res.Failed) > 0 {
		t.Fatalf("apply: %v %v", err, res)
	}
	if got := git(t, main, "log", "-1", "--format=%s", "feature"); got != "feature" {
		t.Fatalf("feature branch at %q after apply", got)
	}
}

// TestLayerInheritedWorkingDirectory: a command started without a
// working directory of its own (exec.Cmd.Dir empty) inherits the
// process's, which is the workspace: it starts in the overlay too, with
// both starts (the mounting thread or helper enters it again).
func TestLayerInheritedWorkingDirectory(t *testing.T) {
	requireNamespaces(t)
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(ws)
	for _, d := range []bool{false, true} {
		direct = d
		r, _, s := layered(t, nil, ws, `echo x > rel && pwd`)
		direct = false
		if r.code != 0 || r.out != ws+"\n" {
			t.Fatalf("direct=%v: exit %d %q", d, r.code, r.out)
		}
		if got := changed(ws, s); !slices.Equal(got, []string{"A rel"}) {
			t.Fatalf("direct=%v: changes %v", d, got)
		}
	}
}

// TestLayerShared: two commands in a world over one layer's overlays,
// the first over the layer's Spec, the second over Layer.Share's, with
// either launcher and the overlays premounted (layer.Layer.Premount, as
// root) or held once the first command's mount made them
// (layer.Layer.Hold: made in this process as root; rootless, by the
// helper in the world's user namespace, which hands them over, and
// cloned by the second command's helper): the first command, which
// looked a path up before the second created the file there, sees the
// file at once (one overlay: two overlays of the same directory would
// not), the layer holds the second's change, and neither command holds
// a descriptor beyond 0, 1 and 2 (the mount descriptors and the
// helpers' sockets stay out of the command).
func TestLayerShared(t *testing.T) {
	rootless := requireNamespaces(t).Rootless
	for _, mode := range []string{"premount", "hold"} {
		for _, d := range []bool{false, true} {
			t.Run(mode+"/"+map[bool]string{false: "helper", true: "direct"}[d], func(t *testing.T) {
				if mode == "premount" && rootless {
					t.Skip("a rootless engine cannot premount a layer (overlayfs is made in the user namespace that mounts it)")
				}
				direct = d
				defer func() { direct = false }()
				testLayerShared(t, mode == "premount")
			})
		}
	}
}

func testLayerShared(t *testing.T, premount bool) {
	w := newWorld(t, sandbox.WorldOptions{})
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	roots, err := sandbox.WorkspaceRoots(ws)
	if err != nil {
		t.Fatal(err)
	}
	l := newLayer(t, roots, "")
	if !premount {
		l.Hold()
	} else if err := l.Premount(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Share(); premount == errors.Is(err, layer.ErrNotShared) {
		t.Fatalf("Share before the first command (premounted: %v): %v", premount, err)
	}
	spec := l.Spec()
	log := startLayered(t, sandbox.Options{Roots: roots, Layer: &spec, World: w, Dir: ws}, ws,
		`ls /proc/$$/fd; test -f ready; echo waiting; while [ ! -f ready ]; do sleep 0.02; done; cat ready`)
	testenv.Eventually(t, 20*time.Second, func() bool { return strings.Contains(log(), "waiting") }, "the first command started: %q", log())
	shared, err := l.Share()
	if err != nil {
		t.Fatal(err)
	}
	// ready is written aside and renamed: the first command, polling for
	// it, could otherwise find it made but still empty.
	r := runOpts(t, sandbox.Options{Roots: roots, Layer: &shared, World: w, Dir: ws}, nil, ws, `ls /proc/$$/fd; echo x > ready.new && mv ready.new ready`)
	if r.code != 0 || r.out != "0\n1\n2\n" {
		t.Fatalf("the second command: exit %d %q", r.code, r.out)
	}
	testenv.Eventually(t, 20*time.Second, func() bool { return strings.HasSuffix(log(), "x\n") }, "the first command saw the second's file: %q", log())
	if got := log(); got != "0\n1\n2\nwaiting\nx\n" {
		t.Fatalf("the first command: %q", got)
	}
	l.Unshare()
	if _, err := l.Share(); !errors.Is(err, layer.ErrNotShared) {
		t.Fatalf("Share after Unshare: %v", err)
	}
	s, err := l.Diff()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := changed(ws, s); !slices.Equal(got, []string{"A ready"}) {
		t.Fatalf("changes %v", got)
	}
	if entries, _ := os.ReadDir(ws); len(entries) != 0 {
		t.Fatalf("the real workspace got %d entries", len(entries))
	}
}

// startLayered starts command with opts in dir and leaves it running
// (killed with its process group and cgroup at the end of the test); the
// function it returns reads what the command wrote so far.
func startLayered(t *testing.T, opts sandbox.Options, dir, command string) func() string {
	t.Helper()
	sc, cg := prepareOpts(t, opts, command)
	cmd := exec.Command(sc.Path, sc.Args[1:]...)
	cmd.Args[0] = sc.Args[0]
	cmd.Dir, cmd.Env = dir, withEnv(os.Environ(), sc.Env)
	logf, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devNull(t), logf, logf
	cmd.SysProcAttr = sysProcAttr(cg)
	err = start(sc, cmd)
	logf.Close()
	if err != nil {
		t.Fatal(err)
	}
	g := testenv.GroupOf(t, cmd.Process.Pid)
	t.Cleanup(func() {
		g.Kill()
		_ = cmd.Wait()
		_ = sc.Cleanup(endCgroup(cg))
	})
	return func() string {
		b, _ := os.ReadFile(logf.Name())
		return string(b)
	}
}
