//go:build linux

package transact_test

import (
	"bufio"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/layer/layertest"
	"github.com/bashvisor/bashvisor/internal/testenv"
	"github.com/bashvisor/bashvisor/internal/transact"
)

// TestApplyLockedByAnotherProcessHolds: while another process holds
// the workspace's apply lock (flock(1) on the workspace, as another
// engine's apply does) for longer than the apply waits, the command's
// changes are held, not lost; once it lets go, accepting them applies
// them.
func TestApplyLockedByAnotherProcessHolds(t *testing.T) {
	testenv.NeedsTool(t, "flock")
	f := newFixture(t)
	m, err := transact.New(transact.Options{Dir: filepath.Join(filepath.Dir(f.ws), "state2"), UserXattr: layertest.Unprivileged(),
		LockWait: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	f.m, f.c = m, m.Conversation()

	holder := exec.Command("flock", "-x", f.ws, "sh", "-c", "echo locked; read x; true")
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			_ = stdin.Close()
			if err := holder.Wait(); err != nil {
				t.Errorf("flock: %v", err)
			}
		}
	}
	defer release()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("flock: %q %v", line, err)
	}

	rep := f.run(t, "echo new > new.txt && echo more >> README")
	if rep.Held == nil || len(rep.Applied) > 0 || f.exists("new.txt") {
		t.Fatalf("while another process held the lock: held %+v, applied %s, new.txt there: %v", rep.Held, kinds(f.ws, rep.Applied), f.exists("new.txt"))
	}
	if reasons := strings.Join(mapValues(rep.Held.Reasons), "; "); !strings.Contains(reasons, "another process") {
		t.Errorf("held for %q", reasons)
	}
	release()
	acc, err := f.c.Accept(rep.Held.ID, rep.Held.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(f.ws, acc.Applied); !strings.Contains(got, "A new.txt") || f.read("README") != "hello\nmore\n" {
		t.Errorf("accepted: %s; README %q", got, f.read("README"))
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
