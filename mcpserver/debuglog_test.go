package mcpserver

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/bashvisor/bashvisor/engine"
)

type debugLogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *debugLogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *debugLogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDebugLogRedactsCommands: `demo mcp -v` logs each call's command at
// Debug; credentials in it and the values of stripped secrets never
// appear.
func TestDebugLogRedactsCommands(t *testing.T) {
	const known = "known-sentinel-4417"
	var log debugLogBuffer
	s := newSetup(t, func(c *engine.Config) {
		c.Env.Environ = []string{"PATH=" + os.Getenv("PATH"), "DEPLOY_TOKEN=" + known}
	}, Options{Logger: slog.New(slog.NewJSONHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	for _, command := range []string{
		"PGPASSWORD=pg-sentinel-1 true",
		"curl -sS -u me:curl-sentinel-2 file:///dev/null || true",
		"echo " + known + " > /dev/null",
	} {
		bash(t, context.Background(), s.cs, map[string]any{"command": command})
	}
	out := log.String()
	if !strings.Contains(out, `"msg":"bash call"`) {
		t.Fatalf("no debug record:\n%s", out)
	}
	for _, v := range []string{"pg-sentinel-1", "curl-sentinel-2", known} {
		if strings.Contains(out, v) {
			t.Errorf("debug log leaks %s:\n%s", v, out)
		}
	}
}
