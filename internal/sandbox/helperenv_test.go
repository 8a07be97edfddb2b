//go:build linux

package sandbox_test

import (
	"os"
	"testing"

	"github.com/bashvisor/bashvisor/internal/sandbox"
)

// TestHelperRuntimeEnvPutBack: the helper runs its Go runtime with
// GOMAXPROCS=1 (helperenv.go), and the command still gets its own
// GOMAXPROCS, or none, in a world (rootless: with the world's command
// server and, as when it died, with the helper) and without one.
func TestHelperRuntimeEnvPutBack(t *testing.T) {
	requireSandbox(t)
	const show = `echo "${GOMAXPROCS-unset}"; env | grep -c '^GOMAXPROCS=' || true`
	for _, c := range []struct {
		name string
		env  []string
		want string
	}{
		{"set", []string{"GOMAXPROCS=7"}, "7\n1\n"},
		{"unset", nil, "unset\n0\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("GOMAXPROCS", "")
			os.Unsetenv("GOMAXPROCS")
			if r := runIn(t, zeroLimits, t.TempDir(), show, c.env...); r.code != 0 || r.out != c.want {
				t.Errorf("without a world: exit %d, %q, want %q", r.code, r.out, c.want)
			}
			if !requireSandbox(t).Namespaces {
				return
			}
			// Rootless, with the world's command server (no helper
			// runs) and without (the helper, as when the server died).
			defer sandbox.UseServer.Store(true)
			for _, served := range []bool{true, false} {
				sandbox.UseServer.Store(served)
				w := newWorld(t, sandbox.WorldOptions{})
				dir := t.TempDir()
				opts := sandbox.Options{World: w, Dir: dir}
				if r := runOpts(t, opts, nil, dir, show, c.env...); r.code != 0 || r.out != c.want {
					t.Errorf("in a world (server %v): exit %d, %q, want %q", served, r.code, r.out, c.want)
				}
			}
		})
	}
}
