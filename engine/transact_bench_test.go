package engine_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
)

// BenchmarkWorkspaceLayer runs a workspace-write command that changes
// nothing (`true` in a git repository) with the layer, without it (the
// read-only binds it replaced), and unrestricted, alternated so that
// load from elsewhere hits all three alike, and reports the medians
// and the differences: the layer's cost per command.
func BenchmarkWorkspaceLayer(b *testing.B) {
	needNamespaces(b)
	withLayer, withoutLayer := newEngine(b), newEngine(b)
	engine.WithoutLayer(withoutLayer)
	dir := repo(b)
	ctx := context.Background()
	tc := workspaceWrite(dir)
	plain := engine.ToolContext{WorkingDir: dir, ConversationID: "ws"}
	run := func(e *engine.Engine, tc engine.ToolContext) time.Duration {
		start := time.Now()
		if r := e.Run(ctx, tc, engine.Input{Command: "true"}); r.Status != engine.StatusOK {
			b.Fatalf("%s %q", r.Status, r.Output)
		}
		return time.Since(start)
	}
	// Worlds and warm caches first.
	run(withLayer, tc)
	run(withoutLayer, tc)
	var un, no, with []time.Duration
	for b.Loop() {
		un = append(un, run(withLayer, plain))
		no = append(no, run(withoutLayer, tc))
		with = append(with, run(withLayer, tc))
	}
	med := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}
	u, n, w := med(un), med(no), med(with)
	b.ReportMetric(u, "unrestricted-ms")
	b.ReportMetric(n, "nolayer-ms")
	b.ReportMetric(w, "layer-ms")
	b.ReportMetric(w-u, "layer-over-unrestricted-ms")
	b.ReportMetric(w-n, "layer-over-nolayer-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkJoinedCommand runs a workspace-write `true` in a conversation
// with a background job running (as root with cgroups the command joins
// the job's layer, and its end takes a checkpoint with the job frozen)
// and in one without (a layer of its own), alternated, and reports the
// medians and their difference: what joining costs per command.
func BenchmarkJoinedCommand(b *testing.B) {
	needNamespaces(b)
	cgroupBase(b)
	e := newEngine(b)
	dir := repo(b)
	ctx := context.Background()
	alone, joined := workspaceWrite(dir), workspaceWrite(dir)
	joined.ConversationID = "with-job"
	job := e.Run(ctx, joined, engine.Input{Mode: engine.ModeBackground, Command: "sleep 600"})
	if job.Status != engine.StatusStarted {
		b.Fatalf("%s %q", job.Status, job.Output)
	}
	defer func() { _, _ = e.Kill(ctx, joined, job.JobID) }()
	run := func(tc engine.ToolContext) time.Duration {
		start := time.Now()
		if r := e.Run(ctx, tc, engine.Input{Command: "true"}); r.Status != engine.StatusOK {
			b.Fatalf("%s %q", r.Status, r.Output)
		}
		return time.Since(start)
	}
	run(alone)
	run(joined)
	var own, shared []time.Duration
	for b.Loop() {
		own = append(own, run(alone))
		shared = append(shared, run(joined))
	}
	med := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}
	o, s := med(own), med(shared)
	b.ReportMetric(o, "own-layer-ms")
	b.ReportMetric(s, "joined-ms")
	b.ReportMetric(s-o, "joined-over-own-ms")
	b.ReportMetric(0, "ns/op")
}
