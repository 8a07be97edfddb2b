package secret

import (
	"strings"
	"sync"
	"sync/atomic"
)

// prefixes mark a secret whatever follows: vendor variables are stripped
// wholesale (ANTHROPIC_BASE_URL included) because a client configuration
// leaking is as bad as its key leaking.
var prefixes = []string{"ANTHROPIC_", "OPENAI_", "GEMINI_", "AWS_SECRET", "PHOENIX_"}

// words are the name words that mark a secret on their own.
var words = map[string]bool{
	"KEY": true, "KEYS": true, "APIKEY": true, "SECRET": true, "SECRETS": true,
	"TOKEN": true, "TOKENS": true, "PASSWORD": true, "PASSWORDS": true, "PASSWD": true,
	"PASS": true, "PWD": true, "PASSPHRASE": true, "CREDENTIAL": true, "CREDENTIALS": true,
	"CREDS": true, "PRIVATE": true, "AUTH": true, "PAT": true, "JWT": true, "BEARER": true,
}

// stems mark a secret at the end of a compound word (AUTHTOKEN,
// PGPASSWORD, CLIENTSECRET). KEY, PAT and PWD are not among them: MONKEY,
// COMPAT and OLDPWD are ordinary words.
var stems = []string{
	"TOKEN", "TOKENS", "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD", "PASSPHRASE",
	"CREDENTIAL", "CREDENTIALS", "JWT", "BEARER",
}

// keyQualifiers make a compound ending in KEY or KEYS a secret (APIKEY,
// SECRETKEY, SECRETACCESSKEY); other KEY compounds (MONKEY, HOTKEY) are not.
var keyQualifiers = []string{
	"API", "SECRET", "ACCESS", "PRIVATE", "AUTH", "MASTER", "SIGNING", "SIGN", "ENCRYPTION",
	"CLIENT", "APP", "LICENSE", "DEPLOY", "SSH", "GPG", "PGP", "SESSION", "ADMIN", "SERVICE",
	"PASS", "WEBHOOK",
}

// names are whole names that carry credentials but match no word.
var names = map[string]bool{"SSHPASS": true}

// notSecret are whole names that contain a secret word but are not
// secrets: PWD is the working directory.
var notSecret = map[string]bool{"PWD": true}

// IsSecret reports whether an environment variable named name exists to
// carry a credential. The rule is case-insensitive:
//
//   - names starting with ANTHROPIC_, OPENAI_, GEMINI_, AWS_SECRET or
//     PHOENIX_;
//   - names with a word KEY(S), APIKEY, SECRET(S), TOKEN(S), PASSWORD(S),
//     PASSWD, PASS, PWD, PASSPHRASE, CREDENTIAL(S), CREDS, PRIVATE, AUTH,
//     PAT, JWT or BEARER (GH_PAT, MYSQL_PWD, CI_JOB_JWT, KUBE_BEARER,
//     SSH_AUTH_SOCK);
//   - names with a compound word ending in TOKEN, SECRET, PASSWORD, PASSWD,
//     PASSPHRASE, CREDENTIAL(S), JWT or BEARER (PGPASSWORD, AUTHTOKEN,
//     CLIENTSECRET), or in KEY after a qualifier such as API, SECRET,
//     ACCESS or PRIVATE (SECRETKEY, SECRETACCESSKEY);
//   - webhook URLs: a word WEBHOOK that ends the name or precedes URL or
//     URI (SLACK_WEBHOOK_URL, DISCORD_WEBHOOK, SLACKWEBHOOKURL);
//   - SSHPASS.
//
// Words are separated by '_' and by a lower-case letter or digit followed
// by an upper-case letter (npm_config__authToken has the words NPM, CONFIG,
// AUTH and TOKEN); trailing digits are ignored (TOKEN2). PWD itself (the
// working directory), OLDPWD, PATH, PATHEXT, COMPAT, SPATH, KEYBOARD_*,
// AUTHOR, ASKPASS programs (GIT_ASKPASS) and TOKENIZERS_PARALLELISM are not
// secrets.
//
// Some variables that often embed credentials are deliberately not
// secrets, because test suites and tools need them: connection strings and
// proxies (DATABASE_URL, REDIS_URL, HTTPS_PROXY, ALL_PROXY), DSNs
// (SENTRY_DSN). Embedders strip them by name (the engine's Config.Env.Strip).
func IsSecret(name string) bool {
	if !mayBeSecret(name) {
		return false
	}
	if v, ok := seen.Load(name); ok {
		return v.(bool)
	}
	secret := isSecret(name)
	if len(name) <= maxSeenName && seenCount.Add(1) <= maxSeen {
		seen.Store(strings.Clone(name), secret)
	}
	return secret
}

// seen remembers the answers for names that mayBeSecret let through (a
// log's redaction asks about the same names again and again), at most
// maxSeen of them, each at most maxSeenName bytes: at most 256 KiB
// whatever the commands.
var (
	seen      sync.Map // name -> bool
	seenCount atomic.Int64
)

// Bounds of seen.
const (
	maxSeen     = 4096
	maxSeenName = 64
)

// isSecret is IsSecret's rule, without the fast test and the memory.
func isSecret(name string) bool {
	upper := strings.ToUpper(name)
	if notSecret[upper] {
		return false
	}
	if names[upper] {
		return true
	}
	for _, p := range prefixes {
		if strings.HasPrefix(upper, p) {
			return true
		}
	}
	ws := splitWords(name)
	for i, w := range ws {
		if secretWord(w) {
			return true
		}
		if strings.HasSuffix(w, "WEBHOOK") && (i == len(ws)-1 || ws[i+1] == "URL" || ws[i+1] == "URI") {
			return true
		}
	}
	return false
}

// secretWord reports whether one upper-case word marks a secret.
func secretWord(w string) bool {
	if words[w] {
		return true
	}
	for _, s := range stems {
		if len(w) > len(s) && strings.HasSuffix(w, s) {
			return true
		}
	}
	if strings.HasSuffix(w, "WEBHOOKURL") || strings.HasSuffix(w, "WEBHOOKURI") {
		return true
	}
	head, ok := strings.CutSuffix(w, "KEY")
	if !ok {
		head, ok = strings.CutSuffix(w, "KEYS")
	}
	if ok {
		for _, q := range keyQualifiers {
			if strings.HasSuffix(head, q) {
				return true
			}
		}
	}
	return false
}

// splitWords splits a name into upper-case words: at '_' (and '-', so that
// header and flag names work too), and between a lower-case letter or digit
// and an upper-case letter. Trailing digits are dropped from each word.
func splitWords(name string) []string {
	var ws []string
	start := 0
	emit := func(end int) {
		w := strings.TrimRight(name[start:end], "0123456789")
		if w != "" {
			ws = append(ws, strings.ToUpper(w))
		}
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_' || c == '-':
			emit(i)
			start = i + 1
		case i > start && isUpper(c) && (isLower(name[i-1]) || isDigit(name[i-1])):
			emit(i)
			start = i
		}
	}
	emit(len(name))
	return ws
}

func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }
func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// mayBeSecret is a necessary condition of IsSecret that allocates
// nothing: every rule above needs one of the words key, secret, token,
// pass, pwd, cred, private, auth, pat, jwt, bearer, webhook or a vendor
// prefix in the name, in any case. A name with a byte outside ASCII may
// be one (strings.ToUpper turns ſ into S and ı into I), so it passes.
func mayBeSecret(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 0x80 {
			return true
		}
		if hintAt(name, i, c|0x20) {
			return true
		}
	}
	return false
}

// hintAt reports whether a word of mayBeSecret starts at offset i of
// name, whose byte there is c in lower case (for letters).
func hintAt(name string, i int, c byte) bool {
	switch c {
	case 'k':
		return foldAt(name, i, "key")
	case 's':
		return foldAt(name, i, "secret")
	case 't':
		return foldAt(name, i, "token")
	case 'p':
		return foldAt(name, i, "pass") || foldAt(name, i, "pwd") || foldAt(name, i, "private") ||
			foldAt(name, i, "pat") || foldAt(name, i, "phoenix_")
	case 'c':
		return foldAt(name, i, "cred")
	case 'a':
		return foldAt(name, i, "auth") || foldAt(name, i, "anthropic_")
	case 'j':
		return foldAt(name, i, "jwt")
	case 'b':
		return foldAt(name, i, "bearer")
	case 'w':
		return foldAt(name, i, "webhook")
	case 'o':
		return foldAt(name, i, "openai_")
	case 'g':
		return foldAt(name, i, "gemini_")
	}
	return false
}

// foldAt reports whether name holds lit (lower-case ASCII letters and _)
// at offset i, ignoring ASCII case.
func foldAt(name string, i int, lit string) bool {
	if len(name)-i < len(lit) {
		return false
	}
	for k := 0; k < len(lit); k++ {
		c := name[i+k]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lit[k] {
			return false
		}
	}
	return true
}
