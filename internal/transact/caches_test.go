//go:build linux

package transact_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/gitindex"
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
