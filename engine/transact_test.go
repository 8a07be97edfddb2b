package engine_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// gitOutside runs git in dir as the user would, outside the sandbox,
// with fsmonitor and hooks honoured.
func gitOutside(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	for k, v := range gitEnv {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// An agent's edit, build, test and commit in workspace-write: the
// changes reach the repository when each command ends, the result lists
// them (Changes and one line of text), and git outside sees the commit.
func TestWorkspaceWriteEditBuildTestCommit(t *testing.T) {
	needNamespaces(t)
	e := newEngine(t)
	dir := repo(t)
	os.WriteFile(filepath.Join(dir, "old.txt"), []byte("old\n"), 0o644)
	tc := workspaceWrite(dir)
	run := func(cmd string) engine.Result {
		t.Helper()
		r := e.Run(context.Background(), tc, engine.Input{Command: cmd})
		if r.Status != engine.StatusOK {
			t.Fatalf("%s: %s %q", cmd, r.Status, r.Output)
		}
		return r
	}
	r := run(`mkdir -p src && printf 'echo built\n' > src/a.sh && echo b > b.txt && rm old.txt`)
	if !strings.HasSuffix(r.Output, "[changed 3 files: D old.txt, A src/a.sh, A b.txt]") &&
		!strings.HasSuffix(r.Output, "[changed 3 files: A b.txt, D old.txt, A src/a.sh]") {
		t.Fatalf("change line: %q", r.Output)
	}
	want := map[string]string{"b.txt": "A", "old.txt": "D", "src/a.sh": "A"}
	if len(r.Changes) != 3 {
		t.Fatalf("changes: %+v", r.Changes)
	}
	for _, c := range r.Changes {
		if want[c.Path] != c.Kind {
			t.Fatalf("change %+v, want %v", c, want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "b.txt")); string(b) != "b\n" {
		t.Fatalf("b.txt: %q", b)
	}
	r = run(`bash src/a.sh > build.out && chmod +x src/a.sh && test "$(cat build.out)" = built && echo tests pass`)
	if !strings.HasPrefix(r.Output, "tests pass\n[changed 2 files: T src/a.sh, A build.out]") &&
		!strings.HasPrefix(r.Output, "tests pass\n[changed 2 files: A build.out, T src/a.sh]") {
		t.Fatalf("build: %q", r.Output)
	}
	r = run(`git add src b.txt build.out && git commit -qm "agent work" && git log --format=%s -1`)
	if r.Output != "agent work\n[git: committed on main, index updated]" {
		t.Fatalf("commit: %q", r.Output)
	}
	if got := gitOutside(t, dir, "log", "--format=%s", "-1"); got != "agent work\n" {
		t.Fatalf("git log outside: %q", got)
	}
	if got := gitOutside(t, dir, "status", "--short"); got != "" {
		t.Fatalf("git status outside: %q", got)
	}
	// A command that changes nothing reports nothing.
	if r := run(`git log -1 --format=%s >/dev/null; cat b.txt`); r.Output != "b\n" || r.Changes != nil {
		t.Fatalf("read-only command: %q %+v", r.Output, r.Changes)
	}
}

// The two attacks of the 2026-11-24 review, run by a foreground
// command: each command succeeds in its layer, its git changes are
// refused when it ends with a line that names them and what to do, and
// the user's git status outside the sandbox runs nothing.
// Rules git-commondir and git-new-config (gitpolicy's
// TestRuleCommondir, TestRuleNewConfig, TestAttackCommondir and
// TestAttackSubmoduleFsmonitor prove them on
// change sets).
func TestRuleCommondirAttackForeground(t *testing.T) { testGitAttack(t, commondirAttack, false) }
func TestRuleNewConfigSubmoduleAttackForeground(t *testing.T) {
	testGitAttack(t, submoduleAttack, false)
}

// The same attacks from background jobs.
func TestRuleCommondirAttackBackground(t *testing.T) { testGitAttack(t, commondirAttack, true) }
func TestRuleNewConfigSubmoduleAttackBackground(t *testing.T) {
	testGitAttack(t, submoduleAttack, true)
}

// An attack: its script (PWNED is the sentinel file's path) and the
// refusal line it must get.
type attack struct{ script, refusal, planted string }

var (
	// A commondir that points git at a directory the command filled with
	// its own config.
	commondirAttack = attack{
		script:  `mkdir -p evil/objects evil/refs && printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "touch PWNED"\n' > evil/config && echo ../evil > .git/commondir`,
		refusal: "[refused .git/commondir (git-commondir): ", planted: ".git/commondir",
	}
	// A nested repository whose config runs fsmonitor, registered as a
	// submodule.
	submoduleAttack = attack{
		script: `git init -q sub && git -C sub config core.fsmonitor "touch PWNED" && echo x > sub/f && git -C sub add f && git -C sub commit -qm s && ` +
			`printf '[submodule "sub"]\n\tpath = sub\n\turl = ./sub\n' > .gitmodules && git add .gitmodules sub`,
		refusal: "(git-new-config): ", planted: "sub/.git/config",
	}
)

// The same attacks by a foreground command that joined the layer of a
// background job still running (with cgroups or without, with either
// launcher; root or not: see transact's "Shared layers"): refused when
// the command ends (its checkpoint), and again when the job ends (the
// refused files stay in the shared layer, which the job sees).
func TestRuleCommondirAttackJoined(t *testing.T) {
	bothLaunchers(t, func(t *testing.T, mod func(*engine.Config)) { testJoinedAttack(t, commondirAttack, mod) })
}
func TestRuleNewConfigSubmoduleAttackJoined(t *testing.T) {
	testJoinedAttack(t, submoduleAttack)
}

func testJoinedAttack(t *testing.T, a attack, mod ...func(*engine.Config)) {
	needNamespaces(t)
	for _, off := range cgroupModes(t) {
		t.Run(cgroupsName(off), func(t *testing.T) { testJoinedAttackWith(t, a, off, mod...) })
	}
}

func testJoinedAttackWith(t *testing.T, a attack, off bool, mod ...func(*engine.Config)) {
	e := newEngine(t, append(mod, func(c *engine.Config) { c.Cgroups.Off = off })...)
	dir := repo(t)
	tc := workspaceWrite(dir)
	tc.Approved = true
	job := e.Run(context.Background(), tc, engine.Input{Mode: engine.ModeBackground, Stdin: engine.StdinPipe,
		Command: "echo started; read _; if test -e " + a.planted + "; then echo sees the planted file; fi"})
	if job.Status != engine.StatusStarted {
		t.Fatalf("%s %q", job.Status, job.Output)
	}
	waitFor(t, e, tc, job.JobID, "started")
	runGitAttack(t, e, tc, dir, a, false)
	if err := e.Write(context.Background(), tc, job.JobID, []byte("\n"), true); err != nil {
		t.Fatal(err)
	}
	j := jobEnded(t, e, tc, job.JobID)
	out, err := e.JobOutput(tc, job.JobID, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != engine.JobCompleted || !strings.Contains(out.Data, "sees the planted file") {
		t.Fatalf("job (the layer was not shared?): %+v\n%s", j, out.Data)
	}
	if len(j.Refused) == 0 || !strings.Contains(out.Data, a.refusal) {
		t.Fatalf("the job's end did not refuse the planted file again: %+v\n%s", j, out.Data)
	}
	if _, err := os.Lstat(filepath.Join(dir, a.planted)); err == nil {
		t.Fatalf("%s reached the workspace", a.planted)
	}
}

func testGitAttack(t *testing.T, a attack, background bool) {
	needNamespaces(t)
	e := newEngine(t)
	dir := repo(t)
	tc := workspaceWrite(dir)
	tc.Approved = true // the analysis asks before git config: the layer and the policy are tested here
	runGitAttack(t, e, tc, dir, a, background)
}

// runGitAttack runs attack a in a foreground command or a background
// job and checks it fails.
func runGitAttack(t *testing.T, e *engine.Engine, tc engine.ToolContext, dir string, a attack, background bool) {
	pwned := filepath.Join(t.TempDir(), "pwned")
	script := strings.ReplaceAll(a.script, "PWNED", pwned)
	var text string
	if background {
		r := e.Run(context.Background(), tc, engine.Input{Command: script, Mode: engine.ModeBackground})
		if r.Status != engine.StatusStarted {
			t.Fatalf("%s %q", r.Status, r.Output)
		}
		j := jobEnded(t, e, tc, r.JobID)
		if j.Status != engine.JobCompleted || len(j.Refused) == 0 {
			t.Fatalf("job: %+v", j)
		}
		out, err := e.JobOutput(tc, r.JobID, 0, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		text = out.Data
	} else {
		r := e.Run(context.Background(), tc, engine.Input{Command: script})
		if r.Status != engine.StatusOK || len(r.Refused) == 0 {
			t.Fatalf("%s %q %+v", r.Status, r.Output, r.Refused)
		}
		text = r.Output
	}
	if !strings.Contains(text, a.refusal) {
		t.Fatalf("no refusal line %q in %q", a.refusal, text)
	}
	if _, err := os.Lstat(filepath.Join(dir, a.planted)); err == nil {
		t.Fatalf("%s reached the workspace", a.planted)
	}
	gitOutside(t, dir, "status")
	if _, err := os.Lstat(pwned); err == nil {
		t.Fatal("the user's git status ran the planted command")
	}
}

// jobEnded waits for a background job to end and returns its info.
func jobEnded(t *testing.T, e *engine.Engine, tc engine.ToolContext, id string) engine.JobInfo {
	t.Helper()
	var j engine.JobInfo
	testenv.Eventually(t, 20*time.Second, func() bool {
		var err error
		if j, err = e.Job(tc, id); err != nil {
			t.Fatal(err)
		}
		return j.Status != engine.JobRunning
	}, "job %s did not end", id)
	return j
}

// Undo takes back the last commands that changed something (not the
// ones that changed nothing), and refuses, naming the file and changing
// nothing, when the user changed a file since.
func TestUndoLastCommands(t *testing.T) {
	needNamespaces(t)
	e := newEngine(t)
	dir := repo(t)
	tc := workspaceWrite(dir)
	for _, cmd := range []string{`echo one > a.txt`, `echo two > a.txt && echo b > b.txt`, `cat a.txt`} {
		if r := e.Run(context.Background(), tc, engine.Input{Command: cmd}); r.Status != engine.StatusOK {
			t.Fatalf("%s: %s %q", cmd, r.Status, r.Output)
		}
	}
	u, err := e.Undo(context.Background(), tc, 1)
	if err != nil {
		t.Fatal(err)
	}
	if u.Text() != "[undid the last command: changed 2 files: M a.txt, D b.txt]" {
		t.Fatalf("undo text %q", u.Text())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "one\n" || fileExists(filepath.Join(dir, "b.txt")) {
		t.Fatalf("after undo: a.txt %q", b)
	}
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("the user's\n"), 0o644)
	_, err = e.Undo(context.Background(), tc, 1)
	var conflict *engine.UndoConflictError
	if !errors.Is(err, engine.ErrUndoConflict) || !errors.As(err, &conflict) || len(conflict.Paths) != 1 ||
		!strings.Contains(err.Error(), filepath.Join(dir, "a.txt")) {
		t.Fatalf("undo over the user's change: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "the user's\n" {
		t.Fatal("a refused undo changed the file")
	}
	if _, err := e.Undo(context.Background(), tc, 5); !errors.Is(err, engine.ErrNothingToUndo) {
		t.Fatalf("too many steps: %v", err)
	}
	if err := e.EndConversation(context.Background(), tc.ConversationID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Undo(context.Background(), tc, 1); !errors.Is(err, engine.ErrNothingToUndo) {
		t.Fatalf("after the conversation ended: %v", err)
	}
}

// A background job's writes reach the workspace while it runs: before
// the conversation's next command starts (which reads them), and in
// its JobOutput's report; its last changes when it ends.
func TestBackgroundJobChangesSeenByNextCommand(t *testing.T) {
	needNamespaces(t)
	for _, off := range cgroupModes(t) { // checkpoints freeze the job's cgroup, or stop its processes
		t.Run(cgroupsName(off), func(t *testing.T) { testBackgroundJobChangesSeen(t, off) })
	}
}

func testBackgroundJobChangesSeen(t *testing.T, off bool) {
	e := newEngine(t, func(c *engine.Config) { c.Cgroups.Off = off })
	dir := repo(t)
	tc := workspaceWrite(dir)
	r := e.Run(context.Background(), tc, engine.Input{Mode: engine.ModeBackground, Stdin: engine.StdinPipe,
		Command: `mkdir -p dist && echo built > dist/app.js && echo ready; read _; echo last > dist/last.js`})
	if r.Status != engine.StatusStarted {
		t.Fatalf("%s %q", r.Status, r.Output)
	}
	testenv.Eventually(t, 10*time.Second, func() bool {
		j, _ := e.Job(tc, r.JobID)
		return j.Bytes > 0
	}, "the job printed nothing")
	next := e.Run(context.Background(), tc, engine.Input{Command: `cat dist/app.js`})
	if next.Status != engine.StatusOK || next.Output != "built\n" {
		t.Fatalf("next command: %s %q", next.Status, next.Output)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "dist", "app.js")); string(b) != "built\n" {
		t.Fatalf("the workspace has %q", b)
	}
	out, err := e.JobOutput(tc, r.JobID, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.Text(), "[the job's changes so far, applied to the workspace:]\n[changed 1 file: A dist/app.js]") {
		t.Fatalf("bash_output while it runs:\n%s", out.Text())
	}
	if err := e.Write(context.Background(), tc, r.JobID, []byte("\n"), true); err != nil {
		t.Fatal(err)
	}
	j := jobEnded(t, e, tc, r.JobID)
	if out, err = e.JobOutput(tc, r.JobID, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	if j.Status != engine.JobCompleted || !strings.Contains(out.Text(), "[changed 2 files: A dist/app.js, A dist/last.js]") {
		t.Fatalf("%+v\n%s", j, out.Text())
	}
	if len(j.Changes) != 2 || j.Changes[1].Path != "dist/last.js" {
		t.Fatalf("job changes %+v", j.Changes)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "dist", "last.js")); string(b) != "last\n" {
		t.Fatalf("last.js: %q", b)
	}
}

// A REPL in the workspace (python3 reading its program from bash_write,
// approved, workspace-write): it reads the workspace's files, and what
// it writes reaches the workspace — at the conversation's next command
// while it runs (a checkpoint: with cgroups, or without, as in the
// unprivileged CI pass), and when it ends — and is reported with the
// job.
func TestREPLInWorkspace(t *testing.T) {
	needNamespaces(t)
	testenv.NeedsTool(t, "python3")
	e := newEngine(t)
	dir := repo(t)
	if err := os.WriteFile(filepath.Join(dir, "in.txt"), []byte("data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tc := workspaceWrite(dir)
	approved := tc // a REPL fed later needs approval
	approved.Approved = true
	r := e.Run(context.Background(), approved, engine.Input{Mode: engine.ModeBackground, Stdin: engine.StdinPipe, Command: "python3 -i -q"})
	if r.Status != engine.StatusStarted {
		t.Fatalf("%s %q", r.Status, r.Output)
	}
	if err := e.Write(context.Background(), tc, r.JobID, []byte("f = open('repl.txt', 'w'); f.write('from repl\\n'); f.close(); print('read', open('in.txt').read().strip())\n"), false); err != nil {
		t.Fatal(err)
	}
	// "read data" comes after repl.txt is written and closed: an
	// interactive python writes its output at once, so a line printed
	// before the write could be read (and the next command run) before
	// the file exists, and the next command's checkpoint would report the
	// REPL's write as its own.
	waitFor(t, e, tc, r.JobID, "read data")
	next := e.Run(context.Background(), tc, engine.Input{Command: "cat repl.txt"})
	if next.Status != engine.StatusOK || next.Output != "from repl\n" {
		t.Fatalf("the next command while the REPL runs: %s %q", next.Status, next.Output)
	}
	if err := e.Write(context.Background(), tc, r.JobID, nil, true); err != nil {
		t.Fatal(err)
	}
	j := jobEnded(t, e, tc, r.JobID)
	if j.Status != engine.JobCompleted {
		t.Fatalf("%+v", j)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "repl.txt")); string(b) != "from repl\n" {
		t.Fatalf("the workspace has %q", b)
	}
	if !strings.Contains(j.ChangeReport, "A repl.txt") {
		t.Fatalf("report %q", j.ChangeReport)
	}
}

// A background job sees, while it runs, the files the conversation's
// later commands make: a loop that waits for a file another command
// creates ends (after looking the file up before it existed), and one
// that reads a file another command rewrites sees the new content: the
// later commands join the job's layer (one overlay; with either
// launcher, root or not, with cgroups or without); each command's
// report has what it changed.
func TestBackgroundJobSeesLaterCommandsFiles(t *testing.T) {
	bothLaunchers(t, testJobSeesLaterFiles)
}

func testJobSeesLaterFiles(t *testing.T, mod func(*engine.Config)) {
	needNamespaces(t)
	modes := cgroupModes(t) // a shared layer's checkpoints freeze the job's cgroup, or stop its processes
	for _, tt := range []struct {
		name, before, job, change, want, line string
	}{
		// The job waits for the content, not the name: `echo x > ready`
		// creates the file before it writes x.
		{name: "created", job: `test -f ready; echo waiting; until [ "$(cat ready 2>/dev/null)" = x ]; do sleep 0.05; done; echo "saw $(cat ready)"`,
			change: `echo x > ready`, want: "saw x", line: "[changed 1 file: A ready]"},
		{name: "rewritten", before: `echo v1 > f`,
			job:    `last=; while :; do c=$(cat f); [ "$c" != "$last" ] && echo "waiting: $c"; last=$c; [ "$c" = v2 ] && exit 0; sleep 0.05; done`,
			change: `echo v2 > f`, want: "waiting: v2", line: "[changed 1 file: M f]"},
		{name: "replaced", before: `echo v1 > f`,
			job:    `last=; while :; do c=$(cat f); [ "$c" != "$last" ] && echo "waiting: $c"; last=$c; [ "$c" = v2 ] && exit 0; sleep 0.05; done`,
			change: `echo v2 > f.new && mv f.new f`, want: "waiting: v2", line: "[changed 1 file: M f]"},
	} {
		for _, off := range modes {
			t.Run(tt.name+"/"+cgroupsName(off), func(t *testing.T) {
				e := newEngine(t, mod, func(c *engine.Config) { c.Cgroups.Off = off })
				dir := repo(t)
				tc := workspaceWrite(dir)
				run := func(cmd string) engine.Result {
					t.Helper()
					r := e.Run(context.Background(), tc, engine.Input{Command: cmd})
					if r.Status != engine.StatusOK {
						t.Fatalf("%s: %s %q", cmd, r.Status, r.Output)
					}
					return r
				}
				if tt.before != "" {
					run(tt.before)
				}
				job := e.Run(context.Background(), tc, engine.Input{Mode: engine.ModeBackground, Command: tt.job})
				if job.Status != engine.StatusStarted {
					t.Fatalf("%s %q", job.Status, job.Output)
				}
				waitFor(t, e, tc, job.JobID, "waiting")
				if r := run(tt.change); !strings.HasSuffix(r.Output, tt.line) || len(r.Changes) != 1 {
					t.Fatalf("the command's report: %q %+v", r.Output, r.Changes)
				}
				waitFor(t, e, tc, job.JobID, tt.want)
				if j := jobEnded(t, e, tc, job.JobID); j.Status != engine.JobCompleted {
					t.Fatalf("%+v", j)
				}
				if r := run(`cat ready 2>/dev/null || cat f`); r.Output != "x\n" && r.Output != "v2\n" {
					t.Fatalf("the workspace after the job: %q", r.Output)
				}
			})
		}
	}
}

// A background job and a command that joined its layer start with
// descriptors 0, 1 and 2 only, with either launcher: the overlays'
// mount descriptors (premounted or held, and their clones) and the
// rootless helpers' sockets for them stay out of the commands.
func TestJoinedCommandsOnlyStandardDescriptors(t *testing.T) {
	bothLaunchers(t, func(t *testing.T, mod func(*engine.Config)) {
		needNamespaces(t)
		e := newEngine(t, mod)
		dir := repo(t)
		tc := workspaceWrite(dir)
		job := e.Run(context.Background(), tc, engine.Input{Mode: engine.ModeBackground,
			Command: `ls /proc/$$/fd; echo waiting; while [ ! -f ready ]; do sleep 0.05; done; echo saw it`})
		if job.Status != engine.StatusStarted {
			t.Fatalf("%s %q", job.Status, job.Output)
		}
		waitFor(t, e, tc, job.JobID, "waiting")
		r := e.Run(context.Background(), tc, engine.Input{Command: `ls /proc/$$/fd; echo x > ready`})
		if r.Status != engine.StatusOK || r.Output != "0\n1\n2\n[changed 1 file: A ready]" {
			t.Fatalf("the joined command: %s %q", r.Status, r.Output)
		}
		waitFor(t, e, tc, job.JobID, "saw it") // it joined: one overlay
		jobEnded(t, e, tc, job.JobID)
		out, err := e.JobOutput(tc, job.JobID, 0, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(out.Data, "0\n1\n2\nwaiting\n") {
			t.Fatalf("the job: %q", out.Data)
		}
	})
}

// A command that joined a running job's layer reports what it changed
// (the job's report does not list it again), and its changes cannot be
// undone while the job runs (the job would go on seeing them, and they
// would be applied again): Undo refuses, and works once the job ended.
func TestUndoJoinedCommandAfterJob(t *testing.T) {
	needNamespaces(t)
	e := newEngine(t, func(c *engine.Config) { c.Cgroups.Off = true }) // the freezer without cgroups (with: TestBackgroundJobSeesLaterCommandsFiles)
	dir := repo(t)
	tc := workspaceWrite(dir)
	job := e.Run(context.Background(), tc, engine.Input{Mode: engine.ModeBackground, Stdin: engine.StdinPipe,
		Command: `echo started; read _; cat a.txt; echo job > job.txt`})
	if job.Status != engine.StatusStarted {
		t.Fatalf("%s %q", job.Status, job.Output)
	}
	waitFor(t, e, tc, job.JobID, "started")
	r := e.Run(context.Background(), tc, engine.Input{Command: `echo x > a.txt`})
	if r.Status != engine.StatusOK || !strings.HasSuffix(r.Output, "[changed 1 file: A a.txt]") {
		t.Fatalf("%s %q", r.Status, r.Output)
	}
	if _, err := e.Undo(context.Background(), tc, 1); !errors.Is(err, engine.ErrUndoConflict) || !strings.Contains(err.Error(), "background job") {
		t.Fatalf("undo while the job runs: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "x\n" {
		t.Fatalf("a refused undo changed a.txt: %q", b)
	}
	if err := e.Write(context.Background(), tc, job.JobID, []byte("\n"), true); err != nil {
		t.Fatal(err)
	}
	j := jobEnded(t, e, tc, job.JobID)
	out, err := e.JobOutput(tc, job.JobID, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != engine.JobCompleted || !strings.Contains(out.Data, "started\nx\n") || len(j.Changes) != 1 || j.Changes[0].Path != "job.txt" {
		t.Fatalf("job: %+v\n%s", j, out.Data)
	}
	u, err := e.Undo(context.Background(), tc, 2)
	if err != nil {
		t.Fatal(err)
	}
	if fileExists(filepath.Join(dir, "a.txt")) || fileExists(filepath.Join(dir, "job.txt")) {
		t.Fatalf("after undo: %q", u.Text())
	}
}
