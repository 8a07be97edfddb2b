// Package testenv is the one place tests give up for lack of something on
// the host, and the one way they poll: a test that needs a kernel feature
// or a program skips without it on a developer's machine, and fails
// instead where the run says the host must have it (.ci/run sets every
// REQUIRE_* variable), so a broken probe or a missing tool fails CI rather
// than turning tests into silent skips. Like golang.org/x/tools'
// internal/testenv.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// The host features a test may need, each named by the environment
// variable that makes its absence a failure.
const (
	// Landlock: the sandbox (Landlock and seccomp).
	Landlock = "REQUIRE_LANDLOCK"
	// Cgroups: per-command cgroups (v2, or v1 memory and pids on a hybrid
	// host) under the engine's own cgroup.
	Cgroups = "REQUIRE_CGROUPS"
	// Namespaces: private namespaces for sandboxed commands (root or
	// CAP_SYS_ADMIN).
	Namespaces = "REQUIRE_NAMESPACES"
	// Etcd: an etcd server binary for the cluster's multi-node scenario.
	Etcd = "REQUIRE_ETCD"
	// Tools: the programs tests run (python3, git, curl, node, …), see
	// NeedsTool.
	Tools = "REQUIRE_TOOLS"
	// Unprivileged: the run is CI's second pass as a user other than
	// root (.ci/unprivileged), so the sandbox must get its namespaces
	// from user namespaces; tests that check that fail otherwise (a run
	// that was root after all, or found no user namespaces). Tests whose
	// fixture needs root (switching users, mounting) skip there: they ran
	// in the first pass.
	Unprivileged = "REQUIRE_UNPRIVILEGED"
	// Clients: the agent clients (Claude Code, Codex) whose model-facing
	// text mcpserver's tests capture, installed by `make clients`.
	Clients = "REQUIRE_CLIENTS"
)

// CgroupParent is where tests create their engines' cgroups (proc.ProbeCgroups,
// config.Cgroups.Parent): "" (the test process's own cgroup), or the
// delegated subtree named by BASHVISOR_TEST_CGROUP_PARENT, which the
// cgroup v2 VM (internal/vmtest) sets: a cgroup with controllers enabled
// for its children and no process of its own, as a systemd unit or a
// container gives one.
func CgroupParent() string { return os.Getenv("BASHVISOR_TEST_CGROUP_PARENT") }

// Required reports whether the feature named by env must be present.
func Required(env string) bool { return os.Getenv(env) == "1" }

// Need gives up on the test when err says the feature named by env is
// missing: it fails the test when the feature is required, and skips it
// otherwise. A nil err returns at once.
func Need(t testing.TB, env string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if Required(env) {
		t.Fatalf("%s=1 but %v", env, err)
	}
	t.Skip(err)
}

// Needf is Need with a message instead of an error, when ok is false.
func Needf(t testing.TB, env string, ok bool, format string, args ...any) {
	t.Helper()
	if !ok {
		Need(t, env, fmt.Errorf(format, args...))
	}
}

// NeedsTool returns the path of each program the test runs, in order; a
// missing one skips the test, or fails it when REQUIRE_TOOLS=1.
func NeedsTool(t testing.TB, names ...string) []string {
	t.Helper()
	paths := make([]string, len(names))
	for i, n := range names {
		p, err := exec.LookPath(n)
		if err != nil {
			Need(t, Tools, fmt.Errorf("%s not installed: %w", n, err))
		}
		paths[i] = p
	}
	return paths
}

// Failer is what Eventually needs of a test: a testing.TB, or the
// *rapid.T of a property test (which is not one).
type Failer interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Eventually calls cond every few milliseconds until it reports true, and
// fails the test with the message if that has not happened within d (use
// generous bounds: machines running tests are often loaded). The message's
// arguments are evaluated when Eventually is called: wrap one in Last to
// show what cond saw last. cond may itself fail the test (from the test's
// goroutine) on an error that no wait will cure.
func Eventually(t Failer, d time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: "+format, append([]any{d}, args...)...)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Last is an argument for Eventually's message that formats *p when the
// message is printed, so that a failed wait shows the value cond last
// stored there rather than the one *p held before the first try. It
// formats with the verb and flags it is given (%v, %+v, %q, %d, …).
func Last[V any](p *V) fmt.Formatter { return last[V]{p} }

type last[V any] struct{ p *V }

func (l last[V]) Format(f fmt.State, verb rune) {
	fmt.Fprintf(f, fmt.FormatString(f, verb), *l.p)
}

// HasTool reports whether the program is installed, for a test that
// checks more with it than without; a missing one fails the test when
// REQUIRE_TOOLS=1.
func HasTool(t testing.TB, name string) bool {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if Required(Tools) {
			t.Fatalf("%s=1 but %s is not installed", Tools, name)
		}
		return false
	}
	return true
}

// Lazy is a message argument computed when the message is printed, so
// that Eventually's failure shows the last value seen:
//
//	testenv.Eventually(t, d, cond, "got %s", testenv.Lazy(func() string { return last }))
type Lazy func() string

func (l Lazy) String() string { return l() }

// ExhaustDescriptors opens /dev/null until the process cannot open
// another descriptor, and returns what closes them all again: for a test
// of what happens out of descriptors, in a child process with a low limit
// (prlimit --nofile=256:256).
func ExhaustDescriptors() (release func()) {
	var held []*os.File
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			break
		}
		held = append(held, f)
	}
	return func() {
		for _, f := range held {
			f.Close()
		}
	}
}
