package egress

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// scrubUpgrade lets a 101 response through if it switches to an
// uncompressed WebSocket and every form's placeholder is as long as its
// secret, with the server's stream scrubbed (wsScrub); it refuses any
// other upgrade. The client's frames are masked, so the placeholder in
// them cannot be swapped: the secret goes only into the handshake's
// headers.
func scrubUpgrade(m *matcher, resp *http.Response) error {
	switch {
	case !strings.EqualFold(resp.Header.Get("Upgrade"), "websocket"):
		return fmt.Errorf("%w: a protocol upgrade to %q", errUnreadable, resp.Header.Get("Upgrade"))
	case resp.Header.Get("Sec-Websocket-Extensions") != "":
		return fmt.Errorf("%w: WebSocket extensions %q", errUnreadable, resp.Header.Get("Sec-Websocket-Extensions"))
	case m != nil && !sameLength(m.forms):
		return fmt.Errorf("%w: a placeholder of another length than its secret", errUnreadable)
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		return fmt.Errorf("%w: a protocol upgrade without a stream", errUnreadable)
	}
	if m != nil {
		resp.Body = &wsScrub{ReadWriteCloser: rwc, m: m}
	}
	return nil
}

// errMaskedFrame ends a WebSocket whose server masks its frames (RFC
// 6455 5.1 forbids it; the payload could not be scrubbed).
var errMaskedFrame = errors.New("egress: the broker host sent a masked WebSocket frame")

// wsScrub passes the server's WebSocket frames with each payload
// scrubbed on its own (a secret split across frames is not caught);
// headers and lengths stay as sent (a placeholder is as long as its
// secret). Writes, the client's frames, go through as they are.
type wsScrub struct {
	io.ReadWriteCloser
	m       *matcher
	header  []byte     // of the frame being passed, still to hand on
	payload *scrubBody // its payload; nil between frames
	buf     []byte     // the payload scrubbers' buffer, reused
}

func (w *wsScrub) Read(p []byte) (int, error) {
	for {
		if len(w.header) > 0 {
			n := copy(p, w.header)
			w.header = w.header[n:]
			return n, nil
		}
		if w.payload != nil {
			n, err := w.payload.Read(p)
			if err == io.EOF {
				w.buf, w.payload = w.payload.buf, nil
				if n == 0 {
					continue
				}
				err = nil
			}
			return n, err
		}
		if err := w.next(); err != nil {
			return 0, err
		}
	}
}

// next reads the next frame's header and sets up its payload.
func (w *wsScrub) next() error {
	h := make([]byte, 2, 14)
	if _, err := io.ReadFull(w.ReadWriteCloser, h); err != nil {
		return err
	}
	if h[1]&0x80 != 0 {
		return errMaskedFrame
	}
	size := uint64(h[1] & 0x7f)
	switch size {
	case 126:
		h = h[:4]
	case 127:
		h = h[:10]
	}
	if _, err := io.ReadFull(w.ReadWriteCloser, h[2:]); err != nil {
		return err
	}
	switch size {
	case 126:
		size = uint64(binary.BigEndian.Uint16(h[2:]))
	case 127:
		size = binary.BigEndian.Uint64(h[2:])
	}
	if w.buf == nil {
		w.payload = newScrubBody(nil, w.m, func() {})
	} else {
		w.payload = &scrubBody{m: w.m, buf: w.buf, eof: func() {}}
	}
	w.payload.rc = io.NopCloser(&frameReader{r: w.ReadWriteCloser, left: size})
	w.header = h
	return nil
}

// frameReader reads a frame's payload: left bytes, then io.EOF (an
// early end of the stream is io.ErrUnexpectedEOF).
type frameReader struct {
	r    io.Reader
	left uint64
}

func (f *frameReader) Read(p []byte) (int, error) {
	if f.left == 0 {
		return 0, io.EOF
	}
	if uint64(len(p)) > f.left {
		p = p[:f.left]
	}
	n, err := f.r.Read(p)
	f.left -= uint64(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}
