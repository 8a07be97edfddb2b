package engine_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
)

// changeList renders a result's changes as "T a/ A b" for messages and
// comparisons.
func changeList(r engine.Result) string {
	var s []string
	for _, c := range r.Changes {
		s = append(s, c.Kind+" "+c.Path)
	}
	return strings.Join(s, " ")
}

// TestChmodZeroDirRoundTrip: in workspace-write, `chmod 0 a` on a
// directory with files below it applies, the next command of the
// conversation runs (the engine reads the layer it owns whatever
// permissions the command left there: it failed before with "layer:
// open .../u0/a: permission denied" as an unprivileged user), and
// `chmod 755 a` gives the files back, as root and as an unprivileged
// user (.ci/unprivileged). An unprivileged engine cannot read the
// real a while it is mode 0, so gitpolicy's repository walk misses it
// and holds the last change for a person's review (rule git-walk,
// fail closed), which the test accepts.
func TestChmodZeroDirRoundTrip(t *testing.T) {
	needNamespaces(t)
	e := newEngine(t)
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	// Registered after TempDir, so it runs first: the directory can be
	// removed whatever step failed.
	t.Cleanup(func() { os.Chmod(filepath.Join(dir, "a"), 0o755) })
	tc := engine.ToolContext{WorkingDir: dir, ConversationID: "modes",
		Sandbox: engine.Sandbox{Profile: engine.WorkspaceWrite}}
	root := os.Geteuid() == 0
	steps := []struct{ cmd, out, changes string }{
		{`mkdir -p a/b && echo x > a/b/f`, "[changed 1 file: A a/b/f]", "A a/b/f"},
		{`chmod 0 a`, "[changed 1 file: T a/]", "T a/"},
		{`true`, "", ""},
		{`chmod 755 a && cat a/b/f`, "x\n[changed 1 file: T a/]", "T a/"},
	}
	for _, s := range steps {
		r := e.Run(context.Background(), tc, engine.Input{Command: s.cmd})
		if !root && strings.HasPrefix(s.cmd, "chmod 755") {
			reviewWalkHold(t, e, tc, r)
			break
		}
		if r.Status != engine.StatusOK || r.Output != s.out || changeList(r) != s.changes {
			t.Fatalf("%s: %s %q changes %q, want ok %q changes %q", s.cmd, r.Status, r.Output, changeList(r), s.out, s.changes)
		}
		if s.cmd == `chmod 0 a` {
			if fi, err := os.Lstat(filepath.Join(dir, "a")); err != nil || fi.Mode() != os.ModeDir {
				t.Fatalf("after chmod 0 a: %v %v", fi.Mode(), err)
			}
		}
	}
	fi, err := os.Lstat(filepath.Join(dir, "a"))
	if err != nil || fi.Mode() != os.ModeDir|0o755 {
		t.Fatalf("a: %v %v", fi.Mode(), err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a", "b", "f")); string(b) != "x\n" {
		t.Fatalf("a/b/f: %q %v", b, err)
	}
}

// reviewWalkHold checks that r, the result of an unprivileged engine's
// `chmod 755 a && cat a/b/f` over a mode 0 a, ran and had its change
// held by gitpolicy's walk (which could not read a), and accepts it.
func reviewWalkHold(t *testing.T, e *engine.Engine, tc engine.ToolContext, r engine.Result) {
	t.Helper()
	if r.Status != engine.StatusOK || !strings.HasPrefix(r.Output, "x\n[refused a (git-walk): ") || r.Changes != nil {
		t.Fatalf("chmod 755 a: %s %q changes %q, want the change held by git-walk", r.Status, r.Output, changeList(r))
	}
	hs, err := e.Held(context.Background(), tc)
	if err != nil || len(hs) != 1 {
		t.Fatalf("held: %+v %v", hs, err)
	}
	r, err = e.Review(context.Background(), tc, hs[0].ID, hs[0].Digest, true)
	if err != nil || changeList(r) != "T a/" {
		t.Fatalf("accept: %q changes %q %v", r.Output, changeList(r), err)
	}
}

// childWorkspaceNotOwned runs, as the unprivileged user
// TestWorkspaceNotOwned switched to, one workspace-write command in
// $BASHVISOR_TEST_WS (a directory the user does not own but may write)
// and prints its status and output.
func childWorkspaceNotOwned() {
	e, err := engine.New(testConfig())
	if err != nil {
		fmt.Println("engine:", err)
		os.Exit(1)
	}
	tc := engine.ToolContext{WorkingDir: os.Getenv("BASHVISOR_TEST_WS"), ConversationID: "ws",
		Sandbox: engine.Sandbox{Profile: engine.WorkspaceWrite}}
	for _, c := range strings.Split(os.Getenv("BASHVISOR_TEST_CMDS"), "\n") {
		r := e.Run(context.Background(), tc, engine.Input{Command: c})
		fmt.Printf("%s %q\n", r.Status, r.Output)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.Shutdown(ctx)
}

// TestWorkspaceNotOwned: an unprivileged engine runs workspace-write
// commands in a workspace the user does not own but may write (root's,
// mode 0777) as it runs them unrestricted: the files the command makes
// are the user's, and the workspace keeps its owner and mode, over several commands.
// Inside the sandbox the workspace shows the user as its owner (its
// upper directory's, which cannot be root's). It failed
// before with "lchown …: operation not permitted" (the layer gave its
// upper directory the workspace's owner). It runs as root, and switches
// to another user in a child (.ci/unprivileged's user cannot make a
// directory that is not its own).
func TestWorkspaceNotOwned(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a workspace another user does not own, and to switch to that user")
	}
	needNamespaces(t)
	const user = 4321 // no one's: not nobody (65534), which files of unmapped users show as in a user namespace
	base, bin := testBinaryForOthers(t, "bashvisor-notowned-")
	home, ws := filepath.Join(base, "home"), filepath.Join(base, "ws")
	for _, d := range []string{home, ws} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(home, user, user); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "BASHVISOR_TEST_CHILD=notowned", "BASHVISOR_TEST_WS=" + ws,
		"BASHVISOR_TEST_CMDS=echo hi > new && mkdir d && echo x > d/f && cat new\necho y >> d/f && rm new\nstat -c %u:%a .",
		"HOME=" + home, "TMPDIR=" + home}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: user, Gid: user}}
	out, err := cmd.CombinedOutput()
	want := "ok \"hi\\n[changed 2 files: A d/f, A new]\"\n" + "ok \"[changed 2 files: M d/f, D new]\"\n" +
		"ok \"4321:777\\n\"\n"
	if err != nil || string(out) != want {
		t.Fatalf("as uid 4321 in root's 0777 workspace: %v\n%s", err, out)
	}
	for _, p := range []string{"d", "d/f"} {
		fi, err := os.Lstat(filepath.Join(ws, p))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != user || st.Gid != user {
			t.Errorf("%s belongs to %d:%d, want the user's", p, st.Uid, st.Gid)
		}
	}
	fi, err := os.Lstat(ws)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || fi.Mode() != os.ModeDir|0o777 {
		t.Errorf("the workspace: %v %d", fi.Mode(), st.Uid)
	}
}
