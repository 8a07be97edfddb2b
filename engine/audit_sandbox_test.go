package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/safety"
)

// TestAuditRecordsEnforcedSandbox: the audit log records the sandbox a
// command ran in, not the one its call asked for: a read locked or guarded
// proved runs in the read-only sandbox from an unsandboxed call, and its
// line says read-only; a command guarded allows by name (make) runs as the
// call says, and its line says none.
func TestAuditRecordsEnforcedSandbox(t *testing.T) {
	needNamespaces(t)
	for _, c := range []struct{ profile, command, want string }{
		{"locked", "grep Seccomp: /proc/self/status", "read-only"},
		{"guarded", "grep Seccomp: /proc/self/status", "read-only"},
		{"guarded", "make -f /dev/null -s --eval 'all: ; @grep Seccomp: /proc/self/status'", "none"},
		{"", "grep Seccomp: /proc/self/status", "none"},
	} {
		t.Run(c.profile+"-"+strings.Fields(c.command)[0], func(t *testing.T) {
			var audit bytes.Buffer
			var mu sync.Mutex
			e := newEngine(t, func(cfg *engine.Config) {
				if c.profile != "" {
					cfg.Permissions, _ = safety.Preset(c.profile)
				}
				cfg.Audit = &lockedWriter{w: &audit, mu: &mu}
			})
			tc := engine.ToolContext{WorkingDir: t.TempDir(), ConversationID: "audit"}
			r := e.Run(context.Background(), tc, engine.Input{Command: c.command})
			if r.Status != engine.StatusOK {
				t.Fatalf("%s %q", r.Status, r.Output)
			}
			if ran := strings.Contains(r.Output, "Seccomp:\t2"); ran != (c.want != "none") {
				t.Fatalf("sandboxed %v, want %s: %q", ran, c.want, r.Output)
			}
			mu.Lock()
			defer mu.Unlock()
			var line struct{ Msg, Sandbox string }
			if err := json.Unmarshal(bytes.TrimSpace(audit.Bytes()), &line); err != nil {
				t.Fatalf("%v: %s", err, audit.Bytes())
			}
			if line.Msg != "bash" || line.Sandbox != c.want {
				t.Errorf("audit line says sandbox %q, want %q: %s", line.Sandbox, c.want, audit.Bytes())
			}
		})
	}
}

// A call asking for hosts is audited with them: "ask" while a person has
// not approved them (the command itself allowed), "approved" once they have.
func TestAuditRecordsNetworkAsks(t *testing.T) {
	needNamespaces(t)
	var audit bytes.Buffer
	var mu sync.Mutex
	e := newEngine(t, func(cfg *engine.Config) { cfg.Audit = &lockedWriter{w: &audit, mu: &mu} })
	tc := engine.ToolContext{WorkingDir: t.TempDir(), ConversationID: "audit-net", Sandbox: engine.Sandbox{Profile: engine.ReadOnly}}
	in := engine.Input{Command: "true", Network: []string{"example.invalid:8443"}}
	for _, approved := range []bool{false, true} {
		tc.Approved = approved
		r := e.Run(context.Background(), tc, in)
		mu.Lock()
		last := bytes.TrimSpace(audit.Bytes())
		if i := bytes.LastIndexByte(last, '\n'); i >= 0 {
			last = last[i+1:]
		}
		var line struct {
			Decision string
			Network  []string
		}
		err := json.Unmarshal(last, &line)
		mu.Unlock()
		want := map[bool]string{false: "ask", true: "approved"}[approved]
		if err != nil || line.Decision != want || len(line.Network) != 1 || line.Network[0] != "example.invalid:8443" {
			t.Errorf("approved %v (%s): audit %s, want decision %s with the host (%v)", approved, r.Status, last, want, err)
		}
	}
}
