package engine

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// slogBashLine is the "bash" line as slog's JSON handler writes it for
// rec at time t (what the auditor wrote through slog before
// appendBashLine): the reference appendBashLine must equal.
func slogBashLine(t time.Time, rec auditRecord, command, display, reason string) []byte {
	attrs := make([]slog.Attr, 0, 18)
	attrs = append(attrs,
		slog.String("conversation", rec.Conversation),
		slog.String("command", command),
		slog.String("display", display),
		slog.String("decision", rec.Decision))
	if rec.Rule != "" {
		attrs = append(attrs, slog.String("rule", rec.Rule))
	}
	if reason != "" {
		attrs = append(attrs, slog.String("reason", reason))
	}
	attrs = append(attrs, slog.String("mode", rec.Mode), slog.String("sandbox", rec.Sandbox))
	if len(rec.Network) > 0 {
		attrs = append(attrs, slog.Any("network", rec.Network))
	}
	attrs = append(attrs, slog.String("status", rec.Status))
	if rec.ExitCode != nil {
		attrs = append(attrs, slog.Int("exit_code", *rec.ExitCode))
	}
	attrs = append(attrs, slog.Int64("duration_ms", rec.DurationMS), slog.Int64("bytes", rec.Bytes),
		slog.Bool("truncated", rec.Truncated))
	if len(rec.Killed) > 0 {
		attrs = append(attrs, slog.Any("killed", rec.Killed))
	}
	if rec.CPUMS > 0 {
		attrs = append(attrs, slog.Int64("cpu_ms", rec.CPUMS))
	}
	if rec.PeakMemory > 0 {
		attrs = append(attrs, slog.Int64("peak_memory_bytes", rec.PeakMemory))
	}
	if rec.Processes > 0 {
		attrs = append(attrs, slog.Int("processes", rec.Processes))
	}
	if rec.OOMKilled {
		attrs = append(attrs, slog.Bool("oom_killed", true))
	}
	var buf bytes.Buffer
	r := slog.NewRecord(t, slog.LevelInfo, "bash", 0)
	r.AddAttrs(attrs...)
	if err := slog.NewJSONHandler(&buf, nil).Handle(context.Background(), r); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// TestBashLineSameAsSlog: the auditor's own encoder of "bash" lines
// writes byte for byte what slog's JSON handler writes, on random records
// whose texts hold quotes, backslashes, control bytes, invalid UTF-8,
// U+2028/U+2029, other characters and long plain runs, at random times
// and zones.
func TestBashLineSameAsSlog(t *testing.T) {
	piece := rapid.SampledFrom([]string{"a", "plain text of some length ", `"`, `\`, "\n", "\t", "\r", "\x00", "\x1f",
		"\x7f", "\xff", "\xe2\x80", "\u2028", "\u2029", "é", "日本", "<>&", "\U0001F600", "0123456"})
	text := rapid.Custom(func(t *rapid.T) string {
		var b bytes.Buffer
		for _, p := range rapid.SliceOfN(piece, 0, 40).Draw(t, "pieces") {
			b.WriteString(p)
		}
		return b.String()
	})
	opt := func(t *rapid.T, label string) string {
		if rapid.Bool().Draw(t, label+" set") {
			return text.Draw(t, label)
		}
		return ""
	}
	rapid.Check(t, func(t *rapid.T) {
		code := rapid.IntRange(-1, 255).Draw(t, "exit code")
		rec := auditRecord{Conversation: text.Draw(t, "conversation"), Decision: text.Draw(t, "decision"),
			Rule: opt(t, "rule"), Mode: text.Draw(t, "mode"), Sandbox: text.Draw(t, "sandbox"), Status: text.Draw(t, "status"),
			DurationMS: rapid.Int64().Draw(t, "duration"), Bytes: rapid.Int64().Draw(t, "bytes"), Truncated: rapid.Bool().Draw(t, "truncated"),
			CPUMS: rapid.Int64Range(-1, 1<<40).Draw(t, "cpu"), PeakMemory: rapid.Int64Range(-1, 1<<40).Draw(t, "mem"),
			Processes: rapid.IntRange(-1, 100).Draw(t, "processes"), OOMKilled: rapid.Bool().Draw(t, "oom")}
		if rapid.Bool().Draw(t, "exited") {
			rec.ExitCode = &code
		}
		if rapid.Bool().Draw(t, "network set") {
			rec.Network = rapid.SliceOfN(text, 1, 3).Draw(t, "network")
		}
		if rapid.Bool().Draw(t, "killed set") {
			rec.Killed = rapid.SliceOfN(text, 1, 3).Draw(t, "killed")
		}
		command := text.Draw(t, "command")
		display := command
		if rapid.Bool().Draw(t, "display differs") {
			display = text.Draw(t, "display")
		}
		reason := opt(t, "reason")
		zone := time.FixedZone("z", rapid.IntRange(-12, 12).Draw(t, "zone")*3600)
		when := time.Unix(rapid.Int64Range(0, 1<<33).Draw(t, "sec"), rapid.Int64Range(0, 999999999).Draw(t, "nsec")).In(zone)
		if rapid.Bool().Draw(t, "utc") {
			when = when.UTC()
		}
		got := appendBashLine(nil, when, rec, command, display, reason)
		want := slogBashLine(when, rec, command, display, reason)
		if !bytes.Equal(got, want) {
			t.Fatalf("got  %q\nwant %q", got, want)
		}
	})
}
