package engine

import (
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/safety"
)

// TestReadsWithoutKernel: where the engine cannot start the read-only
// sandbox (the zero Capabilities: no Landlock, no namespaces; or Landlock
// without namespaces), a read that locked or guarded allows only in it is
// not allowed on the analyser's word: guarded asks (not contained: a
// person approves running it unsandboxed) and locked denies, each saying
// why. With the sandbox, with a sandboxed call (which run refuses), for a
// command allowed by name and under a profile that allows by default,
// nothing changes.
func TestReadsWithoutKernel(t *testing.T) {
	full := sandbox.Capabilities{Filesystem: true, Seccomp: true, Namespaces: true}
	landlockOnly := sandbox.Capabilities{Filesystem: true, Seccomp: true, Reason: "no user namespaces"}
	for _, c := range []struct {
		profile, cmd string
		caps         sandbox.Capabilities
		sandbox      Profile
		want         safety.Decision
	}{
		{"guarded", "cat f", sandbox.Capabilities{}, Unrestricted, safety.Ask},
		{"guarded", "git status --short", landlockOnly, Unrestricted, safety.Ask},
		{"locked", "cat f", sandbox.Capabilities{}, Unrestricted, safety.Deny},
		{"locked", "grep -rn x .", landlockOnly, Unrestricted, safety.Deny},
		{"guarded", "cat f", full, Unrestricted, safety.Allow},
		{"locked", "cat f", full, Unrestricted, safety.Allow},
		{"guarded", "cat f", sandbox.Capabilities{}, ReadOnly, safety.Allow},
		{"guarded", "make test", sandbox.Capabilities{}, Unrestricted, safety.Allow},
		{"standard", "cat f", sandbox.Capabilities{}, Unrestricted, safety.Allow},
		{"locked", "rm f", sandbox.Capabilities{}, Unrestricted, safety.Deny},
	} {
		p, err := safety.Preset(c.profile)
		if err != nil {
			t.Fatal(err)
		}
		tc := ToolContext{WorkingDir: "/w", Sandbox: Sandbox{Profile: c.sandbox}}
		a := withoutKernel(p, c.caps, tc, c.cmd, safety.Analyze(c.cmd, safety.Options{WorkDir: "/w", Profile: p}))
		o := a.Outcome
		if o.Decision != c.want {
			t.Errorf("%s %q, caps %v, sandbox %q: %s (%s), want %s", c.profile, c.cmd, c.caps, c.sandbox, o.Decision, o.Message, c.want)
			continue
		}
		if o.Rule != "no-sandbox" {
			continue
		}
		if o.Contained || a.Part != "" || !strings.Contains(o.Message, "only in the read-only sandbox, which this engine cannot start") || !strings.Contains(o.Message, "; instead: ") {
			t.Errorf("%s %q: %+v part %q", c.profile, c.cmd, o, a.Part)
		}
	}
}
