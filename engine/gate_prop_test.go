package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/safety"
	"pgregory.net/rapid"
)

// Pieces of the commands TestLockedReadsInTheKernel builds: programs the
// read-only grammars know, with harmless options and with options,
// wrappers and expansions that write a file or run code; `git status` in
// a repository whose index is stale, which the grammar allows as a read
// but which rewrites .git/index when it can. Every write names a path
// inside the case's temporary directory. (date and hostname are not
// drawn: their setting forms would change the host, not the directory.)
var (
	kernelPrograms = []string{
		"cat f", "head -n 2 f", "grep -rn x .", "sort f", "sed -n 1p f", "nl -ba f", "ls -la", "wc -l f",
		"find . -name f", "rg x", "git status", "git status --short", "git diff --stat",
		"git log --oneline -1", "xargs echo", "printf '%s\\n' x", "test -f f", "echo x",
	}
	kernelWriters = []string{
		"", "", "", "-o out", "--output=out", "-i", "-exec ./w.sh {} +", "-delete", "-fprint out", "--pre ./w.sh",
		"-v 'x[$(./w.sh)]'", "$(./w.sh)", "<(./w.sh)", ">out", "| tee out", "&& ./w.sh", "-c core.pager=./w.sh",
		"-C ../outside", "$(( 'a[$(./w.sh)]' ))",
	}
	kernelWrappers = []string{"", "", "env ", "command ", "nice ", "timeout 5 ", "builtin ", "eval ", "GIT_PAGER=./w.sh "}
	kernelFrames   = []string{"%s", "%s", "{ %s; } > out", "for x in 'a[$(./w.sh)]'; do %s; done", "f() { %s; }; f"}
)

// kernelCommand draws a command from the pieces above.
func kernelCommand() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		prog := rapid.SampledFrom(kernelPrograms).Draw(t, "program")
		w := rapid.SampledFrom(kernelWriters).Draw(t, "writer")
		cmd := strings.TrimSpace(rapid.SampledFrom(kernelWrappers).Draw(t, "wrapper") + prog + " " + w)
		return fmt.Sprintf(rapid.SampledFrom(kernelFrames).Draw(t, "frame"), cmd)
	})
}

// TestLockedReadsInTheKernel: whatever the locked profile allows runs in
// the read-only sandbox (the audit log's enforced sandbox), though the
// call asked for none, and leaves the case's directory as it was: no
// sentinel from ./w.sh, no file written, no victim outside changed, and
// .git/index not refreshed (git status, allowed as a read, would rewrite
// the stale index unsandboxed: the kernel, not the analyser, keeps it).
// What locked denies is not a check (rapid draws another).
func TestLockedReadsInTheKernel(t *testing.T) {
	needNamespaces(t)
	audit := &syncBuffer{}
	e := newEngine(t, func(c *engine.Config) {
		c.Permissions, _ = safety.Preset("locked")
		c.Audit = audit
	})
	allowed, n := 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		cmd := kernelCommand().Draw(rt, "cmd")
		if s, _ := engine.Admit(e, engine.ToolContext{WorkingDir: os.TempDir()}, cmd); s == engine.StatusDenied {
			rt.Skip("denied")
		}
		root := kernelFixture(t, rt)
		work := filepath.Join(root, "work")
		before := tree(rt, root)
		n++
		tc := engine.ToolContext{WorkingDir: work, ConversationID: fmt.Sprint("k", n), Env: gitEnv}
		r := e.Run(context.Background(), tc, engine.Input{Command: cmd})
		if r.Status == engine.StatusDenied {
			rt.Skip("denied")
		}
		allowed++
		if rec := lastAudit(rt, audit); rec.Command != cmd || rec.Sandbox != "read-only" {
			rt.Fatalf("locked allowed %q (%s) in sandbox %q, want read-only", cmd, r.Status, rec.Sandbox)
		}
		if after := tree(rt, root); after != before {
			rt.Fatalf("locked allowed %q (%s %q), which changed the directory:\nbefore:\n%s\nafter:\n%s", cmd, r.Status, r.Output, before, after)
		}
	})
	t.Logf("%d allowed commands of %d run", allowed, n)
	if allowed == 0 {
		t.Error("locked allowed none of the generated commands: the property was never checked")
	}
}

// kernelFixture makes the case's directory: work (a repository whose
// README is newer than its index, an input file f and a script w.sh that
// makes the sentinel S) and outside/victim.
func kernelFixture(t *testing.T, rt *rapid.T) string {
	root, err := os.MkdirTemp("", "kernel-prop")
	if err != nil {
		rt.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	work := filepath.Join(root, "work")
	if err := os.MkdirAll(filepath.Join(root, "outside"), 0o755); err != nil {
		rt.Fatal(err)
	}
	if err := os.Mkdir(work, 0o755); err != nil {
		rt.Fatal(err)
	}
	gitFixture(t, work, "init", "-q", "-b", "main")
	for name, content := range map[string]string{
		"work/README": "hello\n", "work/f": "x a\nb x\n", "outside/victim": "victim\n",
		"work/w.sh": "#!/bin/sh\ntouch \"$(dirname \"$0\")/S\"\ncat \"$@\"\n",
	} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o755); err != nil {
			rt.Fatal(err)
		}
	}
	gitFixture(t, work, "add", "README", "f", "w.sh")
	gitFixture(t, work, "commit", "-qm", "first")
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(work, "README"), future, future); err != nil {
		rt.Fatal(err)
	}
	return root
}

// tree lists every entry under root with its type, size and content.
func tree(rt *rapid.T, root string) string {
	var b strings.Builder
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		b.WriteString(rel + " " + d.Type().String())
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %x", data)
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		rt.Fatal(err)
	}
	return b.String()
}

// lastAudit returns the last record of the audit log.
func lastAudit(rt *rapid.T, audit *syncBuffer) (rec struct{ Command, Sandbox string }) {
	lines := strings.Split(strings.TrimSpace(audit.String()), "\n")
	var raw map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &raw); err != nil {
		rt.Fatal(err)
	}
	rec.Command, _ = raw["command"].(string)
	rec.Sandbox, _ = raw["sandbox"].(string)
	return rec
}
