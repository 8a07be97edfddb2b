package proc_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/proc"
)

// TestEnvSecretsRedacted: the values of removed secrets (and of Strip
// names) feed the Redactor; kept, allowed and merely unlisted names do not.
func TestEnvSecretsRedacted(t *testing.T) {
	environ := []string{
		"PATH=/usr/bin:/bin", "PGPASSWORD=pg-sentinel-1", "GH_PAT=old-value-0", "GH_PAT=pat-sentinel-2",
		"SSH_AUTH_SOCK=/run/ssh-agent.sock", "DATABASE_URL=postgres://u:db-sentinel-3@h/db",
		"HTTPS_PROXY=http://u:proxy-sentinel-4@proxy:3128", "SHORT_TOKEN=1234567", "DISPLAY=:0.long-value",
	}
	e := proc.NewEnv(config.Env{Environ: environ, Strip: []string{"DATABASE_URL"}})
	r := e.Redactor()
	text := strings.Join(environ, "\n")
	got := r.String(text)
	for _, s := range []string{"pg-sentinel-1", "pat-sentinel-2", "db-sentinel-3", "/run/ssh-agent.sock"} {
		if strings.Contains(got, s) {
			t.Errorf("%s not redacted: %s", s, got)
		}
	}
	for _, want := range []string{"[REDACTED:PGPASSWORD]", "[REDACTED:GH_PAT]", "[REDACTED:DATABASE_URL]",
		"[REDACTED:SSH_AUTH_SOCK]", "proxy-sentinel-4", "SHORT_TOKEN=1234567"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q missing: %s", want, got)
		}
	}
	base := baseEnv(e)
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains([]string{"PGPASSWORD", "GH_PAT", "SSH_AUTH_SOCK", "DATABASE_URL", "SHORT_TOKEN"}, name) {
			t.Errorf("%s passed", kv)
		}
	}
	if !slices.Contains(base, "HTTPS_PROXY=http://u:proxy-sentinel-4@proxy:3128") {
		t.Errorf("HTTPS_PROXY not passed: %v", base)
	}
	// A stripped name cannot come back as an override.
	env, dropped := e.With(nil, map[string]string{"DATABASE_URL": "x", "PGPASSWORD": "y"})
	if !slices.Equal(dropped, []string{"DATABASE_URL", "PGPASSWORD"}) {
		t.Errorf("dropped %v (env %v)", dropped, env)
	}

	// SSH_AUTH_SOCK is passed only on request, and then not redacted.
	keep := proc.NewEnv(config.Env{Environ: environ, Keep: []string{"SSH_AUTH_SOCK"}})
	if !slices.Contains(baseEnv(keep), "SSH_AUTH_SOCK=/run/ssh-agent.sock") {
		t.Errorf("Keep SSH_AUTH_SOCK: %v", baseEnv(keep))
	}
	if got := keep.Redactor().String("/run/ssh-agent.sock"); got != "/run/ssh-agent.sock" {
		t.Errorf("kept value redacted: %s", got)
	}
	// Under the allowlist, a dropped ordinary name is not a secret.
	allow := proc.NewEnv(config.Env{Environ: environ, Policy: config.Allowlist})
	if got := allow.Redactor().String(":0.long-value pg-sentinel-1"); got != ":0.long-value [REDACTED:PGPASSWORD]" {
		t.Errorf("allowlist redaction: %s", got)
	}
	// Strip wins over Keep.
	both := proc.NewEnv(config.Env{Environ: environ, Keep: []string{"DATABASE_URL"}, Strip: []string{"DATABASE_URL"}})
	if slices.ContainsFunc(baseEnv(both), func(kv string) bool { return strings.HasPrefix(kv, "DATABASE_URL=") }) {
		t.Error("Strip did not win over Keep")
	}
}

// baseEnv is the environment a command gets with no additions.
func baseEnv(e *proc.Env) []string {
	env, _ := e.With(nil, nil)
	return env
}
