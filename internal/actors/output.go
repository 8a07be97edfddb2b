package actors

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/jobs"
	"github.com/bashvisor/bashvisor/internal/secret"
)

// discardRest keeps a detached job, which writes through the engine's
// pipe (or terminal), from dying of EPIPE once nobody reads: a `cat` in a
// session of its own, started through sh so that it is not the engine's
// child, drains the pipe. Without secret values to redact, what the job
// prints later is appended to its output file up to the file's cap
// (head -c), and the rest is discarded; with them, all of it is
// discarded (it could hold values the engine can no longer redact). The
// file says which, where the engine stopped.
func (j *job) discardRest() {
	if j.l.file == nil || len(j.pipes) == 0 {
		return
	}
	keep := int64(-1) // -1: discard everything
	if j.res.Redactor.Len() == 0 {
		keep = 1 << 62
		if j.res.JobFileCap > 0 {
			keep = max(j.res.JobFileCap-j.l.file.DiskSize(), 0)
		}
	}
	dup := -1
	rc, err := j.pipes[0].SyscallConn()
	if err == nil {
		cerr := rc.Control(func(fd uintptr) { dup, err = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) })
		err = errors.Join(err, cerr)
	}
	if err == nil {
		j.stopRead.Store(true)
		j.closePipes()              // the reader flushed what it read; the rest waits in the pipe
		if j.spec.Detached != nil { // before what the drain appends
			j.appendLine(j.spec.Detached(keep, nil) + "\n")
		}
		j.closeFile()
		err = unix.SetNonblock(dup, false)
		in := os.NewFile(uintptr(dup), "job-output")
		if err == nil {
			var sh, cat string
			if sh, err = exec.LookPath("sh"); err == nil {
				if cat, err = exec.LookPath("cat"); err == nil {
					// The pipe is fd 3: an asynchronous list's stdin is
					// /dev/null.
					script, args := `"$0" <&3 3<&- >/dev/null &`, []string{cat}
					if keep >= 0 {
						script = `{ head -c "$1"; "$0" >/dev/null; } <&3 3<&- >>"$2" &`
						args = append(args, strconv.FormatInt(keep, 10), j.spec.OutputFile)
					}
					c := exec.Command(sh, append([]string{"-c", script}, args...)...)
					c.ExtraFiles, c.Dir, c.Env = []*os.File{in}, "/", []string{}
					c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
					err = c.Run()
				}
			}
		}
		in.Close()
	}
	if err != nil && j.spec.Detached != nil {
		j.appendLine(j.spec.Detached(-1, err) + "\n")
	}
}

// --- the output ---

// A pipe that has carried floodBytes is enlarged to floodPipeSize (from
// the default 64 KiB), so a flooding command keeps writing while the
// buffer (and its spool file) takes the previous chunk; quieter commands
// keep the small default.
const (
	floodBytes    = 256 << 10
	floodPipeSize = 1 << 20
)

// readBufs holds the read buffers; a reader holds one only while data
// flows, never while parked on a quiet pipe.
var readBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// readInto copies r into dst until EOF, until r is closed or until
// stopRead, then sends drained. It reads with raw non-blocking reads
// inside RawConn.Read so that a parked reader holds no buffer. The output
// goes through the redactor, whose held-back tail (a possible start of a
// secret value) is flushed at the end; closePipes waits for that.
func (j *job) readInto(r *os.File, dst io.Writer) {
	j.pipes = append(j.pipes, r)
	j.open++
	j.readers.Add(1)
	w := dst
	var sw *secret.StreamWriter
	if j.res.Redactor.Len() > 0 {
		sw = j.res.Redactor.Writer(dst)
		w = sw
	}
	p := j.l.p
	go func() {
		defer j.waitExit(p) // last, after drained (see startWaiter)
		defer j.send(drained{})
		defer j.readers.Done()
		if sw != nil {
			defer sw.Close() // a file's errors show at the next write (the completion line)
		}
		rc, err := r.SyscallConn()
		if err != nil {
			return
		}
		var total int
		_ = rc.Read(func(fd uintptr) bool {
			bp := readBufs.Get().(*[]byte)
			defer readBufs.Put(bp)
			for {
				n, err := unix.Read(int(fd), *bp)
				switch {
				case n > 0:
					if total < floodBytes && total+n >= floodBytes {
						// Best effort: the kernel may refuse (pipe-max-size,
						// per-user pipe limits).
						_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, floodPipeSize)
					}
					if n == len(*bp) {
						// A flood, which may outlive the shell: its
						// exit must not wait for the end of file.
						j.startWaiter(p)
					}
					total += n
					_, _ = w.Write((*bp)[:n])
					if j.stopRead.Load() {
						return true
					}
				case errors.Is(err, unix.EINTR):
				case errors.Is(err, unix.EAGAIN):
					j.startWaiter(p) // before it waits for output
					return false
				default: // EOF or error
					return true
				}
			}
		})
	}()
}

// slowReader reports whether an output pipe is still being read although
// every writer is gone (POLLHUP): on a loaded machine the reader may not
// have run yet, and it will see EOF shortly, so the job waits for it (up
// to CleanupWait after since) instead of calling the pipe held. So it
// does while a child of the engine has not exec'd yet (forking): that
// child may be the writer, for a moment.
func (j *job) slowReader(now, since time.Time) bool {
	if j.open == 0 || !now.Before(since.Add(j.res.Lifecycle.CleanupWait)) {
		return false
	}
	for _, f := range j.pipes {
		rc, err := f.SyscallConn()
		if err != nil {
			return false
		}
		hup := false
		_ = rc.Control(func(fd uintptr) {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(pfd, 0)
			hup = err == nil && n > 0 && pfd[0].Revents&unix.POLLHUP != 0
		})
		if !hup && !forking() {
			return false
		}
	}
	return true
}

// closePipes closes the read ends still open (their readers return at
// once) and waits for the readers to have written everything they read.
func (j *job) closePipes() {
	for _, f := range j.pipes {
		f.Close()
	}
	j.pipes = nil
	j.readers.Wait()
}

// closeFile closes a background job's output file for writing (it can
// still be read).
func (j *job) closeFile() {
	if j.l != nil && j.l.file != nil {
		_ = j.l.file.Close()
	}
}

// appendLine appends a line to a background job's output file, after a
// blank line.
func (j *job) appendLine(line string) {
	if j.l != nil && j.l.file != nil {
		_, _ = j.l.file.Write([]byte("\n\n" + line))
	}
}

// --- yield ---

// switchWriter passes writes to w until switchTo moves them elsewhere;
// a write in progress finishes first, so no byte goes to both or neither.
type switchWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *switchWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *switchWriter) switchTo(w io.Writer) {
	s.mu.Lock()
	s.w = w
	s.mu.Unlock()
}

// completion renders a background job's completion line ("" for none).
func (j *job) completion(o jobs.Outcome) string {
	if j.spec.Background && j.spec.Completion != nil {
		return j.spec.Completion(o)
	}
	return ""
}

// finish appends the completion line (job.line) to a background job's
// output file and closes it for writing, once. The actor is done with
// the file by then: nothing else writes it.
func (j *job) finish() {
	j.finished.Do(func() {
		if j.line != "" {
			j.appendLine(j.line)
		}
		j.closeFile()
	})
}
