package actors

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/bashvisor/bashvisor/internal/jobs"
)

// --- stdin ---

// stdinQueue bounds the writes waiting for a job to read its input.
const stdinQueue = 4

// stdinWriteWait bounds how long a write waits for the job to read more of
// it: a job that reads slowly but steadily takes any amount.
const stdinWriteWait = 10 * time.Second

type writeReq struct {
	data  []byte
	close bool
	reply chan<- error
}

// onWrite queues a write to the job's stdin; the writer goroutine answers.
// The actor never blocks: a job that does not read fills the queue, and
// then a write is refused at once.
func (j *job) onWrite(m *Write) {
	var err error
	switch {
	case j.ph == starting:
		err = jobs.ErrEnded // cannot happen: the job is not listed before it runs
	case j.stdin == nil && (j.l == nil || j.l.stdin == nil):
		err = jobs.ErrNoStdin
	case j.stdin == nil, j.exited, j.ph != running && j.ph != draining:
		err = jobs.ErrEnded
	}
	if err != nil {
		m.Reply <- err
		return
	}
	select {
	case j.stdin <- writeReq{data: m.Data, close: m.Close, reply: m.Reply}:
	default:
		m.Reply <- fmt.Errorf("%w: %d earlier writes still wait for it; nothing was sent", jobs.ErrStdinBusy, stdinQueue)
	}
}

// closeStdin ends the writer goroutine and closes the job's input (which
// also ends a write blocked on it).
func (j *job) closeStdin() {
	if j.stdin == nil {
		return
	}
	close(j.stdin)
	j.stdin = nil
	_ = j.l.stdin.Close()
}

// writeLoop writes the queued data to f in order. Closing a terminal's
// input sends ^D (EOF at the start of a line) rather than hanging up the
// terminal.
func writeLoop(f *os.File, q <-chan writeReq, tty bool) {
	closed := false
	for r := range q {
		var err error
		switch {
		case closed:
			err = jobs.ErrStdinClosed
		default:
			err = writeAll(f, r.data)
			if err == nil && r.close {
				if tty {
					_, err = f.Write([]byte{4}) // ^D
				} else if err = f.Close(); errors.Is(err, os.ErrClosed) {
					// The job ended right after it took the input, and
					// closeStdin closed the pipe first: the input was
					// delivered and stdin is closed, as asked.
					err = nil
				}
				closed = true
			}
		}
		r.reply <- err
	}
	_ = f.Close()
}

// writeAll writes data to f, waiting up to stdinWriteWait each time the
// job stops reading; an error says how much of data it took.
func writeAll(f *os.File, data []byte) error {
	total := len(data)
	progress := time.Now() // when the job last took some
	for len(data) > 0 {
		_ = f.SetWriteDeadline(time.Now().Add(time.Second))
		n, err := f.Write(data)
		data = data[n:]
		if n > 0 {
			progress = time.Now()
		}
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded) && time.Since(progress) < stdinWriteWait:
			// It reads, or may yet: wait on.
		case errors.Is(err, os.ErrDeadlineExceeded) && len(data) == total:
			return fmt.Errorf("%w (waited %s); nothing was sent", jobs.ErrStdinBusy, stdinWriteWait)
		case errors.Is(err, os.ErrDeadlineExceeded):
			return fmt.Errorf("%w (waited %s) after it took %d of %d bytes; the rest was not sent", jobs.ErrStdinBusy, stdinWriteWait, total-len(data), total)
		case errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrClosed) || errors.Is(err, syscall.EIO):
			if len(data) == total {
				return jobs.ErrEnded
			}
			return fmt.Errorf("%w after it took %d of %d bytes", jobs.ErrEnded, total-len(data), total)
		default:
			return err
		}
	}
	return nil
}
