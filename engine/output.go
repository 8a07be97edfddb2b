package engine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/bashvisor/bashvisor/internal/render"
)

// What the model reads of a command's output is rendered unless
// Config.Output.Raw (see config.Output.Raw and package internal/render):
// a foreground command's result and progress output through its buffer
// (package truncate), a background job's output here, from its file,
// which keeps the raw bytes. A job on a pipe reads as clean text; a job on
// a terminal (Input.TTY) as the text of its terminal. Every rendered text
// is redacted again, since rendering can join what escape sequences kept
// apart; what that guarantees is said in internal/render's doc.

// JobOutput is a slice of a background job's output file plus the job's
// state.
type JobOutput struct {
	Job    JobInfo `json:"job"`
	Offset int64   `json:"offset"` // file offset of the first byte Data renders
	// End is the file offset after the last byte Data renders: where the
	// next read goes on. It can be short of the bytes read when the slice
	// ends inside an escape sequence or a character of a running job.
	End  int64  `json:"end"`
	Data string `json:"output"` // valid UTF-8: rendered, or the bytes with invalid ones replaced
	Size int64  `json:"size"`   // current size of the output file
	EOF  bool   `json:"eof"`    // Data reaches the current end of the file
}

// DefaultReadLimit is JobOutput's default and largest read.
const DefaultReadLimit = 128 << 10

// lookback is how many bytes before a slice are read to recognise an
// escape sequence that the slice's start cuts.
const lookback = 64

// JobOutput reads a job's output: the last tail bytes when tail > 0,
// otherwise up to limit bytes (0 or more than DefaultReadLimit means
// DefaultReadLimit) from offset; offsets and sizes count the file's
// bytes. Data is rendered (Config.Output.Raw aside). A terminal job's
// Data is what the bytes from offset to End changed on its terminal: its
// whole text (scrollback and screen) from offset 0, the lines that
// followed (or the part of a line, a REPL's answer after its prompt) for
// a later offset, the lines from the first that changed when a
// full-screen program redrew; with tail, the last tail bytes of its text.
// The terminal is replayed from the file on every read, over at most the
// last render.WindowBytes bytes and render.WindowLines lines (Offset then
// says where the replay began).
func (e *Engine) JobOutput(tc ToolContext, id string, tail, offset, limit int64) (JobOutput, error) {
	job, err := e.Job(tc, id)
	if err != nil {
		return JobOutput{}, err
	}
	if offset < 0 || tail < 0 || limit < 0 {
		return JobOutput{}, fmt.Errorf("%w: negative offset, tail or limit", ErrBadInput)
	}
	f, err := os.Open(job.OutputFile)
	if err != nil {
		return JobOutput{}, fmt.Errorf("job %s: %w", id, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return JobOutput{}, fmt.Errorf("job %s: %w", id, err)
	}
	size := fi.Size()
	if limit == 0 || limit > DefaultReadLimit {
		limit = DefaultReadLimit
	}
	if tail > 0 {
		limit = min(tail, DefaultReadLimit)
		offset = max(0, size-limit)
	}
	offset = min(offset, size)
	o := JobOutput{Job: job, Offset: offset, Size: size}
	switch {
	case e.cfg.Output.Raw:
		err = e.rawSlice(f, &o, limit, tail > 0)
	case job.TTY:
		err = e.terminalSlice(f, &o, limit, tail)
	default:
		err = e.cleanSlice(f, &o, limit)
	}
	if err != nil {
		return JobOutput{}, fmt.Errorf("job %s: %w", id, err)
	}
	o.EOF = o.End >= size
	return o, nil
}

// readAt reads up to n bytes at off.
func readAt(f *os.File, off, n int64) ([]byte, error) {
	buf := make([]byte, max(n, 0))
	k, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:k], nil
}

// rawSlice reads the bytes (Config.Output.Raw); a tail starts on a
// character boundary.
func (e *Engine) rawSlice(f *os.File, o *JobOutput, limit int64, tail bool) error {
	buf, err := readAt(f, o.Offset, min(limit, o.Size-o.Offset))
	if err != nil {
		return err
	}
	o.End = o.Offset + int64(len(buf))
	if tail {
		for i := 0; i < 3 && len(buf) > 0 && !utf8.RuneStart(buf[0]); i++ {
			buf, o.Offset = buf[1:], o.Offset+1
		}
	}
	o.Data = strings.ToValidUTF8(string(buf), "\uFFFD")
	return nil
}

// cleanSlice renders the slice as clean text, parsing a few bytes before
// it for a cut escape sequence; a running job's slice ends before an
// unfinished escape sequence or character.
func (e *Engine) cleanSlice(f *os.File, o *JobOutput, limit int64) error {
	ctx := min(o.Offset, lookback)
	buf, err := readAt(f, o.Offset-ctx, ctx+min(limit, o.Size-o.Offset))
	if err != nil {
		return err
	}
	more := o.Job.Status == JobRunning || o.Offset-ctx+int64(len(buf)) < o.Size
	text, n := render.AppendClean(nil, buf, render.CleanOptions{From: int(min(ctx, int64(len(buf)))), More: more})
	o.End = o.Offset - ctx + int64(n)
	o.Data = string(e.sup.Redactor().Bytes(text))
	return nil
}

// terminalSlice renders a terminal job's slice (see JobOutput).
func (e *Engine) terminalSlice(f *os.File, o *JobOutput, limit, tail int64) error {
	end := o.Size
	if tail == 0 {
		end = min(o.Size, o.Offset+limit)
	}
	lo := max(0, end-render.WindowBytes)
	buf, err := readAt(f, lo, end-lo)
	if err != nil {
		return err
	}
	ws := int64(render.WindowStart(buf, lo == 0))
	from := int64(0)
	if tail == 0 {
		from = max(o.Offset-lo-ws, 0)
	}
	o.Offset = max(o.Offset, lo+ws)
	if tail > 0 {
		o.Offset = lo + ws
	}
	sz := ttySize()
	text := e.sup.Redactor().Bytes(render.AppendTerminal(nil, buf[ws:], render.Size{Cols: int(sz.Cols), Rows: int(sz.Rows)}, int(from)))
	if int64(len(text)) > limit {
		i := len(text) - int(limit)
		for i < len(text) && !utf8.RuneStart(text[i]) {
			i++
		}
		text = text[i:]
	}
	o.End, o.Data = lo+int64(len(buf)), string(text)
	return nil
}
