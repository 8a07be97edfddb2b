package proc

import (
	"slices"
	"strings"
)

// secretPrefixes are name prefixes that always mark a secret.
var secretPrefixes = []string{"ANTHROPIC_", "OPENAI_", "GEMINI_", "AWS_SECRET", "PHOENIX_"}

// secretWords are the _-separated name words that mark a secret.
var secretWords = map[string]bool{
	"KEY": true, "KEYS": true, "APIKEY": true, "SECRET": true, "SECRETS": true,
	"TOKEN": true, "TOKENS": true, "PASSWORD": true, "PASSWD": true,
	"CREDENTIAL": true, "CREDENTIALS": true, "PRIVATE": true, "AUTH": true,
}

// AllowlistNames are the names the allowlist policy always passes.
var AllowlistNames = []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "TERM", "SHELL", "TMPDIR"}

// Forced are the variables set for every command, whatever the policy:
// nothing may wait for an editor, a pager or a password prompt.
var Forced = []string{
	"EDITOR=/bin/false",
	"VISUAL=/bin/false",
	"PAGER=cat",
	"GIT_PAGER=cat",
	"GIT_TERMINAL_PROMPT=0",
}

// RebaseGuard is the GIT_SEQUENCE_EDITOR set for foreground commands that
// contain an interactive rebase: git runs it as `$GIT_SEQUENCE_EDITOR "$@"`.
const RebaseGuard = `GIT_SEQUENCE_EDITOR=f() { echo "interactive rebase requires mode=background" >&2; exit 1; }; f`

// IsSecret reports whether an environment variable name names a secret
// (SPEC §2.2): it starts with one of the vendor prefixes, or one of its
// _-separated words (case-insensitive) is KEY, TOKEN, SECRET, PASSWORD, ….
func IsSecret(name string) bool {
	upper := strings.ToUpper(name)
	for _, p := range secretPrefixes {
		if strings.HasPrefix(upper, p) {
			return true
		}
	}
	for w := range strings.SplitSeq(upper, "_") {
		if secretWords[w] {
			return true
		}
	}
	return false
}

// EnvConfig is an environment policy.
type EnvConfig struct {
	// Allowlist passes only AllowlistNames and Allow; otherwise everything
	// but secrets passes (inherit-safe).
	Allowlist bool
	// Keep lists names kept even though they look like secrets.
	Keep []string
	// Allow lists extra names passed under Allowlist.
	Allow []string
	// Home, when set, replaces HOME.
	Home string
}

// Env is a filtered base environment, computed once per engine, plus what
// it removed so that overrides cannot re-add it.
type Env struct {
	base    []string
	removed map[string]bool
}

// NewEnv applies the policy to environ ("NAME=value" entries). Later
// duplicates win, as in os/exec.
func NewEnv(environ []string, cfg EnvConfig) *Env {
	e := &Env{removed: map[string]bool{}}
	allowed := func(name string) bool {
		if slices.Contains(cfg.Keep, name) {
			return true
		}
		if cfg.Allowlist {
			return slices.Contains(AllowlistNames, name) || slices.Contains(cfg.Allow, name)
		}
		return !IsSecret(name)
	}
	var kept []string
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		if !allowed(name) {
			e.removed[name] = true
			continue
		}
		kept = append(kept, kv)
	}
	if cfg.Home != "" {
		kept = append(kept, "HOME="+cfg.Home)
	}
	kept = append(kept, Forced...)
	e.base = dedup(kept)
	return e
}

// Base returns the filtered environment with the forced variables. The
// slice is shared: do not modify it.
func (e *Env) Base() []string { return e.base }

// Removed reports whether the policy removed name from the engine's
// environment.
func (e *Env) Removed(name string) bool { return e.removed[name] }

// With returns the base environment plus extra "NAME=value" entries and
// the overrides map, which apply last. An override naming a secret that
// the policy removed is dropped and reported in dropped. Extra entries are
// trusted (they come from the engine, not the caller).
func (e *Env) With(extra []string, overrides map[string]string) (env []string, dropped []string) {
	if len(extra) == 0 && len(overrides) == 0 {
		return e.base, nil
	}
	env = make([]string, 0, len(e.base)+len(extra)+len(overrides))
	env = append(env, e.base...)
	env = append(env, extra...)
	for k, v := range overrides {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			dropped = append(dropped, k)
			continue
		}
		if e.removed[k] && IsSecret(k) {
			dropped = append(dropped, k)
			continue
		}
		env = append(env, k+"="+v)
	}
	env = append(env, Forced...) // forced variables win over overrides
	slices.Sort(dropped)
	return dedup(env), dropped
}

// dedup keeps the last entry for each name, in the order of first
// appearance.
func dedup(env []string) []string {
	idx := make(map[string]int, len(env))
	out := env[:0:0]
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[name]; ok {
			out[i] = kv
			continue
		}
		idx[name] = len(out)
		out = append(out, kv)
	}
	return out
}
