package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
)

// A workspace-write command that leaves processes behind (in its
// process group, or escaped from it with setsid) has them killed when
// its shell exits, and once they are gone its changes are applied, with
// cgroups and without (the unprivileged engine's way): the edit is in
// the workspace and the result names it. Before, without cgroups, killed
// leftovers counted as not gone and every change was dropped under
// status ok.
func TestLeftoversKilledChangesApply(t *testing.T) {
	needNamespaces(t)
	for _, off := range cgroupModes(t) {
		t.Run(cgroupsName(off), func(t *testing.T) {
			e := newEngine(t, func(c *engine.Config) { c.Cgroups.Off = off })
			for i, cmd := range []string{
				`echo edit > h.txt; sleep 2 & echo started`,
				`echo edit > h.txt; setsid sleep 3 </dev/null >/dev/null 2>&1 & echo started`,
			} {
				dir := repo(t)
				tc := workspaceWrite(dir)
				tc.ConversationID += cgroupsName(off) + string(rune('a'+i))
				r := e.Run(context.Background(), tc, engine.Input{Command: cmd})
				if r.Status != engine.StatusOK || !strings.HasPrefix(r.Output, "started\n") ||
					!strings.Contains(r.Output, "[killed processes left running after the shell exited: ") {
					t.Fatalf("%s: %s %q", cmd, r.Status, r.Output)
				}
				if strings.Contains(r.Output, "not applied") || !strings.Contains(r.Output, "[changed 1 file: A h.txt]") {
					t.Fatalf("%s: changes not applied: %q", cmd, r.Output)
				}
				if b, err := os.ReadFile(filepath.Join(dir, "h.txt")); err != nil || string(b) != "edit\n" {
					t.Fatalf("%s: h.txt in the workspace: %q %v", cmd, b, err)
				}
			}
		})
	}
}

// When a command's changes cannot be applied (here: its leftovers are
// kept running on purpose, Lifecycle.KeepLeftovers, so they still write
// over its layer), the call does not report ok: it fails with a status
// line, and the note says the changes were discarded, why and what to
// do instead; nothing reaches the workspace.
func TestChangesNotAppliedFail(t *testing.T) {
	needNamespaces(t)
	for _, off := range cgroupModes(t) {
		t.Run(cgroupsName(off), func(t *testing.T) {
			e := newEngine(t, func(c *engine.Config) { c.Cgroups.Off, c.Lifecycle.KeepLeftovers = off, true })
			dir := repo(t)
			tc := workspaceWrite(dir)
			tc.ConversationID += cgroupsName(off)
			r := e.Run(context.Background(), tc, engine.Input{Command: `echo edit > h.txt; sleep 1 & echo "started $!"`})
			if pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(strings.SplitN(r.Output, "\n", 3)[1], "started "))); err == nil {
				defer waitGone(t, pid, 10*time.Second)
			}
			if r.Status != engine.StatusFailed || !r.IsError() ||
				!strings.HasPrefix(r.Output, "[command failed: its changes to the workspace were not applied]\nstarted ") ||
				!strings.Contains(r.Output, "[the command's changes to the workspace were not applied: ") ||
				!strings.Contains(r.Output, "mode=background") {
				t.Fatalf("got %s %q", r.Status, r.Output)
			}
			if _, err := os.Stat(filepath.Join(dir, "h.txt")); !os.IsNotExist(err) {
				t.Fatalf("h.txt reached the workspace: %v", err)
			}
		})
	}
}
