package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/cluster"
	"github.com/bashvisor/bashvisor/engine"
)

// TestLargeResultsAtOnce: forty commands, each in a conversation of its
// own, end at the same moment with 1 MB of output each (the executor's
// Config.Output.Max lets it all through), while another call runs: every
// result reaches the front whole and the other call answers ok. Results
// are not forward data, which a credit bounds: before the transport's
// batches were bounded and the receiving servers took any batch the
// writer could build, the results queued for the front made a batch over
// gRPC's 4 MiB receive limit, the connection failed and the calls were
// lost with the executor.
func TestLargeResultsAtOnce(t *testing.T) {
	if inFreshProcess(t) {
		return
	}
	const n, size = 40, 1_000_000
	mark := t.Name()
	ex := startExecutor(t, execSpec{name: "exec-1", mark: mark, outputMax: 2 << 20})
	// The executor's answers to keepalives queue behind the results (one
	// transport stream): under -race, at load 12, the 40 MB took more
	// than the default 2.5 s to arrive.
	c := newClient(t, cluster.ClientOptions{Membership: cluster.Static(ex.addr), LostAfter: 30 * time.Second})
	t.Cleanup(func() {
		shutdown(t, c)
		ex.stop()
		waitNoLeftovers(t, mark)
	})
	waitReady(t, c, 1)
	dir := t.TempDir()
	gate := filepath.Join(dir, "go")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Each waits for the gate, then writes size bytes: line i, repeated.
	cmd := fmt.Sprintf("while [ ! -e %s ]; do sleep 0.05; done; yes \"$LINE\" | head -c %d", gate, size)
	var wg sync.WaitGroup
	errs := make(chan error, n+1)
	started := make(chan struct{}, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			line := fmt.Sprintf("result %02d", i)
			tc := engine.ToolContext{WorkingDir: dir, ConversationID: fmt.Sprintf("big-%d", i),
				Env: map[string]string{"LINE": line}}
			started <- struct{}{}
			r := c.Run(ctx, tc, engine.Input{Command: cmd, Mode: engine.ModeSlow})
			switch {
			case r.Status != engine.StatusOK:
				errs <- fmt.Errorf("call %d: %s %.200q", i, r.Status, r.Output)
			case len(r.Output) != size || strings.Count(r.Output, line+"\n") != size/(len(line)+1):
				errs <- fmt.Errorf("call %d: %d bytes of %d, %q…", i, len(r.Output), size, r.Output[:min(len(r.Output), 80)])
			}
		}()
	}
	for range n {
		<-started
	}
	time.Sleep(3 * time.Second) // every command waits at the gate
	wg.Add(1)
	go func() {
		defer wg.Done()
		other := engine.ToolContext{WorkingDir: dir, ConversationID: "other"}
		if r := c.Run(ctx, other, engine.Input{Command: "sleep 3; echo done", Mode: engine.ModeSlow}); r.Status != engine.StatusOK || r.Output != "done\n" {
			errs <- fmt.Errorf("a call meanwhile: %s %q", r.Status, r.Output)
		}
	}()
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	opened := time.Now()
	wg.Wait()
	t.Logf("%d results of %d bytes arrived within %v of the gate", n, size, time.Since(opened))
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
