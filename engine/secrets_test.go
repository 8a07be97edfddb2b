package engine_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// The tests below run real commands that print a stripped secret's value
// (a harmless sentinel). A command cannot read the stripped variable, so
// the value is written to a file first and printed from there.

const sentinelName = "BV_SENTINEL_TOKEN"

// sentinel returns a value unique to the test and a directory holding
// it in the file "s" (no newline).
func sentinel(t *testing.T) (value, dir string) {
	t.Helper()
	value = "s3nt1nel-" + strings.ReplaceAll(t.Name(), "/", "-") + "-9f2c"
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "s"), []byte(value), 0o600); err != nil {
		t.Fatal(err)
	}
	return value, dir
}

// secretEngine is an engine whose environment holds the sentinel under a
// secret name.
func secretEngine(t *testing.T, value string, mod ...func(*engine.Config)) *engine.Engine {
	return newEngine(t, append([]func(*engine.Config){func(c *engine.Config) {
		c.Env.Environ = []string{"PATH=" + os.Getenv("PATH"), sentinelName + "=" + value}
	}}, mod...)...)
}

const marker = "[REDACTED:" + sentinelName + "]"

func TestSecretValueRedactedForeground(t *testing.T) {
	v, dir := sentinel(t)
	e := secretEngine(t, v, func(c *engine.Config) { c.Output.SeparateStreams = true })
	cases := map[string]string{
		"plain":  `cat s; echo; echo "x$(cat s)y"`,
		"split":  `head -c 7 s; sleep 0.2; tail -c +8 s`, // two writes, two reads
		"stderr": `cat s >&2`,
	}
	for name, command := range cases {
		t.Run(name, func(t *testing.T) {
			r := e.Run(context.Background(), engine.ToolContext{WorkingDir: dir}, engine.Input{Command: command})
			if r.Status != engine.StatusOK || strings.Contains(r.Output, v) || strings.Contains(r.Output, v[:7]) {
				t.Fatalf("%s: %q", r.Status, r.Output)
			}
			if !strings.Contains(r.Output, marker) {
				t.Fatalf("no marker: %q", r.Output)
			}
		})
	}
	r := e.Run(context.Background(), engine.ToolContext{WorkingDir: dir}, engine.Input{Command: `cat s; echo; echo "x$(cat s)y"`})
	if r.Output != marker+"\nx"+marker+"y\n" {
		t.Fatalf("got %q", r.Output)
	}
}

func TestSecretValueRedactedInSpool(t *testing.T) {
	v, dir := sentinel(t)
	e := secretEngine(t, v)
	// Sentinels in the head, the middle (only in the spool file) and the tail.
	r := e.Run(context.Background(), engine.ToolContext{WorkingDir: dir}, engine.Input{
		Command: `cat s; head -c 150000 /dev/zero | tr '\0' a; cat s; head -c 150000 /dev/zero | tr '\0' b; cat s`,
	})
	if !r.Truncated || r.FullOutputFile == "" {
		t.Fatalf("not truncated: %q", r.Output[:min(200, len(r.Output))])
	}
	if strings.Contains(r.Output, v) || strings.Count(r.Output, marker) != 2 {
		t.Fatalf("result text: %q ... %q", r.Output[:200], r.Output[len(r.Output)-200:])
	}
	full, err := os.ReadFile(r.FullOutputFile)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(full, []byte(v)) || bytes.Count(full, []byte(marker)) != 3 {
		t.Fatalf("full output file holds %d sentinels, %d markers", bytes.Count(full, []byte(v)), bytes.Count(full, []byte(marker)))
	}
}

func TestSecretValueRedactedInBackgroundFile(t *testing.T) {
	v, dir := sentinel(t)
	e := secretEngine(t, v)
	r := e.Run(context.Background(), engine.ToolContext{WorkingDir: dir}, engine.Input{
		Command: `cat s; echo; head -c 7 s; sleep 0.2; tail -c +8 s; echo`, Mode: engine.ModeBackground,
	})
	if r.Status != engine.StatusStarted {
		t.Fatal(r.Output)
	}
	if j := waitJob(t, e, r.JobID); j.Status != engine.JobCompleted {
		t.Fatalf("%+v", j)
	}
	b, err := os.ReadFile(r.OutputFile)
	if err != nil {
		t.Fatal(err)
	}
	want := marker + "\n" + marker + "\n\n\n[background process completed]"
	if string(b) != want {
		t.Fatalf("job file %q, want %q", b, want)
	}
	out, err := e.JobOutput(engine.ToolContext{}, r.JobID, 0, 0, 0)
	if err != nil || out.Data != want {
		t.Fatalf("JobOutput %q, %v", out.Data, err)
	}
}

// TestSecretValueRedactedInProgress: the command prints the sentinel and
// then waits on a FIFO that the progress callback opens once it has seen
// the line, so the check does not depend on timing.
func TestSecretValueRedactedInProgress(t *testing.T) {
	v, dir := sentinel(t)
	if err := syscall.Mkfifo(filepath.Join(dir, "go"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := secretEngine(t, v, func(c *engine.Config) { c.ProgressInterval = 10 * time.Millisecond })
	var mu sync.Mutex
	var lines []string
	var release sync.Once
	tctx := engine.ToolContext{WorkingDir: dir, Progress: func(p engine.Progress) {
		mu.Lock()
		lines = append(lines, p.LastLine)
		mu.Unlock()
		if strings.Contains(p.LastLine, "sentinel:") {
			release.Do(func() {
				go func() { // opening a FIFO blocks until the command opens it
					f, err := os.OpenFile(filepath.Join(dir, "go"), os.O_WRONLY, 0)
					if err == nil {
						f.Close()
					}
				}()
			})
		}
	}}
	r := e.Run(context.Background(), tctx, engine.Input{Command: `echo "sentinel: $(cat s)"; read -r _ < go; echo end`})
	if r.Status != engine.StatusOK || r.Output != "sentinel: "+marker+"\nend\n" {
		t.Fatalf("%s %q", r.Status, r.Output)
	}
	mu.Lock()
	defer mu.Unlock()
	seen := false
	for _, l := range lines {
		if strings.Contains(l, v) {
			t.Fatalf("progress showed the value: %q", l)
		}
		seen = seen || l == "sentinel: "+marker
	}
	if !seen {
		t.Fatalf("no progress line with the marker: %q", lines)
	}
}

// TestSecretValueRedactedInAuditLog: the stripped value never reaches the
// audit log, even in a command that names it literally.
func TestSecretValueRedactedInAuditLog(t *testing.T) {
	v, dir := sentinel(t)
	var log syncBuffer
	e := secretEngine(t, v, func(c *engine.Config) { c.Audit = &log })
	r := e.Run(context.Background(), engine.ToolContext{WorkingDir: dir}, engine.Input{Command: "echo " + v + " | wc -c"})
	if r.Status != engine.StatusOK {
		t.Fatal(r.Output)
	}
	e.Run(context.Background(), engine.ToolContext{WorkingDir: dir}, engine.Input{Command: "git add . # " + v})
	out := log.String()
	if strings.Contains(out, v) || strings.Count(out, marker) < 3 {
		t.Fatalf("audit log:\n%s", out)
	}
	if got := e.RedactCommand("PGPASSWORD=pw-12345678 psql; echo " + v); strings.Contains(got, v) || strings.Contains(got, "pw-12345678") {
		t.Fatalf("RedactCommand: %q", got)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSecretEnvNames: names that exist only to carry credentials are
// stripped and their values redacted; near misses pass; EnvStrip strips
// names the rule passes; EnvKeep passes SSH_AUTH_SOCK.
func TestSecretEnvNames(t *testing.T) {
	secretNames := []string{"npm_config__authToken", "PGPASSWORD", "MYSQL_PWD", "GH_PAT", "GITLAB_PAT", "CI_JOB_JWT",
		"KUBE_BEARER", "SECRETKEY", "SLACK_WEBHOOK_URL", "SSH_AUTH_SOCK", "DATABASE_URL"}
	passed := []string{"KEYBOARD_LAYOUT", "TOKENIZERS_PARALLELISM", "PATHEXT", "COMPAT", "SPATH", "HTTPS_PROXY"}
	environ := []string{"PATH=" + os.Getenv("PATH"), "OLDPWD=/"}
	for _, n := range append(secretNames, passed...) {
		environ = append(environ, n+"=value-of-"+n)
	}
	e := newEngine(t, func(c *engine.Config) { c.Env.Environ, c.Env.Strip = environ, []string{"DATABASE_URL"} })
	dir := t.TempDir()
	var want strings.Builder
	for _, kv := range environ {
		want.WriteString(kv + "\n")
	}
	os.WriteFile(filepath.Join(dir, "env"), []byte(want.String()), 0o600)
	r := e.Run(context.Background(), engine.ToolContext{WorkingDir: dir}, engine.Input{Command: "env | sort; echo ---; cat env"})
	got, file, _ := strings.Cut(r.Output, "---\n")
	for _, n := range secretNames {
		if strings.Contains(got, n+"=") {
			t.Errorf("%s passed", n)
		}
		if strings.Contains(file, "value-of-"+n) || !strings.Contains(file, n+"=[REDACTED:"+n+"]") {
			t.Errorf("value of %s not redacted", n)
		}
	}
	for _, n := range passed {
		if !strings.Contains(got, n+"=value-of-"+n+"\n") {
			t.Errorf("%s not passed", n)
		}
	}
	if !strings.Contains(got, "OLDPWD=/") || !strings.Contains(got, "PWD="+dir) {
		t.Errorf("PWD or OLDPWD missing:\n%s", got)
	}
	keep := newEngine(t, func(c *engine.Config) { c.Env.Environ, c.Env.Keep = environ, []string{"SSH_AUTH_SOCK"} })
	r = keep.Run(context.Background(), engine.ToolContext{WorkingDir: dir}, engine.Input{Command: `echo "$SSH_AUTH_SOCK"`})
	if r.Output != "value-of-SSH_AUTH_SOCK\n" {
		t.Errorf("EnvKeep SSH_AUTH_SOCK: %q", r.Output)
	}
}

// TestSecretRedactionLeavesJobsRunning: with LeaveJobsRunning, a job whose
// output the engine redacts keeps running after Shutdown (no EPIPE) to its
// natural end, and its later output, which nobody can redact any more,
// never reaches its file: the file says so instead.
func TestSecretRedactionLeavesJobsRunning(t *testing.T) {
	v, dir := sentinel(t)
	if err := syscall.Mkfifo(filepath.Join(dir, "go"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.LeaveJobsRunning, cfg.OutputDir = true, t.TempDir()
	cfg.Env.Environ = []string{"PATH=" + os.Getenv("PATH"), sentinelName + "=" + v}
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := e.Run(context.Background(), engine.ToolContext{WorkingDir: dir}, engine.Input{
		Command: `cat s; echo; read -r _ < go; for i in $(seq 2000); do echo "line $i"; done; echo finished; touch finished`,
		Mode:    engine.ModeBackground,
	})
	if r.Status != engine.StatusStarted {
		t.Fatal(r.Output)
	}
	testenv.KillGroupAtCleanup(t, r.PID) // it waits for go
	// The job has printed the sentinel once the engine has written it.
	testenv.Eventually(t, 10*time.Second, func() bool {
		b, _ := os.ReadFile(r.OutputFile)
		return string(b) == marker+"\n"
	}, "the job's first line never arrived")
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "go"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	waitGone(t, r.PID, 10*time.Second)
	if _, err := os.Stat(filepath.Join(dir, "finished")); err != nil {
		t.Errorf("the job did not run to its end (EPIPE?): %v", err)
	}
	b, _ := os.ReadFile(r.OutputFile)
	want := marker + "\n\n\n[output after the engine stopped is discarded: it could hold secret values the engine can no longer redact]\n"
	if string(b) != want {
		t.Fatalf("job file %q, want %q", b, want)
	}
}
