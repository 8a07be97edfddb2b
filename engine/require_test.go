package engine_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/sandbox"
)

// The host features some tests need, each with the environment variable
// that makes its absence a failure. .ci/run sets them all, so a broken probe
// fails CI instead of turning the tests that need the feature into skips.
const (
	requireLandlock   = "REQUIRE_LANDLOCK"
	requireCgroups    = "REQUIRE_CGROUPS"
	requireNamespaces = "REQUIRE_NAMESPACES"
)

// cgroupParent is where the tests' engines create their cgroups: ""
// (the test process's own cgroup), or the delegated subtree the cgroup v2
// VM (internal/vmtest) names in BASHVISOR_TEST_CGROUP_PARENT.
var cgroupParent = os.Getenv("BASHVISOR_TEST_CGROUP_PARENT")

// testConfig is engine.DefaultConfig with the tests' cgroup parent.
func testConfig() engine.Config {
	c := engine.DefaultConfig()
	c.CgroupParent = cgroupParent
	return c
}

// required reports whether the feature behind env must be present.
func required(env string) bool { return os.Getenv(env) == "1" }

// unavailable is the one place this package's tests give up for lack of a
// host feature: it fails the test when env is "1" and skips it otherwise.
func unavailable(t testing.TB, env, why string) {
	t.Helper()
	if required(env) {
		t.Fatalf("%s=1 but %s", env, why)
	}
	t.Skip(why)
}

// needLandlock skips without Landlock, and fails instead when
// REQUIRE_LANDLOCK=1 (CI).
func needLandlock(t testing.TB) {
	t.Helper()
	if c := sandbox.Probe(); !c.Available() {
		unavailable(t, requireLandlock, "restricted mode unavailable: "+c.String())
	}
}

// needNamespaces is needLandlock for what needs the sandbox's private
// namespaces too (workspace-write, network); REQUIRE_NAMESPACES=1 (CI)
// makes their absence a failure.
func needNamespaces(t testing.TB) {
	t.Helper()
	needLandlock(t)
	if c := sandbox.Probe(); !c.Namespaces {
		unavailable(t, requireNamespaces, "no private namespaces for sandboxed commands: "+c.String())
	}
}

// cgroupBase returns the directory under which this test process's engines
// create their cgroups. Without cgroups it skips the test, or fails it when
// REQUIRE_CGROUPS=1 (CI).
func cgroupBase(t testing.TB) string {
	t.Helper()
	m, err := proc.ProbeCgroups(cgroupParent)
	if err != nil {
		unavailable(t, requireCgroups, "cgroups unavailable: "+err.Error())
	}
	parent := filepath.Dir(m.Dir())
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	return parent
}

// haveCgroups reports whether the engine can create cgroups, for a test
// that checks both ways of ending processes; with REQUIRE_CGROUPS=1 it
// fails the test instead of reporting false.
func haveCgroups(t testing.TB) bool {
	t.Helper()
	m, err := proc.ProbeCgroups(cgroupParent)
	if err == nil {
		err = m.Close()
	}
	if err != nil && required(requireCgroups) {
		t.Fatalf("%s=1 but cgroups unavailable: %v", requireCgroups, err)
	}
	return err == nil
}
