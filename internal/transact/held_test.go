//go:build linux

package transact_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
	"github.com/bashvisor/bashvisor/internal/transact"
)

// A command joins a background job's layer whose overlays are held
// rather than premounted (the sandbox's helper made them; rootless, in
// the world's user namespace, and handed them over), with real
// sandboxed commands in a world: the job, which looked a path up before
// the joined command created the file there, sees it; the joined
// command's Commit is a checkpoint taken with the job frozen (here by
// SIGSTOP of its process group), which applies the file; the job's
// Commit applies the rest. As root with premounted overlays too.
func TestJoinSandboxedCommands(t *testing.T) {
	c := sandbox.Probe()
	testenv.Needf(t, testenv.Landlock, c.Available(), "restricted mode unavailable: %s", c)
	testenv.Needf(t, testenv.Namespaces, c.Namespaces, "no private namespaces: %s", c)
	bash := testenv.NeedsTool(t, "bash")[0]
	for _, premount := range []bool{false, true} {
		t.Run(map[bool]string{false: "held", true: "premounted"}[premount], func(t *testing.T) {
			if premount && c.Rootless {
				t.Skip("a rootless engine cannot premount (the sandbox's helper makes the overlays)")
			}
			testJoinSandboxed(t, bash, c.Rootless, premount)
		})
	}
}

func testJoinSandboxed(t *testing.T, bash string, rootless, premount bool) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(base, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := transact.New(transact.Options{Dir: filepath.Join(base, "state"), UserXattr: rootless, Premount: premount})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := m.Conversation()
	w, err := sandbox.NewWorld(sandbox.WorldOptions{Dir: filepath.Join(base, "world"), Hide: []string{filepath.Join(base, "state")}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	begin := func(label string) *transact.Tx {
		t.Helper()
		tx, err := c.Begin([]string{ws}, label)
		if err != nil {
			t.Fatal(err)
		}
		return tx
	}
	job := begin("job")
	jobLog := filepath.Join(base, "job.log")
	// The job runs on after it saw the file, until its stdin closes:
	// the joined command's checkpoint stops it (a job that ended would
	// wait for its Commit, which the engine, not this test, starts).
	stdin, release, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer release.Close()
	jobCmd := startSandboxed(t, w, bash, job, ws, jobLog, stdin,
		`test -f ready; echo waiting; while [ ! -f ready ]; do sleep 0.02; done; echo saw; read _; echo job > job.txt`)
	stdin.Close()
	logged := func(want string) func() bool {
		return func() bool { b, _ := os.ReadFile(jobLog); return strings.Contains(string(b), want) }
	}
	testenv.Eventually(t, 20*time.Second, logged("waiting"), "the job did not start")
	job.Background(stopGroup(jobCmd.Process.Pid))
	joined := begin("joined")
	if !joined.Shared() {
		t.Fatal("the command did not join the job's layer")
	}
	cmd := startSandboxed(t, w, bash, joined, ws, filepath.Join(base, "joined.log"), nil, `echo x > ready`)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the joined command: %v", err)
	}
	rep, err := joined.Commit(context.Background(), true)
	if err != nil || rep.NotApplied != "" || len(rep.Applied) != 1 || rep.Applied[0].Path != filepath.Join(ws, "ready") {
		t.Fatalf("the joined command's checkpoint: %+v %v", rep, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "ready")); string(b) != "x\n" {
		t.Fatalf("ready in the workspace: %q", b)
	}
	testenv.Eventually(t, 20*time.Second, logged("saw"), "the job never saw the joined command's file")
	release.Close()
	if err := jobCmd.Wait(); err != nil {
		t.Fatalf("the job: %v", err)
	}
	rep, err = job.Commit(context.Background(), true)
	var paths []string
	for _, c := range rep.Applied {
		paths = append(paths, filepath.Base(c.Path))
	}
	if err != nil || !slices.Equal(paths, []string{"job.txt"}) {
		t.Fatalf("the job's commit: %v %+v", err, rep)
	}
}

// startSandboxed starts command in the workspace-write profile of ws
// over tx's layer, in world w, its output in logPath and stdin its
// standard input (nil: /dev/null); it is killed at the end of the test.
func startSandboxed(t *testing.T, w *sandbox.World, bash string, tx *transact.Tx, ws, logPath string, stdin *os.File, command string) *exec.Cmd {
	t.Helper()
	spec := tx.Spec()
	sc, err := sandbox.Prepare(sandbox.Options{Bash: bash, Command: command, Roots: sandbox.Roots{Writable: tx.Roots()},
		Layer: &spec, World: w, Dir: ws})
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command(sc.Path, sc.Args[1:]...)
	cmd.Args[0] = sc.Args[0]
	cmd.Dir, cmd.Env = ws, append(os.Environ(), sc.Env...)
	cmd.Stdout, cmd.Stderr = out, out
	if stdin != nil {
		cmd.Stdin = stdin
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := sc.StartHelper(cmd); err != nil {
		t.Fatal(err)
	}
	g := testenv.GroupOf(t, cmd.Process.Pid) // tests reap it before the cleanup
	t.Cleanup(func() {
		g.Kill()
		_ = cmd.Wait()
		_ = sc.Cleanup(true)
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s: %s", command, b)
		}
	})
	return cmd
}

// stopGroup is a freeze function for Tx.Background: it stops the
// process group pgid (SIGSTOP), waits until each of its processes is
// stopped, runs f and continues them.
func stopGroup(pgid int) func(func()) bool {
	return func(f func()) bool {
		if syscall.Kill(-pgid, syscall.SIGSTOP) != nil {
			return false
		}
		defer syscall.Kill(-pgid, syscall.SIGCONT)
		deadline := time.Now().Add(5 * time.Second)
		for !groupStopped(pgid) {
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(time.Millisecond)
		}
		f()
		return true
	}
}

// groupStopped reports whether every process of group pgid is stopped
// (state T in /proc/PID/stat).
func groupStopped(pgid int) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:]) // state, ppid, pgrp, ...
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "T" && f[0] != "t" && f[0] != "Z" {
			return false
		}
	}
	return true
}
