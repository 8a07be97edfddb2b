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
	"strconv"
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
// with the session. StdioTransport reads the lines itself: each is
// decoded as the go-sdk's own message decoder ([jsonrpc.DecodeMessage])
// decodes it (the common request by encoding/json, anything else by that
// decoder: see decodeMessage), and only valid messages reach the session,
// as decoded, once. Other lines are answered on Writer with a JSON-RPC
// error response and the session goes on:
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
	c := &stdioConn{in: t.Reader, out: &lockedWriteCloser{w: t.Writer}, msgs: make(chan msgOrErr), closed: make(chan struct{})}
	f := &lineFilter{in: bufio.NewReaderSize(t.Reader, 64<<10), conn: c, max: max, log: log}
	go f.run()
	return c, nil
}

// stdioConn is the session's connection: the filter hands it each valid
// message as the go-sdk's decoder made it, once. (The go-sdk's own stdio
// connection, behind a pipe, decoded each line twice more, first as a
// batch that fails, allocating a decoder buffer each time: 388 KB per
// call round trip in BenchmarkInMemoryJobs, and a goroutine hand-off more
// per message.) Its writes are the go-sdk's, one line per message.
type stdioConn struct {
	in        io.Closer
	out       *lockedWriteCloser
	msgs      chan msgOrErr // from the filter; an error ends the stream
	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error
}

// msgOrErr is a message the filter passed, or how the stream ended.
type msgOrErr struct {
	msg jsonrpc.Message
	err error
}

// Read implements [mcp.Connection]: the next valid message, io.EOF once
// the client closed its end (or the connection was closed), or the read's
// error.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case m := <-c.msgs:
		return m.msg, m.err
	case <-c.closed:
		return nil, io.EOF
	}
}

// Write implements [mcp.Connection]: one line per message.
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("marshaling message: %w", err)
	}
	_, err = c.out.Write(append(data, '\n'))
	return err
}

// Close implements [mcp.Connection]: it closes Reader, which unblocks the
// filter's read, and Writer.
func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() {
		c.closeErr = errors.Join(c.in.Close(), c.out.Close())
		close(c.closed)
	})
	return c.closeErr
}

// SessionID implements [mcp.Connection]: a stdio session has no id.
func (c *stdioConn) SessionID() string { return "" }

// pass hands the session a message or the end of the stream; false once
// the connection is closed.
func (c *stdioConn) pass(m msgOrErr) bool {
	select {
	case c.msgs <- m:
		return true
	case <-c.closed:
		return false
	}
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

// lineFilter reads lines from in, passes valid messages to conn and
// answers the others on conn's writer.
type lineFilter struct {
	in   *bufio.Reader
	conn *stdioConn
	max  int
	log  *slog.Logger
	buf  []byte
}

func (f *lineFilter) run() {
	for {
		line, tooLong, err := f.readLine()
		if tooLong {
			f.refuse(jsonrpc.CodeInvalidRequest, fmt.Sprintf("message longer than %d bytes", f.max), nil, nil)
		} else if len(bytes.TrimSpace(line)) > 0 && !f.check(line) {
			return // the connection is closed
		}
		if err != nil {
			f.conn.pass(msgOrErr{err: err}) // io.EOF: the client closed its end
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

// check passes a valid message on, or answers an invalid one. It reports
// false only when the connection is closed.
func (f *lineFilter) check(line []byte) bool {
	if !json.Valid(line) {
		f.refuse(jsonrpc.CodeParseError, "parse error: the line is not JSON (send one JSON-RPC message per line)", nil, line)
		return true
	}
	switch trimmed := bytes.TrimSpace(line); trimmed[0] {
	case '[':
		f.refuse(jsonrpc.CodeInvalidRequest, "invalid request: JSON-RPC batches are not supported (send one message per line)", nil, line)
	case '{':
		msg, err := decodeMessage(trimmed)
		if err != nil {
			f.refuse(jsonrpc.CodeInvalidRequest, "invalid request: "+err.Error(), messageID(trimmed), line)
			return true
		}
		return f.conn.pass(msgOrErr{msg: msg})
	default:
		f.refuse(jsonrpc.CodeInvalidRequest, "invalid request: a JSON-RPC message is a JSON object", nil, line)
	}
	return true
}

// decodeMessage decodes a line that is one JSON object as
// [jsonrpc.DecodeMessage] does. The common message, a request or
// notification with a plain method name and id and object or array
// params, is decoded here with encoding/json: the go-sdk's decoder
// allocates a buffer per message (61 KB a call in
// BenchmarkStdioTransportJobs). Anything else (a response, escapes in the
// method or id, a fractional or huge id, a null, another key) goes to
// the go-sdk's decoder, so what is accepted, and how it reads, stays its
// own (TestDecodeMessageAsTheGoSDK).
func decodeMessage(line []byte) (jsonrpc.Message, error) {
	if req, ok := plainRequest(line); ok {
		return req, nil
	}
	// A copy: the line's buffer is reused, and the message's params may
	// point into what it was decoded from.
	return jsonrpc.DecodeMessage(bytes.Clone(line))
}

// plainRequest decodes the message decodeMessage decodes itself; false
// for any other. encoding/json copies the values it keeps.
func plainRequest(line []byte) (*jsonrpc.Request, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil || string(m["jsonrpc"]) != `"2.0"` {
		return nil, false
	}
	method, ok := plainString(m["method"])
	if !ok || method == "" {
		return nil, false
	}
	req := &jsonrpc.Request{Method: method}
	for k, v := range m {
		switch k {
		case "jsonrpc", "method":
		case "id":
			if req.ID, ok = plainID(v); !ok {
				return nil, false
			}
		case "params":
			if v[0] != '{' && v[0] != '[' || deeperThan(v, maxNesting-1) { // inside the message's object
				return nil, false
			}
			req.Params = v
		default: // also a key that differs only in case, which the go-sdk ignores
			return nil, false
		}
	}
	return req, true
}

// maxNesting is the go-sdk's bound on how deep a message nests (its JSON
// decoder refuses deeper ones; encoding/json allows 10,000): params nested
// deeper go to its decoder, which says so.
const maxNesting = 1000

// deeperThan reports whether JSON text raw nests arrays and objects more
// than max deep.
func deeperThan(raw []byte, max int) bool {
	depth, inString, escaped := 0, false, false
	for _, c := range raw {
		switch {
		case escaped:
			escaped = false
		case inString:
			escaped, inString = c == '\\', c != '"'
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > max {
				return true
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return false
}

// plainString returns the value of a JSON string of printable ASCII
// without escapes.
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	for _, c := range raw[1 : len(raw)-1] {
		if c < 0x20 || c > 0x7e || c == '\\' || c == '"' {
			return "", false
		}
	}
	return string(raw[1 : len(raw)-1]), true
}

// plainID returns a request id that is a plain string or an integer of
// at most 15 digits (exact as the float64 the go-sdk reads it as).
func plainID(raw []byte) (jsonrpc.ID, bool) {
	if s, ok := plainString(raw); ok {
		id, err := jsonrpc.MakeID(s)
		return id, err == nil
	}
	digits := bytes.TrimPrefix(raw, []byte("-"))
	if len(digits) == 0 || len(digits) > 15 {
		return jsonrpc.ID{}, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return jsonrpc.ID{}, false
		}
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(float64(n))
	return id, err == nil
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
	_, _ = f.conn.out.Write(append(resp, '\n'))
}
