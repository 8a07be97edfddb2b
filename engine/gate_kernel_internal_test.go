package engine

import (
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/safety"
)

// TestReadsWithoutKernel: where the engine cannot start the read-only
// sandbox (no Landlock and no namespaces, or Landlock without
// namespaces), a read that locked or guarded allows only in it is
// not allowed on the analyser's word: guarded asks (not contained: a
// person approves running it unsandboxed) and locked denies, each saying
// why. With the sandbox, with a sandboxed call (which run refuses), for a
// command allowed by name and under a profile that allows by default,
// nothing changes.
func TestReadsWithoutKernel(t *testing.T) {
	// the engine's sandbox: whether it can start the read-only sandbox,
	// and its capabilities in words
	type caps struct {
		kernel bool
		why    string
	}
	full, none := caps{true, ""}, caps{false, "landlock_abi=0 filesystem=off seccomp=off namespaces=off"}
	landlockOnly := caps{false, "landlock_abi=6 filesystem=on seccomp=on namespaces=off"}
	for _, c := range []struct {
		profile, cmd string
		caps         caps
		sandbox      Profile
		want         safety.Decision
	}{
		{"guarded", "cat f", none, Unrestricted, safety.Ask},
		{"guarded", "git status --short", landlockOnly, Unrestricted, safety.Ask},
		{"locked", "cat f", none, Unrestricted, safety.Deny},
		{"locked", "grep -rn x .", landlockOnly, Unrestricted, safety.Deny},
		{"guarded", "cat f", full, Unrestricted, safety.Allow},
		{"locked", "cat f", full, Unrestricted, safety.Allow},
		{"guarded", "cat f", none, ReadOnly, safety.Allow},
		{"guarded", "make test", none, Unrestricted, safety.Allow},
		{"standard", "cat f", none, Unrestricted, safety.Allow},
		{"locked", "rm f", none, Unrestricted, safety.Deny},
	} {
		p, err := safety.Preset(c.profile)
		if err != nil {
			t.Fatal(err)
		}
		tc := ToolContext{WorkingDir: "/w", Sandbox: Sandbox{Profile: c.sandbox}}
		a := withoutKernel(p, c.caps.kernel, c.caps.why, tc, c.cmd, safety.Analyze(c.cmd, safety.Options{WorkDir: "/w", Profile: p}))
		o := a.Outcome
		if o.Decision != c.want {
			t.Errorf("%s %q, caps %v, sandbox %q: %s (%s), want %s", c.profile, c.cmd, c.caps, c.sandbox, o.Decision, o.Message, c.want)
			continue
		}
		if o.Rule != "no-sandbox" {
			continue
		}
		if o.Contained || a.Part != "" || !strings.Contains(o.Message, "only in the read-only sandbox, which this engine cannot start ("+c.caps.why+")") || !strings.Contains(o.Message, "; instead: ") {
			t.Errorf("%s %q: %+v part %q", c.profile, c.cmd, o, a.Part)
		}
	}
}
