package secret

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestIsSecret(t *testing.T) {
	secrets := []string{
		// vendor prefixes and plain words
		"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_ORG", "GEMINI_API_KEY", "AWS_SECRET_ACCESS_KEY",
		"PHOENIX_COLLECTOR", "GITHUB_TOKEN", "API_KEY", "DB_PASSWORD", "MY_SECRET", "GOOGLE_APPLICATION_CREDENTIALS",
		"PRIVATE_KEY", "REDISCLI_AUTH", "aws_session_token", "Api_Key", "PHOENIX_Z", "DISCORD_TOKEN", "KEY",
		"X_KEYS", "A_SECRETS", "A_TOKENS", "PASSWD", "GCP_CREDENTIAL", "PRIVATE", "HTTP_AUTH", "My_Token_2",
		// issue 9 item 10: names that exist only to carry credentials
		"npm_config__authToken", "NPM_CONFIG__AUTHTOKEN", "PGPASSWORD", "MYSQL_PWD", "GH_PAT", "GITLAB_PAT",
		"CI_JOB_JWT", "CI_JOB_JWT_V2", "KUBE_BEARER", "SECRETKEY", "SLACK_WEBHOOK_URL", "DISCORD_WEBHOOK",
		"TEAMS_WEBHOOK_URI", "SLACKWEBHOOKURL", "SSHPASS", "SMTP_PASS", "BORG_PASSPHRASE", "DJANGO_SECRETKEY",
		"AWS_SECRETACCESSKEY", "CLIENTSECRET", "ACCESSTOKEN", "BEARERTOKEN", "DOCKER_CREDS", "APIKEY", "MY_APIKEYS",
		"githubPat", "sessionToken", "dbPassword", "myAPIKey", "OAuthToken", "TOKEN2", "API_KEY_2",
		// SSH_AUTH_SOCK grants use of the user's keys: stripped (Config.Env.Keep passes it)
		"SSH_AUTH_SOCK",
	}
	notSecrets := []string{
		"PATH", "PWD", "pwd", "OLDPWD", "PATHEXT", "COMPAT", "SPATH", "MANPATH", "GOPATH", "KEYBOARD_LAYOUT",
		"TOKENIZERS_PARALLELISM", "MONKEY", "HOTKEY_MODE", "AUTHOR", "GIT_AUTHOR_NAME", "XAUTHORITY", "GIT_ASKPASS",
		"SSH_ASKPASS", "BYPASS_CACHE", "PASSTHROUGH", "COMPASS_DIR", "KEYRING_BACKEND", "WEBHOOK_PORT",
		"DATABASE_URL", "REDIS_URL", "HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "SENTRY_DSN", "SECRETARY",
		"HOME", "USER", "LANG", "SHELL", "TERM", "EDITOR", "PAGER", "PATCH_LEVEL", "PATTERN", "SSH_AGENT_PID",
		"GPG_TTY", "", "_", "__", "KEYBOARD", "TOKENIZER", "AWS_REGION", "KEYWORDS",
	}
	for _, n := range secrets {
		if !IsSecret(n) {
			t.Errorf("IsSecret(%q) = false, want true", n)
		}
	}
	for _, n := range notSecrets {
		if IsSecret(n) {
			t.Errorf("IsSecret(%q) = true, want false", n)
		}
	}
}

func TestSplitWords(t *testing.T) {
	cases := map[string]string{
		"npm_config__authToken": "NPM CONFIG AUTH TOKEN",
		"OAuthToken":            "OAUTH TOKEN",
		"myAPIKey":              "MY APIKEY",
		"X-Api-Key":             "X API KEY",
		"TOKEN2_S3":             "TOKEN S",
		"__":                    "",
	}
	for in, want := range cases {
		got := ""
		for i, w := range splitWords(in) {
			if i > 0 {
				got += " "
			}
			got += w
		}
		if got != want {
			t.Errorf("splitWords(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestMayBeSecretNecessary: the fast test IsSecret starts with never
// turns away a name the full rule takes, over names built from the rule's
// own words, qualifiers, prefixes and ordinary words in random case and
// separators, and over every two-word name of those pieces.
func TestMayBeSecretNecessary(t *testing.T) {
	var pieces []string
	for w := range words {
		pieces = append(pieces, w)
	}
	pieces = append(pieces, stems...)
	pieces = append(pieces, keyQualifiers...)
	pieces = append(pieces, prefixes...)
	for n := range names {
		pieces = append(pieces, n)
	}
	pieces = append(pieces, "WEBHOOK", "URL", "URI", "MY", "DB", "2", "X", "ſ", "ı", "K", "CONFIG", "")
	full := isSecret // IsSecret without the fast test and the memory
	cases := func(s string) []string {
		return []string{s, strings.ToLower(s), strings.ToUpper(s[:len(s)/2]) + strings.ToLower(s[len(s)/2:])}
	}
	n := 0
	for _, a := range pieces {
		for _, b := range pieces {
			for _, sep := range []string{"", "_", "-"} {
				for _, name := range cases(a + sep + b) {
					n++
					if full(name) != IsSecret(name) {
						t.Errorf("%q: full rule %v, IsSecret %v", name, full(name), IsSecret(name))
					}
				}
			}
		}
	}
	t.Logf("%d names", n)
}

// TestMayBeSecretRandom: random names (pieces of secret words, letters,
// digits, separators, ſ and ı) never tell the fast test and the full rule
// apart.
func TestMayBeSecretRandom(t *testing.T) {
	frag := rapid.SampledFrom([]string{"k", "ey", "K", "EY", "se", "cret", "TOK", "en", "pa", "ss", "PW", "d", "cr", "ED",
		"pri", "vate", "au", "TH", "PAT", "j", "wt", "bear", "ER", "web", "hook", "_", "-", "2", "x", "ſ", "ı", "URL",
		"anthropic", "OPENAI", "gemini", "phoenix", "aws", "SECRET", "api", "KEY", "S", "a", "Z"})
	rapid.Check(t, func(t *rapid.T) {
		name := strings.Join(rapid.SliceOfN(frag, 0, 8).Draw(t, "pieces"), "")
		slow := isSecret(name)
		if slow != IsSecret(name) {
			t.Fatalf("%q: full rule %v, IsSecret %v", name, slow, IsSecret(name))
		}
	})
}
