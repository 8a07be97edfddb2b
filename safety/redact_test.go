package safety

import (
	"os"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestRedactSecrets(t *testing.T) {
	cases := []struct{ in, want string }{
		{"TOKEN=abc cmd", "TOKEN=[REDACTED] cmd"},
		{`API_KEY="a b" cmd`, `API_KEY=[REDACTED] cmd`},
		{"PATH=/bin ls", "PATH=/bin ls"},
		{"export OPENAI_API_KEY=sk-1", "export OPENAI_API_KEY=[REDACTED]"},
		{"ls", "ls"},
		{"MY_SERVICE_PASSWORD=p echo 'unterminated", "MY_SERVICE_PASSWORD=[REDACTED] echo 'unterminated"},
		{"mysql -u root -pS3NT1NEL db", "mysql -u root -p[REDACTED] db"},
		{"mysql -u root -p db", "mysql -u root -p db"},
		{"mysql -P 3306 -h db", "mysql -P 3306 -h db"},
		{"git log -p HEAD", "git log -p HEAD"},
		{"docker run -p 8080:80 img", "docker run -p 8080:80 img"},
		{"curl -u alice:S3NT1NEL https://x", "curl -u alice:[REDACTED] https://x"},
		{"git clone https://S3NT1NEL@github.com/o/r", "git clone https://[REDACTED]@github.com/o/r"},
		{"curl -H 'X-Api-Key: S3NT1NEL' https://x", "curl -H 'X-Api-Key: [REDACTED]' https://x"},
		{`curl --header "PRIVATE-TOKEN: S3NT1NEL" https://gitlab`, `curl --header "PRIVATE-TOKEN: [REDACTED]" https://gitlab`},
		{"sshpass -p S3NT1NEL ssh host", "sshpass -p [REDACTED] ssh host"},
		{"docker login -u me -p S3NT1NEL ghcr.io", "docker login -u me -p [REDACTED] ghcr.io"},
		{"docker login -u me --password-stdin ghcr.io", "docker login -u me --password-stdin ghcr.io"},
		{"curl --oauth2-bearer S3NT1NEL https://x", "curl --oauth2-bearer [REDACTED] https://x"},
		{"psql --no-password -h db", "psql --no-password -h db"},
		{"gh auth login --with-token < tok.txt", "gh auth login --with-token < tok.txt"},
		{"aws configure set aws_secret_access_key S3NT1NEL", "aws configure set aws_secret_access_key [REDACTED]"},
		{"aws configure set region eu-west-1", "aws configure set region eu-west-1"},
		{"aws configure set --profile prod aws_session_token S3NT1NEL", "aws configure set --profile prod aws_session_token [REDACTED]"},
		{"git config --global user.name Me", "git config --global user.name Me"},
		{`curl -H "Authorization: Bearer $GH_TOKEN" https://x`, `curl -H "Authorization: Bearer $GH_TOKEN" https://x`},
	}
	for _, tc := range cases {
		if got := RedactSecrets(tc.in); got != tc.want {
			t.Errorf("RedactSecrets(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestRedactSecretsCases: issue 9 item 12. The sentinel never reaches the
// log, and what surrounds it stays readable.
func TestRedactSecretsCases(t *testing.T) {
	const v = "S3NT1NEL-value"
	cases := []struct{ in, keep string }{
		{"PGPASSWORD=" + v + " psql -h db", "psql -h db"},
		{"MYSQL_PWD=" + v + " mysql", "mysql"},
		{"mysql -uroot -p" + v + " shop", "shop"},
		{"mysqldump -p'" + v + "' shop > dump.sql", "shop > dump.sql"},
		{"mariadb -p" + v, "mariadb -p"},
		{"curl -u user:" + v + " https://api", "-u user:"},
		{"curl --user=user:" + v + " https://api", "https://api"},
		{"git push https://" + v + "@github.com/o/r main", "@github.com/o/r main"},
		{"git clone https://oauth2:" + v + "@gitlab.com/o/r", "https://oauth2:"},
		{"curl -H 'X-Api-Key: " + v + "' https://api", "https://api"},
		{"curl -H \"PRIVATE-TOKEN: " + v + "\" https://gitlab", "PRIVATE-TOKEN"},
		{"curl -H 'Authorization: Bearer " + v + "' https://api", "Authorization: Bearer"},
		{"curl -H 'Cookie: session=" + v + "; theme=dark' https://x", "https://x"},
		{"npm config set //registry.npmjs.org/:_authToken=" + v, "npm config set"},
		{"npm config set //registry.npmjs.org/:_authToken " + v, "npm config set"},
		{"echo '//registry.npmjs.org/:_authToken=" + v + "' >> .npmrc", ">> .npmrc"},
		{"yarn config set npmAuthToken " + v, "yarn config set npmAuthToken"},
		{"sshpass -p" + v + " ssh host", "ssh host"},
		{"sshpass -p '" + v + "' scp a host:", "scp a host:"},
		{"docker login -u me -p " + v + " registry.example", "registry.example"},
		{"docker login --password " + v + " registry.example", "registry.example"},
		{"podman login -p=" + v + " quay.io", "quay.io"},
		{"echo sk-ant-api03-" + v + "abcdefgh", "sk-ant-"},
		{"export K=ghp_" + strings.Repeat("a1B2", 9), "export K="},
		{"echo AKIAIOSFODNN7EXAMPLE", "echo AKIA"},
		{"aws configure set aws_secret_access_key " + v, "aws configure set aws_secret_access_key"},
		{"aws configure set default.aws_secret_access_key " + v + " && aws s3 ls", "&& aws s3 ls"},
		{`curl -d '{"username":"me","password":"` + v + `"}' https://api`, `"username":"me"`},
		{`curl -d "{\"password\": \"` + v + `\"}" https://api`, "https://api"},
		{`curl -d 'user=me&password=` + v + `' https://api`, "user=me&password="},
		{"curl --oauth2-bearer " + v + " https://api", "https://api"},
		{"curl --oauth2-bearer=" + v + " https://api", "https://api"},
		{"wget --http-password=" + v + " https://x", "https://x"},
		{"gh api -H 'Authorization: token " + v + "' /user", "/user"},
		{"openssl enc -pass pass:" + v + " -in a", "-in a"},
		{"keytool -list -storepass " + v + " -keystore k.jks", "-keystore k.jks"},
		{"helm install x --set auth.token=" + v, "helm install x"},
		{"curl 'https://api/x?access_token=" + v + "&page=2'", "&page=2"},
		{"bash -c 'mysql -p" + v + " db'", "db'"},
		{"SLACK_WEBHOOK_URL=https://hooks.slack.com/services/" + v + " ./notify", "./notify"},
		{"GH_PAT=" + v + " gh repo list", "gh repo list"},
		{"printf '%s' \"-----BEGIN OPENSSH PRIVATE KEY-----\n" + v + "\n-----END OPENSSH PRIVATE KEY-----\" > k", "> k"},
		{"TOKEN=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0." + v + " x", " x"},
	}
	for _, tc := range cases {
		got := RedactSecrets(tc.in)
		if strings.Contains(got, "S3NT1NEL") || strings.Contains(got, "a1B2a1B2") || strings.Contains(got, "IOSFODNN7") {
			t.Errorf("RedactSecrets(%q) = %q: the value leaks", tc.in, got)
		}
		if !strings.Contains(got, tc.keep) || !strings.Contains(got, redacted) {
			t.Errorf("RedactSecrets(%q) = %q: want %q kept and %s", tc.in, got, tc.keep, redacted)
		}
	}
}

// redactCases are texts for comparing windowed and whole-text redaction.
var redactTexts = []string{
	"TOKEN=abc cmd\nls\nexport X=1 API_KEY='a b'",
	"curl -H 'Authorization: Bearer x'\n  -d '{\"password\":\n \"hunter2\"}' https://x",
	"cat <<'EOF' > a.json\n{\"token\": \"abc\", \"name\": \"x\"}\nEOF\nmysql -uroot -pS3CRET db",
	"a=1\nb=2\ngit config --global user.name me\n  npm config set //r/:_authToken tok\naws configure set aws_secret_access_key k",
	"x\n--password hunter2 --user=me\nsshpass -p pw ssh h; docker login -u me -p pw\nopenssl enc -pass pass:pw",
	"keytool -storepass pw\ngit clone https://user:pw@host/x https://tok@github.com/x\nghp_0123456789abcdefABCDEF AKIA0123456789ABCDEF",
	"Cookie: a=b; c=d\nSet-Cookie: x\nX-Api-Key: k\n-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----",
	// where the header rule's search starts (headerStart): after code,
	// inside an earlier value, after an earlier colon or scheme word
	"    return wrapped(self)  # password: see docs\nFoo: x.password: y\nX-Note: password: y\nA: Bearer password: z\nf(x) 'token: t' \"secret: s\"",
	// the JSON rule's lines (nearSecretKey): a value on the next line,
	// escaped quotes, a key whose value is not a string
	"{\"password\"\n  : \"hunter2\", \"token\": None}\necho {\\\"token\\\":\\\"abc\\\"}\n{\"token\": None, \"password\": \"pw\"}\n\"api_key\":\n\"k\"",
	// keytool's options (nearDashPass)
	"keytool -importkeystore -srcstorepass pw -deststorepass pw2\n-keypass pw\nx-storepass y\n\t-newpass p\npassword pass p",
}

// Redaction runs the patterns only on the lines that may match (see
// redactRule): the result equals running them on the whole text.
func TestRedactWindowsSameAsWhole(t *testing.T) {
	texts := append([]string(nil), redactTexts...)
	texts = append(texts, heredocCommand(10<<10))
	if os.Getenv("BASHVISOR_AGENT_CORPUS") != "" {
		for _, rec := range agentCorpus(t) {
			texts = append(texts, rec.Command)
		}
	}
	for _, s := range texts {
		got, want := redactWith(&source{text: s}, false), redactWith(&source{text: s}, true)
		if got != want {
			t.Errorf("windowed redaction of %q:\n%q\nwhole text:\n%q", clip(s), got, want)
		}
	}
	// rapid joins pieces of keys, headers, flags, quotes and blanks (all
	// of regexp's \s, and \v); 100 rounds of rapid's 100 texts. Before
	// the windows grew past open quotes, key lines and -p on the next
	// line, review4's generator found 4,059 differences in 1M such texts;
	// now one in 1M, where the windowed text redacts more.
	for range 100 {
		rapid.Check(t, redactWindowsProp)
	}
}

// redactPieces are what redactWindowsProp's texts are made of.
var redactPieces = []string{"password", "token", "Authorization", "X-Api-Key", "Foo", "bearer", "Bearer", ":", ": ",
	"\t", " ", "\n", "\"", "\\\"", "'", "S3NT", "-storepass", "-keypass", "pass", "-", "x", "=", "#", "{", "}", ",",
	"\r", "\v", "\f", "a.b", "key", "None", "\"password\"", "\"token\": ", "-srcstorepass ", "--password ", "Cookie",
	"mysql", " -p", "curl", " -u ", "login", ";", "--token=", "TOKEN="}

// redactWindowsProp: windowed redaction equals the whole text's, or
// redacts more (it shows no more S3NT and no fewer [REDACTED]): a window
// that starts at a later line may find a NAME the whole text's match
// before it took as its value (1 in 1M of these texts).
func redactWindowsProp(rt *rapid.T) {
	s := strings.Join(rapid.SliceOfN(rapid.SampledFrom(redactPieces), 3, 12).Draw(rt, "pieces"), "")
	got, want := redactWith(&source{text: s}, false), redactWith(&source{text: s}, true)
	if got != want && (strings.Count(got, "S3NT") > strings.Count(want, "S3NT") || strings.Count(got, redacted) < strings.Count(want, redacted)) {
		rt.Fatalf("windowed redaction of %q:\n%q\nwhole text:\n%q", s, got, want)
	}
}

// The lines the JSON, header and keytool rules search only from where a
// match may start still give up their values.
func TestRedactNarrowedLines(t *testing.T) {
	for _, tc := range []struct{ in, leak string }{
		{"    return wrapped(self)  # password: S3NT1NEL docs", "S3NT1NEL"},
		{"print(x) 'token: S3NT1NEL'", "S3NT1NEL"},
		{"{\"password\"\n  : \"S3NT1NEL\"}", "S3NT1NEL"},
		{"{\"token\": None, \"password\": \"S3NT1NEL\"}", "S3NT1NEL"},
		{`echo {\"token\":\"S3NT1NEL\"}`, "S3NT1NEL"},
		{"keytool -list -srcstorepass S3NT1NEL", "S3NT1NEL"},
		{"keytool -list\n-keypass S3NT1NEL", "S3NT1NEL"},
		// review4: a quoted value across lines, a value after a key line
		// that ends in a colon, a NAME and its colon apart (any \s)
		{"keytool -list -storepass 'S3NT1NEL\nmy passphrase'", "S3NT1NEL"},
		{"keytool -list -storepass \"S3NT1NEL\n--password-file=x\"", "S3NT1NEL"},
		{"keytool -storepass \"x\" -keypass \"\nS3NT1NEL\"", "S3NT1NEL"},
		{"Authorization\f: S3NT1NEL password: x", "S3NT1NEL"},
		{"Authorization\r\n\f: S3NT1NEL", "S3NT1NEL"},
		{"{\"password\":\n\n\"S3NT1NEL\", \"token\": null}", "S3NT1NEL"},
		{"{\"password\"\n\n: \"S3NT1NEL\"}", "S3NT1NEL"},
		{"token\n\n: S3NT1NEL", "S3NT1NEL"},
		{"echo -Authorization: S3NT1NEL", "S3NT1NEL"},
		{"curl --password 'S3NT1NEL\nx' https://x", "S3NT1NEL"},
	} {
		if got := RedactSecrets(tc.in); strings.Contains(got, tc.leak) {
			t.Errorf("RedactSecrets(%q) = %q: the value leaks", tc.in, got)
		}
	}
}
