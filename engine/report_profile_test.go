package engine_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/safety"
)

// Under the locked and guarded permission profiles, a command the
// analyser allows as a read runs in the read-only sandbox, though the call
// asked for none: its processes carry the sandbox's seccomp filter, and
// what it writes to the workspace does not reach it (git status, which
// the grammar allows as a read, refreshes a stale .git/index: unsandboxed
// it rewrites the file, under the profiles it cannot). A command guarded
// allows by name (go, make, ...) runs as the call says.
func TestProfilesRunReadsSandboxed(t *testing.T) {
	needNamespaces(t)
	for _, name := range []string{"locked", "guarded", ""} {
		t.Run(name+"-", func(t *testing.T) {
			e := newEngine(t, func(c *engine.Config) {
				if name != "" {
					p, err := safety.Preset(name)
					if err != nil {
						t.Fatal(err)
					}
					c.Permissions = p
				}
			})
			dir := repo(t)
			tc := engine.ToolContext{WorkingDir: dir, ConversationID: "p", Env: gitEnv}
			sandboxed := name != ""
			r := e.Run(context.Background(), tc, engine.Input{Command: "grep Seccomp: /proc/self/status"})
			if r.Status != engine.StatusOK || strings.Contains(r.Output, "Seccomp:\t2") != sandboxed {
				t.Fatalf("seccomp: %s %q", r.Status, r.Output)
			}
			index := filepath.Join(dir, ".git", "index")
			before, _ := os.ReadFile(index)
			future := time.Now().Add(time.Hour)
			if err := os.Chtimes(filepath.Join(dir, "README"), future, future); err != nil {
				t.Fatal(err)
			}
			if r := e.Run(context.Background(), tc, engine.Input{Command: "git status --short"}); r.Status != engine.StatusOK {
				t.Fatalf("git status: %s %q", r.Status, r.Output)
			}
			after, _ := os.ReadFile(index)
			if bytes.Equal(before, after) != sandboxed {
				t.Fatalf("git status rewrote .git/index: %v, want %v", !bytes.Equal(before, after), !sandboxed)
			}
			if name == "guarded" {
				// Allowed by name, not as a read: unsandboxed (it may build).
				r := e.Run(context.Background(), tc, engine.Input{Command: "make -f /dev/null -s --eval 'all: ; @grep Seccomp: /proc/self/status'"})
				if r.Status != engine.StatusOK || strings.Contains(r.Output, "Seccomp:\t2") {
					t.Fatalf("make: %s %q", r.Status, r.Output)
				}
			}
		})
	}
}

// BenchmarkLockedRead measures what the kernel's enforcement costs a read
// under the locked profile: the same command with no profile (as the
// analyser alone allowed it before) and under locked (in the read-only
// sandbox), side by side.
func BenchmarkLockedRead(b *testing.B) {
	needNamespaces(b)
	for _, name := range []string{"none", "locked"} {
		b.Run(name, func(b *testing.B) {
			e := newEngine(b, func(c *engine.Config) {
				if name == "locked" {
					c.Permissions, _ = safety.Preset("locked")
				}
			})
			tc := engine.ToolContext{WorkingDir: b.TempDir(), ConversationID: "bench"}
			for b.Loop() {
				if r := e.Run(context.Background(), tc, engine.Input{Command: "cat /etc/hostname"}); r.Status != engine.StatusOK {
					b.Fatalf("%s %q", r.Status, r.Output)
				}
			}
		})
	}
}
