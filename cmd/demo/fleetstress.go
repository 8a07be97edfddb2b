package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bashvisor/bashvisor/cluster"
	"github.com/bashvisor/bashvisor/cmd/internal/cli"
	"github.com/bashvisor/bashvisor/engine"
)

// fleetStress runs `demo stress -executors`: n calls of cmd at
// concurrency c, one conversation per concurrent worker, through a
// cluster.Client on the given executors ("local": the same load through a
// local engine, for comparison). It prints throughput and latency and
// returns false when any call did not answer ok with the expected output.
func fleetStress(executors string, n, c int, command, token string, stdout, stderr io.Writer) (bool, error) {
	var r engine.Runner
	if executors == "local" {
		cfg := engine.DefaultConfig()
		cfg.Admission.MaxRunning = c // every call runs at once, as on executors started with -max-running >= c
		e, err := engine.New(cfg)
		if err != nil {
			return false, err
		}
		r = e
	} else {
		if token == "" {
			token = os.Getenv(cli.ClusterTokenEnv)
		}
		cl, err := cluster.NewClient(cluster.ClientOptions{Membership: cluster.Static(strings.Split(executors, ",")...), Token: token})
		if err != nil {
			return false, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = cl.WaitExecutors(ctx, len(strings.Split(executors, ",")))
		cancel()
		if err != nil {
			_ = cl.Shutdown(context.Background())
			return false, err
		}
		r = cl
	}
	defer r.Shutdown(context.Background())
	dir, err := os.MkdirTemp("", "bashvisor-fleet-stress-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	want := r.Run(context.Background(), engine.ToolContext{WorkingDir: dir, ConversationID: "warm"}, engine.Input{Command: command})
	if want.Status != engine.StatusOK {
		return false, fmt.Errorf("%q: %s %q", command, want.Status, want.Output)
	}
	lat := make([]time.Duration, n)
	statuses := make([]engine.Status, n)
	var bad atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range c {
		wg.Go(func() {
			tc := engine.ToolContext{WorkingDir: dir, ConversationID: fmt.Sprintf("stress-%d", w)}
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				res := r.Run(context.Background(), tc, engine.Input{Command: command})
				lat[i], statuses[i] = time.Since(t0), res.Status
				if res.Status != engine.StatusOK || res.Output != want.Output {
					if bad.Add(1) <= 3 {
						fmt.Fprintf(stderr, "call %d: %s %q, want ok %q\n", i, res.Status, res.Output, want.Output)
					}
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(lat)
	counts := map[engine.Status]int{}
	for _, s := range statuses {
		counts[s]++
	}
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(float64(len(lat))*p))] }
	fmt.Fprintf(stdout, "fleet stress (%s): %d calls of %q at concurrency %d in %s: %.0f calls/s; latency p50 %s p90 %s p99 %s; statuses %v; %d wrong\n",
		executors, n, command, c, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(),
		pct(0.50).Round(10*time.Microsecond), pct(0.90).Round(10*time.Microsecond), pct(0.99).Round(10*time.Microsecond), counts, bad.Load())
	return bad.Load() == 0, nil
}
