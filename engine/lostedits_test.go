package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
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
			// The leftovers outlive any wait for them (at load ~35 an
			// unprivileged call takes 3-5 s: a `sleep 2` ended on its
			// own before it was found, and nothing was killed).
			for i, cmd := range []string{
				`echo edit > h.txt; sleep 60 & echo started`,
				`echo edit > h.txt; setsid sleep 60 </dev/null >/dev/null 2>&1 & echo started`,
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
// line, and the note says the changes were not applied, why and what
// to do instead; nothing reaches the workspace: the changes are held
// for review.
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
			if r.Status != engine.StatusFailed ||
				!strings.HasPrefix(r.Output, "[command failed: its changes to the workspace were not applied]\nstarted ") ||
				!strings.Contains(r.Output, "[the command's changes to the workspace were not applied: ") ||
				!strings.Contains(r.Output, "mode=background") {
				t.Fatalf("got %s %q", r.Status, r.Output)
			}
			if _, err := os.Stat(filepath.Join(dir, "h.txt")); !os.IsNotExist(err) {
				t.Fatalf("h.txt reached the workspace: %v", err)
			}
			if r.Held == nil || !strings.Contains(r.Output, "[held: h.txt (processes of the command were still running over its layer)]") {
				t.Fatalf("not held: %+v %q", r.Held, r.Output)
			}
		})
	}
}

// zombieLeaderPy is a process whose main thread exits (SYS_exit, not
// exit_group: %d is its number here) while another thread goes on
// counting in zl.count: its stat says 'Z' while it runs.
const zombieLeaderPy = `import ctypes, os, threading, time
def count():
    for i in range(1, 6000):
        with open("zl.count.new", "w") as f:
            f.write(str(i))
        os.rename("zl.count.new", "zl.count")
        time.sleep(0.01)
    os._exit(0)
threading.Thread(target=count).start()
while not os.path.exists("zl.count"):
    time.sleep(0.001)
ctypes.CDLL(None).syscall(%d, 0)
`

// liveThreads counts the threads of pid that have not exited.
func liveThreads(pid int) int {
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/stat")
	n := 0
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if i := strings.LastIndexByte(string(b), ')'); err == nil && i > 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X' {
			n++
		}
	}
	return n
}

// A workspace-write command leaves a process whose leader thread exited
// while its other threads run (security review round 4, H4): it is a
// leftover like any other, killed and named, with cgroups and without
// (the Freezer's scan); the command's changes apply only once it is
// gone, and nothing writes to the workspace after the call returned.
func TestZombieLeaderLeftoverKilled(t *testing.T) {
	needNamespaces(t)
	testenv.NeedsTool(t, "python3")
	for _, off := range cgroupModes(t) {
		t.Run(cgroupsName(off), func(t *testing.T) {
			e := newEngine(t, func(c *engine.Config) { c.Cgroups.Off = off })
			dir := repo(t)
			if err := os.WriteFile(filepath.Join(dir, "zl.py"), fmt.Appendf(nil, zombieLeaderPy, syscall.SYS_EXIT), 0o644); err != nil {
				t.Fatal(err)
			}
			tc := workspaceWrite(dir)
			tc.ConversationID += cgroupsName(off)
			r := e.Run(context.Background(), tc, engine.Input{Command: `echo edit > h.txt; python3 zl.py </dev/null >/dev/null 2>&1 & ` +
				`until [ -s zl.count ] && grep -q '^State:.*Z' /proc/$!/status; do sleep 0.01; done; echo "started $!"`})
			pid := 0
			if _, after, ok := strings.Cut(r.Output, "started "); ok {
				line, _, _ := strings.Cut(after, "\n")
				pid, _ = strconv.Atoi(line)
			}
			if pid > 0 {
				testenv.KillAtCleanup(t, pid)
			}
			if r.Status != engine.StatusOK || pid == 0 ||
				!strings.Contains(r.Output, "[killed processes left running after the shell exited: python3 (pid "+strconv.Itoa(pid)+")") {
				t.Fatalf("got %s %q", r.Status, r.Output)
			}
			if n := liveThreads(pid); n > 0 {
				t.Fatalf("pid %d runs on after the call (%d threads)", pid, n)
			}
			if !strings.Contains(r.Output, "A h.txt") || strings.Contains(r.Output, "not applied") {
				t.Fatalf("changes: %q", r.Output)
			}
			a, _ := os.ReadFile(filepath.Join(dir, "zl.count"))
			time.Sleep(300 * time.Millisecond)
			if b, _ := os.ReadFile(filepath.Join(dir, "zl.count")); string(a) != string(b) {
				t.Fatalf("the workspace changed after the call: zl.count %q -> %q", a, b)
			}
		})
	}
}
