package safety

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

func TestAuditJSONLines(t *testing.T) {
	var buf bytes.Buffer
	a := NewAuditor(&buf)
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
	for _, want := range []string{`"exit_code":3`, `"killed":["sleep (pid 4)"]`, `"truncated":true`, `GITHUB_TOKEN=***`, `gh pr list`} {
		if !strings.Contains(first, want) {
			t.Errorf("first line lacks %s: %s", want, first)
		}
	}
}

func TestAuditNilAndConcurrent(t *testing.T) {
	var a *Auditor
	a.Log(AuditRecord{Command: "ls"}) // must not panic
	if NewAuditor(nil) != nil {
		t.Error("NewAuditor(nil) should be nil")
	}
	var buf syncBuf
	a = NewAuditor(&buf)
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
		{"TOKEN=abc cmd", "TOKEN=*** cmd"},
		{`API_KEY="a b" cmd`, `API_KEY=*** cmd`},
		{"PATH=/bin ls", "PATH=/bin ls"},
		{"export OPENAI_API_KEY=sk-1", "export OPENAI_API_KEY=***"},
		{"ls", "ls"},
		{"MY_SERVICE_PASSWORD=p echo 'unterminated", "MY_SERVICE_PASSWORD=*** echo 'unterminated"},
	}
	for _, tc := range cases {
		if got := RedactSecrets(tc.in); got != tc.want {
			t.Errorf("RedactSecrets(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
