package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// BenchmarkListening measures the lookup of the listening ports that
// every sandboxed result makes, beside the sandboxed command it is part of
// (`true`), in one run: in a conversation with nothing running (one look
// at its jobs), with a background job that listens on nothing (the
// namespace's TCP tables read), and with one that listens (the owner
// found among the world's processes). It reports each lookup's share of
// the command's time.
func BenchmarkListening(b *testing.B) {
	needNamespaces(b)
	testenv.NeedsTool(b, "python3")
	e := newEngine(b)
	ctx := context.Background()
	idle := conversation("bench-idle", b.TempDir(), engine.ReadOnly)
	quiet := conversation("bench-quiet", b.TempDir(), engine.ReadOnly)
	serving := conversation("bench-serving", b.TempDir(), engine.ReadOnly)
	b.Cleanup(func() {
		for _, c := range []string{idle.ConversationID, quiet.ConversationID, serving.ConversationID} {
			_ = e.EndConversation(ctx, c)
		}
	})
	for _, c := range []struct {
		tc  engine.ToolContext
		cmd string
	}{{idle, "true"}, {quiet, "sleep 600"}, {serving, "exec python3 -m http.server 3000"}} {
		if r := e.Run(ctx, c.tc, engine.Input{Command: c.cmd, Mode: engine.ModeBackground}); r.Status != engine.StatusStarted {
			b.Fatalf("%s %q", r.Status, r.Output)
		}
	}
	var r engine.Result
	testenv.Eventually(b, 30*time.Second, func() bool {
		r = engine.Result{}
		engine.Listening(e, serving, &r)
		return len(r.Listening) == 1
	}, "the server does not listen: %+v", testenv.Last(&r.Listening))
	var command time.Duration
	b.Run("command", func(b *testing.B) {
		for b.Loop() {
			if r := e.Run(ctx, quiet, engine.Input{Command: "true"}); r.Status != engine.StatusOK {
				b.Fatalf("%s %q", r.Status, r.Output)
			}
		}
		command = b.Elapsed() / time.Duration(b.N)
	})
	for _, c := range []struct {
		name  string
		tc    engine.ToolContext
		ports int
	}{{"lookup-nothing-running", idle, 0}, {"lookup-job-not-listening", quiet, 0}, {"lookup-job-listening", serving, 1}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				var r engine.Result
				engine.Listening(e, c.tc, &r)
				if len(r.Listening) != c.ports {
					b.Fatalf("listening %+v, want %d ports", r.Listening, c.ports)
				}
			}
			if command > 0 {
				b.ReportMetric(100*float64(b.Elapsed()/time.Duration(b.N))/float64(command), "%-of-command")
			}
		})
	}
}
