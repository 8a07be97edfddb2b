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
// secret (the matcher rewrites in place), with the server's stream
// scrubbed (wsScrub); it refuses any other upgrade. The client's frames
// are masked, so the placeholder in them cannot be swapped: the secret
// goes only into the handshake's headers.
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
		resp.Body = &wsScrub{ReadWriteCloser: rwc, m: m, buf: make([]byte, scrubSize(m))}
	}
	return nil
}

// errBadFrame ends a WebSocket whose server sends a frame the proxy
// cannot pass: masked (RFC 6455 5.1 forbids it; the payload could not be
// scrubbed), with reserved bits (no extension was negotiated), a control
// frame longer than 125 bytes or fragmented, or a message begun inside
// another.
var errBadFrame = errors.New("egress: the broker host sent a WebSocket frame that breaks RFC 6455")

// wsScrub passes the server's WebSocket stream with each data message
// scrubbed as one stream, so a secret split across frames (and frames
// split across reads) is caught. It re-frames (RFC 6455 5.4 lets an
// intermediary change the fragmentation of a message that uses no
// extension): what it has read of a message goes on at once as a frame
// of its own, but for a tail that could begin a secret's form, which
// waits for the message's next bytes or its end; a control frame (ping,
// pong, close, each scrubbed on its own) goes on as soon as it is read,
// between those frames, never delayed by a tail held back. Writes, the
// client's frames, go through as they are.
type wsScrub struct {
	io.ReadWriteCloser
	m   *matcher
	out []byte    // a frame's header (a control frame's payload with it), still to hand on
	hdr [127]byte // out's storage: a control frame whole (125 bytes of payload at most) or a data frame's header
	buf []byte    // buf[off:cut] the payload of the frame passed, buf[cut:n] held back
	off int
	cut int
	n   int
	err error

	left    uint64 // of the server's frame's payload, still to read
	fin     bool   // the server's frame ends its message
	opcode  byte   // of the message, till its first frame is passed
	message bool   // a data message is open
}

func (w *wsScrub) Read(p []byte) (int, error) {
	for {
		if len(w.out) > 0 {
			n := copy(p, w.out)
			w.out = w.out[n:]
			return n, nil
		}
		if w.off < w.cut {
			n := copy(p, w.buf[w.off:w.cut])
			w.off += n
			return n, nil
		}
		if w.err != nil {
			return 0, w.err
		}
		w.n = copy(w.buf, w.buf[w.cut:w.n])
		w.off, w.cut = 0, 0
		w.err = w.step()
	}
}

// step reads on until it has a frame to pass (in out, and buf[:cut]) or
// an error.
func (w *wsScrub) step() error {
	for {
		if w.left == 0 && !(w.fin && w.message) {
			if err := w.frame(); err != nil || len(w.out) > 0 {
				return err
			}
			if w.left == 0 && !w.fin {
				continue // an empty fragment: nothing to pass
			}
		}
		if w.left > 0 {
			k, err := w.ReadWriteCloser.Read(w.buf[w.n:min(uint64(len(w.buf)), uint64(w.n)+w.left)])
			w.n += k
			w.left -= uint64(k)
			if err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return err
			}
		}
		end := w.left == 0 && w.fin
		w.m.replace(w.buf[:w.n], !end)
		w.cut = w.n
		if !end {
			w.cut -= w.m.hold(w.buf[:w.n])
		}
		if w.cut > 0 || end {
			w.out = w.header(end, w.opcode, uint64(w.cut))
			w.opcode = 0
			w.message = !end
			if end {
				w.fin = false
			}
			return nil
		}
	}
}

// frame reads the server's next frame's header: a control frame is read
// whole, scrubbed and put in out; a data frame's payload is left to read.
func (w *wsScrub) frame() error {
	h := w.hdr[:2]
	if _, err := io.ReadFull(w.ReadWriteCloser, h); err != nil {
		if err == io.EOF && w.message {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	fin, opcode, size := h[0]&0x80 != 0, h[0]&0x0f, uint64(h[1]&0x7f)
	control := opcode&0x08 != 0
	switch {
	case h[0]&0x70 != 0, h[1]&0x80 != 0, control && (size > 125 || !fin), !control && (opcode == 0) != w.message:
		return fmt.Errorf("%w: header %x", errBadFrame, h)
	}
	switch size {
	case 126:
		h = w.hdr[:4]
	case 127:
		h = w.hdr[:10]
	}
	if _, err := io.ReadFull(w.ReadWriteCloser, h[2:]); err != nil {
		return unexpected(err)
	}
	switch size {
	case 126:
		size = uint64(binary.BigEndian.Uint16(h[2:]))
	case 127:
		size = binary.BigEndian.Uint64(h[2:])
	}
	if control {
		f := w.hdr[:2+size]
		if _, err := io.ReadFull(w.ReadWriteCloser, f[2:]); err != nil {
			return unexpected(err)
		}
		w.m.replace(f[2:], false)
		w.out = f
		return nil
	}
	if opcode != 0 {
		w.opcode, w.message = opcode, true
	}
	w.left, w.fin = size, fin
	return nil
}

// header writes the header of a data frame of size bytes into hdr (its
// opcode 0, a continuation, for all but a message's first).
func (w *wsScrub) header(fin bool, opcode byte, size uint64) []byte {
	h := w.hdr[:2]
	h[0] = opcode
	if fin {
		h[0] |= 0x80
	}
	switch {
	case size < 126:
		h[1] = byte(size)
	case size <= 0xffff:
		h[1], h = 126, w.hdr[:4]
		binary.BigEndian.PutUint16(h[2:], uint16(size))
	default:
		h[1], h = 127, w.hdr[:10]
		binary.BigEndian.PutUint64(h[2:], size)
	}
	return h
}

// unexpected is err, but io.ErrUnexpectedEOF for io.EOF: the stream
// ended inside a frame.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
