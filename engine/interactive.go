package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/bashvisor/bashvisor/internal/jobs"
)

// Interactive jobs: a foreground command may yield (become a background
// job at its timeout or after Input.YieldMS instead of being killed), a
// job may read input sent later (Input.Stdin "pipe", Write), run on a
// terminal (Input.TTY), and be watched as it prints (WaitOutput,
// Progress.Output).
//
// Choices: stdin stays /dev/null unless asked for, and stdin or a terminal
// are only given to commands that can become jobs, never to a command the
// call waits for until its timeout (a prompt would hang it); a terminal is
// 40 rows by 120 columns (wide enough that most tools do not wrap), with
// TERM=xterm-256color; closing a terminal's input sends ^D rather than
// hanging it up.

// ttySize is the size of a job's terminal (Input.TTY).
func ttySize() *jobs.Winsize { return &jobs.Winsize{Rows: 40, Cols: 120} }

// maxWait bounds WaitOutput, and maxWriteBytes one Write.
const (
	maxWait       = 30 * time.Second
	maxWriteBytes = 1 << 20
)

// StdinPipe is the Input.Stdin of a command that reads input sent later
// with Write; stdinNull ("" too) keeps its stdin at /dev/null.
const (
	StdinPipe = "pipe"
	stdinNull = "null"
)

// interactive checks the interactive fields of a call and returns its
// yield (0: the command is ended at its timeout).
func (e *Engine) interactive(in Input, mode Mode) (time.Duration, error) {
	var yield time.Duration
	switch {
	case in.YieldMS > 0 && mode == ModeBackground:
		return 0, fmt.Errorf("%w: yield_ms is for default and slow commands (a background command returns at once)", ErrBadInput)
	case in.YieldMS > 0:
		yield = min(time.Duration(in.YieldMS)*time.Millisecond, e.timeout(mode))
	case e.cfg.OnTimeout == OnTimeoutBackground && mode != ModeBackground:
		yield = e.timeout(mode)
	}
	if (in.Stdin == StdinPipe || in.TTY) && mode != ModeBackground && yield == 0 {
		return 0, fmt.Errorf("%w: stdin \"pipe\" and tty are for commands that become background jobs: use mode=background, or yield_ms (a command the call waits for would hang on a prompt)", ErrBadInput)
	}
	return yield, nil
}

func validateInteractive(in Input) error {
	switch in.Stdin {
	case "", stdinNull, StdinPipe:
	default:
		return fmt.Errorf("%w: unknown stdin %.32q (want pipe or null)", ErrBadInput, in.Stdin)
	}
	if in.YieldMS < 0 || in.YieldMS > int64(24*time.Hour/time.Millisecond) {
		return fmt.Errorf("%w: yield_ms must be between 0 and 86400000", ErrBadInput)
	}
	return nil
}

// Write sends data to the stdin of background job id of tc's
// conversation (started with Input.Stdin "pipe" or Input.TTY; on a
// terminal the bytes are keys: "\x03" is Ctrl-C, "\x04" Ctrl-D), then
// closes its stdin when close is set (on a terminal: sends ^D), and
// records the write in the audit log. A terminal in canonical mode (a
// shell's or REPL's prompt) takes at most 4095 bytes per line: the kernel
// drops the rest of a longer one. It returns once the job took the
// bytes, or with ErrBadInput (data over 1 MiB), ErrNoSuchJob (also for
// another conversation's job), ErrNoStdin, ErrJobEnded, ErrStdinClosed or
// ErrStdinBusy (the job stopped reading for 10 s, or four earlier writes
// still wait; the error says how much of data it took).
func (e *Engine) Write(ctx context.Context, tc ToolContext, id string, data []byte, close bool) error {
	if len(data) > maxWriteBytes {
		return fmt.Errorf("%w: %d bytes to write, over the limit of %d", ErrBadInput, len(data), maxWriteBytes)
	}
	err := public(e.sup.Write(ctx, tc.ConversationID, id, data, close))
	if err != nil {
		err = fmt.Errorf("job %s: %w", id, err)
	}
	e.auditor.Write(tc.ConversationID, id, data, close, err)
	return err
}

// WaitOutput waits until background job id of tc's conversation has more
// than offset bytes of output, has ended, d (at most 30 s) has passed,
// or ctx is done, and returns the job's state then (its Bytes is the
// output's size). It polls every 20 ms.
func (e *Engine) WaitOutput(ctx context.Context, tc ToolContext, id string, offset int64, d time.Duration) (JobInfo, error) {
	d = min(max(d, 0), maxWait)
	deadline := time.Now().Add(d)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		j, err := e.Job(tc, id)
		if err != nil || j.Status != JobRunning || j.Bytes > offset || !time.Now().Before(deadline) {
			return j, err
		}
		select {
		case <-ctx.Done():
			return j, nil
		case <-t.C:
		}
	}
}

// timeout is mode's timeout: a background job's lifetime for background.
func (e *Engine) timeout(mode Mode) time.Duration {
	switch mode {
	case ModeBackground:
		return e.cfg.BackgroundLifetime
	case ModeSlow:
		return e.cfg.SlowTimeout
	}
	return e.cfg.Timeout
}

// yieldSpec is what a yielding call's job becomes.
func (e *Engine) yieldSpec(tc ToolContext) *jobs.Yield {
	return &jobs.Yield{Lifetime: e.cfg.BackgroundLifetime, Completion: e.completionLine(tc)}
}
