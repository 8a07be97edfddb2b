package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/bashvisor/bashvisor/internal/egress"
	"github.com/bashvisor/bashvisor/internal/jobs"
	"github.com/bashvisor/bashvisor/safety"
)

// Profile names a sandbox profile: what a command may write. Every profile
// keeps the whole boundary of package sandbox (no processes, signals,
// ptrace or IPC outside, resource limits, a private scratch $TMPDIR, a
// pids limit); they differ in where writes go.
type Profile string

// The sandbox profiles.
const (
	// Unrestricted runs the command as the engine's user, with no sandbox.
	Unrestricted Profile = ""
	// ReadOnly lets the command read and run anything but write only its
	// scratch $TMPDIR and the conversation's build caches.
	ReadOnly Profile = "read-only"
	// WorkspaceWrite adds the working directory and its git directories
	// (git add, commit, branch and stash work, in worktrees and submodules
	// too), and Sandbox.Writable; the repository's hooks and config stay
	// read-only, because git would run them later outside the sandbox (see
	// sandbox.WorkspaceRoots). It needs private namespaces (a root
	// engine, or CAP_SYS_ADMIN).
	WorkspaceWrite Profile = "workspace-write"
)

// ParseProfile parses a profile name: "read-only", "workspace-write", or
// "none" (or "") for Unrestricted.
func ParseProfile(name string) (Profile, error) {
	switch p := Profile(strings.ToLower(strings.TrimSpace(name))); p {
	case "none", Unrestricted:
		return Unrestricted, nil
	case ReadOnly, WorkspaceWrite:
		return p, nil
	}
	return "", fmt.Errorf("%w: unknown sandbox profile %q (want none, read-only or workspace-write)", ErrBadInput, name)
}

// Sandbox is the sandbox of a call: a profile and what it may reach.
type Sandbox struct {
	// Profile says where the command may write; Unrestricted means no
	// sandbox at all (Writable and Network must then be empty).
	Profile Profile
	// Writable are more directories (absolute paths) a WorkspaceWrite
	// command may write, such as a second checkout. ReadOnly ignores
	// them.
	Writable []string
	// Network, when not empty, lets the command reach what its entries
	// allow through the engine's egress proxy, and nothing else: domains
	// ("registry.npmjs.org", ports 80 and 443), wildcards
	// ("*.example.com"), host:port pairs and presets (npm, pypi, go,
	// crates, debian, github, playwright). The command's network
	// namespace has no other way out: its resolver answers the allowed
	// names with an address whose listeners carry connections to the
	// proxy, and its HTTP_PROXY, HTTPS_PROXY and package managers' proxy
	// settings point at the proxy where Config.ProxyEnv says they are
	// needed. The proxy resolves names itself,
	// refuses private, loopback, link-local and metadata addresses unless
	// an entry names that host:port exactly, and every decision goes to
	// the audit log. Empty: no network. An entry that does not parse
	// fails the call with ErrBadInput. Needs private namespaces.
	Network []string
}

// On reports whether the command runs sandboxed.
func (s Sandbox) On() bool { return s.Profile != Unrestricted }

// profile turns a call's sandbox into the job's, with the conversation's
// cache directory; nil for an unrestricted call.
func (e *Engine) profile(tc ToolContext) (*jobs.Profile, error) {
	s := tc.Sandbox
	if !s.On() {
		if len(s.Writable) > 0 || len(s.Network) > 0 {
			return nil, fmt.Errorf("%w: writable roots and a network allowlist need a sandbox profile", ErrBadInput)
		}
		return nil, nil
	}
	if _, err := ParseProfile(string(s.Profile)); err != nil {
		return nil, err
	}
	p := &jobs.Profile{Workspace: s.Profile == WorkspaceWrite}
	if len(s.Network) > 0 {
		allow, err := egress.ParseAllowlist(s.Network)
		if err != nil {
			return nil, fmt.Errorf("%w: network allowlist: %w", ErrBadInput, err)
		}
		p.Network, p.ProxyEnv = allow, e.proxyEnv()
	}
	if p.Workspace {
		for _, w := range s.Writable {
			if !filepath.IsAbs(w) {
				return nil, fmt.Errorf("%w: writable root must be an absolute path: %q", ErrBadInput, w)
			}
		}
		p.Writable = s.Writable
	}
	p.Layer = p.Workspace && !e.noLayer
	if p.Network != nil && e.auditor != nil {
		conv := tc.ConversationID
		p.OnProxy = func(d egress.Decision) { e.auditor.Egress(conv, d) }
	}
	return p, nil
}

// profileName is a profile as logs and texts name it.
func profileName(s Sandbox) string {
	if !s.On() {
		return "none"
	}
	return string(s.Profile)
}

// dropMissingBases leaves out the base caches that are not directories
// (a missing one is made when a conversation's sandbox starts), saying so
// in the log: a conversation's cache then starts empty.
func (e *Engine) dropMissingBases() {
	b := &e.cfg.Sandbox.BaseCaches
	for _, f := range []*string{&b.GoBuild, &b.GoMod, &b.Npm, &b.Pip} {
		if *f == "" {
			continue
		}
		if fi, err := os.Stat(*f); !filepath.IsAbs(*f) || err == nil && !fi.IsDir() || err != nil && !errors.Is(err, fs.ErrNotExist) {
			e.log.Warn("base cache left out: not an absolute path of a directory", "dir", *f)
			*f = ""
		}
	}
}

// readsOnly is the profile that allows only what the analyser proves
// reads (the "locked" preset): a command it allows is one a read-only
// rule let through.
var readsOnly = sync.OnceValue(func() *safety.Profile {
	p, err := safety.Preset("locked")
	if err != nil {
		panic(err) // a built-in preset
	}
	if err := p.Compile(); err != nil {
		panic(err)
	}
	return p
})

// kernelProfile returns the sandbox a command runs in under the
// permission profile: when the profile allowed it through a read-only
// rule (see kernelRead) and the engine can sandbox, the read-only
// sandbox, with the call's network allowlist, so that a command the
// analyser wrongly allows still cannot change anything; tc's sandbox
// otherwise (a command a rule allows by name, such as guarded's builds,
// or one a person approved, runs as the call says). Where the engine
// cannot sandbox, an unsandboxed call's read never gets here as an
// allowed command (see withoutKernel), and a sandboxed call fails.
func (e *Engine) kernelProfile(tc ToolContext, command string, a safety.Analysis) Sandbox {
	if tc.Sandbox.Profile == ReadOnly || !kernelRead(e.cfg.Permissions, command, a) {
		return tc.Sandbox
	}
	if c := e.sup.Sandbox(); !c.Available() || !c.Namespaces {
		return tc.Sandbox // run refuses a sandboxed call; withoutKernel kept an unsandboxed one from Allow
	}
	return Sandbox{Profile: ReadOnly, Network: tc.Sandbox.Network}
}

// kernelRead reports whether permission profile p allowed a's command
// only as a read (Rule.ReadOnly: the analyser proved that it only reads,
// as every command the "locked" preset and the reads the "guarded" preset
// allow without asking), which the kernel is to contain.
func kernelRead(p *safety.Profile, command string, a safety.Analysis) bool {
	if p == nil || a.Outcome.Decision != safety.Allow || !readRules(p) {
		return false
	}
	return onlyReads(p) || safety.Gate(command, readsOnly()).Decision == safety.Allow
}

// withoutKernel is a's analysis on an engine that can (kernel) or cannot
// start the read-only sandbox (why: the sandbox's capabilities): when
// the profile allowed an unsandboxed call's command only as a read the
// kernel is to contain (kernelRead) and the engine cannot start the
// read-only sandbox (no Landlock, or no private namespaces: a user other
// than root without user namespaces or SandboxMain), the command is not
// allowed on the analyser's word alone: the profile's default decides,
// so guarded asks (a person may approve running it unsandboxed; the ask
// is not Contained) and locked denies. A profile whose default allows
// loses nothing and allows it.
func withoutKernel(p *safety.Profile, kernel bool, why string, tc ToolContext, command string, a safety.Analysis) safety.Analysis {
	if tc.Sandbox.On() || kernel || p == nil || p.Default == safety.Allow || p.Default == "" || !kernelRead(p, command, a) {
		return a
	}
	name := p.Name
	if name == "" {
		name = "custom"
	}
	why = fmt.Sprintf("permission profile %s lets a read run only in the read-only sandbox, which this engine cannot start (%s)", name, why)
	a.Outcome.Decision, a.Outcome.Rule, a.Outcome.Contained = p.Default, "no-sandbox", false
	if p.Default == safety.Ask {
		a.Outcome.Message = why + "; instead: ask the user to approve running it unsandboxed"
	} else {
		a.Outcome.Message = why + "; instead: run the engine where the sandbox works (Landlock, and user namespaces when not root)"
	}
	a.Part = ""
	return a
}

// onlyReads reports whether p allows nothing but through read-only rules
// (as "locked" does), so that whatever it allowed only reads.
func onlyReads(p *safety.Profile) bool {
	if p.Default == safety.Allow {
		return false
	}
	for _, r := range p.Rules {
		if r.Decision == safety.Allow && !r.ReadOnly {
			return false
		}
	}
	return true
}

// readRules reports whether p allows anything through a read-only rule.
func readRules(p *safety.Profile) bool {
	for _, r := range p.Rules {
		if r.ReadOnly && r.Decision == safety.Allow {
			return true
		}
	}
	return false
}
