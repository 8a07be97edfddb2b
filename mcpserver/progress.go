package mcpserver

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/truncate"
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
	out     []byte        // output since the last notification (at most progressOutputMax)
	skipped int64         // bytes left out of out
	last    float64       // the progress value last sent (the loop's until stop)
	wake    chan struct{} // capacity 1
	quit    chan struct{}
	wg      sync.WaitGroup
}

// progressOutputMax bounds the output one notification carries (16 KiB,
// as the engine bounds one report's, engine.Progress.Output).
const progressOutputMax = 16 << 10

func startProgress(ctx context.Context, ss *mcp.ServerSession, token any, interval time.Duration, log *slog.Logger) *progress {
	p := &progress{
		ctx: ctx, ss: ss, token: token, interval: interval, log: log, last: -1,
		wake: make(chan struct{}, 1), quit: make(chan struct{}),
	}
	p.wg.Add(1)
	go p.loop()
	return p
}

// update records a snapshot; it is [engine.ToolContext.Progress]. The
// output of snapshots not yet sent accumulates, bounded: past
// progressOutputMax the oldest is dropped (cut on a UTF-8
// boundary) and counted as skipped.
func (p *progress) update(snap engine.Progress) {
	p.mu.Lock()
	p.latest, p.pending = snap, true
	if snap.Skipped > 0 { // what came before the gap is not followed by what comes after
		p.skipped += int64(len(p.out)) + snap.Skipped
		p.out = p.out[:0]
	}
	p.out = append(p.out, snap.Output...)
	if over := len(p.out) - progressOutputMax; over > 0 {
		for over < len(p.out) && !utf8.RuneStart(p.out[over]) {
			over++
		}
		p.skipped += int64(over)
		p.out = append(p.out[:0], p.out[over:]...)
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// barrierWait bounds the ping that separates a call's last progress
// notification from its result.
const barrierWait = 3 * time.Second

// stop ends the sender, first sending the output not yet sent (at once,
// whatever the interval); nothing is sent after stop returns. When any
// notification was sent, it then pings the client and waits (at most
// barrierWait) for the answer, so that the client has handled every
// notification before the result arrives (see the package doc).
func (p *progress) stop() {
	close(p.quit)
	p.wg.Wait()
	p.mu.Lock()
	snap := p.latest
	snap.Output, snap.Skipped = string(p.out), p.skipped
	p.mu.Unlock()
	if p.ctx.Err() != nil {
		return
	}
	if snap.Output != "" || snap.Skipped > 0 {
		p.send(max(snap.Elapsed.Seconds(), p.last+0.001), snap)
	}
	if p.last < 0 { // nothing sent
		return
	}
	ctx, cancel := context.WithTimeout(p.ctx, barrierWait)
	defer cancel()
	if err := p.ss.Ping(ctx, nil); err != nil {
		p.log.Debug("progress barrier ping failed", "err", err)
	}
}

func (p *progress) loop() {
	defer p.wg.Done()
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
		value := snap.Elapsed.Seconds()
		if !ok || value <= p.last { // progress must increase
			p.mu.Unlock()
			continue
		}
		snap.Output, snap.Skipped = string(p.out), p.skipped
		p.out, p.skipped, p.pending = p.out[:0], 0, false
		p.mu.Unlock()
		next = time.Now().Add(p.interval)
		p.send(value, snap)
	}
}

// send sends one notification with progress value.
func (p *progress) send(value float64, snap engine.Progress) {
	p.last = value
	params := &mcp.ProgressNotificationParams{
		ProgressToken: p.token,
		Progress:      value,
		Message:       progressMessage(snap),
	}
	if snap.Output != "" || snap.Skipped > 0 {
		params.Meta = mcp.Meta{metaOutput: snap.Output, metaSkipped: snap.Skipped}
	}
	if err := p.ss.NotifyProgress(p.ctx, params); err != nil {
		p.log.Debug("progress notification failed", "err", err)
	}
}

// The _meta keys of a progress notification that carry the command's
// output since the previous notification of the call (a string, valid
// UTF-8, at most progressOutputMax bytes) and how many bytes
// before it were left out (a number; 0 when the notifications' outputs
// together are the whole output). Absent when there is no new output.
const (
	metaOutput  = "bashvisor/output"
	metaSkipped = "bashvisor/skipped"
)

// progressMessage formats a snapshot: "12.0s, 3.4 KiB, last: LINE", then,
// on the lines that follow, the output since the previous notification
// (after "[… N bytes not shown …]" when some was left out).
func progressMessage(snap engine.Progress) string {
	msg := fmt.Sprintf("%.1fs, %s", snap.Elapsed.Seconds(), truncate.Humanize(snap.Bytes))
	if line := strings.TrimSpace(snap.LastLine); line != "" {
		msg += ", last: " + clip(line, 256)
	}
	if snap.Skipped > 0 {
		msg += fmt.Sprintf("\n[… %s not shown …]", truncate.Humanize(snap.Skipped))
	}
	if snap.Output != "" {
		msg += "\n" + snap.Output
	}
	return msg
}
