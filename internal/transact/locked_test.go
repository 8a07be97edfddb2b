//go:build linux

package transact_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/layer/layertest"
	"github.com/bashvisor/bashvisor/internal/transact"
)

// holdEnv makes the test binary a process that holds the apply lock
// of the workspace it names, as another engine's apply does (the
// abstract unix socket "@bashvisor-apply-<dev>:<ino>" of the root),
// until its standard input ends.
const holdEnv = "TRANSACT_TEST_HOLD_APPLY_LOCK"

// holdApplyLock is the other engine of
// TestApplyLockedByAnotherProcessHolds.
func holdApplyLock(t *testing.T, ws string) {
	var st unix.Stat_t
	if err := unix.Stat(ws, &st); err != nil {
		t.Fatal(err)
	}
	s, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(s)
	if err := unix.Bind(s, &unix.SockaddrUnix{Name: fmt.Sprintf("@bashvisor-apply-%d:%d", st.Dev, st.Ino)}); err != nil {
		t.Fatal(err)
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// TestApplyLockedByAnotherProcessHolds: while another process holds
// the workspace's apply lock (as another engine's apply does) for
// longer than the apply waits, the command's changes are held, not
// lost; once it lets go, accepting them applies them.
func TestApplyLockedByAnotherProcessHolds(t *testing.T) {
	if ws := os.Getenv(holdEnv); ws != "" {
		holdApplyLock(t, ws)
		return
	}
	f := newFixture(t)
	m, err := transact.New(transact.Options{Dir: filepath.Join(filepath.Dir(f.ws), "state2"), UserXattr: layertest.Unprivileged(),
		LockWait: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	f.m, f.c = m, m.Conversation()

	holder := exec.Command(os.Args[0], "-test.run=^TestApplyLockedByAnotherProcessHolds$")
	holder.Env = append(os.Environ(), holdEnv+"="+f.ws)
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
				t.Errorf("the holder: %v", err)
			}
		}
	}
	defer release()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("the holder: %q %v", line, err)
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
