package engine

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/bashvisor/bashvisor/internal/render"
	"github.com/bashvisor/bashvisor/internal/truncate"
)

// What the model reads of a command's output is rendered unless
// Config.Output.Raw (see config.Output.Raw and package internal/render):
// a foreground command's result and progress output through its buffer
// (package truncate), a background job's output here, from its file,
// which keeps the raw bytes. A job on a pipe reads as clean text; a job on
// a terminal (Input.TTY) as the text of its terminal. Every rendered text
// is redacted again, since rendering can join what escape sequences kept
// apart; what that guarantees is said in internal/render's doc.

// JobOutput is a slice of a background job's output plus the job's
// state. Offsets count every byte the job printed, also those that its
// capped output file dropped (config.Output.JobFileCap): byte n of the
// output is at offset n whatever was dropped before it.
type JobOutput struct {
	Job    JobInfo `json:"job"`
	Offset int64   `json:"offset"` // output offset of the first byte Data renders
	// End is the output offset after the last byte Data renders: where the
	// next read goes on. It can be short of the bytes read when the slice
	// ends inside an escape sequence or a character of a running job, or
	// where the output file dropped output (the next read skips it).
	End  int64  `json:"end"`
	Data string `json:"output"` // valid UTF-8: rendered, or the bytes with invalid ones replaced
	Size int64  `json:"size"`   // bytes of output so far
	EOF  bool   `json:"eof"`    // Data reaches the current end of the output
	// Skipped is how many bytes from the offset asked for up to Offset
	// the capped output file dropped (0: none).
	Skipped int64 `json:"skipped,omitempty"`

	after int64 // where the output resumes after a dropped range: slices read nothing before it
}

// readLimit is JobOutput's default and largest read.
const readLimit = 128 << 10

// lookback is how many bytes before a slice are read to recognise an
// escape sequence that the slice's start cuts.
const lookback = 64

// JobOutput reads a job's output: the last tail bytes when tail > 0,
// otherwise up to limit bytes (0 or more than 128 KiB means
// 128 KiB) from offset; offsets and sizes count the file's
// bytes. Data is rendered (Config.Output.Raw aside). A terminal job's
// Data is what the bytes from offset to End changed on its terminal: its
// whole text (scrollback and screen) from offset 0, the lines that
// followed (or the part of a line, a REPL's answer after its prompt) for
// a later offset, the lines from the first that changed when a
// full-screen program redrew; with tail, the last tail bytes of its text.
// The terminal is replayed from the file on every read, over at most the
// last render.WindowBytes bytes and render.WindowLines lines (Offset then
// says where the replay began). Job and Data agree: the completion line
// is in Data only beside an ended state, and an ended job's file has it
// (the line and the state come in one step; [Engine.Kill] returns after
// it too).
func (e *Engine) JobOutput(tc ToolContext, id string, tail, offset, limit int64) (JobOutput, error) {
	e.sup.Checkpoint(tc.ConversationID) // the job's changes so far, for its report
	job, err := e.Job(tc, id)
	if err != nil {
		return JobOutput{}, err
	}
	if offset < 0 || tail < 0 || limit < 0 {
		return JobOutput{}, fmt.Errorf("%w: negative offset, tail or limit", ErrBadInput)
	}
	f := outputSource{job.output}
	if f.File == nil {
		return JobOutput{}, fmt.Errorf("job %s: its output file is not the engine's", id)
	}
	size := f.Size()
	if job.Status == JobRunning {
		// The completion line and the final state come in one step of the
		// supervisor: a size taken before a look that still finds the job
		// running holds no completion line; after one that finds it ended,
		// the file has it.
		if again, err := e.Job(tc, id); err == nil && again.Status != JobRunning {
			job, size = again, f.Size()
		}
		job.Bytes = size
	}
	if limit == 0 || limit > readLimit {
		limit = readLimit
	}
	if tail > 0 {
		limit = min(tail, readLimit)
		offset = max(0, size-limit)
	}
	offset = min(offset, size)
	// A slice never spans the output the file dropped: one that starts in
	// it starts after it, one that reaches it ends there.
	gap, dropped := f.Gap()
	var skipped int64
	if dropped > 0 && offset >= gap && offset < gap+dropped {
		skipped, offset = gap+dropped-offset, gap+dropped
		if tail > 0 {
			skipped = 0 // a tail is the newest output, which the file keeps
		}
	}
	if dropped > 0 && offset < gap {
		limit = min(limit, gap-offset)
	}
	o := JobOutput{Job: job, Offset: offset, Size: size, Skipped: skipped}
	if dropped > 0 && offset >= gap+dropped {
		o.after = gap + dropped // no look back into the gap
	}
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

// outputSource reads a job's output by output offset (truncate.File).
type outputSource struct{ *truncate.File }

// readAt reads up to n bytes at output offset off, where nothing was
// dropped (JobOutput keeps its slices off the gap).
func readAt(f outputSource, off, n int64) ([]byte, error) {
	buf := make([]byte, max(n, 0))
	_, k, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:k], nil
}

// rawSlice reads the bytes (Config.Output.Raw); a tail starts on a
// character boundary.
func (e *Engine) rawSlice(f outputSource, o *JobOutput, limit int64, tail bool) error {
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
func (e *Engine) cleanSlice(f outputSource, o *JobOutput, limit int64) error {
	ctx := min(o.Offset-o.after, lookback)
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
func (e *Engine) terminalSlice(f outputSource, o *JobOutput, limit, tail int64) error {
	end := o.Size
	if tail == 0 {
		end = min(o.Size, o.Offset+limit)
	}
	lo := max(o.after, end-render.WindowBytes)
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
