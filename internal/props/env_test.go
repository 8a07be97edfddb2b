package props

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/secret"
)

// isSecretModel is the name rule of secret.IsSecret, written
// independently with regular expressions over the name's words.
func isSecretModel(name string) bool {
	u := strings.ToUpper(name)
	switch {
	case u == "PWD":
		return false
	case u == "SSHPASS", regexp.MustCompile(`^(ANTHROPIC_|OPENAI_|GEMINI_|AWS_SECRET|PHOENIX_)`).MatchString(u):
		return true
	}
	spaced := camelRe.ReplaceAllString(name, "${1}_${2}")
	ws := strings.FieldsFunc(strings.ToUpper(spaced), func(r rune) bool { return r == '_' || r == '-' })
	for i, w := range ws {
		ws[i] = strings.TrimRight(w, "0123456789")
	}
	for i, w := range ws {
		next := ""
		if i+1 < len(ws) {
			next = ws[i+1]
		}
		switch {
		case wordRe.MatchString(w), stemRe.MatchString(w), keyRe.MatchString(w), hookURLRe.MatchString(w),
			hookRe.MatchString(w) && (next == "" || next == "URL" || next == "URI"):
			return true
		}
	}
	return false
}

var (
	camelRe   = regexp.MustCompile(`([a-z0-9])([A-Z])`)
	wordRe    = regexp.MustCompile(`^(KEYS?|APIKEY|SECRETS?|TOKENS?|PASSWORDS?|PASSWD|PASS|PWD|PASSPHRASE|CREDENTIALS?|CREDS|PRIVATE|AUTH|PAT|JWT|BEARER)$`)
	stemRe    = regexp.MustCompile(`^.+(TOKENS?|SECRETS?|PASSWORDS?|PASSWD|PASSPHRASE|CREDENTIALS?|JWT|BEARER)$`)
	keyRe     = regexp.MustCompile(`(API|SECRET|ACCESS|PRIVATE|AUTH|MASTER|SIGNING|SIGN|ENCRYPTION|CLIENT|APP|LICENSE|DEPLOY|SSH|GPG|PGP|SESSION|ADMIN|SERVICE|PASS|WEBHOOK)KEYS?$`)
	hookURLRe = regexp.MustCompile(`WEBHOOKUR[LI]$`)
	hookRe    = regexp.MustCompile(`WEBHOOK$`)
)

// nameGen draws variable names: secret-looking, near misses (KEYBOARD,
// MONKEY, AUTHOR), the allowlist, and random ones, in random case.
func nameGen() *rapid.Generator[string] {
	word := rapid.SampledFrom([]string{
		"KEY", "KEYS", "APIKEY", "SECRET", "SECRETS", "TOKEN", "TOKENS", "PASSWORD", "PASSWD", "CREDENTIAL",
		"CREDENTIALS", "PRIVATE", "AUTH", "KEYBOARD", "MONKEY", "AUTHOR", "TOKENIZER", "PATH", "HOME", "GITHUB",
		"MY", "SERVICE", "DB", "ANTHROPIC", "OPENAI", "GEMINI", "AWS", "PHOENIX", "SSH", "SOCK", "X", "",
		"PAT", "JWT", "BEARER", "PWD", "OLDPWD", "PASS", "ASKPASS", "COMPAT", "SPATH", "PATHEXT", "WEBHOOK", "URL",
		"PORT", "AUTHTOKEN", "SECRETKEY", "PGPASSWORD", "HOTKEY", "SECRETARY", "TOKENIZERS", "PARALLELISM",
		"authToken", "apiKey", "Pat", "V2", "TOKEN2", "SSHPASS", "CREDS", "PASSPHRASE", "WEBHOOKURL",
	})
	return rapid.OneOf(
		rapid.Custom(func(t *rapid.T) string {
			parts := rapid.SliceOfN(word, 1, 4).Draw(t, "words")
			name := strings.Join(parts, "_")
			switch rapid.IntRange(0, 2).Draw(t, "case") {
			case 1:
				name = strings.ToLower(name)
			case 2:
				if name != "" {
					name = strings.ToLower(name[:1]) + name[1:]
				}
			}
			return name
		}),
		rapid.SampledFrom([]string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "TERM", "SHELL", "TMPDIR", "PWD",
			"ANTHROPIC_BASE_URL", "AWS_SECRET_ACCESS_KEY", "AWS_SECRETX", "OPENAI_ORG", "SSH_AUTH_SOCK", "EDITOR", "PAGER",
			"npm_config__authToken", "MYSQL_PWD", "OLDPWD", "SLACK_WEBHOOK_URL", "TOKENIZERS_PARALLELISM", "DATABASE_URL"}),
		rapid.StringMatching(`[A-Za-z_][A-Za-z0-9_]{0,12}`),
	)
}

func envGen() *rapid.Generator[[]string] {
	return rapid.Custom(func(t *rapid.T) []string {
		names := rapid.SliceOfN(nameGen(), 0, 25).Draw(t, "names")
		var env []string
		for i, n := range names {
			env = append(env, n+"=v"+strings.Repeat("=", i%2)+n)
		}
		if rapid.Bool().Draw(t, "junk") {
			env = append(env, "NOEQUALS", "=novalue", "")
		}
		return env
	})
}

func names(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		n, v, _ := strings.Cut(kv, "=")
		if _, dup := m[n]; dup {
			panic("duplicate name " + n)
		}
		m[n] = v
	}
	return m
}

// TestIsSecretMatchesSpec: secret.IsSecret agrees with the model for any
// name.
func TestIsSecretMatchesSpec(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := nameGen().Draw(t, "name")
		if secret.IsSecret(n) != isSecretModel(n) {
			t.Fatalf("IsSecret(%q) = %v, model says %v", n, secret.IsSecret(n), isSecretModel(n))
		}
	})
}

// TestEnvironmentPolicy: for any environment and policy, no secret name
// survives (unless kept on purpose), Strip names never do, the allowlist
// keeps only allowed names, the forced variables are set, overrides can
// never re-add a secret the policy removed, and the value of every removed
// secret is redacted.
func TestEnvironmentPolicy(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		environ := envGen().Draw(t, "environ")
		cfg := config.Env{
			Environ: environ,
			Keep:    rapid.SliceOfN(nameGen(), 0, 3).Draw(t, "keep"),
			Strip:   rapid.SliceOfN(nameGen(), 0, 3).Draw(t, "strip"),
			Allow:   rapid.SliceOfN(nameGen(), 0, 3).Draw(t, "allow"),
		}
		if rapid.Bool().Draw(t, "allowlist") {
			cfg.Policy = config.Allowlist
		}
		e := proc.NewEnv(cfg)
		overrides := map[string]string{}
		for _, n := range rapid.SliceOfN(nameGen(), 0, 6).Draw(t, "overrides") {
			overrides[n] = "override-" + n
		}
		forcedNames := map[string]string{}
		for _, kv := range proc.Forced() {
			n, v, _ := strings.Cut(kv, "=")
			forcedNames[n] = v
		}
		// The last value of each name in the engine's environment.
		last := map[string]string{}
		for _, kv := range environ {
			if n, v, ok := strings.Cut(kv, "="); ok && n != "" {
				last[n] = v
			}
		}
		// stripped: a removed name whose value is a secret (the rule, or
		// Strip).
		secretName := func(n string) bool { return isSecretModel(n) || slices.Contains(cfg.Strip, n) }
		allowed := func(n string) bool {
			if slices.Contains(cfg.Strip, n) {
				return false
			}
			if slices.Contains(cfg.Keep, n) {
				return true
			}
			if cfg.Policy == config.Allowlist {
				return slices.Contains(proc.AllowlistNames(), n) || slices.Contains(cfg.Allow, n)
			}
			return !isSecretModel(n)
		}
		check := func(env []string, withOverrides bool) {
			got := names(env)
			for n, v := range forcedNames {
				if got[n] != v {
					t.Fatalf("forced %s=%q, got %q", n, v, got[n])
				}
			}
			for n, v := range got {
				if _, forced := forcedNames[n]; forced {
					continue
				}
				ov, overridden := overrides[n]
				overridden = overridden && withOverrides
				if _, had := last[n]; overridden && had && !allowed(n) && secretName(n) {
					// The engine drops an override naming a removed
					// secret; what remains is judged as if there were none.
					overridden = false
				}
				switch {
				case overridden:
					if v != ov {
						t.Fatalf("override %s=%q, got %q", n, ov, v)
					}
				default:
					lv, had := last[n]
					if !had || !allowed(n) || v != lv {
						t.Fatalf("%s=%q passed (in environ: %v, allowed: %v, want %q)", n, v, had, allowed(n), lv)
					}
					// Only a name configured on purpose (Keep, or Allow under
					// the allowlist) passes as a secret.
					if isSecretModel(n) && !slices.Contains(cfg.Keep, n) && !(cfg.Policy == config.Allowlist && slices.Contains(cfg.Allow, n)) {
						t.Fatalf("secret %s survived", n)
					}
				}
			}
			// Everything allowed is passed.
			for n, v := range last {
				if _, forced := forcedNames[n]; forced || !allowed(n) {
					continue
				}
				if _, o := overrides[n]; o && withOverrides {
					continue
				}
				if got[n] != v {
					t.Fatalf("allowed %s=%q missing (got %q)", n, v, got[n])
				}
			}
		}
		base, _ := e.With(nil, nil)
		check(base, false)
		// The value of every removed secret is redacted.
		for n, v := range last {
			if !allowed(n) && secretName(n) && len(v) >= secret.MinLen {
				if got := e.Redactor().String(v); strings.Contains(got, v) {
					t.Fatalf("value of removed secret %s not redacted: %q", n, got)
				}
			}
		}
		env, dropped := e.With(nil, overrides)
		check(env, true)
		for _, n := range dropped {
			if _, ok := overrides[n]; !ok {
				t.Fatalf("dropped %q was not an override", n)
			}
			if _, present := names(env)[n]; present {
				if _, forced := forcedNames[n]; !forced {
					t.Fatalf("dropped %q still present", n)
				}
			}
		}
	})
}
