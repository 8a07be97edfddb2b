package safety

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/bashvisor/bashvisor/secret"
)

func TestAuditJSONLines(t *testing.T) {
	var buf bytes.Buffer
	a := NewAuditor(&buf, nil)
	code := 3
	secrets := []string{"sk-ant-SECRET1", "ghp_SECRET2", "hunter2SECRET3", "SECRET4bearer", "SECRET5url", "SECRET6pw"}
	recs := []AuditRecord{
		{Conversation: "c1", Command: "GITHUB_TOKEN=ghp_SECRET2 ANTHROPIC_API_KEY='sk-ant-SECRET1' gh pr list", Display: "gh pr list",
			Decision: "allow", Mode: "default", Status: "failed", ExitCode: &code, DurationMS: 12, Bytes: 99, Truncated: true,
			Killed: []string{"sleep (pid 4)"}},
		{Conversation: "c2", Command: "export DB_PASSWORD=hunter2SECRET3; curl -H 'Authorization: Bearer SECRET4bearer' https://u:SECRET5url@x/ --password=SECRET6pw",
			Decision: "block", Rule: "git-add-blind", Reason: "r", Mode: "slow", Restricted: true, Status: "blocked"},
		{Conversation: "c3", Command: "env AWS_SECRET_ACCESS_KEY=abcSECRET7 aws s3 ls", Decision: "ask", Status: "needs_approval"},
	}
	secrets = append(secrets, "abcSECRET7")
	for _, r := range recs {
		a.Log(r)
	}
	out := buf.String()
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("audit log leaks %q:\n%s", s, out)
		}
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	n := 0
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %d not JSON: %v: %s", n, err, sc.Text())
		}
		for _, k := range []string{"time", "conversation", "command", "display", "decision", "mode", "restricted", "status", "duration_ms", "bytes", "truncated"} {
			if _, ok := m[k]; !ok {
				t.Errorf("line %d lacks %q: %s", n, k, sc.Text())
			}
		}
		n++
	}
	if n != len(recs) {
		t.Fatalf("%d lines, want %d", n, len(recs))
	}
	first := strings.SplitN(out, "\n", 2)[0]
	for _, want := range []string{`"exit_code":3`, `"killed":["sleep (pid 4)"]`, `"truncated":true`, `GITHUB_TOKEN=[REDACTED]`, `gh pr list`} {
		if !strings.Contains(first, want) {
			t.Errorf("first line lacks %s: %s", want, first)
		}
	}
}

func TestAuditNilAndConcurrent(t *testing.T) {
	var a *Auditor
	a.Log(AuditRecord{Command: "ls"}) // must not panic
	if NewAuditor(nil, nil) != nil {
		t.Error("NewAuditor(nil) should be nil")
	}
	var buf syncBuf
	a = NewAuditor(&buf, nil)
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				a.Log(AuditRecord{Command: "ls", Decision: "allow"})
			}
		}()
	}
	wg.Wait()
	if got := strings.Count(buf.String(), "\n"); got != 320 {
		t.Errorf("%d lines, want 320", got)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

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

// TestAuditKnownValues: the values the engine stripped are redacted from
// the command, display and reason even where no pattern recognises them.
func TestAuditKnownValues(t *testing.T) {
	var buf bytes.Buffer
	r := secret.NewRedactor(map[string]string{"DEPLOY_SECRET": "plain-looking-value-42"})
	a := NewAuditor(&buf, r)
	a.Log(AuditRecord{Command: "echo plain-looking-value-42 | wc -c", Display: "echo plain-looking-value-42",
		Decision: "block", Reason: "saw plain-looking-value-42"})
	out := buf.String()
	if strings.Contains(out, "plain-looking-value-42") {
		t.Fatalf("known value leaks: %s", out)
	}
	if strings.Count(out, "[REDACTED:DEPLOY_SECRET]") != 3 || !strings.Contains(out, "| wc -c") {
		t.Fatalf("want the marker in command, display and reason: %s", out)
	}
}
