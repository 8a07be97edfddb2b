package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// errUnreadable refuses a brokered response whose body the proxy cannot
// scrub.
var errUnreadable = errors.New("the broker host's response cannot be checked for the secret")

// swapping puts the secrets of a request's host into its headers (see
// [Broker.swapIn]) before h (the reverse proxy) sends it on, and scrubs
// the headers h writes back, 1xx responses' too (the proxy forwards those
// without ModifyResponse). A WebSocket handshake goes on without
// Sec-WebSocket-Extensions: no compression, so the server's frames carry
// its bytes as sent.
func (b *Broker) swapping(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dest := r.Context().Value(destKey{}).(flowKey)
		m := b.forms[dest]
		b.swapIn(dest.host, dest.port, r.Header)
		// The transport asks for gzip and decodes it: the body is read
		// as sent.
		r.Header.Del("Accept-Encoding")
		r.Header.Del("Sec-Websocket-Extensions")
		h.ServeHTTP(&scrubWriter{ResponseWriter: w, m: m}, r.WithContext(context.WithValue(r.Context(), swapsKey{}, m)))
	})
}

// scrubWriter scrubs the headers of each response written, 1xx ones too.
type scrubWriter struct {
	http.ResponseWriter
	m *matcher
}

func (w *scrubWriter) WriteHeader(code int) {
	scrubHeader(w.m, w.Header())
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *scrubWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// scrubResponse turns the forms of its host's secrets m finds (a Basic
// credential's base64 among them) back into their placeholders in resp: its headers now, its body as it is read, its
// trailers at the body's end. It refuses an encoded body, and a protocol
// upgrade other than an uncompressed WebSocket (whose server-to-client
// stream is scrubbed message by message: wsScrub).
func scrubResponse(m *matcher, resp *http.Response) error {
	scrubHeader(m, resp.Header)
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return scrubUpgrade(m, resp)
	}
	if m == nil || resp.Body == nil || resp.Body == http.NoBody {
		return nil // HEAD, 204, 304: whatever Content-Encoding says
	}
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return fmt.Errorf("%w: Content-Encoding %q", errUnreadable, ce)
	}
	resp.Body = newScrubBody(resp.Body, m, func() { scrubHeader(m, resp.Trailer) })
	return nil
}

// newScrubBody scrubs rc's stream of what m finds; eof runs at its end.
func newScrubBody(rc io.ReadCloser, m *matcher, eof func()) *scrubBody {
	return &scrubBody{rc: rc, m: m, buf: make([]byte, scrubSize(m)), eof: eof}
}

// scrubSize is the size of a scrubber's buffer for m: 32 KiB beside the
// longest tail held back.
func scrubSize(m *matcher) int {
	size := 32 << 10
	for _, f := range m.forms {
		size = max(size, 32<<10+len(f.old)+1)
	}
	return size
}

// scrubBody replaces secrets with their placeholders (of the same
// length) in a stream, in place in its buffer. It holds back only a tail
// that begins a secret's form, so a secret split across reads is caught
// and a stream's events are not delayed.
type scrubBody struct {
	rc  io.ReadCloser
	m   *matcher
	eof func() // at the end of the body (the trailers are in)
	buf []byte // buf[off:cut] scrubbed, to pass; buf[cut:n] held back
	off int
	cut int
	n   int
	err error // rc's, once buf[off:cut] is passed
}

func (s *scrubBody) Read(p []byte) (int, error) {
	for s.off == s.cut {
		if s.err != nil {
			return 0, s.err
		}
		held := copy(s.buf, s.buf[s.cut:s.n])
		m, err := s.rc.Read(s.buf[held:])
		s.n, s.off = held+m, 0
		s.m.replace(s.buf[:s.n], err == nil)
		s.cut = s.n
		if err == nil {
			s.cut -= s.m.hold(s.buf[:s.n])
		} else {
			s.err = err
			if err == io.EOF {
				s.eof()
			}
		}
	}
	n := copy(p, s.buf[s.off:s.cut])
	s.off += n
	return n, nil
}

func (s *scrubBody) Close() error { return s.rc.Close() }
