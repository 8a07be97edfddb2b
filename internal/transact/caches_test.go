//go:build linux

package transact_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/gitindex"
	"github.com/bashvisor/bashvisor/internal/layer/layertest"
	"github.com/bashvisor/bashvisor/internal/testenv"
	"github.com/bashvisor/bashvisor/internal/transact"
)

// TestIndexCachesNotApplied: the index a command's git writes with an
// untracked cache or fsmonitor data applies without them (what git
// trusts there cannot be checked against the workspace apply makes);
// the entries are the command's, and the user's git status still sees
// the untracked file. A command that leaves no cache in the index
// applies its index byte for byte.
func TestIndexCachesNotApplied(t *testing.T) {
	fsm := filepath.Join(t.TempDir(), "fsm")
	if err := os.WriteFile(fsm, []byte("#!/bin/sh\nprintf 'tok-1\\0/\\0'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, script := range map[string]string{
		"untracked cache": "echo u > u.txt && echo a > a.txt && git add a.txt && git -c core.untrackedCache=true update-index --untracked-cache && git -c core.untrackedCache=true status --short",
		"fsmonitor":       "echo a > a.txt && git add a.txt && echo u > u.txt && git -c core.fsmonitor=" + fsm + " status --short",
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.run(t, script)
			b, err := os.ReadFile(filepath.Join(f.ws, ".git/index"))
			if err != nil {
				t.Fatal(err)
			}
			ix, err := gitindex.Parse(b, 20)
			if err != nil {
				t.Fatal(err)
			}
			var entries, exts []string
			for _, e := range ix.Entries {
				entries = append(entries, e.Name)
			}
			for _, x := range ix.Extensions {
				exts = append(exts, x.Sig)
			}
			if slices.Contains(exts, "UNTR") || slices.Contains(exts, "FSMN") || !slices.Equal(entries, []string{"README", "a.txt"}) {
				t.Errorf("applied index: entries %v, extensions %v", entries, exts)
			}
			cmd := exec.Command("git", "status", "--porcelain")
			cmd.Dir, cmd.Env = f.ws, f.env
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "?? u.txt") || !strings.Contains(string(out), "A  a.txt") {
				t.Errorf("git status: %v\n%s", err, out)
			}
		})
	}
}

// TestIndexCachesNotAppliedAtCheckpoint: a checkpoint of a background
// job applies the index its git wrote without the untracked cache, as
// the job's end does, and leaves the job its own index (the job's git
// still finds its cache there).
func TestIndexCachesNotAppliedAtCheckpoint(t *testing.T) {
	f := newFixture(t)
	roots, err := transact.Roots(f.ws)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := f.c.Begin(roots, "job")
	if err != nil {
		t.Fatal(err)
	}
	cmd := layertest.Command(t, tx.Spec(), f.ws, f.env, `echo u > u.txt && echo a > a.txt && git add a.txt &&
		git -c core.untrackedCache=true update-index --untracked-cache && git -c core.untrackedCache=true status --short >/dev/null &&
		echo ready && read _ && grep -qa UNTR .git/index && echo kept`)
	in, out := testenv.Piped(t, cmd, "ready")
	ran := func(f func()) bool { f(); return true } // the job waits on its stdin
	rep, err := tx.Checkpoint(context.Background(), ran)
	if err != nil || rep == nil || !strings.Contains(kinds(f.ws, rep.Applied), ".git/index") {
		t.Fatalf("checkpoint: %+v %v", rep, err)
	}
	exts := func(where string) []string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(f.ws, ".git/index"))
		if err != nil {
			t.Fatal(err)
		}
		ix, err := gitindex.Parse(b, 20)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		var sigs []string
		for _, x := range ix.Extensions {
			sigs = append(sigs, x.Sig)
		}
		if !slices.ContainsFunc(ix.Entries, func(e gitindex.Entry) bool { return e.Name == "a.txt" }) {
			t.Errorf("%s: the job's index was not applied", where)
		}
		return sigs
	}
	if sigs := exts("after the checkpoint"); slices.Contains(sigs, "UNTR") {
		t.Errorf("after the checkpoint the workspace's index has %v", sigs)
	}
	_, _ = in.Write([]byte("\n"))
	_ = in.Close()
	var lines []string
	for out.Scan() {
		lines = append(lines, out.Text())
	}
	if err := cmd.Wait(); err != nil || !slices.Contains(lines, "kept") {
		t.Fatalf("the job's own index lost its untracked cache: %v %q", err, lines)
	}
	if _, err := tx.Commit(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if sigs := exts("after the job"); slices.Contains(sigs, "UNTR") {
		t.Errorf("after the job the workspace's index has %v", sigs)
	}
}
