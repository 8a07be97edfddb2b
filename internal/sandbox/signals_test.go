//go:build linux

package sandbox_test

import (
	"bytes"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/bashvisor/bashvisor/internal/sandbox"
)

// TestSandboxedSignalsWithoutEnv: when the engine's program ignores
// SIGINT and SIGQUIT, a sandboxed command still starts with both at their
// defaults, and no program but bash (or the sandbox helper) is executed
// in the command's namespaces to do it: env(1) is masked there by a file
// nobody may execute, which made every such start fail while the engine
// ran `env --default-signal` by path before bash (before its cgroup v1
// placement and rlimits). Each start path: the direct thread forking
// with clone3 into the cgroup (or a plain vfork without cgroups), the
// same with the move by pid, a buffer as stdout (os/exec's fork, which
// cannot reset them: the helper starts it), and the helper.
func TestSandboxedSignalsWithoutEnv(t *testing.T) {
	requireNamespaces(t)
	env, err := filepath.EvalSymlinks("/usr/bin/env")
	if err != nil {
		t.Skipf("no /usr/bin/env to mask: %v", err)
	}
	blocked := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(blocked, []byte("not a program\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	signal.Ignore(syscall.SIGINT, syscall.SIGQUIT)
	defer signal.Reset(syscall.SIGINT, syscall.SIGQUIT)
	if ign := sigIgnOf(t, "/proc/self/status"); ign&intQuit != intQuit {
		t.Fatalf("the premise failed: this process's SigIgn %x lacks SIGINT or SIGQUIT", ign)
	}
	const script = `grep SigIgn: /proc/self/status; if /usr/bin/env true; then echo env-ran; else echo env-denied; fi`
	opts := sandbox.Options{Masks: []sandbox.Mask{{Path: env, Source: blocked}}}
	check := func(t *testing.T, out string) {
		t.Helper()
		if !strings.Contains(out, "env-denied") {
			t.Fatalf("env(1) was not masked in the command's view (the test proves nothing):\n%s", out)
		}
		m := regexp.MustCompile(`SigIgn:\s*([0-9a-f]+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no SigIgn in %q", out)
		}
		if v, _ := strconv.ParseUint(m[1], 16, 64); v&intQuit != 0 {
			t.Errorf("the command's SigIgn %x has SIGINT or SIGQUIT", v)
		}
	}
	for _, c := range []struct {
		name          string
		direct, byPid bool
	}{{"direct", true, false}, {"direct-move-by-pid", true, true}, {"helper", false, false}} {
		t.Run(c.name, func(t *testing.T) {
			direct = c.direct
			sandbox.MoveByPid.Store(c.byPid)
			defer func() { direct = false; sandbox.MoveByPid.Store(false) }()
			r := runOpts(t, opts, nil, t.TempDir(), script)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.out)
			}
			check(t, r.out)
		})
	}
	t.Run("direct-buffer", func(t *testing.T) {
		sc, cg := prepareOpts(t, opts, script)
		var out bytes.Buffer
		cmd := exec.Command(sc.Path)
		cmd.Dir, cmd.Stdout, cmd.Stderr, cmd.SysProcAttr = t.TempDir(), &out, &out, sysProcAttr(cg)
		cmd.Env = withEnv(os.Environ(), sc.Env)
		if err := sc.StartDirect(cmd); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
		check(t, out.String())
	})
}

const intQuit = 1<<(syscall.SIGINT-1) | 1<<(syscall.SIGQUIT-1)

// sigIgnOf reads the SigIgn mask of a /proc/PID/status file.
func sigIgnOf(t *testing.T, path string) uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`SigIgn:\s*([0-9a-f]+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no SigIgn in %s", path)
	}
	v, err := strconv.ParseUint(string(m[1]), 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
