package engine_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// A change report names the working tree's files first and sums up git's
// own files in words: a commit of a.txt reads "M a.txt; git: committed
// on main", never ".git/COMMIT_EDITMSG, .git/index, … and 4 more" with
// a.txt hidden; a new branch, a read-only git status (index refreshed)
// and git init are told in words too; the API's Changes still list every
// path, each once.
func TestChangeReportSummarisesGit(t *testing.T) {
	needNamespaces(t)
	e := newEngine(t)
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
	for _, c := range []struct{ cmd, line string }{
		{`echo x >> README && echo n > a.txt && git add README a.txt && git commit -qm two`,
			"[changed 2 files: M README, A a.txt; git: committed on main, index updated]"},
		{`git branch feature`, "[git: branch feature created]"},
		{`git checkout -q feature`, "[git: HEAD switched, index updated]"},
		{`git checkout -q main && echo y > b.txt && git add b.txt`, "[changed 1 file: A b.txt; git: HEAD switched, index updated]"},
		{`git checkout -q --detach && git commit -q --allow-empty -m detached`, "[git: committed on a detached HEAD, index updated]"},
		{`git checkout -q main`, "[changed 1 file: D b.txt; git: HEAD switched, index updated]"},
		{`git init -q sub`, "[git: repository created]"},
	} {
		r := run(c.cmd)
		if !strings.HasSuffix(r.Output, c.line) {
			t.Errorf("%s:\n got %q\nwant suffix %q", c.cmd, r.Output, c.line)
		}
		if strings.Count(r.Output, "\n[") > 1 || strings.Contains(r.Output, ".git/") {
			t.Errorf("%s: more than one line, or git's paths: %q", c.cmd, r.Output)
		}
		seen := map[string]bool{}
		for _, ch := range r.Changes {
			if seen[ch.Path] {
				t.Errorf("%s: %s listed twice in %+v", c.cmd, ch.Path, r.Changes)
			}
			seen[ch.Path] = true
		}
		if len(r.Changes) == 0 {
			t.Errorf("%s: no changes listed", c.cmd)
		}
	}
	u, err := e.Undo(context.Background(), tc, 2)
	if err != nil {
		t.Fatal(err)
	}
	if u.Text() != "[undid the last 2 commands: changed 2 files: A b.txt, D sub/; git: HEAD switched, index updated]" {
		t.Errorf("undo: %q", u.Text())
	}
}

// A background job that changed a file at a checkpoint and again at its
// end reports it once ("A w.log", not "A w.log, M w.log"), and its final
// report is printed once in bash_output's text (the completion lines of
// its output file), not again below it.
func TestJobReportOnce(t *testing.T) {
	needNamespaces(t)
	for _, off := range cgroupModes(t) {
		t.Run(cgroupsName(off), func(t *testing.T) {
			e := newEngine(t, func(c *engine.Config) { c.Cgroups.Off = off })
			dir := repo(t)
			tc := workspaceWrite(dir)
			r := e.Run(context.Background(), tc, engine.Input{Mode: engine.ModeBackground, Stdin: engine.StdinPipe,
				Command: `echo one > w.log && echo ready; read _; echo two >> w.log`})
			if r.Status != engine.StatusStarted {
				t.Fatalf("%s %q", r.Status, r.Output)
			}
			testenv.Eventually(t, 10*time.Second, func() bool {
				j, _ := e.Job(tc, r.JobID)
				return j.Bytes > 0
			}, "the job printed nothing")
			if next := e.Run(context.Background(), tc, engine.Input{Command: `cat w.log`}); next.Output != "one\n" {
				t.Fatalf("next command: %s %q", next.Status, next.Output)
			}
			if out, err := e.JobOutput(tc, r.JobID, 0, 0, 0); err != nil || !strings.Contains(out.Text(), "[changed 1 file: A w.log]") {
				t.Fatalf("bash_output while it runs: %v\n%s", err, out.Text())
			}
			if err := e.Write(context.Background(), tc, r.JobID, []byte("\n"), true); err != nil {
				t.Fatal(err)
			}
			j := jobEnded(t, e, tc, r.JobID)
			out, err := e.JobOutput(tc, r.JobID, 0, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			text := out.Text()
			if j.Status != engine.JobCompleted || strings.Count(text, "[changed 1 file: A w.log]") != 1 || strings.Contains(text, "M w.log") {
				t.Fatalf("%+v\n%s", j, text)
			}
			if len(j.Changes) != 1 || j.Changes[0] != (engine.Change{Path: "w.log", Kind: "A", Size: 8}) {
				t.Fatalf("job changes %+v", j.Changes)
			}
		})
	}
}

// A background job that ends while a later command runs over its layer
// cannot apply its changes then (the command cannot be frozen): its
// report says once that they are not in the workspace yet, never that
// they were not applied, and the later command's end applies and lists
// them.
func TestJobEndingDuringALaterCommand(t *testing.T) {
	needNamespaces(t)
	e := newEngine(t)
	dir := repo(t)
	tc := workspaceWrite(dir)
	job := e.Run(context.Background(), tc, engine.Input{Mode: engine.ModeBackground, Stdin: engine.StdinPipe,
		Command: `read _; echo a > a.txt`})
	if job.Status != engine.StatusStarted {
		t.Fatalf("%s %q", job.Status, job.Output)
	}
	later := make(chan engine.Result, 1)
	go func() {
		later <- e.Run(context.Background(), tc, engine.Input{Command: `echo started; sleep 3.17; echo b > b.txt`})
	}()
	testenv.Eventually(t, 20*time.Second, func() bool { return running("sleep\x003.17\x00") }, "the later command did not start")
	if err := e.Write(context.Background(), tc, job.JobID, []byte("\n"), true); err != nil {
		t.Fatal(err)
	}
	jobEnded(t, e, tc, job.JobID)
	r := <-later
	if r.Status != engine.StatusOK || !strings.Contains(r.Output, "A a.txt") || !strings.Contains(r.Output, "A b.txt") {
		t.Fatalf("later command: %s %q", r.Status, r.Output)
	}
	out, err := e.JobOutput(tc, job.JobID, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	text := out.Text()
	t.Logf("job output:\n%s", text)
	if strings.Contains(text, "were not applied") || strings.Count(text, "not in the workspace yet") != 1 {
		t.Fatalf("job output:\n%s", text)
	}
}

// running reports whether a process with this command line (its
// arguments, each ended by NUL) runs.
func running(cmdline string) bool {
	ds, _ := os.ReadDir("/proc")
	for _, d := range ds {
		if b, err := os.ReadFile("/proc/" + d.Name() + "/cmdline"); err == nil && string(b) == cmdline {
			return true
		}
	}
	return false
}
