package engine_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
	"github.com/bashvisor/bashvisor/safety"
)

// The security review's round 4 (issue 29), through the engine with real
// processes: each command is started as the review started it, and what
// the review sent or ran is sent or run; the sentinel file (SENTINEL in
// the texts) must not appear and the call must be refused. A control
// runs the same command with the person's approval (or, for what locked
// denies, with no profile), so the sentinel proves the payload runs code:
// a test that cannot fail proves nothing.

// review4Stdin are M1's 16 background jobs whose stdin takes input sent
// later with bash_write, under the standard profile, and what the review
// sent.
var review4Stdin = []struct{ name, cmd, payload string }{
	{"xargs-env", "xargs env", "touch SENTINEL\n"},
	{"xargs-awk", "xargs awk", `'BEGIN{system("touch SENTINEL")}'` + "\n"},
	{"xargs-perl-e", "xargs perl -e", `'system("touch SENTINEL")'` + "\n"},
	{"xargs-python3-c", "xargs python3 -c", `'import os; os.system("touch SENTINEL")'` + "\n"},
	{"xargs-git", "xargs git", `-c 'alias.x=!touch SENTINEL' x` + "\n"},
	{"xargs-find", "xargs find", ". -maxdepth 0 -exec touch SENTINEL ;\n"},
	{"read-let", `read -r l; let "$l"`, "x[$(touch SENTINEL)]=1\n"},
	{"read-arith", `read -r l; (( l ))`, "x[$(touch SENTINEL)]\n"},
	{"read-dbl-bracket-eq", `read -r l; [[ $l -eq 1 ]]`, "x[$(touch SENTINEL)]\n"},
	{"read-test-v", `read -r l; test -v "$l"`, "x[$(touch SENTINEL)]\n"},
	{"read-printf-v", `read -r l; printf -v "$l" x`, "x[$(touch SENTINEL)]\n"},
	{"read-declare", `read -r l; declare "$l"`, "x[$(touch SENTINEL)]=1\n"},
	{"read-mapfile-C", `read -r l; mapfile -C "$l" -c 1 a`, "touch SENTINEL;:\none\ntwo\n"},
	{"python3-exec-stdin", `python3 -c 'import sys; exec(sys.stdin.read())'`, `import os; os.system("touch SENTINEL")` + "\n"},
	{"perl-eval-stdin", `perl -e 'eval <STDIN>'`, `system("touch SENTINEL");` + "\n"},
	{"npm-exec-bash", "npm exec -- bash", "touch SENTINEL\n"},
}

// TestReview4StdinSentinel: M1. Every job asks; approved, the same job
// fed the same input makes the sentinel.
func TestReview4StdinSentinel(t *testing.T) {
	e := newEngine(t, func(c *engine.Config) { c.Permissions, _ = safety.Preset("standard") })
	for _, c := range review4Stdin {
		t.Run(c.name, func(t *testing.T) {
			testenv.NeedsTool(t, tool(c.cmd))
			dir := t.TempDir()
			sentinel := filepath.Join(dir, "sent")
			payload := strings.ReplaceAll(c.payload, "SENTINEL", sentinel)
			tc := engine.ToolContext{WorkingDir: dir, ConversationID: "m1-" + c.name}
			in := engine.Input{Command: c.cmd, Mode: engine.ModeBackground, Stdin: engine.StdinPipe}
			r := e.Run(context.Background(), tc, in)
			if r.Status != engine.StatusNeedsApproval {
				t.Errorf("%q: %s %q, want needs_approval", c.cmd, r.Status, r.Output)
			}
			feed(t, e, tc, r, payload)
			if _, err := os.Stat(sentinel); err == nil {
				t.Fatalf("%q fed %q made the sentinel", c.cmd, payload)
			}
			tc.Approved = true
			r = e.Run(context.Background(), tc, in)
			if r.Status != engine.StatusStarted {
				t.Fatalf("approved %q: %s %q", c.cmd, r.Status, r.Output)
			}
			feed(t, e, tc, r, payload)
			if _, err := os.Stat(sentinel); err != nil {
				t.Fatalf("control: approved %q fed %q made no sentinel (the payload runs nothing): %v", c.cmd, payload, err)
			}
		})
	}
}

// tool is the program a review command needs: what xargs runs, bash for
// a builtin, the command's program otherwise.
func tool(cmd string) string {
	f := strings.Fields(cmd)
	switch f[0] {
	case "xargs":
		return f[1]
	case "read":
		return "bash"
	}
	return f[0]
}

// feed sends payload to r's job, if it started, closes its stdin and
// waits for it to end.
func feed(t *testing.T, e *engine.Engine, tc engine.ToolContext, r engine.Result, payload string) {
	t.Helper()
	if r.JobID == "" {
		return
	}
	if err := e.Write(context.Background(), tc, r.JobID, []byte(payload), true); err != nil {
		t.Errorf("write to %s: %v", r.JobID, err)
	}
	waitJob(t, e, r.JobID, tc.ConversationID)
}

// review4Profiles are M2's commands that ran code (or wrote a file)
// through what locked and guarded allowed as reads. (date -s and hostname
// NAME are safety's TestReview4Profiles: run for real they would change
// the host.)
var review4Profiles = []struct{ name, cmd, tool string }{
	{"test-v-subscript", `test -v 'x[$(touch SENTINEL)]'`, "bash"},
	{"bracket-v-subscript", `[ -v 'x[$(touch SENTINEL)]' ]`, "bash"},
	{"printf-v-subscript", `printf -v 'x[$(touch SENTINEL)]' x`, "bash"},
	{"rg-pre", `rg --pre sh x <(printf 'touch SENTINEL\n')`, "rg"},
	{"sort-o", `sort -o SENTINEL <(printf 'x\n')`, "sort"},
}

// TestReview4ProfilesSentinel: M2. Unsandboxed, locked denies and guarded
// asks; under guarded in the read-only sandbox (where a contained ask runs
// without asking) the kernel keeps the sentinel out of the workspace.
// With no profile and approved (the safety rules ask about rg --pre sh)
// the same command makes it.
func TestReview4ProfilesSentinel(t *testing.T) {
	engines := map[string]*engine.Engine{}
	for _, name := range []string{"none", "locked", "guarded"} {
		engines[name] = newEngine(t, func(c *engine.Config) {
			if name != "none" {
				c.Permissions, _ = safety.Preset(name)
			}
		})
	}
	want := map[string]engine.Status{"locked": engine.StatusDenied, "guarded": engine.StatusNeedsApproval}
	for _, c := range review4Profiles {
		t.Run(c.name, func(t *testing.T) {
			testenv.NeedsTool(t, c.tool)
			run := func(profile string, sandbox engine.Sandbox, approved bool) (engine.Result, bool) {
				dir := t.TempDir()
				sentinel := filepath.Join(dir, "sent")
				tc := engine.ToolContext{WorkingDir: dir, ConversationID: "m2", Sandbox: sandbox, Approved: approved}
				r := engines[profile].Run(context.Background(), tc, engine.Input{Command: strings.ReplaceAll(c.cmd, "SENTINEL", sentinel)})
				_, err := os.Stat(sentinel)
				return r, err == nil
			}
			for _, profile := range []string{"locked", "guarded"} {
				if r, made := run(profile, engine.Sandbox{}, false); r.Status != want[profile] || made {
					t.Errorf("%s, unsandboxed: %s %q, sentinel made: %v; want %s and none", profile, r.Status, r.Output, made, want[profile])
				}
			}
			t.Run("read-only", func(t *testing.T) {
				needNamespaces(t)
				if r, made := run("guarded", engine.Sandbox{Profile: engine.ReadOnly}, false); made {
					t.Errorf("guarded, read-only sandbox: %s %q made the sentinel", r.Status, r.Output)
				}
			})
			if r, made := run("none", engine.Sandbox{}, true); !made {
				t.Fatalf("control: approved with no profile, %q made no sentinel: %s %q", c.cmd, r.Status, r.Output)
			}
		})
	}
}

// TestStageAllAndCommitIsApprovable: nothing a person could approve is a
// block. `git add . && git commit` (what agents end a task with) asks
// under every profile; approved, it commits.
func TestStageAllAndCommitIsApprovable(t *testing.T) {
	for _, name := range []string{"none", "standard", "guarded"} {
		t.Run(name, func(t *testing.T) {
			e := newEngine(t, func(c *engine.Config) {
				if name != "none" {
					c.Permissions, _ = safety.Preset(name)
				}
			})
			dir := gitRepo(t)
			tc := engine.ToolContext{WorkingDir: dir, ConversationID: "c"}
			in := engine.Input{Command: "git add . && git commit -qm all"}
			if r := e.Run(context.Background(), tc, in); r.Status != engine.StatusNeedsApproval || staged(t, dir) != "" {
				t.Fatalf("unapproved: %s %q, staged %q", r.Status, r.Output, staged(t, dir))
			}
			tc.Approved = true
			if r := e.Run(context.Background(), tc, in); r.Status != engine.StatusOK {
				t.Fatalf("approved: %s %q", r.Status, r.Output)
			}
			out, err := exec.Command("git", "-C", dir, "log", "--format=%s", "--name-only").Output()
			if err != nil || !strings.Contains(string(out), "all\n\nuntracked.txt") {
				t.Fatalf("no commit of untracked.txt: %q %v", out, err)
			}
		})
	}
}
