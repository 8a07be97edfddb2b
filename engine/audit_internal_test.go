package engine

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/bashvisor/bashvisor/internal/secret"
	"github.com/bashvisor/bashvisor/safety"
)

func TestAuditJSONLines(t *testing.T) {
	var buf bytes.Buffer
	a := newAuditor(&buf, safety.RedactSecrets)
	code := 3
	secrets := []string{"sk-ant-SECRET1", "ghp_SECRET2", "hunter2SECRET3", "SECRET4bearer", "SECRET5url", "SECRET6pw"}
	recs := []auditRecord{
		{Conversation: "c1", Command: "GITHUB_TOKEN=ghp_SECRET2 ANTHROPIC_API_KEY='sk-ant-SECRET1' gh pr list", Display: "gh pr list",
			Decision: "allow", Mode: "default", Status: "failed", ExitCode: &code, DurationMS: 12, Bytes: 99, Truncated: true,
			Killed: []string{"sleep (pid 4)"}, CPUMS: 7, PeakMemory: 1 << 20, Processes: 3, OOMKilled: true},
		{Conversation: "c2", Command: "export DB_PASSWORD=hunter2SECRET3; curl -H 'Authorization: Bearer SECRET4bearer' https://u:SECRET5url@x/ --password=SECRET6pw",
			Decision: "block", Rule: "git-add-blind", Reason: "r", Mode: "slow", Sandbox: "read-only", Status: "blocked"},
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
		for _, k := range []string{"time", "conversation", "command", "display", "decision", "mode", "sandbox", "status", "duration_ms", "bytes", "truncated"} {
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
	for _, want := range []string{`"exit_code":3`, `"killed":["sleep (pid 4)"]`, `"truncated":true`, `GITHUB_TOKEN=[REDACTED]`, `gh pr list`,
		`"cpu_ms":7,"peak_memory_bytes":1048576,"processes":3,"oom_killed":true`} {
		if !strings.Contains(first, want) {
			t.Errorf("first line lacks %s: %s", want, first)
		}
	}
	if strings.Contains(out, `"cpu_ms":0`) || strings.Count(out, "cpu_ms") != 1 {
		t.Errorf("a command that did not run has no resource report: %s", out)
	}
}

func TestAuditNilAndConcurrent(t *testing.T) {
	var a *auditor
	a.Log(auditRecord{Command: "ls"}) // must not panic
	if newAuditor(nil, safety.RedactSecrets) != nil {
		t.Error("NewAuditor(nil) should be nil")
	}
	var buf syncBuf
	a = newAuditor(&buf, safety.RedactSecrets)
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				a.Log(auditRecord{Command: "ls", Decision: "allow"})
			}
		}()
	}
	wg.Wait()
	if got := strings.Count(buf.String(), "\n"); got != 320 {
		t.Errorf("%d lines, want 320", got)
	}
}

// TestAuditKnownValues: the values the engine stripped are redacted from
// the command, display and reason even where no pattern recognises them.
func TestAuditKnownValues(t *testing.T) {
	var buf bytes.Buffer
	r := secret.NewRedactor(map[string]string{"DEPLOY_SECRET": "plain-looking-value-42"})
	a := newAuditor(&buf, func(s string) string { return safety.RedactSecrets(r.String(s)) })
	a.Log(auditRecord{Command: "echo plain-looking-value-42 | wc -c", Display: "echo plain-looking-value-42",
		Decision: "block", Reason: "saw plain-looking-value-42"})
	out := buf.String()
	if strings.Contains(out, "plain-looking-value-42") {
		t.Fatalf("known value leaks: %s", out)
	}
	if strings.Count(out, "[REDACTED:DEPLOY_SECRET]") != 3 || !strings.Contains(out, "| wc -c") {
		t.Fatalf("want the marker in command, display and reason: %s", out)
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
