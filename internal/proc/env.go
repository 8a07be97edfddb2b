package proc

import (
	"slices"
	"strings"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/secret"
)

// allowlistNames are the names the allowlist policy always passes.
var allowlistNames = []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "TERM", "SHELL", "TMPDIR"}

// AllowlistNames returns the names the allowlist policy always passes.
func AllowlistNames() []string { return slices.Clone(allowlistNames) }

// forced are the variables set for every command, whatever the policy:
// nothing may wait for an editor, a pager or a password prompt.
var forced = []string{
	"EDITOR=/bin/false",
	"VISUAL=/bin/false",
	"PAGER=cat",
	"GIT_PAGER=cat",
	"GIT_TERMINAL_PROMPT=0",
}

// Forced returns the "NAME=value" variables set for every command,
// whatever the policy.
func Forced() []string { return slices.Clone(forced) }

// Env is a filtered base environment, computed once per engine, plus what
// it removed so that overrides cannot re-add it, and the values of the
// secrets it removed so that output can be redacted.
type Env struct {
	base     []string
	removed  map[string]bool
	secrets  map[string]string // removed secrets (IsSecret or Strip): name → value
	redactor *secret.Redactor
}

// NewEnv applies the policy to cfg.Environ ("NAME=value" entries). Later
// duplicates win, as in os/exec. Under config.Allowlist only
// AllowlistNames and cfg.Allow pass; otherwise everything but secrets
// (secret.IsSecret) does.
func NewEnv(cfg config.Env) *Env {
	e := &Env{removed: map[string]bool{}, secrets: map[string]string{}}
	allowed := func(name string) bool {
		if slices.Contains(cfg.Strip, name) {
			return false
		}
		if slices.Contains(cfg.Keep, name) {
			return true
		}
		if cfg.Policy == config.Allowlist {
			return slices.Contains(allowlistNames, name) || slices.Contains(cfg.Allow, name)
		}
		return !secret.IsSecret(name)
	}
	var kept []string
	for _, kv := range cfg.Environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		if !allowed(name) {
			e.removed[name] = true
			if secret.IsSecret(name) || slices.Contains(cfg.Strip, name) {
				e.secrets[name] = value // later duplicates win
			}
			continue
		}
		kept = append(kept, kv)
	}
	kept = append(kept, forced...)
	e.base = dedup(kept)
	e.redactor = secret.NewRedactor(e.secrets)
	return e
}

// Redactor returns the Redactor for the values of the secrets the policy
// removed (names that secret.IsSecret or Strip marks). Names the allowlist
// merely did not pass (DISPLAY, XDG_RUNTIME_DIR) are not secrets and their
// values are not redacted; values shorter than secret.MinLen never are.
func (e *Env) Redactor() *secret.Redactor { return e.redactor }

// With returns the base environment plus extra "NAME=value" entries and
// the overrides map, which apply last. An override naming a secret that
// the policy removed (see Redactor) is dropped and reported in dropped.
// Extra entries are trusted (they come from the engine, not the caller).
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
		if _, ok := e.secrets[k]; ok {
			dropped = append(dropped, k)
			continue
		}
		env = append(env, k+"="+v)
	}
	env = append(env, forced...) // forced variables win over overrides
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
