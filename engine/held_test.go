package engine_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

const plantHook = `echo a > a.txt && printf '#!/bin/sh\necho hook\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit`

func exists(dir, rel string) bool {
	_, err := os.Lstat(filepath.Join(dir, rel))
	return err == nil
}

// reviewedModes are the ways a workspace-write call tc runs a command
// whose result is reviewed, each with the prefix its command needs to be
// one: contained (an ask, the planted hook), in hold mode, and in the
// read-only sandbox answering its ask (the kernel refuses the writes).
func reviewedModes(tc engine.ToolContext) map[string]struct {
	tc      engine.ToolContext
	command string
} {
	hold := tc
	hold.Review = "hold"
	ro := tc
	ro.Sandbox.Profile = engine.ReadOnly
	return map[string]struct {
		tc      engine.ToolContext
		command string
	}{
		"contained": {tc, plantHook + " && "},
		"hold":      {hold, ""},
		"read-only": {ro, plantHook + "; "},
	}
}

// runHeld runs plantHook and checks that the hook is held, named with
// its reason in the text, and a.txt applied.
func runHeld(t *testing.T, e *engine.Engine, tc engine.ToolContext) engine.HeldChanges {
	t.Helper()
	tc.Approved = true // the analyser asks for a hook written by name
	r := e.Run(context.Background(), tc, engine.Input{Command: plantHook})
	if r.Held == nil || len(r.Held.Changes) != 1 || r.Held.Changes[0].Path != ".git/hooks/pre-commit" || !strings.Contains(r.Held.Changes[0].Reason, "git-hooks") {
		t.Fatalf("held: %+v\n%s", r.Held, r.Output)
	}
	// The refused line names the hook; the held line says it waits for
	// review, and no path is named twice.
	if !strings.Contains(r.Output, "[refused .git/hooks/pre-commit (git-hooks)") || strings.Contains(r.Output, "[held: .git/hooks/pre-commit") ||
		!strings.Contains(r.Output, "[the refused changes are held, not applied") || !strings.Contains(r.Output, "digest "+r.Held.Digest) {
		t.Fatalf("text: %q", r.Output)
	}
	if !exists(tc.WorkingDir, "a.txt") || exists(tc.WorkingDir, ".git/hooks/pre-commit") {
		t.Fatal("a.txt not applied, or the hook applied")
	}
	hs, err := e.Held(context.Background(), tc)
	if err != nil || len(hs) != 1 || hs[0].Digest != r.Held.Digest {
		t.Fatalf("listed %+v %v", hs, err)
	}
	return hs[0]
}

// A hook policy refuses is held: a wrong digest applies nothing,
// accepting with the listed digest applies it (and Undo takes it
// back), rejecting discards it, and ending the conversation discards
// what is held.
func TestHeldChangesReview(t *testing.T) {
	needNamespaces(t)
	e := newEngine(t)
	dir := repo(t)
	tc := workspaceWrite(dir)
	ctx := context.Background()
	h := runHeld(t, e, tc)
	if _, err := e.Review(ctx, tc, h.ID, strings.Repeat("0", 64), true); !errors.Is(err, engine.ErrBadInput) || exists(dir, ".git/hooks/pre-commit") {
		t.Fatalf("a wrong digest: %v", err)
	}
	r, err := e.Review(ctx, tc, h.ID, h.Digest, true)
	if err != nil || !exists(dir, ".git/hooks/pre-commit") || len(r.Changes) != 1 || !strings.Contains(r.Output, "[accepted held change set") {
		t.Fatalf("accept: %+v %v", r, err)
	}
	if _, err := e.Undo(ctx, tc, 1); err != nil || exists(dir, ".git/hooks/pre-commit") {
		t.Fatalf("undo of the accept: %v", err)
	}
	h = runHeld(t, e, tc)
	if _, err := e.Review(ctx, tc, h.ID, "", false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Review(ctx, tc, h.ID, h.Digest, true); !errors.Is(err, engine.ErrBadInput) || exists(dir, ".git/hooks/pre-commit") {
		t.Fatalf("accept after reject: %v", err)
	}
	h = runHeld(t, e, tc)
	if err := e.EndConversation(ctx, tc.ConversationID); err != nil {
		t.Fatal(err)
	}
	if hs, err := e.Held(ctx, tc); err != nil || len(hs) != 0 {
		t.Fatalf("after the conversation ended: %+v %v", hs, err)
	}
	if _, err := e.Review(ctx, tc, h.ID, h.Digest, true); !errors.Is(err, engine.ErrBadInput) || exists(dir, ".git/hooks/pre-commit") {
		t.Fatalf("accept after the conversation ended: %v", err)
	}
}

// In the hold review mode nothing is applied until accepted; a callback
// (Config.OnHeld) that accepts applies the held changes before Run
// returns.
func TestHoldModeAndCallback(t *testing.T) {
	needNamespaces(t)
	ctx := context.Background()
	t.Run("hold", func(t *testing.T) {
		e := newEngine(t)
		dir := repo(t)
		tc := workspaceWrite(dir)
		tc.Review = "hold"
		r := e.Run(ctx, tc, engine.Input{Command: "echo b > b.txt"})
		if r.Status != engine.StatusOK || r.Held == nil || len(r.Changes) != 0 || exists(dir, "b.txt") {
			t.Fatalf("%+v", r)
		}
		if _, err := e.Review(ctx, tc, r.Held.ID, r.Held.Digest, true); err != nil || !exists(dir, "b.txt") {
			t.Fatal(err)
		}
		tc.Review = "sometimes"
		if r := e.Run(ctx, tc, engine.Input{Command: "true"}); !errors.Is(r.Err, engine.ErrBadInput) {
			t.Fatalf("an unknown mode: %+v", r)
		}
	})
	t.Run("callback", func(t *testing.T) {
		var offered []engine.HeldChanges
		e := newEngine(t, func(c *engine.Config) {
			c.Review = "hold"
			c.OnHeld = func(_ context.Context, _ engine.ToolContext, h engine.HeldChanges) bool {
				offered = append(offered, h)
				return strings.Contains(h.Command, "yes")
			}
		})
		dir := repo(t)
		tc := workspaceWrite(dir)
		r := e.Run(ctx, tc, engine.Input{Command: "echo yes > yes.txt"})
		if r.Held != nil || !exists(dir, "yes.txt") || len(r.Changes) != 1 || !strings.Contains(r.Output, "[accepted held change set") {
			t.Fatalf("accepted by the callback: %+v", r)
		}
		r = e.Run(ctx, tc, engine.Input{Command: "echo no > no.txt"})
		if r.Held == nil || exists(dir, "no.txt") || len(offered) != 2 {
			t.Fatalf("declined by the callback: %+v", r)
		}
	})
}

// Approve the result, not the command: in workspace-write, a command the
// safety analyser asks about (here one that writes a git hook) runs
// without asking when none of its effects can leave the layer, and what
// policy does not prove harmless is held for review; with a network
// grant, or writable roots besides the workspace, it still asks, as it
// does outside workspace-write.
func TestContainedAskRunsAndIsReviewed(t *testing.T) {
	needNamespaces(t)
	e := newEngine(t)
	testenv.Needf(t, testenv.Landlock, sandbox.Probe().Scoping, "no Landlock signal scoping (Linux 6.12+): a contained command's signals could leave it, so it asks")
	dir := repo(t)
	tc := workspaceWrite(dir)
	ctx := context.Background()
	r := e.Run(ctx, tc, engine.Input{Command: plantHook})
	if r.Status != engine.StatusOK || r.Held == nil || !exists(dir, "a.txt") || exists(dir, ".git/hooks/pre-commit") {
		t.Fatalf("contained: %s %q %+v", r.Status, r.Output, r.Held)
	}
	net := tc
	net.Sandbox.Network = []string{"example.com"}
	other := t.TempDir()
	wr := tc
	wr.Sandbox.Writable = []string{other}
	plain := engine.ToolContext{WorkingDir: dir, ConversationID: "plain"}
	for name, tc := range map[string]engine.ToolContext{"network": net, "writable": wr, "unrestricted": plain} {
		if r := e.Run(ctx, tc, engine.Input{Command: plantHook}); r.Status != engine.StatusNeedsApproval {
			t.Errorf("%s: %s %q", name, r.Status, r.Output)
		}
	}
}

// An unknown Config.Review is refused at New.
func TestReviewModeChecked(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.Review = "later"
	if e, err := engine.New(cfg); err == nil || !errors.Is(err, engine.ErrBadInput) {
		if e != nil {
			e.Shutdown(context.Background())
		}
		t.Fatalf("New with Review %q: %v", cfg.Review, err)
	}
}

// A contained command asks while a job of its conversation with a
// network grant runs (the world's network namespace then holds that
// job's egress proxy, resolver and carried listeners); once the job
// ended it runs and is reviewed again.
func TestContainedAsksWhileNetworkJobRuns(t *testing.T) {
	needNamespaces(t)
	e := newEngine(t)
	testenv.Needf(t, testenv.Landlock, sandbox.Probe().Scoping, "no Landlock signal scoping (Linux 6.12+): a contained command's signals could leave it, so it asks")
	dir := repo(t)
	tc := workspaceWrite(dir)
	ctx := context.Background()
	net := tc
	net.Sandbox = engine.Sandbox{Profile: engine.ReadOnly, Network: []string{"example.com"}}
	job := e.Run(ctx, net, engine.Input{Mode: engine.ModeBackground, Command: "sleep 600"})
	if job.Status != engine.StatusStarted {
		t.Fatalf("background: %s %q", job.Status, job.Output)
	}
	if r := e.Run(ctx, tc, engine.Input{Command: plantHook}); r.Status != engine.StatusNeedsApproval || exists(dir, "a.txt") {
		t.Fatalf("contained beside a network job: %s %q", r.Status, r.Output)
	}
	if _, err := e.Kill(ctx, net, job.JobID); err != nil {
		t.Fatal(err)
	}
	if r := e.Run(ctx, tc, engine.Input{Command: plantHook}); r.Status != engine.StatusOK || r.Held == nil || !exists(dir, "a.txt") {
		t.Fatalf("contained after the network job: %s %q %+v", r.Status, r.Output, r.Held)
	}
}

// Accepting does not overwrite a later edit: a held file the user wrote
// in the workspace after the command ran refuses the accept, naming it
// (an *UndoConflictError, matching ErrUndoConflict as well as
// ErrBadInput: the refusal's identity survives the supervisor), and
// nothing is applied; the set stays held and can be rejected.
func TestHeldAcceptAfterUserEdit(t *testing.T) {
	needNamespaces(t)
	e := newEngine(t)
	dir := repo(t)
	tc := workspaceWrite(dir)
	tc.Review = "hold"
	ctx := context.Background()
	r := e.Run(ctx, tc, engine.Input{Command: "echo command > b.txt && echo command >> README"})
	if r.Held == nil || exists(dir, "b.txt") {
		t.Fatalf("%+v", r)
	}
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("the user's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := e.Review(ctx, tc, r.Held.ID, r.Held.Digest, true)
	var conflict *engine.UndoConflictError
	if !errors.Is(err, engine.ErrBadInput) || !strings.Contains(err.Error(), "changed since the command ran at README;") ||
		!errors.Is(err, engine.ErrUndoConflict) || !errors.As(err, &conflict) || len(conflict.Paths) != 1 || filepath.Base(conflict.Paths[0]) != "README" {
		t.Fatalf("accept over the user's edit: %v (conflict %+v)", err, conflict)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "README")); string(b) != "the user's\n" || exists(dir, "b.txt") {
		t.Fatalf("applied: README %q, b.txt %v", b, exists(dir, "b.txt"))
	}
	if hs, err := e.Held(ctx, tc); err != nil || len(hs) != 1 {
		t.Fatalf("%+v %v", hs, err)
	}
	if _, err := e.Review(ctx, tc, r.Held.ID, "", false); err != nil {
		t.Fatal(err)
	}
}

// A conversation holds at most 64 change sets: the next command's
// result says its changes were not held but discarded, and what to do;
// it is not ok.
func TestHeldLimitSaid(t *testing.T) {
	needNamespaces(t)
	e := newEngine(t)
	dir := repo(t)
	tc := workspaceWrite(dir)
	tc.Review = "hold"
	ctx := context.Background()
	for i := range 64 {
		if r := e.Run(ctx, tc, engine.Input{Command: "echo x > f" + strconv.Itoa(i)}); r.Held == nil {
			t.Fatalf("command %d not held: %+v", i, r)
		}
	}
	r := e.Run(ctx, tc, engine.Input{Command: "echo x > last"})
	if r.Held != nil || r.Status == engine.StatusOK || exists(dir, "last") ||
		!strings.HasPrefix(r.Output, "[command failed: not all of its changes to the workspace were applied]\n") ||
		!strings.Contains(r.Output, "[the changes to hold were not held, and are discarded: the conversation holds 64 change sets for review already") {
		t.Fatalf("%+v", r)
	}
	if hs, err := e.Held(ctx, tc); err != nil || len(hs) != 64 || hs[0].ID != 1 {
		t.Fatalf("%d held, %v", len(hs), err)
	}
}

// The engine's CPU time spent on a principal's change set counts against
// its share: once a command with a large change set ended (held for
// review: its digest reads every byte), the engine counts a busy CPU
// (Load.BusyCPUs) while nothing runs, for a bounded time (as long as
// that work took); so does accepting it (the digest is read again).
func TestChangeSetCPUCharged(t *testing.T) {
	needNamespaces(t)
	e := newEngine(t, func(c *engine.Config) { c.Timeout = time.Minute })
	dir := repo(t)
	tc := workspaceWrite(dir)
	tc.Principal, tc.Review = "big", "hold"
	ctx := context.Background()
	r := e.Run(ctx, tc, engine.Input{Command: "head -c 128M /dev/zero > big && seq -f 'f%g' 1000 | xargs touch"})
	if r.Status != engine.StatusOK || r.Held == nil {
		t.Fatalf("%s %q", r.Status, r.Output)
	}
	chargedOnce(t, e, "the command")
	if _, err := e.Review(ctx, tc, r.Held.ID, r.Held.Digest, true); err != nil || !exists(dir, "big") {
		t.Fatal(err)
	}
	chargedOnce(t, e, "the accept")
}

// chargedOnce waits until the engine counts a busy CPU while nothing
// runs, and then until that charge ran out.
func chargedOnce(t *testing.T, e *engine.Engine, what string) {
	t.Helper()
	charged, start := false, time.Now()
	for time.Since(start) < 30*time.Second {
		l := e.Load()
		if l.Running == 0 && l.Jobs == 0 && l.BusyCPUs > 0 {
			charged = true
		}
		if charged && l.BusyCPUs == 0 {
			return // charged, and the charge ran out
		}
		if !charged && l.Running == 0 && time.Since(start) > 10*time.Second {
			break
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%s: charged %v; load now %+v", what, charged, e.Load())
}

// Accepting the held changes of a command whose processes were kept
// running over its layer (Lifecycle.KeepLeftovers) is refused with an
// error that matches ErrStray (and ErrBadInput) through the engine,
// nothing applied; rejecting them works. With and without cgroups.
func TestHeldStrayThroughEngine(t *testing.T) {
	needNamespaces(t)
	for _, off := range cgroupModes(t) {
		t.Run(cgroupsName(off), func(t *testing.T) {
			e := newEngine(t, func(c *engine.Config) { c.Cgroups.Off, c.Lifecycle.KeepLeftovers = off, true })
			dir := repo(t)
			tc := workspaceWrite(dir)
			ctx := context.Background()
			r := e.Run(ctx, tc, engine.Input{Command: `echo edit > h.txt; sleep 1 & echo "started $!"`})
			if pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(strings.SplitN(r.Output, "\n", 3)[1], "started "))); err == nil {
				defer waitGone(t, pid, 10*time.Second)
			}
			if r.Held == nil {
				t.Fatalf("not held: %s %q", r.Status, r.Output)
			}
			_, err := e.Review(ctx, tc, r.Held.ID, r.Held.Digest, true)
			if !errors.Is(err, engine.ErrStray) || !errors.Is(err, engine.ErrBadInput) || exists(dir, "h.txt") {
				t.Fatalf("accept of a stray set: %v (h.txt applied %v)", err, exists(dir, "h.txt"))
			}
			if errors.Is(err, engine.ErrUndoConflict) {
				t.Fatalf("a stray set's refusal matches ErrUndoConflict: %v", err)
			}
			if _, err := e.Review(ctx, tc, r.Held.ID, "", false); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A contained command is checked for running jobs with a network grant
// only when it starts (TestContainedAsksWhileNetworkJobRuns); one that
// starts while it runs shares the conversation's network with it. The
// contained command has no TCP there (Landlock denies bind and
// connect), so a listener of the network job gives it nothing; before,
// it connected.
func TestContainedNoTCPAfterNetworkJobStarts(t *testing.T) {
	needNamespaces(t)
	e := newEngine(t)
	testenv.Needf(t, testenv.Landlock, sandbox.Probe().Scoping, "no Landlock signal scoping (Linux 6.12+): a contained command's signals could leave it, so it asks")
	testenv.NeedsTool(t, "python3")
	dir := repo(t)
	tc := workspaceWrite(dir)
	ctx := context.Background()
	contained := e.Run(ctx, tc, engine.Input{Mode: engine.ModeBackground, Command: plantHook +
		// The job's listener in the shared network's table (/tmp is
		// not shared: what a later command writes there may never show
		// in a contained command's throwaway view of it).
		` && echo waiting && until grep -q ':494D 00000000:0000 0A' /proc/net/tcp; do sleep 0.05; done; ` +
		`if (exec 3<>/dev/tcp/127.0.0.1/18765) 2>/dev/null; then echo CONNECTED; else echo REFUSED; fi`})
	if contained.Status != engine.StatusStarted {
		t.Fatalf("contained: %s %q", contained.Status, contained.Output)
	}
	waitFor(t, e, tc, contained.JobID, "waiting")
	net := tc
	net.Sandbox = engine.Sandbox{Profile: engine.ReadOnly, Network: []string{"example.com"}}
	srv := e.Run(ctx, net, engine.Input{Mode: engine.ModeBackground, Command: `python3 -c '
import socket, time
s = socket.socket()
s.bind(("127.0.0.1", 18765))
s.listen()
print("listening", flush=True)
time.sleep(60)
'`})
	if srv.Status != engine.StatusStarted {
		t.Fatalf("network job: %s %q", srv.Status, srv.Output)
	}
	defer func() { _, _ = e.Kill(ctx, net, srv.JobID) }()
	waitFor(t, e, net, srv.JobID, "listening")
	waitJob(t, e, contained.JobID, tc.ConversationID)
	out, err := e.JobOutput(tc, contained.JobID, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.Data, "REFUSED") || strings.Contains(out.Data, "CONNECTED") {
		t.Fatalf("the contained command reached the network job's listener: %q", out.Data)
	}
}

// A command that runs without asking because its result is reviewed
// (contained, in workspace-write; in read-only, because the kernel
// answers its ask) or whose every change is held (hold mode) sees the
// conversation's build caches warm, and may write them, but what it
// writes there is its own: a later ordinary command does not see it (a
// planted GOCACHE entry would run in the user's later build,
// unreviewed). An ordinary command's cache writes stay for the next
// command. With and without a base cache (the user's GOCACHE, under the
// world's overlay).
func TestCachesThrowawayForReviewedCommands(t *testing.T) {
	needNamespaces(t)
	testenv.Needf(t, testenv.Landlock, sandbox.Probe().Scoping, "no Landlock signal scoping (Linux 6.12+): a contained command's signals could leave it, so it asks")
	for _, withBase := range []bool{false, true} {
		t.Run(map[bool]string{false: "world cache", true: "base cache"}[withBase], func(t *testing.T) {
			base := t.TempDir()
			e := newEngine(t, func(c *engine.Config) {
				if withBase {
					c.Sandbox.BaseCaches.GoBuild = base
				}
			})
			cache := `"$GOCACHE"`
			if withBase {
				cache = base
			}
			dir := repo(t)
			tc := workspaceWrite(dir)
			ctx := context.Background()
			ordinary := tc
			ordinary.Approved = true
			if r := e.Run(ctx, ordinary, engine.Input{Command: "mkdir -p " + cache + " && echo warm > " + cache + "/warm"}); r.Status != engine.StatusOK {
				t.Fatalf("ordinary: %s %q", r.Status, r.Output)
			}
			for name, c := range reviewedModes(tc) {
				r := e.Run(ctx, c.tc, engine.Input{Command: c.command + "cat " + cache + "/warm && echo poison > " + cache + "/" + name + " && cat " + cache + "/" + name})
				if r.Status != engine.StatusOK || !strings.Contains(r.Output, "warm\npoison\n") {
					t.Fatalf("%s: %s %q", name, r.Status, r.Output)
				}
			}
			if r := e.Run(ctx, ordinary, engine.Input{Command: "echo two > " + cache + "/two && ls " + cache}); r.Status != engine.StatusOK ||
				strings.Contains(r.Output, "contained") || strings.Contains(r.Output, "hold") || strings.Contains(r.Output, "read-only") || !strings.Contains(r.Output, "warm") {
				t.Fatalf("a later ordinary command: %s %q", r.Status, r.Output)
			}
			if r := e.Run(ctx, ordinary, engine.Input{Command: "cat " + cache + "/two"}); r.Status != engine.StatusOK || !strings.Contains(r.Output, "two") {
				t.Fatalf("an ordinary command's cache write did not stay: %s %q", r.Status, r.Output)
			}
		})
	}
}

// Real tool workflows in workspace-write apply without being held or
// refused (issue 28's "real workflows stay unasked", beyond git's own in
// gitpolicy's TestWorkflows): go build, pip install -e . into a
// virtual environment of the workspace, npm ci with a local dependency.
func TestToolWorkflowsApplyUnheld(t *testing.T) {
	needNamespaces(t)
	goBin := testenv.NeedsTool(t, "go")[0]
	testenv.NeedsTool(t, "npm")
	if err := exec.Command("/usr/bin/python3", "-c", "import setuptools, pip, venv").Run(); err != nil {
		testenv.Needf(t, testenv.Tools, false, "python3 with pip, setuptools and venv: %v", err)
	}
	gocache, err := exec.Command(goBin, "env", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	// The test user's warm build cache as the base: the build compiles
	// only the program.
	e := newEngine(t, func(c *engine.Config) {
		c.SlowTimeout = 5 * time.Minute
		c.Sandbox.BaseCaches.GoBuild = strings.TrimSpace(string(gocache))
	})
	dir := repo(t)
	for name, body := range map[string]string{
		"go.mod":            "module hello\n\ngo 1.21\n",
		"main.go":           "package main\n\nfunc main() { println(\"hello\") }\n",
		"setup.py":          "from setuptools import setup\nsetup(name=\"demo\", version=\"0.1\", packages=[\"demo\"])\n",
		"demo/__init__.py":  "",
		"package.json":      `{"name":"app","version":"1.0.0","dependencies":{"dep":"file:dep"}}` + "\n",
		"dep/package.json":  `{"name":"dep","version":"1.0.0"}` + "\n",
		"package-lock.json": `{"name":"app","version":"1.0.0","lockfileVersion":3,"requires":true,"packages":{"":{"name":"app","version":"1.0.0","dependencies":{"dep":"file:dep"}},"dep":{"version":"1.0.0"},"node_modules/dep":{"resolved":"dep","link":true}}}` + "\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tc := workspaceWrite(dir)
	tc.Approved = true // ordinary commands: what they change is judged, not asked about
	tc.Env = map[string]string{"PATH": filepath.Dir(goBin) + ":/usr/bin:/bin", "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
	for k, v := range gitEnv {
		tc.Env[k] = v
	}
	for _, c := range []struct{ command, made string }{
		{`go build -o hello . && ./hello`, "hello"},
		{`python3 -m venv --system-site-packages --without-pip .venv && python3 -m pip --python .venv/bin/python install -q --no-build-isolation --no-index --no-deps --no-use-pep517 -e . && cd / && ` + dir + `/.venv/bin/python -c "import demo; print(demo.__file__)"`, ".venv/bin/python"},
		{`npm ci --offline --no-audit --no-fund`, "node_modules/dep"},
	} {
		r := e.Run(context.Background(), tc, engine.Input{Command: c.command, Mode: engine.ModeSlow})
		if r.Status != engine.StatusOK || r.Held != nil || len(r.Refused) > 0 || strings.Contains(r.Output, "refused") {
			t.Fatalf("%s: %s held %+v refused %+v\n%s", c.command, r.Status, r.Held, r.Refused, r.Output)
		}
		if !exists(dir, c.made) {
			t.Fatalf("%s: %s not applied:\n%s", c.command, c.made, r.Output)
		}
	}
}

// BenchmarkThrowawayCaches: a command in hold mode (a throwaway view of
// the caches: an overlay per cache on a tmpfs of its own) beside the
// same command without it, in workspace-write, side by side.
func BenchmarkThrowawayCaches(b *testing.B) {
	needNamespaces(b)
	e := newEngine(b)
	dir := repo(b)
	for _, mode := range []string{"apply", "hold"} {
		b.Run(mode, func(b *testing.B) {
			tc := workspaceWrite(dir)
			tc.Review = mode
			for b.Loop() {
				if r := e.Run(context.Background(), tc, engine.Input{Command: `mkdir -p "$GOCACHE" && ls "$GOCACHE" >/dev/null`}); r.Status != engine.StatusOK {
					b.Fatalf("%s %q", r.Status, r.Output)
				}
			}
		})
	}
}
