package engine_test

import (
	"path/filepath"
	"testing"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// testConfig is engine.DefaultConfig with the tests' cgroup parent
// (testenv.CgroupParent).
func testConfig() engine.Config {
	c := engine.DefaultConfig()
	c.Cgroups.Parent = testenv.CgroupParent()
	return c
}

// needLandlock skips without Landlock, and fails instead when
// REQUIRE_LANDLOCK=1 (CI).
func needLandlock(t testing.TB) {
	t.Helper()
	c := sandbox.Probe()
	testenv.Needf(t, testenv.Landlock, c.Available(), "restricted mode unavailable: %s", c)
}

// needNamespaces is needLandlock for what needs the sandbox's private
// namespaces too (workspace-write, network); REQUIRE_NAMESPACES=1 (CI)
// makes their absence a failure.
func needNamespaces(t testing.TB) {
	t.Helper()
	needLandlock(t)
	c := sandbox.Probe()
	testenv.Needf(t, testenv.Namespaces, c.Namespaces, "no private namespaces for sandboxed commands: %s", c)
}

// cgroupBase returns the directory under which this test process's engines
// create their cgroups. Without cgroups it skips the test, or fails it when
// REQUIRE_CGROUPS=1 (CI).
func cgroupBase(t testing.TB) string {
	t.Helper()
	m, err := proc.ProbeCgroups(testenv.CgroupParent())
	testenv.Need(t, testenv.Cgroups, err)
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
	m, err := proc.ProbeCgroups(testenv.CgroupParent())
	if err == nil {
		err = m.Close()
	}
	if err != nil && testenv.Required(testenv.Cgroups) {
		t.Fatalf("REQUIRE_CGROUPS=1 but cgroups unavailable: %v", err)
	}
	return err == nil
}

// cgroupModes returns the values of Config.Cgroups.Off a test of both
// ways of freezing and ending a command runs with: both where the
// engine can create cgroups, only without them elsewhere (the
// unprivileged CI pass), or failing the test when REQUIRE_CGROUPS=1
// but none can be created.
func cgroupModes(t testing.TB) []bool {
	t.Helper()
	if haveCgroups(t) {
		return []bool{false, true}
	}
	return []bool{true}
}

// cgroupsName names a subtest run with Config.Cgroups.Off = off.
func cgroupsName(off bool) string {
	if off {
		return "no-cgroups"
	}
	return "cgroups"
}
