package proc_test

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/proc"
)

// sigIgn reads the SigIgn mask in a /proc/PID/status text.
func sigIgn(t *testing.T, status string) uint64 {
	t.Helper()
	m := regexp.MustCompile(`SigIgn:\s*([0-9a-f]+)`).FindStringSubmatch(status)
	if m == nil {
		t.Fatalf("no SigIgn in %q", status)
	}
	v, err := strconv.ParseUint(m[1], 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

const intQuit = 1<<(syscall.SIGINT-1) | 1<<(syscall.SIGQUIT-1)

// TestCommandsStartWithDefaultSignals: a program that ignores SIGINT and
// SIGQUIT (here after signal.Ignore; nohup or a script's background job
// start it so) still starts commands with both at their defaults, keeps
// ignoring them itself, and bash keeps its name ($0). ^C on a terminal
// then interrupts the command.
func TestCommandsStartWithDefaultSignals(t *testing.T) {
	b := bash(t)
	signal.Ignore(syscall.SIGINT, syscall.SIGQUIT)
	defer signal.Reset(syscall.SIGINT, syscall.SIGQUIT)

	// The premise: a plain child inherits them ignored.
	out, err := exec.Command(b, "-c", "cat /proc/self/status; true").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := sigIgn(t, string(out)); got&intQuit != intQuit {
		t.Fatalf("a plain child's SigIgn %x does not have SIGINT and SIGQUIT: the premise failed", got)
	}

	p, err := proc.Start(proc.Spec{Path: b, Args: []string{"bash", "-c", "cat /proc/self/status; echo name=$0; no-such-command-42"}, Dir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(p.Stdout)
	p.Stdout.Close()
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if ign := sigIgn(t, string(got)); ign&intQuit != 0 {
		t.Errorf("the command's SigIgn %x has SIGINT or SIGQUIT", ign)
	}
	for _, want := range []string{"name=bash\n", "bash: line 1: no-such-command-42: command not found"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("missing %q in %q", want, got)
		}
	}
	self, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	if ign := sigIgn(t, string(self)); ign&intQuit != intQuit {
		t.Errorf("this process's SigIgn %x changed: it no longer ignores SIGINT and SIGQUIT", ign)
	}

	// ^C on a job's terminal.
	p, err = proc.Start(proc.Spec{Path: b, Dir: "/", TTY: &proc.Winsize{Rows: 24, Cols: 80},
		Args: []string{"bash", "-c", "sleep 30"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stdin.Close()
	done := make(chan struct{})
	go func() { defer close(done); io.Copy(io.Discard, p.Stdout) }()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p.Pid)); string(comm) == "sleep\n" {
			break
		}
	}
	start := time.Now()
	if _, err := p.Stdin.Write([]byte{3}); err != nil {
		t.Fatal(err)
	}
	exited := make(chan *proc.Exit, 1)
	go func() { st, _ := p.Wait(); exited <- st }()
	select {
	case st := <-exited:
		if st == nil || !st.Status.Signaled() || st.Status.Signal() != syscall.SIGINT {
			t.Errorf("^C: %+v", st)
		}
	case <-time.After(20 * time.Second):
		_ = p.SignalGroup(syscall.SIGKILL) // by its pidfd: Wait may have reaped it
		<-exited
		t.Errorf("^C did not interrupt sleep in %v", time.Since(start))
	}
	p.Stdout.Close()
	<-done
}
