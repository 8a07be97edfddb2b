package mcpserver

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/truncate"
)

// progress forwards engine progress snapshots of one call to the client as
// notifications/progress. update never blocks the engine: it keeps only the
// latest snapshot, and one goroutine sends it at most once per interval.
type progress struct {
	ctx      context.Context
	ss       *mcp.ServerSession
	token    any
	interval time.Duration
	log      *slog.Logger

	mu      sync.Mutex
	latest  engine.Progress
	pending bool
	wake    chan struct{} // capacity 1
	quit    chan struct{}
	wg      sync.WaitGroup
}

func startProgress(ctx context.Context, ss *mcp.ServerSession, token any, interval time.Duration, log *slog.Logger) *progress {
	p := &progress{
		ctx: ctx, ss: ss, token: token, interval: interval, log: log,
		wake: make(chan struct{}, 1), quit: make(chan struct{}),
	}
	p.wg.Add(1)
	go p.loop()
	return p
}

// update records a snapshot; it is [engine.ToolContext.Progress].
func (p *progress) update(snap engine.Progress) {
	p.mu.Lock()
	p.latest, p.pending = snap, true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// stop ends the sender; nothing is sent after stop returns.
func (p *progress) stop() {
	close(p.quit)
	p.wg.Wait()
}

func (p *progress) loop() {
	defer p.wg.Done()
	var last float64 = -1
	var next time.Time
	for {
		select {
		case <-p.quit:
			return
		case <-p.wake:
		}
		if d := time.Until(next); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-p.quit:
				t.Stop()
				return
			case <-t.C:
			}
		}
		p.mu.Lock()
		snap, ok := p.latest, p.pending
		p.pending = false
		p.mu.Unlock()
		if !ok {
			continue
		}
		value := snap.Elapsed.Seconds()
		if value <= last { // progress must increase
			continue
		}
		last = value
		next = time.Now().Add(p.interval)
		err := p.ss.NotifyProgress(p.ctx, &mcp.ProgressNotificationParams{
			ProgressToken: p.token,
			Progress:      value,
			Message:       progressMessage(snap),
		})
		if err != nil {
			p.log.Debug("progress notification failed", "err", err)
		}
	}
}

// progressMessage formats a snapshot: "12.0s, 3.4 KiB, last: LINE".
func progressMessage(snap engine.Progress) string {
	msg := fmt.Sprintf("%.1fs, %s", snap.Elapsed.Seconds(), truncate.Humanize(snap.Bytes))
	if line := strings.TrimSpace(snap.LastLine); line != "" {
		msg += ", last: " + clip(line, 256)
	}
	return msg
}
