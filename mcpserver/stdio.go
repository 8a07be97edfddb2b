package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioTransport serves MCP over newline-delimited JSON-RPC on a pair of
// streams (stdin and stdout for `bashvisor mcp`), like the go-sdk's
// [mcp.IOTransport], but survives malformed input.
//
// The go-sdk's stdio connection decodes the stream with a json.Decoder and
// ends the session on the first line it cannot use: a line that is not
// JSON stops its reader, and a message that is not valid JSON-RPC (`{}`,
// `[]`, "jsonrpc": "1.0", a batch) fails the connection's Read. Either way
// the client gets no answer and the server's background jobs are lost
// with the session. StdioTransport puts a filter in front of it: every
// line is checked with the go-sdk's own message decoder
// ([jsonrpc.DecodeMessage]) and only valid messages are passed on to an
// [mcp.IOTransport], which does everything else (framing of the valid
// lines, sessions, writes). Other lines are answered on Writer with a
// JSON-RPC error response and the session goes on:
//
//   - not JSON: -32700 (parse error), id null;
//   - JSON but not a JSON-RPC 2.0 request, notification or response
//     (wrong "jsonrpc", no method and no id, an id that is neither a
//     string nor a number, a scalar): -32600 (invalid request), with the
//     message's id when it has a usable one, else null;
//   - a batch (a JSON array): -32600. Only protocol 2025-03-26 had
//     batches; 2025-06-18 removed them, and the go-sdk ends the session on
//     a batch it does not accept (a newer protocol, a repeated id), so
//     none are passed on;
//   - a line longer than MaxLineLength: -32600, id null; the line is
//     skipped without being held in memory.
//
// Framing follows the MCP stdio transport: one message per line, no
// embedded newlines. Blank lines are skipped and a trailing "\r" is
// ignored. A pretty-printed message spread over several lines, which the
// go-sdk's decoder would accept, is answered with parse errors instead.
type StdioTransport struct {
	// Reader carries the client's messages (os.Stdin). Closing the
	// connection closes it, so that a blocked read ends.
	Reader io.ReadCloser
	// Writer receives the server's messages and the error responses
	// (stdout). Each message is written with one Write call.
	Writer io.WriteCloser
	// MaxLineLength bounds one message (default mcp.DefaultMaxLineLength,
	// 16 MiB).
	MaxLineLength int
	// Logger receives a warning for every line refused (default: discard).
	Logger *slog.Logger
}

// Connect implements [mcp.Transport]. It starts the goroutine that reads
// Reader; it ends when Reader reaches EOF or fails, or when the
// connection is closed.
func (t *StdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	max := t.MaxLineLength
	if max <= 0 {
		max = mcp.DefaultMaxLineLength
	}
	log := t.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pr, pw := io.Pipe()
	out := &lockedWriteCloser{w: t.Writer}
	f := &lineFilter{in: bufio.NewReaderSize(t.Reader, 64<<10), pass: pw, out: out, max: max, log: log}
	go f.run()
	// The go-sdk reads only lines the filter passed, each at most max
	// bytes, so its own frame limit is off.
	return (&mcp.IOTransport{Reader: filteredReader{pr, t.Reader}, Writer: out, MaxLineLength: -1}).Connect(ctx)
}

// filteredReader is what the go-sdk reads: the filter's output. Closing it
// also closes the original reader, which unblocks the filter's read.
type filteredReader struct {
	*io.PipeReader
	orig io.Closer
}

func (r filteredReader) Close() error {
	return errors.Join(r.PipeReader.Close(), r.orig.Close())
}

// lockedWriteCloser serialises the go-sdk's writes and the filter's error
// responses, so each message stays one whole line.
type lockedWriteCloser struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (l *lockedWriteCloser) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriteCloser) Close() error { return l.w.Close() }

// lineFilter reads lines from in, passes valid messages to pass and
// answers the others on out.
type lineFilter struct {
	in   *bufio.Reader
	pass *io.PipeWriter
	out  io.Writer
	max  int
	log  *slog.Logger
	buf  []byte
}

func (f *lineFilter) run() {
	for {
		line, tooLong, err := f.readLine()
		if tooLong {
			f.refuse(jsonrpc.CodeInvalidRequest, fmt.Sprintf("message longer than %d bytes", f.max), nil, nil)
		} else if len(bytes.TrimSpace(line)) > 0 {
			if werr := f.check(line); werr != nil {
				f.pass.CloseWithError(werr)
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				f.pass.Close()
			} else {
				f.pass.CloseWithError(err)
			}
			return
		}
	}
}

// readLine returns the next line without its "\n" (and "\r"). A line
// longer than max is consumed but not kept: tooLong is set and line is
// empty. err is the read error that ended the line (io.EOF at the end).
func (f *lineFilter) readLine() (line []byte, tooLong bool, err error) {
	if cap(f.buf) > 1<<20 {
		f.buf = nil // do not keep a large message's buffer
	}
	f.buf = f.buf[:0]
	for {
		chunk, err := f.in.ReadSlice('\n')
		if !tooLong {
			f.buf = append(f.buf, chunk...)
			if len(f.buf) > f.max+len("\r\n") {
				tooLong, f.buf = true, f.buf[:0]
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			return nil, true, err
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(f.buf, []byte("\n")), []byte("\r"))
		if len(line) > f.max {
			return nil, true, err
		}
		return line, false, err
	}
}

// check passes a valid message on, or answers an invalid one. It returns
// an error only when the go-sdk side is gone.
func (f *lineFilter) check(line []byte) error {
	if !json.Valid(line) {
		f.refuse(jsonrpc.CodeParseError, "parse error: the line is not JSON (send one JSON-RPC message per line)", nil, line)
		return nil
	}
	switch trimmed := bytes.TrimSpace(line); trimmed[0] {
	case '[':
		f.refuse(jsonrpc.CodeInvalidRequest, "invalid request: JSON-RPC batches are not supported (send one message per line)", nil, line)
		return nil
	case '{':
		if _, err := jsonrpc.DecodeMessage(trimmed); err != nil {
			f.refuse(jsonrpc.CodeInvalidRequest, "invalid request: "+err.Error(), messageID(trimmed), line)
			return nil
		}
	default:
		f.refuse(jsonrpc.CodeInvalidRequest, "invalid request: a JSON-RPC message is a JSON object", nil, line)
		return nil
	}
	msg := make([]byte, 0, len(line)+1)
	msg = append(append(msg, line...), '\n')
	_, err := f.pass.Write(msg)
	return err
}

// messageID returns the id of an invalid message when it is one a response
// may carry (a string or a number), else nil (sent as null).
func messageID(msg []byte) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(msg, &m) != nil {
		return nil
	}
	id := bytes.TrimSpace(m["id"])
	if len(id) == 0 || (id[0] != '"' && id[0] != '-' && (id[0] < '0' || id[0] > '9')) {
		return nil
	}
	return id
}

// refuse writes a JSON-RPC error response.
func (f *lineFilter) refuse(code int64, message string, id json.RawMessage, line []byte) {
	if id == nil {
		id = json.RawMessage("null")
	}
	f.log.Warn("refused a malformed message on stdin", "code", code, "error", message, "line", clip(string(line), 200))
	resp, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", id, jsonrpc.Error{Code: code, Message: message}})
	if err != nil {
		f.log.Error("encoding an error response", "err", err)
		return
	}
	// A failed write means stdout is gone; the go-sdk's next write fails
	// the same way and ends the session.
	_, _ = f.out.Write(append(resp, '\n'))
}
