package engine

import (
	"encoding/json"
	"io"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// The audit log's "bash" line is written by appendBashLine, byte for byte
// what slog's JSON handler writes for the same attributes (a test compares
// the two on random records), at a fraction of its cost: a command of 10
// KB is escaped once, eight bytes at a time where nothing needs escaping,
// and its display, when the same text, is the same bytes copied.

// lockedWriter writes whole lines to the audit log, one at a time: the
// "bash" lines and slog's "egress" and "write" lines share it.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// lineBufs holds buffers for the "bash" lines.
var lineBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// maxPooledLine bounds the buffers kept for reuse.
const maxPooledLine = 64 << 10

// writeBashLine writes rec as one "bash" line (see auditor) at time t,
// with its command, display and reason already redacted.
func (a *auditor) writeBashLine(t time.Time, rec auditRecord, command, display, reason string) {
	bp := lineBufs.Get().(*[]byte)
	b := appendBashLine((*bp)[:0], t, rec, command, display, reason)
	_, _ = a.out.Write(b) // as slog's handler, which reports no write error
	if cap(b) <= maxPooledLine {
		*bp = b
		lineBufs.Put(bp)
	}
}

// appendBashLine appends the JSON line of rec (see auditor) to b.
func appendBashLine(b []byte, t time.Time, rec auditRecord, command, display, reason string) []byte {
	b = append(b, `{"time":"`...)
	b = t.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"INFO","msg":"bash","conversation":`...)
	b = appendJSONString(b, rec.Conversation)
	b = append(b, `,"command":`...)
	at := len(b)
	b = appendJSONString(b, command)
	b = append(b, `,"display":`...)
	if display == command {
		b = append(b, b[at:len(b)-len(`,"display":`)]...)
	} else {
		b = appendJSONString(b, display)
	}
	b = appendField(b, "decision", rec.Decision)
	if rec.Rule != "" {
		b = appendField(b, "rule", rec.Rule)
	}
	if reason != "" {
		b = appendField(b, "reason", reason)
	}
	b = appendField(b, "mode", rec.Mode)
	b = appendField(b, "sandbox", rec.Sandbox)
	if len(rec.Network) > 0 {
		b = appendStrings(b, "network", rec.Network)
	}
	b = appendField(b, "status", rec.Status)
	if rec.ExitCode != nil {
		b = appendInt(b, "exit_code", int64(*rec.ExitCode))
	}
	b = appendInt(b, "duration_ms", rec.DurationMS)
	b = appendInt(b, "bytes", rec.Bytes)
	b = append(b, `,"truncated":`...)
	b = strconv.AppendBool(b, rec.Truncated)
	if len(rec.Killed) > 0 {
		b = appendStrings(b, "killed", rec.Killed)
	}
	if rec.CPUMS > 0 {
		b = appendInt(b, "cpu_ms", rec.CPUMS)
	}
	if rec.PeakMemory > 0 {
		b = appendInt(b, "peak_memory_bytes", rec.PeakMemory)
	}
	if rec.Processes > 0 {
		b = appendInt(b, "processes", int64(rec.Processes))
	}
	if rec.OOMKilled {
		b = append(b, `,"oom_killed":true`...)
	}
	return append(b, "}\n"...)
}

// appendField appends ,"key":"value" (key needs no escaping).
func appendField(b []byte, key, value string) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return appendJSONString(b, value)
}

// appendInt appends ,"key":n.
func appendInt(b []byte, key string, n int64) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, n, 10)
}

// appendStrings appends ,"key":[...] as slog does for a slice (through
// encoding/json without HTML escaping, whose escapes differ from a
// string attribute's).
func appendStrings(b []byte, key string, list []string) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	var buf jsonBuf
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(list); err != nil {
		return append(b, "null"...)
	}
	return append(b, buf[:len(buf)-1]...) // without the newline
}

// jsonBuf is an io.Writer appending to itself.
type jsonBuf []byte

func (j *jsonBuf) Write(p []byte) (int, error) { *j = append(*j, p...); return len(p), nil }

// SWAR constants: a byte of ones, and the high bit of each byte.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// plain8 reports whether none of the 8 bytes of s at i needs escaping
// (a control byte, ", \, or a byte of a multi-byte character).
func plain8(s string, i int) bool {
	p := s[i : i+8] // one bounds check: the compiler loads the 8 bytes at once
	x := uint64(p[0]) | uint64(p[1])<<8 | uint64(p[2])<<16 | uint64(p[3])<<24 |
		uint64(p[4])<<32 | uint64(p[5])<<40 | uint64(p[6])<<48 | uint64(p[7])<<56
	less := (x - ones*0x20) & ^x & highs // a byte < 0x20
	q := x ^ (ones * '"')
	bs := x ^ (ones * '\\')
	return (less | (q-ones)&^q&highs | (bs-ones)&^bs&highs | x&highs) == 0
}

// hexDigits are the digits of \u escapes.
const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string the way slog's JSON handler
// escapes a string: ", \, \n, \r, \t and other control bytes (\u00XX),
// invalid UTF-8 (\ufffd) and U+2028, U+2029; everything else as it is.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if i+8 <= len(s) && plain8(s, i) {
			i += 8
			continue
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
