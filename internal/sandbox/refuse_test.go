//go:build linux

package sandbox_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/sandbox"
)

// TestWorkspaceReplacedRefused: a working directory or workspace that
// the sandbox replaces (/tmp, a workspace holding /tmp), hides (one
// holding the engine's directories) or that is the kernel's (/proc,
// /dev) is refused by Prepare, and by World.CheckWorkspace before a
// layer is made, with the same message as root and rootless (CI runs
// this package as both); the read-only profile still works in /, /proc
// and below /tmp. Before, rootless read-only in /tmp failed "not started
// inside the command's namespaces", workspace-write with lchown EPERM,
// and root ran read-only in the host's /tmp hidden behind the world's.
func TestWorkspaceReplacedRefused(t *testing.T) {
	ws := t.TempDir()
	hidden := filepath.Join(ws, "engine")
	if err := os.Mkdir(hidden, 0o700); err != nil {
		t.Fatal(err)
	}
	hidden, _ = filepath.EvalSymlinks(hidden)
	w := newWorld(t, sandbox.WorldOptions{Hide: []string{hidden}})
	tmpWD := "sandbox: the working directory /tmp is not the host's in the sandbox"
	for _, c := range []struct {
		name, dir string
		writable  []string
		want      string
	}{
		{"read-only/tmp", "/tmp", nil, tmpWD},
		{"workspace-write/tmp", "/tmp", []string{"/tmp"}, tmpWD},
		{"workspace-write/root", "/", []string{"/"}, "sandbox: the workspace / holds /tmp, which the conversation's own /tmp replaces"},
		{"workspace-write/holds-engine", ws, []string{ws}, "sandbox: the workspace " + filepath.Dir(hidden) + " holds the engine's directory " + hidden},
		{"workspace-write/proc", "/proc", []string{"/proc"}, "sandbox: the workspace /proc is on the kernel's file systems (/proc)"},
		{"workspace-write/dev", "/dev", []string{"/dev"}, "sandbox: the workspace /dev is on the kernel's file systems (/dev)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := w.CheckWorkspace(c.dir, c.writable)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("CheckWorkspace(%s, %v) = %v, want %q…", c.dir, c.writable, err, c.want)
			}
			_, perr := sandbox.Prepare(sandbox.Options{
				World: w, Dir: c.dir, Roots: sandbox.Roots{Writable: c.writable},
				Bash: bashPath(t), Command: "true",
			})
			if perr == nil || err == nil || perr.Error() != err.Error() {
				t.Errorf("Prepare in %s = %v, want CheckWorkspace's %v", c.dir, perr, err)
			}
		})
	}
	t.Run("relative", func(t *testing.T) { // review7, review8: a relative path passed, and started from the namespaces' root
		t.Chdir("/")
		for _, c := range []struct {
			dir      string
			writable []string
		}{{"tmp", nil}, {"/", []string{"proc"}}} {
			if err := w.CheckWorkspace(c.dir, c.writable); err == nil || !strings.Contains(err.Error(), "is relative") {
				t.Errorf("CheckWorkspace(%s, %v) in / = %v, want a relative path refused", c.dir, c.writable, err)
			}
		}
	})
	t.Run("kernel-without-world", func(t *testing.T) {
		var none *sandbox.World
		if err := none.CheckWorkspace("/proc/self", []string{"/proc/self"}); err == nil || !strings.Contains(err.Error(), "kernel's file systems") {
			t.Errorf("CheckWorkspace(/proc/self) without a world = %v", err)
		}
		if err := none.CheckWorkspace("/tmp", []string{"/tmp"}); err != nil {
			t.Errorf("without a world /tmp is the host's: %v", err)
		}
	})
	below := t.TempDir() // below /tmp: shown at its path
	below, _ = filepath.EvalSymlinks(below)
	for _, dir := range []string{"/", "/proc", "/dev", below} {
		t.Run("read-only-works"+dir, func(t *testing.T) {
			if err := w.CheckWorkspace(dir, nil); err != nil {
				t.Fatal(err)
			}
			if r := runWorld(t, w, sandbox.Options{}, dir, "pwd"); r.code != 0 || r.out != dir+"\n" {
				t.Errorf("pwd in %s: exit %d, %q", dir, r.code, r.out)
			}
		})
	}
	if err := w.CheckWorkspace(below, []string{below}); err != nil {
		t.Errorf("a workspace below /tmp: %v", err)
	}
}
