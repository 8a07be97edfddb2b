package secret

import "testing"

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
