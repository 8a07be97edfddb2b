package cluster_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/bashvisor/bashvisor/cluster"
	"github.com/bashvisor/bashvisor/engine"
)

// BenchmarkFirstCall compares a conversation's first call through a
// front (which asks every executor where the conversation runs, then
// places it) with a later call (the front knows), on two executor
// processes: the difference is the lookup. Report it as the ratio of
// the two, with the machine's load.
func BenchmarkFirstCall(b *testing.B) {
	mark := b.Name()
	var ex []*proc
	for i := range 2 {
		ex = append(ex, startExecutor(b, execSpec{name: fmt.Sprintf("exec-%d", i+1), mark: mark}))
	}
	c := newClient(b, cluster.ClientOptions{Membership: cluster.Static(ex[0].addr, ex[1].addr)})
	defer func() {
		shutdown(b, c)
		for _, p := range ex {
			p.stop()
		}
	}()
	waitReady(b, c, 2)
	dir := b.TempDir()
	run := func(conv string) {
		if r := c.Run(context.Background(), engine.ToolContext{WorkingDir: dir, ConversationID: conv}, engine.Input{Command: "true"}); r.Status != engine.StatusOK {
			b.Fatalf("%s %q", r.Status, r.Output)
		}
	}
	b.Run("first", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			run(fmt.Sprintf("first-%s-%d", b.Name(), i))
		}
	})
	b.Run("next", func(b *testing.B) {
		run("next")
		for b.Loop() {
			run("next")
		}
	})
}
