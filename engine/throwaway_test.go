package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// A contained command (it runs because its result is reviewed, or the
// read-only sandbox answered its ask) and one in hold mode read the
// conversation's /tmp ($TMPDIR) as its ordinary commands left it and
// write it in a view of their own: what they write, change or remove
// there is gone when they end, so a later ordinary command never reads
// it (a planted Jest transform, say). Their /tmp has the world's mode
// (1777) and owner. An ordinary command's /tmp writes stay for the next.
func TestTmpThrowawayForReviewedCommands(t *testing.T) {
	needNamespaces(t)
	testenv.Needf(t, testenv.Landlock, sandbox.Probe().Scoping, "no Landlock signal scoping (Linux 6.12+): a contained command's signals could leave it, so it asks")
	e := newEngine(t)
	dir := repo(t)
	tc := workspaceWrite(dir)
	ctx := context.Background()
	ordinary := tc
	ordinary.Approved = true
	r := e.Run(ctx, ordinary, engine.Input{Command: `test "$TMPDIR" = /tmp && echo kept > /tmp/kept && mkdir /tmp/d && echo inside > /tmp/d/f && stat -c '%a %u:%g' /tmp`})
	if r.Status != engine.StatusOK || !strings.Contains(r.Output, "1777 ") {
		t.Fatalf("ordinary: %s %q", r.Status, r.Output)
	}
	owner := r.Output // the throwaway view's /tmp has the world's mode (sticky) and owner
	for name, c := range reviewedModes(tc) {
		r := e.Run(ctx, c.tc, engine.Input{Command: c.command + `cat /tmp/kept /tmp/d/f && echo poison > /tmp/` + name +
			` && echo poison > "$TMPDIR/d/` + name + `" && echo changed > /tmp/kept && rm /tmp/d/f && cat /tmp/` + name + ` /tmp/kept && ls /tmp/d && stat -c '%a %u:%g' /tmp`})
		if r.Status != engine.StatusOK || !strings.Contains(r.Output, "kept\ninside\npoison\nchanged\n"+name+"\n"+owner) {
			t.Fatalf("%s: %s %q", name, r.Status, r.Output)
		}
	}
	r = e.Run(ctx, ordinary, engine.Input{Command: `cat /tmp/kept /tmp/d/f && ls /tmp /tmp/d && echo two > /tmp/two`})
	if r.Status != engine.StatusOK || !strings.Contains(r.Output, "kept\ninside\n") {
		t.Fatalf("a later ordinary command: %s %q", r.Status, r.Output)
	}
	for _, name := range []string{"contained", "hold", "read-only", "changed"} {
		if strings.Contains(r.Output, name) {
			t.Fatalf("a later ordinary command sees what a %s command wrote in /tmp: %q", name, r.Output)
		}
	}
	if r := e.Run(ctx, ordinary, engine.Input{Command: "cat /tmp/two"}); r.Status != engine.StatusOK || r.Output != "two\n" {
		t.Fatalf("an ordinary command's /tmp write did not stay: %s %q", r.Status, r.Output)
	}
}

// TestThrowawayTmpChargedToTheCommand: the tmpfs of a contained
// command's throwaway view is outside the conversation's quota, but what
// it writes there is memory charged to the command's cgroup (no swap):
// a contained command cannot write more there than its memory limit.
func TestThrowawayTmpChargedToTheCommand(t *testing.T) {
	needMemoryController(t)
	needNamespaces(t)
	testenv.Needf(t, testenv.Landlock, sandbox.Probe().Scoping, "no Landlock signal scoping (Linux 6.12+): a contained command's signals could leave it, so it asks")
	e := newEngine(t, func(c *engine.Config) { c.Limits.Memory = 128 << 20; c.Timeout = time.Minute })
	tc := workspaceWrite(repo(t))
	r := e.Run(context.Background(), tc, engine.Input{Command: plantHook + ` && head -c 384M /dev/zero > /tmp/big; stat -c 'size %s' /tmp/big`})
	if !r.OOMKilled || strings.Contains(r.Output, "size 402653184") {
		t.Fatalf("a contained command wrote 384 MiB to its throwaway /tmp with a memory limit of 128 MiB: %s %q", r.Status, r.Output)
	}
}
