package egress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
)

// errUnreadable refuses a brokered response whose body the proxy cannot
// scrub.
var errUnreadable = errors.New("the broker host's response cannot be checked for the secret")

// swapping puts the secrets of a request's host into its headers (see
// [Broker.swapIn]) before h (the reverse proxy) sends it on, and scrubs
// the headers h writes back, 1xx responses' too (the proxy forwards those
// without ModifyResponse).
func (b *Broker) swapping(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dest := r.Context().Value(destKey{}).(flowKey)
		ss := b.secrets[dest]
		if encoded := b.swapIn(dest.host, dest.port, r.Header); encoded != nil {
			ss = append(slices.Clip(ss), encoded...)
		}
		// The transport asks for gzip and decodes it: the body is read
		// as sent.
		r.Header.Del("Accept-Encoding")
		h.ServeHTTP(&scrubWriter{ResponseWriter: w, swaps: ss}, r.WithContext(context.WithValue(r.Context(), swapsKey{}, ss)))
	})
}

// scrubWriter scrubs the headers of each response written, 1xx ones too.
type scrubWriter struct {
	http.ResponseWriter
	swaps []swap
}

func (w *scrubWriter) WriteHeader(code int) {
	scrub(w.swaps, w.Header())
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *scrubWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// scrubResponse turns the secrets of ss (its host's, and the base64 of
// the request's Basic credentials) back into their placeholders in resp:
// its headers now, its body as it is read, its trailers at the body's
// end. It refuses an upgrade (101) and an encoded body.
func scrubResponse(ss []swap, resp *http.Response) error {
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return fmt.Errorf("%w: a protocol upgrade", errUnreadable)
	}
	scrub(ss, resp.Header)
	if len(ss) == 0 || resp.Body == nil || resp.Body == http.NoBody {
		return nil // HEAD, 204, 304: whatever Content-Encoding says
	}
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return fmt.Errorf("%w: Content-Encoding %q", errUnreadable, ce)
	}
	size := 32 << 10 // beside the longest tail held back
	for _, sw := range ss {
		size = max(size, 32<<10+len(sw.secret))
	}
	resp.Body = &scrubBody{rc: resp.Body, swaps: ss, buf: make([]byte, size), eof: func() {
		scrub(ss, resp.Trailer)
	}}
	return nil
}

// scrubBody replaces secrets with their placeholders (of the same
// length) in a stream, in place in its buffer. It holds back only a tail
// that begins a secret, so a secret split across reads is caught and a
// stream's events are not delayed.
type scrubBody struct {
	rc    io.ReadCloser
	swaps []swap
	eof   func() // at the end of the body (the trailers are in)
	buf   []byte // buf[off:cut] scrubbed, to pass; buf[cut:n] held back
	off   int
	cut   int
	n     int
	err   error // rc's, once buf[off:cut] is passed
}

func (s *scrubBody) Read(p []byte) (int, error) {
	for s.off == s.cut {
		if s.err != nil {
			return 0, s.err
		}
		held := copy(s.buf, s.buf[s.cut:s.n])
		m, err := s.rc.Read(s.buf[held:])
		s.n, s.off = held+m, 0
		for _, sw := range s.swaps {
			replaceSame(s.buf[:s.n], sw.secret, sw.placeholder)
		}
		s.cut = s.n
		if err == nil {
			s.cut -= s.secretStart(s.buf[:s.n])
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

// secretStart is the length of the longest tail of b that is a proper
// beginning of a secret.
func (s *scrubBody) secretStart(b []byte) int {
	keep := 0
	for _, sw := range s.swaps {
		for k := min(len(sw.secret)-1, len(b)); k > keep; k-- {
			if bytes.HasSuffix(b, []byte(sw.secret[:k])) {
				keep = k
				break
			}
		}
	}
	return keep
}

func (s *scrubBody) Close() error { return s.rc.Close() }

// replaceSame replaces old with new (of the same length) in b, in place.
func replaceSame(b []byte, old, new string) {
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte(old))
		if j < 0 {
			return
		}
		copy(b[i+j:], new)
		i += j + len(new)
	}
}
